// A checkpoint's predictions (stepgraph predict), evaluation (stepgraph eval) and weights for other
// tools (stepgraph export) from a configuration.
#include "stepgraph/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/files.h"
#include "train/run_data.h"
#include "train/run_output.h"

namespace sg {

using nlohmann::json;

namespace {

// A graph model by name: the inputs from an .npz (a member per model input), every output into
// an .npz (a member per output).
Shape predict_named(const RunConfig& cfg, const std::string& checkpoint, const std::string& input,
                    const std::string& output, const RunOptions& opt) {
  NamedArrays inputs = read_npz(input);
  const std::vector<std::string>& names = cfg.graph->input_names();
  for (const std::string& n : names)
    SG_REQUIRE(inputs.count(n), "predict: the input '", input, "' has no array '", n, "' for the model's input '", n,
               "' (it has: ", [&] {
                 std::vector<std::string> have;
                 for (const auto& kv : inputs) have.push_back(kv.first);
                 return joined(have);
               }(), "; the model's inputs: ", joined(names), ")");
  for (auto it = inputs.begin(); it != inputs.end();)  // other members are not the model's
    it = std::find(names.begin(), names.end(), it->first) == names.end() ? inputs.erase(it) : std::next(it);
  const RunData data = prepare_data(cfg);  // with data.standardize, the training split's scaling
  for (auto& [name, a] : inputs)
    if (data.scaling.count(name) && a.dtype() == DType::F32) data.scaling.at(name).apply(a);
  std::string note;
  const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
  Reporter rep(opt, "");
  if (!note.empty()) rep.info(note);
  std::unique_ptr<Trainer> t = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  const int64_t rows = inputs.begin()->second.shape().empty() ? 0 : inputs.begin()->second.shape()[0];
  SG_REQUIRE(rows > 0, "predict: the input '", input, "' has no rows");
  t->compile({std::min<int64_t>(cfg.train.batch_size, rows)});
  t->load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
  const NamedArrays y = t->predict(inputs);
  write_npz(output, y);
  json shapes = json::object();
  for (const auto& [name, a] : y) shapes[name] = a.shape();
  rep.record({{"event", "predict"}, {"input", input}, {"output", output}, {"rows", rows}, {"outputs", shapes},
              {"checkpoint", checkpoint}, {"steps", t->step()}},
             cat("predicted ", y.size(), " output", y.size() == 1 ? "" : "s", " of ", rows, " rows from '", input,
                 "' with '", checkpoint, "' (step ", t->step(), "): ", output));
  return {rows};
}

}  // namespace

Shape predict_run(const RunConfig& cfg, const std::string& checkpoint, const std::string& input,
                  const std::string& output, const RunOptions& opt) {
  SG_REQUIRE(opt.overwrite || !std::filesystem::exists(output), "predict: the output '", output,
             "' exists; choose another path or pass --overwrite");
  if (cfg.named()) return predict_named(cfg, checkpoint, input, output, opt);
  HostArray X = read_npy(input);
  // read_npy has turned a file's integers (or booleans) into i32: the message names what the file holds.
  SG_REQUIRE(X.dtype() == DType::F32 && X.shape().size() == 2 && X.shape()[0] > 0,
             "predict: the input '", input, "' must hold f32 or f64 [rows, features] (rows > 0), got ",
             X.dtype() == DType::F32 ? "floats" : "integers or booleans", " of shape ", shape_str(X.shape()),
             X.dtype() == DType::F32 ? "" : "; convert them with X.astype(np.float32)");
  std::string note;
  const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
  Reporter rep(opt, "");
  if (!note.empty()) rep.info(note);
  std::unique_ptr<Trainer> t = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  if (!cfg.problem) {
    const RunData data = prepare_data(cfg);  // the features' count and, with data.standardize, their scaling
    SG_REQUIRE(X.shape()[1] == data.train.features(), "predict: the input '", input, "' has ", X.shape()[1],
               " features per row; the model was trained on ", data.train.features(), " (", data.train.name, ")");
    if (data.scaling.count("X")) data.scaling.at("X").apply(X);
    t->compile({std::min<int64_t>(cfg.train.batch_size, X.shape()[0]), X.shape()[1]});
  }
  t->load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
  const HostArray y = t->predict(X);
  write_npy(output, y);
  json j = {{"event", "predict"}, {"input", input}, {"output", output}, {"rows", y.shape()[0]},
            {"outputs", y.shape().size() > 1 ? y.shape()[1] : 1}, {"checkpoint", checkpoint}, {"steps", t->step()}};
  rep.record(j, cat("predicted ", shape_str(y.shape()), " from '", input, "' with '", checkpoint, "' (step ",
                    t->step(), "): ", output));
  return y.shape();
}

RunSummary eval_run(const RunConfig& cfg, const std::string& checkpoint, const RunOptions& opt) {
  if (cfg.problem) {
    std::string note;
    const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
    Reporter rep(opt, "");
    if (!note.empty()) rep.info(note);
    std::unique_ptr<Trainer> owned = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
    Trainer& t = *owned;
    t.load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
    RunSummary sum;
    sum.task = "physics-informed";
    sum.device = device_name(device);
    sum.steps = t.step();
    const bool has_exact = !cfg.problem->exact.empty() || static_cast<bool>(cfg.problem->exact_fn);
    if (has_exact) sum.rel_l2_error = pinn::relative_l2_error(t, *cfg.problem);
    sum.coefficients = t.coefficients();
    const std::string learned = coefficients_text(sum.coefficients);
    rep.record(sum.to_json(), cat("eval of '", checkpoint, "' (step ", sum.steps, ")",
                                  has_exact ? cat(": relative L2 error ", sum.rel_l2_error) : std::string(),
                                  learned.empty() ? "" : (has_exact ? learned : ": " + learned.substr(2))));
    return sum;
  }
  std::string note;
  const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
  Reporter rep(opt, "");
  if (!note.empty()) rep.info(note);
  const RunData data = prepare_data(cfg);
  const int64_t B = std::min<int64_t>(cfg.train.batch_size, std::max<int64_t>(data.train_size(), 1));
  std::unique_ptr<Trainer> owned = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  Trainer& t = *owned;
  compile_for(t, cfg, data, B);
  t.load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
  const bool classes = !data.named && data.train.task == Task::Classification;
  const bool on_val = data.val_size() > 0;
  RunSummary sum;
  sum.task = data.named ? "graph" : task_name(data.train.task);
  sum.device = device_name(device);
  sum.steps = t.step();
  EvalResult r = evaluate_split(t, data, on_val);
  sum.val_loss = r.loss;
  sum.final_loss = r.loss;
  sum.val_accuracy = r.accuracy;
  sum.val_terms = r.terms;
  sum.val_size = on_val ? data.val_size() : data.train_size();
  if (classes) sum.train_accuracy = evaluate_split(t, data, false).accuracy;
  std::string text = cat("eval of '", checkpoint, "' (step ", sum.steps, ") on ", on_val ? "validation" : "training",
                         " split of ", sum.val_size, ": loss ", fixed(r.loss, 4), terms_text(r.terms));
  if (classes) text += cat(", accuracy ", fixed(100 * r.accuracy, 2), "%");
  rep.record(sum.to_json(), text);
  return sum;
}

std::unique_ptr<Trainer> exportable_trainer(const RunConfig& cfg, const std::string& checkpoint,
                                            const RunOptions& opt, nlohmann::json* input_scaling) {
  std::unique_ptr<Trainer> t = trainer_from_config(cfg, Device::CPU, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  if (!cfg.problem) {  // physics-informed trainers come compiled
    const RunData data = prepare_data(cfg);  // the features' count and, with data.standardize, their scaling
    if (input_scaling)
      for (const auto& [name, s] : data.scaling) (*input_scaling)[name] = {{"mean", s.mean}, {"sd", s.sd}};
    t->compile(cfg.graph ? Shape{1} : Shape{1, data.train.features()});
  }
  t->load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
  return t;
}

void export_run(const RunConfig& cfg, const std::string& checkpoint, const std::string& output,
                ExportFormat format, const RunOptions& opt) {
  SG_REQUIRE(opt.overwrite || !std::filesystem::exists(output), "export: the output '", output,
             "' exists; choose another path or pass --overwrite");
  Reporter rep(opt, "");
  json scaling = json::object();
  std::unique_ptr<Trainer> t = exportable_trainer(cfg, checkpoint, opt, &scaling);
  t->export_weights(output, format);
  json j = {{"event", "export"}, {"format", export_format_name(format)}, {"output", output},
            {"checkpoint", checkpoint}, {"steps", t->step()}};
  std::string text = cat("exported the weights of '", checkpoint, "' (step ", t->step(), ") as ",
                         export_format_name(format), ": ", output);
  if (format == ExportFormat::Torch) {
    j["torch_module"] = t->torch_module();
    text += "\n  they load into " + j["torch_module"].get<std::string>() + " with load_state_dict";
  }
  if (!scaling.empty()) {
    j["input_scaling"] = scaling;
    text += "\n  note: the model was trained on standardized inputs (data.standardize): feed it (x - mean) / sd "
            "with the training split's mean and sd (in --json output as input_scaling)";
  }
  rep.record(j, text);
}

}  // namespace sg
