// Trainer::save, load and load_weights: checkpoints that carry the setup they come from (the
// model, loss and optimizer descriptions) and the names of their weights, loads that take what
// the LoadMode says after checking the whole file, and weights files from anywhere.
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "stepgraph/safetensors.h"
#include "stepgraph/trainer.h"
#include "train/describe_diff.h"
#include "train/torch_names.h"

namespace sg {

namespace {

// The model's own tensors, which a weights-only load takes: parameters and fixed constants.
bool is_weight(Role r) { return r == Role::Parameter || r == Role::Constant; }

// The weights a checkpoint lists in its metadata (empty for other files).
std::set<std::string> listed_weights(const SafetensorsFile& f) {
  std::set<std::string> out;
  const auto w = f.metadata.find("weights");
  if (w == f.metadata.end()) return out;
  const nlohmann::json wl = nlohmann::json::parse(w->second, nullptr, false);
  if (wl.is_array())
    for (const auto& n : wl)
      if (n.is_string()) out.insert(n.get<std::string>());
  return out;
}

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
  if (mode == LoadMode::WeightsOnly) {
    load_weights(path, true);
    return;
  }
  SafetensorsFile f = read_safetensors(path);
  const std::string where = cat("checkpoint '", path, "'");
  std::map<std::string, const HostArray*> in_file;  // SafetensorsFile::find is a linear search
  for (const auto& [name, a] : f.tensors) in_file.emplace(name, &a);
  auto find = [&](const std::string& name) -> const HostArray* {
    const auto it = in_file.find(name);
    return it == in_file.end() ? nullptr : it->second;
  };
  {
    auto it = f.metadata.find("format");
    SG_REQUIRE(it != f.metadata.end() && it->second == "stepgraph-checkpoint", where,
               " is not a stepgraph checkpoint (metadata format is ",
               it == f.metadata.end() ? std::string("missing") : "'" + it->second + "'",
               "); a file of weights alone loads with load_weights (CLI --weights-only, Python "
               "load_weights or weights_only=True)");
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
    return is_weight(info.role) || info.name == kStepTensor;
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
  // Tensors of the file this trainer has no place for: any (resume), or its weights (evaluate).
  const std::set<std::string> saved_weights = listed_weights(f);
  const bool listed = f.metadata.count("weights") > 0;
  for (const auto& [name, a] : f.tensors) {
    if (name == "rng.seed" || is_step_status(name)) continue;  // older checkpoints hold the schedule
    const auto slot = slots.find(name);
    const bool known = slot != slots.end();
    const bool is_saved_weight = listed ? saved_weights.count(name) > 0 : !known;
    if (mode == LoadMode::Resume ? !known : is_saved_weight && !(known && is_weight(slot->second->role)))
      extra.push_back(cat("'", name, "'"));
  }
  const HostArray* s = find("rng.seed");
  if (!(s && s->dtype() == DType::U64 && s->numel() == 1)) missing.push_back("'rng.seed' (u64 [1])");
  std::vector<std::string> problems;
  if (!missing.empty()) problems.push_back("missing: " + joined(missing));
  if (!mismatched.empty()) problems.push_back("other shapes: " + joined(mismatched));
  if (!extra.empty()) problems.push_back("not in this model: " + joined(extra));
  SG_REQUIRE(problems.empty(), where, " does not fit this model and optimizer:\n  ", joined(problems, "\n  "));
  for (const auto& [name, a] : take) write_tensor(name, *a);
  seed_ = s->data<uint64_t>()[0];
  // The watch belongs to the steps since: the checkpoint's state starts it afresh.
  if (slots.count(kWatchTensor)) write_tensor(kWatchTensor, HostArray::i32({2}, {0, 0}));
}

WeightsReport Trainer::load_weights(const std::string& path, bool strict) {
  SafetensorsFile f = read_safetensors(path);
  const std::string where = cat("weights file '", path, "'");
  const std::vector<TensorInfo> mine = persistent_tensors();
  std::map<std::string, const TensorInfo*> slots, weights;
  for (const TensorInfo& info : mine) {
    slots.emplace(info.name, &info);
    if (is_weight(info.role)) weights.emplace(info.name, &info);
  }
  // The file's names are ours or torch_module()'s: whichever names more of its tensors rightly.
  std::map<std::string, std::string> from_torch;
  try {
    for (const auto& [ours, theirs] : torch_layout(*model_, weight_shapes(mine)).names) from_torch[theirs] = ours;
  } catch (const Error&) {
    // no torch naming for this model: the file's names must be ours
  }
  auto fits = [&](const std::string& ours, const HostArray& a) {
    const auto w = weights.find(ours);
    return w != weights.end() && w->second->shape == a.shape();
  };
  int ours_hits = 0, torch_hits = 0;
  for (const auto& [name, a] : f.tensors) {
    ours_hits += fits(name, a);
    const auto t = from_torch.find(name);
    torch_hits += t != from_torch.end() && fits(t->second, a);
  }
  WeightsReport r;
  // Our own files (checkpoints, safetensors exports) keep our names; torch exports say "pt".
  const auto format = f.metadata.find("format");
  const bool ours = format != f.metadata.end() && format->second.rfind("stepgraph", 0) == 0;
  const bool torch = format != f.metadata.end() && format->second == "pt";
  if (!ours && (torch ? torch_hits > 0 : torch_hits > ours_hits)) r.naming = "torch";
  // What a checkpoint holds besides its weights (optimizer state, step, seed) is not unexpected.
  const std::set<std::string> saved_weights = listed_weights(f);
  const bool listed = f.metadata.count("weights") > 0;
  std::vector<std::string> mismatched;
  std::set<std::string> found;  // this model's weights the file holds, of any shape
  std::map<std::string, const HostArray*> take;
  for (const auto& [name, a] : f.tensors) {
    std::string ours = name;
    if (r.naming == "torch") {
      const auto t = from_torch.find(name);
      ours = t == from_torch.end() ? "" : t->second;
    }
    const auto w = weights.find(ours);
    if (w != weights.end()) {
      found.insert(ours);
      const TensorInfo& info = *w->second;
      if (a.dtype() != info.dtype || a.shape() != info.shape)
        mismatched.push_back(cat("'", name, "' is ", dtype_name(a.dtype()), " ", shape_str(a.shape()), " there but ",
                                 dtype_name(info.dtype), " ", shape_str(info.shape), " here"));
      else if (!take.emplace(ours, &a).second)
        mismatched.push_back(cat("'", name, "' is given twice"));
      else if (const auto c = f.converted_from.find(name); c != f.converted_from.end())
        r.converted[ours] = c->second;
      continue;
    }
    const bool other_state = name == "rng.seed" || is_step_status(name) || slots.count(name) ||
                             (listed && !saved_weights.count(name));
    if (!other_state) r.unexpected.push_back(name);
  }
  std::vector<std::string> missing, unexpected;  // quoted, for the message
  for (const TensorInfo& info : mine) {
    if (!is_weight(info.role)) continue;
    if (take.count(info.name)) {
      r.loaded.push_back(info.name);
    } else if (!found.count(info.name)) {  // one of another shape is reported as that
      r.missing.push_back(info.name);
      missing.push_back(cat("'", info.name, "' (", role_name(info.role), ")"));
    }
  }
  for (const std::string& n : r.unexpected) unexpected.push_back(cat("'", n, "'"));
  std::vector<std::string> problems;
  if (strict && !missing.empty()) problems.push_back("missing: " + joined(missing));
  if (!mismatched.empty()) problems.push_back("other shapes: " + joined(mismatched));
  if (strict && !unexpected.empty()) problems.push_back("not in this model: " + joined(unexpected));
  SG_REQUIRE(problems.empty(), where, " does not fit this model's parameters",
             r.naming == "torch" ? " (read by torch.nn.Sequential names)" : "", ":\n  ", joined(problems, "\n  "),
             strict && mismatched.empty() ? "\nto take the weights that fit and report the rest, load it with strict=False"
                                          : "");
  for (const auto& [name, a] : take) write_tensor(name, *a);
  return r;
}

}  // namespace sg
