// Run configuration from JSON: sections model, loss, optimizer, data, train. Every error names
// the JSON path ("model.layers[1].units: expected a positive integer, got -3").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepgraph/data.h"
#include "stepgraph/loss.h"
#include "stepgraph/nn.h"
#include "stepgraph/optim.h"
#include "stepgraph/trainer.h"
#include "stepgraph/pinn.h"

namespace sg {

struct DataConfig {
  std::string source = "digits";  // digits | synthetic_classification | synthetic_regression | npy | npz | csv | sequence_task | text_file | antiderivative
  std::string path, x_path, y_path;        // npz/csv: path; npy: x_path + y_path
  std::string x_key = "X", y_key = "y";    // npz member names
  Task task = Task::Classification;
  CsvOptions csv;
  int64_t samples = 1000, features = 16, classes = 4, targets = 1;  // synthetic (samples: sequence_task too)
  std::string sequence_kind = "reverse";  // sequence_task: copy | reverse
  int64_t sequence_length = 8, symbols = 10;  // sequence_task (see make_sequence_task); length: text_file too
  int64_t stride = 0;                          // text_file: bytes between window starts (0: length)
  double noise = 0.0;
  uint64_t seed = 0;           // synthetic data and the train/validation split
  double validation_split = 0.2;
  bool shuffle = true;
  LastBatch last_batch = LastBatch::Drop;
  bool standardize = false;    // z-score features with the training split's mean and std
  bool device_resident = false;  // upload the training split once; batches are gathered in the step
  // A graph model's arrays by name (data.inputs, data.targets; docs/models.md). npz and
  // antiderivative: the member holding each model input and each output's target (default: the
  // member of that name). csv: each one's columns.
  std::map<std::string, std::string> input_members, target_members;
  std::map<std::string, std::vector<CsvColumn>> input_columns, target_columns;
  int64_t functions = 1000, sensors = 100, points = 10;  // antiderivative (make_antiderivative)
};

// train.early_stopping: stop when the validation metric (at train.eval_every) has not improved
// by more than min_delta for `patience` evaluations in a row, as Keras's EarlyStopping; with
// restore_best, the run ends with the best evaluation's parameters (and its checkpoint).
struct EarlyStopping {
  bool on = false;
  std::string metric = "val_loss";  // val_loss | val_accuracy (classification) | a graph model's term "val_<output>"
  std::string mode = "min";         // min | max (the default: max for val_accuracy, else min)
  int64_t patience = 5;
  double min_delta = 0.0;
  bool restore_best = true;
};

struct TrainConfig {
  int64_t steps = 1000;
  int64_t batch_size = 64;
  uint64_t seed = 0;
  std::string device = "auto";  // auto | cpu | cuda
  int64_t log_every = 100;      // progress line every N steps (0: only the summary)
  int64_t eval_every = 0;       // validation metrics every N steps (0: at the end only)
  int64_t checkpoint_every = 0; // checkpoint every N steps (0: at the end only)
  // Data-parallel training (docs/multi-gpu.md): auto = through NCCL when the launch
  // environment has WORLD_SIZE > 1; nccl = through NCCL even alone (world size 1, the same path).
  std::string distributed = "auto";
  double bucket_mb = 25;         // gradient all-reduce bucket size (MiB)
  int64_t check_params = 0;      // compare the ranks' parameter checksums every N steps (0: at start and end)
  EarlyStopping early_stopping;
};

struct RunConfig {
  nlohmann::json json;  // the configuration as given, defaults filled in
  LayerPtr model;
  int64_t model_inputs = 0;  // model.inputs: the feature count the model expects (0: the data's)
  // model.input_shape: each sample's features viewed as an NHWC image [height, width, channels]
  // (row-major: digits' 64 features are an 8x8 image, [8, 8, 1]); empty: feature rows as given.
  Shape model_input_shape;
  LossPtr loss;
  // A graph model with several inputs or outputs, or losses by output ("loss": {"u": {...}}):
  // the model, its terms and batches by name (NamedDataset); model and loss above are then the
  // same model and null.
  ModelPtr graph;
  std::vector<LossTerm> loss_terms;
  bool named() const { return !loss_terms.empty(); }
  OptimizerPtr optimizer;
  DataConfig data;
  TrainConfig train;
  // train.mode (graph | eager), train.shape_policy (recapture | pad | error), train.max_shapes,
  // train.autotune (off | heuristic | exhaustive), train.precision (fp32 | tf32 | tf32x3),
  // train.attention (fp32 | cudnn_bf16), train.deterministic, train.fusion, train.concurrent
  // (true | false), train.plan_cache.
  TrainerOptions trainer;
  // A physics-informed problem (section "problem"): replaces "data" and "loss".
  std::optional<pinn::Problem> problem;
};

// Builds every object; unknown keys and bad values are Errors naming the JSON path.
RunConfig parse_config(const nlohmann::json& j, const std::string& base_dir = "");
// Reads a file: unreadable files and malformed JSON (with line and column) are Errors.
RunConfig load_config(const std::string& path);
// The same from a config's text; `source` names it in errors (a file name; empty: "config").
// Relative data paths stay as written; a problem's observation files resolve against the folder of
// `source` (when it names a file). Strict JSON (src/core/json_text.h): at most 64 MiB and 64
// levels of nesting, no duplicate keys, no numbers beyond a double's range.
RunConfig parse_config_text(const std::string& text, const std::string& source);
// The embedded default: an MLP on the digits data.
nlohmann::json default_config();

// Loads the data set a config names.
Dataset load_data(const DataConfig& d);
// The same by name, for a graph model: `inputs` are its input names, `targets` the outputs that
// have loss terms. Errors name the missing member or column group and what the file has.
NamedDataset load_named_data(const DataConfig& d, const std::vector<std::string>& inputs,
                             const std::vector<std::string>& targets);
// Checks model.inputs and model.input_shape against the data's features (before compiling: an
// input shape that does not fit would fail in the model's first layer with a vaguer message).
void check_model_inputs(const RunConfig& cfg, const Dataset& d);
// Checks that the data fits the model: model.inputs (when given) against the data's features,
// the model's outputs against the classes or regression targets. Errors name both sides.
void check_data_fits(const RunConfig& cfg, const Dataset& d, int64_t model_outputs);

}  // namespace sg
