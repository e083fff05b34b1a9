// A whole training run from a configuration: data, trainer, loop, progress, metrics file,
// checkpoint and summary. The CLI's `train` and `eval` are thin wrappers around these.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "stepgraph/config.h"
#include "stepgraph/distributed.h"
#include "stepgraph/trainer.h"

namespace sg {

struct RunOptions {
  std::optional<int64_t> steps;       // overrides train.steps (the run's total step count)
  std::optional<std::string> device;  // overrides train.device: auto | cpu | cuda
  std::optional<uint64_t> seed;       // overrides train.seed
  // metrics.jsonl, checkpoint.safetensors, config.json. A folder that holds another run is
  // refused unless `resume` is that folder's checkpoint or `overwrite` is set (src/train/run_folder.h).
  std::string out_dir;
  std::string resume;                 // checkpoint to continue from (steps continue its count)
  bool overwrite = false;             // replace the run in out_dir (once every input is checked)
  // resume / eval: take only the checkpoint's parameters, into a setup (activations, loss,
  // optimizer) that may differ from the one it was saved from; training starts at step 0.
  bool weights_only = false;
  std::optional<int64_t> check_params;  // overrides train.check_params (data-parallel runs)
  bool json = false;                  // every output line a JSON object
  std::ostream* out = nullptr;        // progress and summary (default std::cout)
  // Between train.log_every's progress lines, one on the screen (not in metrics.jsonl) whenever
  // this many seconds have passed without one, so that a slow run is never silent for long.
  // 0: only log_every's. In a data-parallel run rank 0 prints these without the loss (the
  // averaged loss is a collective, so only log points have it).
  double progress_seconds = 5;
  // Where the trained Trainer goes when the run ends (null: it is destroyed with the run).
  std::unique_ptr<Trainer>* keep_trainer = nullptr;
  // TensorBoard scalars (the event-file format its reader takes) into this folder: each progress
  // and eval record's numbers, by name ("loss", "val_loss", "loss_terms/u", ...). Empty: none.
  std::string tensorboard;
  // Called with every progress and eval record (as metrics.jsonl holds it); returning false
  // stops the run after that step, which then ends as a finished run does (final evaluation,
  // checkpoint, summary). Not in data-parallel runs.
  std::function<bool(const nlohmann::json& record)> callback;
};

// The run's result; also the last line printed (as JSON with --json).
struct RunSummary {
  int64_t steps = 0;          // optimizer steps taken in total
  double final_loss = 0;      // loss of the last step
  double us_per_step = 0;     // wall time per step of this run's loop
  std::string task;           // classification | regression | graph (arrays by name) | physics-informed
  double val_loss = 0;
  double val_accuracy = 0;    // classification ("accuracy" in the JSON summary)
  double train_accuracy = 0;
  int64_t val_size = 0;
  std::string device;
  std::string checkpoint;     // path written, if any
  double rel_l2_error = -1;   // physics-informed problems: against the known solution
  // Physics-informed problems and graph models with losses by output: each term's last value.
  std::map<std::string, float> loss_terms;
  std::map<std::string, double> val_terms;  // graph models: each term over the validation split
  std::map<std::string, float> amax;        // dense layers with amax: max |output| of the last step
  std::map<std::string, float> coefficients;  // physics-informed problems: the learned coefficients
  std::string stopped_by;     // empty: every step ran; "early_stopping" | "callback"
  int64_t best_step = 0;      // train.early_stopping: the best evaluation's step (its parameters with restore_best)
  NonFiniteSteps nonfinite;   // steps whose loss or gradient norm was NaN or inf (train.on_nan skip | continue)
  nlohmann::json to_json() const;
};

// Picks the backend: "auto" means CUDA when available, otherwise CPU with *note saying why.
Device choose_device(const std::string& requested, std::string* note);

// Data-parallel training from the launch environment (docs/multi-gpu.md): when WORLD_SIZE > 1,
// or train.distributed is "nccl" or SG_DISTRIBUTED=nccl (world size 1 through the same path),
// makes CUDA device LOCAL_RANK this thread's and returns this rank's NCCL communicator (the world
// in *world); otherwise null. Errors say why data-parallel training cannot run here.
std::shared_ptr<dist::Communicator> start_data_parallel(const RunConfig& cfg, const std::string& requested_device,
                                                       dist::World* world);

// What the step of a configuration is, as Trainer::explain says, compiled for batches of `batch`
// rows (0: train.batch_size) and then, when `then_batch` > 0, for that size too.
std::string explain_run(const RunConfig& cfg, Device device, int64_t batch = 0, int64_t then_batch = 0);

// The Trainer a configuration describes (its model, loss or physics problem, optimizer, trainer
// options, train.seed unless `seed`), on `device` ("auto" | "cpu" | "cuda"; empty: train.device).
// A physics-informed step is compiled (it makes its own inputs); a supervised one is compiled by
// the caller for its batch shape (Trainer::compile).
std::unique_ptr<Trainer> trainer_from_config(const RunConfig& cfg, const std::string& device = "",
                                             std::optional<uint64_t> seed = std::nullopt);
// The same on a chosen device, with these trainer options (the runs' own: data-parallel ones add
// the communicator).
std::unique_ptr<Trainer> trainer_from_config(const RunConfig& cfg, Device device, uint64_t seed,
                                             const TrainerOptions& options);

// Trains; in a data-parallel launch, each rank on its shard of every global batch, rank 0 alone
// writing progress, metrics and checkpoints.
RunSummary train_run(const RunConfig& cfg, const RunOptions& opt);

// Predictions of a checkpoint for the rows of an .npy file (f32 or f64 [rows, features]; a
// physics-informed model's [points, coordinates]), written to `output` as f32 [rows, outputs].
// Features are standardized as in training where data.standardize is set. An existing output
// file is refused unless opt.overwrite. Returns the predictions' shape.
Shape predict_run(const RunConfig& cfg, const std::string& checkpoint, const std::string& input,
                  const std::string& output, const RunOptions& opt);

// A checkpoint's weights as a file for another tool (Trainer::export_weights): `format` safetensors
// or torch; an existing output is refused unless opt.overwrite.
void export_run(const RunConfig& cfg, const std::string& checkpoint, const std::string& output,
                ExportFormat format, const RunOptions& opt);
// The trainer export reads: the config's, on the CPU, compiled for one row, holding the
// checkpoint's weights (opt.weights_only: its parameters alone). With data.standardize,
// *input_scaling receives {input: {mean, sd}} (the model expects standardized inputs).
std::unique_ptr<Trainer> exportable_trainer(const RunConfig& cfg, const std::string& checkpoint,
                                            const RunOptions& opt, nlohmann::json* input_scaling = nullptr);

// Evaluates a checkpoint on the config's validation split (and training split).
RunSummary eval_run(const RunConfig& cfg, const std::string& checkpoint, const RunOptions& opt);

}  // namespace sg
