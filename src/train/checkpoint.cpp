// Trainer::save and Trainer::load: checkpoints that carry the setup they come from (the model,
// loss and optimizer descriptions) and the names of their weights, and loads that take what the
// LoadMode says after checking the whole file.
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "stepgraph/safetensors.h"
#include "stepgraph/trainer.h"
#include "train/describe_diff.h"

namespace sg {

namespace {

// The model's own tensors, which a weights-only load takes: parameters and fixed constants.
bool is_weight(Role r) { return r == Role::Parameter || r == Role::Constant; }

}  // namespace

void Trainer::save(const std::string& path) const {
  SG_REQUIRE(persistent_, "save: nothing to save: call compile first");
  std::vector<std::pair<std::string, HostArray>> tensors;
  nlohmann::json weights = nlohmann::json::array();
  for (const TensorInfo& info : persistent_tensors()) {
    if (info.role == Role::Gradient || is_step_status(info.name)) continue;  // recomputed each step
    if (is_weight(info.role)) weights.push_back(info.name);
    tensors.emplace_back(info.name, read_tensor(info.name));
  }
  tensors.emplace_back("rng.seed", [&] {
    HostArray s(DType::U64, {1});
    s.data<uint64_t>()[0] = seed_;
    return s;
  }());
  // The setup it comes from: load() compares it with the loading trainer's.
  std::map<std::string, std::string> meta = {{"format", "stepgraph-checkpoint"},
                                             {"version", "1"},
                                             {"step", std::to_string(step())},
                                             {"model", model_->describe()},
                                             {"loss", loss_description()},
                                             {"optimizer", optimizer_->describe()},
                                             {"weights", weights.dump()}};
  write_safetensors(path, tensors, meta);
}

void Trainer::load(const std::string& path, LoadMode mode) {
  SafetensorsFile f = read_safetensors(path);
  const std::string where = cat("checkpoint '", path, "'");
  std::map<std::string, const HostArray*> in_file;  // SafetensorsFile::find is a linear search
  for (const auto& [name, a] : f.tensors) in_file.emplace(name, &a);
  auto find = [&](const std::string& name) -> const HostArray* {
    const auto it = in_file.find(name);
    return it == in_file.end() ? nullptr : it->second;
  };
  if (mode != LoadMode::WeightsOnly) {
    auto it = f.metadata.find("format");
    SG_REQUIRE(it != f.metadata.end() && it->second == "stepgraph-checkpoint", where,
               " is not a stepgraph checkpoint (metadata format is missing)");
    std::vector<std::string> diffs;
    auto compare = [&](const char* key, const std::string& here) {
      const auto saved = f.metadata.find(key);
      const std::string d = describe_diff(saved == f.metadata.end() ? "(not recorded)" : saved->second, here);
      if (!d.empty()) diffs.push_back(cat(key, ": ", d));
    };
    compare("model", model_->describe());
    compare("loss", loss_description());
    if (mode == LoadMode::Resume) compare("optimizer", optimizer_->describe());
    SG_REQUIRE(diffs.empty(), where, " was saved from another setup:\n  ", joined(diffs, "\n  "),
               "\nto take only its parameters into this setup, load it weights-only (CLI --weights-only, Python "
               "weights_only=True, C++ LoadMode::WeightsOnly)");
  }
  // The tensors to take, each checked before anything is written: a bad file leaves the trainer as it was.
  auto wanted = [&](const TensorInfo& info) {
    if (info.role == Role::Gradient || is_step_status(info.name)) return false;
    if (mode == LoadMode::Resume) return true;
    return is_weight(info.role) || (mode == LoadMode::Evaluate && info.name == kStepTensor);
  };
  std::vector<std::string> missing, mismatched, extra;
  std::vector<std::pair<std::string, const HostArray*>> take;
  const std::vector<TensorInfo> mine = persistent_tensors();
  std::map<std::string, const TensorInfo*> slots;
  for (const TensorInfo& info : mine) slots.emplace(info.name, &info);
  for (const TensorInfo& info : mine) {
    const std::string& name = info.name;
    if (!wanted(info)) continue;
    const HostArray* a = find(name);
    if (!a) missing.push_back(cat("'", name, "' (", role_name(info.role), ")"));
    else if (a->dtype() != info.dtype || a->shape() != info.shape)
      mismatched.push_back(cat("'", name, "' is ", dtype_name(a->dtype()), " ", shape_str(a->shape()),
                               " there but ", dtype_name(info.dtype), " ", shape_str(info.shape), " here"));
    else take.emplace_back(name, a);
  }
  // Tensors of the file this trainer has no place for: any (resume), or its weights (the other modes).
  std::set<std::string> saved_weights;
  const auto w = f.metadata.find("weights");
  const nlohmann::json wl = w == f.metadata.end() ? nlohmann::json() : nlohmann::json::parse(w->second, nullptr, false);
  const bool listed = wl.is_array();
  if (listed)
    for (const auto& n : wl)
      if (n.is_string()) saved_weights.insert(n.get<std::string>());
  for (const auto& [name, a] : f.tensors) {
    if (name == "rng.seed" || is_step_status(name)) continue;  // older checkpoints hold the schedule
    const auto slot = slots.find(name);
    const bool known = slot != slots.end();
    const bool is_saved_weight = listed ? saved_weights.count(name) > 0 : !known;
    if (mode == LoadMode::Resume ? !known : is_saved_weight && !(known && is_weight(slot->second->role)))
      extra.push_back(cat("'", name, "'"));
  }
  const HostArray* s = find("rng.seed");
  if (mode != LoadMode::WeightsOnly && !(s && s->dtype() == DType::U64 && s->numel() == 1))
    missing.push_back("'rng.seed' (u64 [1])");
  std::vector<std::string> problems;
  if (!missing.empty()) problems.push_back("missing: " + joined(missing));
  if (!mismatched.empty()) problems.push_back("other shapes: " + joined(mismatched));
  if (!extra.empty()) problems.push_back("not in this model: " + joined(extra));
  SG_REQUIRE(problems.empty(), where, " does not fit this ",
             mode == LoadMode::WeightsOnly ? "model's parameters" : "model and optimizer", ":\n  ",
             joined(problems, "\n  "));
  for (const auto& [name, a] : take) write_tensor(name, *a);
  if (mode != LoadMode::WeightsOnly) {
    seed_ = s->data<uint64_t>()[0];
    // The watch belongs to the steps since: the checkpoint's state starts it afresh.
    if (slots.count(kWatchTensor)) write_tensor(kWatchTensor, HostArray::i32({2}, {0, 0}));
  }
}

}  // namespace sg
