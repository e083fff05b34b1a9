// The Trainer: builds the whole step (forward → loss → backward → optimizer) as one Program,
// plans its memory, lowers it on a backend and runs it over fixed buffers.
//
//   sg::Trainer t(model, loss, optimizer, sg::Device::CPU);
//   t.compile({64, 128});
//   float l = t.one_step(X, y);
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "stepgraph/backend.h"
#include "stepgraph/data.h"
#include "stepgraph/loss.h"
#include "stepgraph/model.h"
#include "stepgraph/nn.h"
#include "stepgraph/optim.h"
#include "stepgraph/plan.h"
#include "stepgraph/step.h"

namespace sg {

// How steps run.
//   graph (default): the first launch runs the step op by op (the warm-up), then records it as
//                    one CUDA graph; every later launch replays it. Needs a backend with capture
//                    (CUDA); on the CPU it is the same as eager.
//   eager:           op by op every step (the same kernels).
enum class ExecMode : uint8_t { Graph, Eager };
const char* exec_mode_name(ExecMode m);
ExecMode parse_exec_mode(const std::string& s);

// What one_step does with a batch whose row count differs from the compiled one (e.g. the last
// partial batch).
//   recapture (default): compile and capture that shape too; shapes are cached (at most
//                        max_shapes; the least recently used is dropped beyond that)
//   pad:                 pad the batch to the compiled size; padding rows carry no loss and no
//                        gradient (the loss divides by the real rows), so the step is exact
//   error:               refuse with an Error
enum class ShapePolicy : uint8_t { Recapture, Pad, Error };
const char* shape_policy_name(ShapePolicy p);
ShapePolicy parse_shape_policy(const std::string& s);

struct TrainerOptions {
  ExecMode mode = ExecMode::Graph;
  ShapePolicy shape_policy = ShapePolicy::Recapture;
  int max_shapes = 8;
  LowerOptions lower;  // autotune, precision, attention; comm: data-parallel training (distributed.h)
  // A step whose loss (or, with clip_norm, gradient norm) is NaN or inf: recorded on the device
  // without a host sync (nonfinite_steps()); Skip also leaves that step's update out. What a run
  // does about it at its next check is train_run's (train.on_nan).
  NanPolicy on_nan = NanPolicy::Stop;
};

// The steps whose loss or gradient norm was NaN or inf, as the step recorded them on the device.
struct NonFiniteSteps {
  int64_t first = 0;  // the first such step (1-based, as step()); 0: none
  int64_t count = 0;  // how many
};

// A loss on one named output of a Model, and its weight in the total loss
// (total = sum of weight * term).
struct LossTerm {
  std::string output;
  LossPtr loss;
  double weight = 1.0;
};

struct EvalResult {
  double loss = 0;      // over all rows, with the loss's reduction (mean: per row / element)
  std::map<std::string, double> terms;  // a graph model's terms by output (unweighted), as loss
  // Classification only: the fraction of labels matched by the argmax (per row, or per labelled
  // position of a sequence).
  double accuracy = 0;
  int64_t count = 0;
};


// What Trainer::load takes from a checkpoint, and what must match. Names, dtypes and shapes
// always must; errors list every tensor that is missing, shaped otherwise or extra.
//   resume (default): everything (parameters, optimizer state, step, seed); the model, loss and
//                     optimizer descriptions must be the checkpoint's (an Error lists the differences:
//                     a relu checkpoint does not load into a tanh model, nor AdamW state into Adam)
//   evaluate:         parameters, the step and the seed; the model and loss must match, the
//                     optimizer is not used
//   weights_only:     the parameters (and fixed constants) alone, on purpose into another setup
//                     with the same names and shapes; the step stays where it is
enum class LoadMode : uint8_t { Resume, Evaluate, WeightsOnly };

// What Trainer::load_weights took from a file and what it left, in the terms of PyTorch's
// load_state_dict: this model's weights the file lacks, and the file's tensors with no place here.
struct WeightsReport {
  std::vector<std::string> loaded;      // this model's names, in model order
  std::vector<std::string> missing;     // this model's weights the file does not hold
  std::vector<std::string> unexpected;  // the file's tensors this model has no weight for
  std::map<std::string, std::string> converted;  // loaded tensors stored in another type: name -> "F64"
  std::string naming = "stepgraph";     // the file's names: "stepgraph" or "torch" (see torch_module)
};

// Weights for other tools (docs/interop.md). safetensors: the parameters and fixed constants
// alone under stepgraph's names; torch: the same values under the names torch_module()'s
// state_dict uses, so torch's load_state_dict takes the file as it is.
enum class ExportFormat : uint8_t { Safetensors, Torch };
const char* export_format_name(ExportFormat f);
ExportFormat parse_export_format(const std::string& s);  // "safetensors" | "torch"; onnx: see python

// The forward program predict runs, for exporters: its inputs and outputs by name (a graph
// model's, or "input" and "output"); parameters and constants are its persistent tensors.
struct InferenceGraph {
  const Program* program = nullptr;
  std::vector<std::pair<std::string, TensorId>> inputs, outputs;
};

class Trainer {
 public:
  // `seed` fixes the initial parameters (per parameter name) and is kept in checkpoints.
  Trainer(LayerPtr model, LossPtr loss, OptimizerPtr optimizer, Device device = Device::CPU,
          uint64_t seed = 0, TrainerOptions options = {});
  // A trainer whose step comes from `step`; compile_custom() builds it. one_step/set_batch and
  // evaluate do not apply (the step makes its own inputs); launch, loss, predict do.
  Trainer(LayerPtr model, StepBuilder step, OptimizerPtr optimizer, Device device = Device::CPU,
          uint64_t seed = 0, TrainerOptions options = {});
  void compile_custom();
  // A model graph with named inputs and any number of loss terms, each on one named output
  // (every output named once at most; an output without a term is predicted, not trained).
  // compile({batch}): shapes come from the model's Inputs. Batches are NamedArrays: every model
  // input by name ([rows, shape...], or [rows, features] holding as many values), every term's
  // target by output name; the single-array one_step/predict/evaluate do not apply.
  Trainer(ModelPtr model, std::vector<LossTerm> losses, OptimizerPtr optimizer, Device device = Device::CPU,
          uint64_t seed = 0, TrainerOptions options = {});
  bool has_named_io() const { return graph_ != nullptr; }
  float one_step(const NamedArrays& inputs, const NamedArrays& targets);
  void one_step_async(const NamedArrays& inputs, const NamedArrays& targets);
  void set_batch(const NamedArrays& inputs, const NamedArrays& targets);
  // The same batch already in CUDA memory (a CUDA trainer): copied device to device into the
  // slots after the checks set_batch makes of names, shapes and dtypes (the values, labels among
  // them, are not read).
  void set_batch_device(const NamedDeviceArrays& inputs, const NamedDeviceArrays& targets);
  NamedArrays predict(const NamedArrays& inputs);           // every output, [rows, shape...]
  EvalResult evaluate(const NamedArrays& inputs, const NamedArrays& targets);
  const std::vector<LossTerm>& loss_term_specs() const { return terms_; }
  // Each named term of the last step: a custom step's terms, or a graph model's by output
  // (unweighted; loss() is their weighted sum).
  std::map<std::string, float> loss_terms() const;
  // A custom step's coefficients (a physics problem's trainable ones) by name, as they are now.
  std::map<std::string, float> coefficients() const;
  // max |output| of the last step for every dense layer built with amax, by tensor name
  // ('0.amax', ...); empty when no layer records it.
  std::map<std::string, float> amax() const;
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Builds, plans and lowers the step for inputs of shape {B, D}. The first compile creates and
  // initialises parameters and optimizer state; later compiles (another batch size) reuse them.
  void compile(const Shape& input_shape);
  bool is_compiled() const { return current_ != nullptr; }
  const Shape& input_shape() const;
  const Shape& output_shape() const;  // the model's prediction [batch, out] (sequences: [batch, positions, out])

  // The seed's workflow: copy a batch into the input slots and run one step; returns the loss
  // (which waits for the step to finish).
  float one_step(const HostArray& X, const HostArray& y);
  // The same without waiting: the loss of the last step queued is read later with loss(), so a
  // training loop need not synchronize every step.
  void one_step_async(const HostArray& X, const HostArray& y);
  // Copies a batch into the input slots (host data through pinned staging). A batch with fewer
  // rows than compiled follows the shape policy.
  void set_batch(const HostArray& X, const HostArray& y);
  // A batch already in the trainer's device memory (a CUDA tensor through DLPack; host memory for
  // the CPU backend): copied device to device into the input slots, never through the host.
  // X: f32 [rows, features] row-major; y: i32 [rows] labels or f32 [rows, targets]. Labels are
  // not checked on the host here: a label outside [0, classes) makes the loss NaN on the GPU
  // (the CPU reference raises an Error).
  void set_batch_device(const void* X, const void* y, int64_t rows);
  // Where a tensor of the current step lives on the device ("input", "target", "loss", the
  // model output, parameters by name): for zero-copy views (DLPack). Valid until the next
  // compile/invalidate. The model output's name is output_name(). A physics-informed step
  // computes its fixed points and what follows from them and constants once (ir.h
  // invariant_prefix): after writing a constant here, call invalidate().
  void* device_ptr(const std::string& tensor) const;
  std::string output_name() const;
  void launch();
  float loss() const;        // the last step's loss
  // Checks a whole data set as one_step checks a batch (X's width, y's dtype and shape, labels
  // within the outputs, token ids within each embedding's vocabulary where X feeds one), so a
  // run can refuse bad data before it writes anything. `what` names the data in errors.
  void check_data(const HostArray& X, const HostArray& y, const std::string& what) const;
  void check_data(const NamedArrays& inputs, const NamedArrays& targets, const std::string& what) const;

  // Device-resident training: the data set is uploaded once and every launch() gathers its own
  // batch inside the step (the GatherBatch rule in ir.h: a keyed per-epoch shuffle computed on
  // the device from the step counter), so a training loop does no host work per step:
  //   t.set_dataset(X, y, 64);  for (...) t.launch();  t.loss();
  // The order depends only on (seed, step), so a resumed run continues it exactly. `last`:
  // Drop skips a tail smaller than the batch; Partial makes it a padded batch. compile()
  // switches back to host-fed batches.
  // Data parallel: shard r of `shards` trains on rows [r * batch_size, (r + 1) * batch_size) of
  // each global batch of shards * batch_size rows (dist::shard_of; Drop only).
  void set_dataset(const HostArray& X, const HostArray& y, int64_t batch_size, bool shuffle = true,
                   LastBatch last = LastBatch::Drop, uint64_t seed = 0, int shard = 0, int shards = 1);
  // The same for a graph model: every input and every term's target by name (as one_step takes
  // them), all with the same rows; one gather in the step draws the same rows of each.
  void set_dataset(const NamedArrays& inputs, const NamedArrays& targets, int64_t batch_size, bool shuffle = true,
                   LastBatch last = LastBatch::Drop, uint64_t seed = 0, int shard = 0, int shards = 1);
  bool is_resident() const;
  HostArray logits() const;  // the last step's predictions [B, out]

  // Forward (+ loss) only, in batches of the compiled size; parameters are not changed. predict
  // returns [rows, ...] in the model's output shape.
  HostArray predict(const HostArray& X);
  EvalResult evaluate(const HostArray& X, const HostArray& y);

  // Parameters by name ("0.weight" [out, in], "0.bias" [out], ...).
  std::map<std::string, HostArray> params() const;
  // Writes the given parameters in place (no new plan). Every name must exist with the right
  // shape; on any mismatch nothing is written.
  void set_params(const std::map<std::string, HostArray>& values);

  // The base learning rate lives in the step-scalar buffer: changing it needs no recompile.
  void set_lr(double lr);
  double lr() const;
  int64_t step() const;  // optimizer steps taken
  NonFiniteSteps nonfinite_steps() const;  // {0, 0} before any such step (a few bytes read back)
  uint64_t seed() const { return seed_; }

  // Checkpoint (safetensors): parameters, optimizer state, step scalars and the seed, with the
  // model, loss and optimizer descriptions they come from; written atomically. load() validates
  // the whole file before changing anything; see LoadMode for what it takes and requires.
  void save(const std::string& path) const;
  void load(const std::string& path, LoadMode mode = LoadMode::Resume);
  // A weights file into this model: a parameters-only safetensors file (F32, or F64/F16/BF16
  // converted), a checkpoint's parameters, or a state_dict of torch_module() (its names are
  // recognised). Shapes must match. strict: every weight present and nothing extra, else an
  // Error listing each; not strict: takes what fits and reports the rest. Nothing is written
  // when anything is refused. The step and optimizer state stay as they are.
  WeightsReport load_weights(const std::string& path, bool strict = true);
  // Writes the parameters and constants (atomically) for another tool; see ExportFormat.
  void export_weights(const std::string& path, ExportFormat format) const;
  // The torch.nn.Sequential whose state_dict a torch export is, as Python source
  // ("torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))");
  // an Error naming the first layer that has no torch module of the same parameters.
  std::string torch_module() const;
  // The forward program of predict for `rows` rows (compiled on first use, as predict does).
  InferenceGraph inference_graph(int64_t rows = 1);

  std::string explain() const;
  int64_t launch_count() const { return launches_; }
  int64_t compile_count() const { return compiles_; }
  int64_t capture_count() const { return captures_; }  // graphs recorded (recaptures included)
  size_t graph_nodes() const;                            // of the current step's graph (0: none)
  const TrainerOptions& options() const { return options_; }
  // Per-op device time of the current step program (see Executable::profile).
  std::vector<std::pair<std::string, double>> profile(int reps = 50);
  // Downloads every persistent tensor (parameters, optimizer state, step scalars) by name.
  std::map<std::string, HostArray> state() const;
  // Drops every compiled step (parameters and optimizer state are kept).
  void invalidate();

  const Program& program() const;
  const MemoryPlan& plan() const;
  Backend& backend() { return *backend_; }
  const LayerPtr& model() const { return model_; }
  const LossPtr& loss_fn() const { return loss_; }
  const OptimizerPtr& optimizer() const { return optimizer_; }

 private:
  struct Variant;
  struct Persistent;
  struct Resident;
  std::unique_ptr<Variant> build_variant(const Shape& input_shape, bool training,
                                         const Resident* resident = nullptr);
  Variant& eval_variant(int64_t batch);
  void init_persistent(const Program& p, const MemoryPlan& plan, const std::vector<ParamSpec>& specs,
                       const std::vector<std::pair<std::string, double>>& fills);
  void check_batch(const Variant& v, const HostArray& X, const HostArray& y, const std::string& what) const;
  void upload_batch(Variant& v, const HostArray& X, const HostArray& y, int64_t row0, int64_t rows);
  HostArray read_tensor(const std::string& name) const;
  std::vector<TensorInfo> persistent_tensors() const;  // in creation order (checkpoint order)
  void settle() const;
  void write_tensor(const std::string& name, const HostArray& a);
  // Whether a batch of `rows` rows needs its own compiled shape, by the shape policy (pad: no,
  // when it is smaller; error: an Error naming `fn`).
  bool needs_compile(int64_t rows, const char* fn) const;
  void build_graph_step(Variant& v, GraphBuilder& g, int64_t batch, bool training, const Resident* resident);
  void check_dataset_args(int64_t N, int64_t batch_size, LastBatch last, int shard, int shards) const;
  void install_resident(std::unique_ptr<Resident> r, const Shape& input_shape);
  void upload_named(Variant& v, const NamedArrays& inputs, const NamedArrays& targets, int64_t row0, int64_t rows);
  // An array check_named reads: its shape and dtype, and its values when they are on the host.
  struct ArrayRef {
    Shape shape;
    DType dtype;
    const HostArray* host;  // null: device memory
  };
  int64_t check_named(const Variant& v, const NamedArrays& inputs, const NamedArrays* targets,
                      const std::string& what) const;
  int64_t check_named(const Variant& v, const std::map<std::string, ArrayRef>& inputs,
                      const std::map<std::string, ArrayRef>* targets, const std::string& what) const;
  std::string loss_description() const;  // for checkpoints

  LayerPtr model_;
  LossPtr loss_;
  ModelPtr graph_;  // a graph model with named inputs, outputs and terms (then loss_ is null)
  std::vector<LossTerm> terms_;
  StepBuilder step_;
  OptimizerPtr optimizer_;
  uint64_t seed_;
  TrainerOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Persistent> persistent_;
  std::map<int64_t, std::unique_ptr<Variant>> train_variants_, eval_variants_;
  std::unique_ptr<Resident> resident_;
  std::unique_ptr<Variant> resident_variant_;
  Variant* current_ = nullptr;
  int64_t launches_ = 0, compiles_ = 0, captures_ = 0, use_clock_ = 0;
};

}  // namespace sg
