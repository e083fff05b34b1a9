#include "stepgraph/trainer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "stepgraph/autodiff.h"
#include "stepgraph/distributed.h"
#include "stepgraph/rng.h"
#include "train/trainer_state.h"

namespace sg {

void check_token_ids(const Program& p, TensorId input, const HostArray& X, const std::string& what) {
  for (const Op& op : p.ops()) {
    if (op.kind != OpKind::Embedding || op.in[0] != input || X.shape().size() != 2) continue;
    const int64_t V = p.tensor(op.in[1]).shape[0], S = std::max<int64_t>(X.shape()[1], 1);
    const float* x = X.data<float>();
    for (int64_t k = 0; k < X.numel(); ++k)
      SG_REQUIRE(x[k] >= 0 && x[k] < static_cast<float>(V) && x[k] == std::floor(x[k]), "embedding: token id ", x[k],
                 " at ", what, " row ", k / S, ", position ", k % S, " is not an integer in [0, ", V,
                 "), the embedding's vocabulary");
  }
}

namespace {

// Batch norm's statistics must be those of the batch a single process would train on: a padded
// batch's padding rows would enter them (the valid-row count reaches only the loss), and each
// data-parallel rank would normalise by its own shard's (no cross-rank sync).
void check_batch_norm_batches(const Program& p, bool padded_training, bool distributed) {
  for (const Op& op : p.ops()) {
    if (op.kind != OpKind::BatchNorm && op.kind != OpKind::BatchNormInference) continue;
    SG_REQUIRE(!distributed, "batch norm '", op.name, "': data-parallel training is not supported (each rank would ",
               "normalise by the statistics of its own shard, so the result would differ from one process); ",
               "train on one GPU, or use layer_norm");
    SG_REQUIRE(!padded_training || op.kind != OpKind::BatchNorm, "batch norm '", op.name, "': padded training ",
               "batches are not supported (the padding rows would enter the batch statistics); use shape_policy ",
               "'recapture' (a smaller last batch gets its own step) or drop the last partial batch");
  }
}

}  // namespace

const char* exec_mode_name(ExecMode m) { return m == ExecMode::Graph ? "graph" : "eager"; }

ExecMode parse_exec_mode(const std::string& s) {
  if (s == "graph") return ExecMode::Graph;
  if (s == "eager") return ExecMode::Eager;
  throw Error(cat("unknown mode '", s, "': expected graph or eager"));
}

const char* shape_policy_name(ShapePolicy p) {
  switch (p) {
    case ShapePolicy::Recapture: return "recapture";
    case ShapePolicy::Pad: return "pad";
    case ShapePolicy::Error: return "error";
  }
  return "?";
}

ShapePolicy parse_shape_policy(const std::string& s) {
  for (ShapePolicy p : {ShapePolicy::Recapture, ShapePolicy::Pad, ShapePolicy::Error})
    if (s == shape_policy_name(p)) return p;
  throw Error(cat("unknown shape policy '", s, "': expected recapture, pad or error"));
}

Trainer::Trainer(LayerPtr model, LossPtr loss, OptimizerPtr optimizer, Device device, uint64_t seed,
                 TrainerOptions options)
    : model_(std::move(model)), loss_(std::move(loss)), optimizer_(std::move(optimizer)), seed_(seed),
      options_(options) {
  SG_REQUIRE(model_ && loss_ && optimizer_, "Trainer needs a model, a loss and an optimizer");
  SG_REQUIRE(options_.max_shapes >= 1, "TrainerOptions.max_shapes must be at least 1, got ",
             options_.max_shapes);
  SG_REQUIRE(!options_.lower.comm || device == Device::CUDA,
             "data-parallel training (a communicator in TrainerOptions.lower.comm) runs on the CUDA backend, not on ",
             device_name(device));
  backend_ = make_backend(device);
}

Trainer::Trainer(LayerPtr model, StepBuilder step, OptimizerPtr optimizer, Device device, uint64_t seed,
                 TrainerOptions options)
    : model_(std::move(model)), step_(std::move(step)), optimizer_(std::move(optimizer)), seed_(seed),
      options_(options) {
  SG_REQUIRE(model_ && step_ && optimizer_, "Trainer needs a model, a step builder and an optimizer");
  SG_REQUIRE(!options_.lower.comm || device == Device::CUDA,
             "data-parallel training (a communicator in TrainerOptions.lower.comm) runs on the CUDA backend, not on ",
             device_name(device));
  backend_ = make_backend(device);
}

void Trainer::compile_custom() {
  SG_REQUIRE(step_, "compile_custom: this trainer was made with a loss; use compile({batch, features})");
  auto v = build_variant({0, 0}, true);
  current_ = v.get();
  current_->last_used = ++use_clock_;
  train_variants_[-1] = std::move(v);
}

namespace {

// The one-element tensors `named` of the current step, read from the device.
std::map<std::string, float> read_scalars(Backend& be, const std::vector<void*>& ptrs,
                                          const std::vector<std::pair<std::string, TensorId>>& named) {
  std::map<std::string, float> out;
  for (const auto& [name, t] : named) {
    float v = 0;
    be.download(&v, ptrs[t], sizeof(v));
    out[name] = v;
  }
  return out;
}

}  // namespace

std::map<std::string, float> Trainer::loss_terms() const {
  settle();
  SG_REQUIRE(current_, "loss_terms: the trainer is not compiled");
  return read_scalars(*backend_, current_->ptrs, current_->terms);
}

std::map<std::string, float> Trainer::coefficients() const {
  settle();
  SG_REQUIRE(current_, "coefficients: the trainer is not compiled");
  return read_scalars(*backend_, current_->ptrs, current_->coefficients);
}

std::map<std::string, float> Trainer::amax() const {
  settle();
  SG_REQUIRE(current_, "amax: the trainer is not compiled");
  std::map<std::string, float> out;
  for (const Op& op : current_->program.ops()) {
    if (op.kind != OpKind::AbsMax) continue;
    float v = 0;
    backend_->download(&v, current_->ptrs[op.out[0]], sizeof(v));
    out[current_->program.tensor(op.out[0]).name] = v;
  }
  return out;
}

Trainer::~Trainer() = default;

const Shape& Trainer::input_shape() const {
  SG_REQUIRE(current_, "trainer is not compiled: call compile({batch, features}) first");
  return current_->input_shape;
}

const Shape& Trainer::output_shape() const {
  SG_REQUIRE(current_, "trainer is not compiled: call compile({batch, features}) first");
  SG_REQUIRE(current_->pred != kNone, "a custom step has no single output: use predict()");
  return current_->program.tensor(current_->pred).shape;
}

const Program& Trainer::program() const {
  SG_REQUIRE(current_, "trainer is not compiled: call compile({batch, features}) first");
  return current_->program;
}

const MemoryPlan& Trainer::plan() const {
  SG_REQUIRE(current_, "trainer is not compiled: call compile({batch, features}) first");
  return current_->plan;
}

std::unique_ptr<Trainer::Variant> Trainer::build_variant(const Shape& input_shape, bool training,
                                                         const Resident* resident) {
  SG_REQUIRE((step_ && training) || (graph_ && input_shape.size() == 1 && input_shape[0] > 0) ||
                 (!graph_ && input_shape.size() == 2 && input_shape[0] > 0 && input_shape[1] > 0),
             graph_ ? "compile: a graph model takes {batch} (shapes come from its Inputs), got "
                    : "compile: input shape must be {batch, features} with both positive, got ",
             shape_str(input_shape));
  auto v = std::make_unique<Variant>();
  v->input_shape = input_shape;
  v->training = training;
  GraphBuilder g(v->program);
  g.set_training(training);
  // Each data-parallel rank draws its own dropout masks for its rows of the global batch.
  g.set_seed(options_.lower.comm ? mix_seed(seed_, static_cast<uint64_t>(options_.lower.comm->rank())) : seed_);
  if (graph_) {
    build_graph_step(*v, g, input_shape[0], training, resident);
  } else if (step_ && training) {
    CustomStep cs = step_(g, *model_);
    SG_REQUIRE(cs.loss != kNone && !cs.seeds.empty(), "custom step: no loss or no loss terms");
    v->loss = cs.loss;
    v->program.tensor(cs.loss).live_out = true;
    for (const auto& t : cs.terms) v->program.tensor(t.second).live_out = true;
    v->terms = cs.terms;
    v->coefficients = cs.coefficients;
    v->input_shape = {0, cs.input_dim};
    g.watch_loss(cs.loss, options_.on_nan);
    optimizer_->build(g, append_backward(v->program, cs.seeds, cs.num_forward_ops));
  } else if (resident) {
    // The batch slots are written by the gather op at the start of the step.
    v->resident = true;
    Shape ys = resident->y.shape();
    ys[0] = input_shape[0];
    TensorId dx = g.tensor("data.X", resident->X.shape(), Role::Input);
    TensorId dy = g.tensor("data.y", resident->y.shape(), Role::Input, resident->y.dtype());
    TensorId step = g.tensor(kStepTensor, {1}, Role::StepScalar, DType::I32);
    v->X = g.tensor("input", input_shape, Role::Activation);
    v->y = g.tensor("target", ys, Role::Activation, resident->y.dtype());
    v->valid = g.tensor("valid_rows", {1}, Role::Activation, DType::I32);
    Op op;
    op.kind = OpKind::GatherBatch;
    op.name = "data.gather";
    op.in = {step, dx, dy};
    op.out = {v->valid, v->X, v->y};
    op.attrs = resident->attrs;
    v->program.add_op(std::move(op));
  } else {
    v->X = g.tensor("input", input_shape, Role::Input);
  }
  if (!(step_ && training) && !graph_) {
    v->pred = model_->build(g, v->X, "");
    v->program.tensor(v->pred).live_out = true;
  }
  if (loss_) {
    const Shape pred_shape = v->program.tensor(v->pred).shape;
    if (!resident) {
      v->y = g.tensor("target", loss_->target_shape(pred_shape), Role::Input, loss_->target_dtype());
      v->valid = g.tensor("valid_rows", {1}, Role::Input, DType::I32);
    }
    LossOutputs lo = loss_->build(g, v->pred, v->y, v->valid);
    v->loss = lo.loss;
    if (training) {
      g.watch_loss(v->loss, options_.on_nan);
      optimizer_->build(g, append_backward(v->program, v->pred, lo.dpred));
    }
  }
  check_batch_norm_batches(v->program,
                           training && (options_.shape_policy == ShapePolicy::Pad || (resident && resident->attrs.partial_last)),
                           options_.lower.comm && options_.lower.comm->size() > 1);
  v->plan = plan_memory(v->program, backend_->lifetime_hints(v->program, options_.lower));
  if (!persistent_) {
    SG_ASSERT(training && !resident);
    init_persistent(v->program, v->plan, g.param_specs(), g.fills());
  }
  v->transient = DeviceBuffer(*backend_, v->plan.transient_bytes);
  v->ptrs.resize(v->program.num_tensors());
  for (size_t t = 0; t < v->program.num_tensors(); ++t) {
    const TensorInfo& info = v->program.tensor(static_cast<TensorId>(t));
    if (is_persistent(info.role)) {
      auto it = persistent_->slots.find(info.name);
      SG_REQUIRE(it != persistent_->slots.end() && it->second.info.shape == info.shape,
                 "model changed between compiles: '", info.name, "' ", shape_str(info.shape),
                 " is not in the trainer's parameters; create a new Trainer");
      v->ptrs[t] = persistent_->buffer.data() + it->second.offset;
    } else {
      v->ptrs[t] = v->transient.data() + v->plan.at[t].offset;
    }
  }
  v->exe = backend_->lower(v->program, v->ptrs, options_.lower);
  ++compiles_;
  return v;
}

void Trainer::init_persistent(const Program& p, const MemoryPlan& plan, const std::vector<ParamSpec>& specs,
                              const std::vector<std::pair<std::string, double>>& fills) {
  auto ps = std::make_unique<Persistent>();
  ps->buffer = DeviceBuffer(*backend_, plan.persistent_bytes);
  for (size_t t = 0; t < p.num_tensors(); ++t) {
    const TensorInfo& info = p.tensor(static_cast<TensorId>(t));
    if (!is_persistent(info.role)) continue;
    ps->slots[info.name] = {plan.at[t].offset, info};
    ps->order.push_back(info.name);
  }
  ps->specs = specs;
  persistent_ = std::move(ps);
  // Everything starts at zero (allocate zero-fills); parameters from their init rule.
  for (const ParamSpec& s : specs) write_tensor(s.name, init_parameter(s, seed_));
  for (const auto& [name, value] : fills) {  // optimizer state declared with another start
    const Shape& shape = persistent_->slots.at(name).info.shape;
    write_tensor(name, HostArray::f32(shape, std::vector<float>(static_cast<size_t>(numel(shape)), static_cast<float>(value))));
  }
  write_tensor(kHyperTensor, HostArray::f32({hyper::kSize}, {static_cast<float>(optimizer_->lr()),
                                                            static_cast<float>(optimizer_->weight_decay())}));
}

void Trainer::compile(const Shape& input_shape) {
  settle();
  if (graph_) {
    SG_REQUIRE(input_shape.size() == 1, "compile: a graph model takes {batch} (shapes come from its Inputs), got ",
               shape_str(input_shape));
  } else {
    SG_REQUIRE(input_shape.size() == 2, "compile: input shape must be {batch, features}, got ",
               shape_str(input_shape));
  }
  auto it = train_variants_.find(input_shape[0]);
  if (it != train_variants_.end() && it->second->input_shape == input_shape) {
    current_ = it->second.get();
    current_->last_used = ++use_clock_;
    return;
  }
  if (persistent_ && current_ && !graph_) {
    SG_REQUIRE(input_shape[1] == current_->input_shape[1], "compile: the model was built for ",
               current_->input_shape[1], " input features, got ", input_shape[1]);
  }
  auto v = build_variant(input_shape, true);
  current_ = v.get();
  current_->last_used = ++use_clock_;
  train_variants_[input_shape[0]] = std::move(v);
  // Bounded cache: drop the least recently used shape beyond max_shapes.
  while (static_cast<int>(train_variants_.size()) > options_.max_shapes) {
    auto lru = train_variants_.begin();
    for (auto i = train_variants_.begin(); i != train_variants_.end(); ++i)
      if (i->second->last_used < lru->second->last_used) lru = i;
    train_variants_.erase(lru);
  }
}

void Trainer::invalidate() {
  current_ = nullptr;
  train_variants_.clear();
  eval_variants_.clear();
  resident_variant_.reset();
}

bool Trainer::is_resident() const { return current_ && current_->resident; }

void Trainer::check_data(const HostArray& X, const HostArray& y, const std::string& what) const {
  SG_REQUIRE(current_, "check_data: call compile first");
  check_batch(*current_, X, y, what);
}

void Trainer::check_batch(const Variant& v, const HostArray& X, const HostArray& y, const std::string& what) const {
  SG_REQUIRE(!graph_, "this trainer's model has named inputs (", joined(graph_->input_names(), ", "),
             "): pass batches as arrays by name (NamedArrays; a dict in Python)");
  SG_REQUIRE(loss_, "this trainer's step makes its own inputs (a custom step): use launch(), not batches");
  const Shape& xs = v.input_shape;
  SG_REQUIRE(X.dtype() == DType::F32, what, " X must be f32, got ", dtype_name(X.dtype()));
  SG_REQUIRE(X.shape().size() == 2 && X.shape()[1] == xs[1], what, " X has shape ",
             shape_str(X.shape()), " but the model takes [batch, ", xs[1], "]");
  check_token_ids(v.program, v.X, X, what);
  const Program& p = v.program;
  const TensorInfo& yt = p.tensor(v.y);
  SG_REQUIRE(y.dtype() == yt.dtype, what, " y must be ", dtype_name(yt.dtype), " (", loss_->describe(),
             "), got ", dtype_name(y.dtype()));
  Shape want = yt.shape;
  want[0] = X.shape()[0];
  Shape got = y.shape();
  if (yt.dtype == DType::F32 && got.size() == 1 && want.size() == 2 && want[1] == 1)
    got.push_back(1);  // [N] targets for a single-output regression
  SG_REQUIRE(got == want, what, " y has shape ", shape_str(y.shape()), " but ", shape_str(want),
             " is expected for X ", shape_str(X.shape()));
  if (yt.dtype == DType::I32) {
    // Per-token labels ([batch, positions]) may be -1: no target at that position.
    const int64_t C = p.tensor(v.pred).shape.back(), per_row = y.numel() / std::max<int64_t>(X.shape()[0], 1);
    const int32_t lowest = yt.shape.size() > 1 ? -1 : 0;
    const int32_t* lab = y.data<int32_t>();
    for (int64_t i = 0; i < y.numel(); ++i)
      SG_REQUIRE(lab[i] >= lowest && lab[i] < C, what, ": label ", lab[i], " at row ", i / per_row,
                 per_row > 1 ? cat(", position ", i % per_row) : std::string(), " is outside [", lowest, ", ", C,
                 ") for a model with ", C, " outputs");
  }
}

// Rows [row0, row0 + rows) of X and y into the slots; valid_rows = rows (the rest is padding).
void Trainer::upload_batch(Variant& v, const HostArray& X, const HostArray& y, int64_t row0,
                           int64_t rows) {
  const int64_t D = v.input_shape[1];
  const size_t ysz = dtype_size(y.dtype());
  const int64_t yrow = y.numel() / std::max<int64_t>(y.shape()[0], 1);
  backend_->upload(v.ptrs[v.X], static_cast<const char*>(X.raw()) + row0 * D * 4, rows * D * 4);
  backend_->upload(v.ptrs[v.y], static_cast<const char*>(y.raw()) + row0 * yrow * ysz, rows * yrow * ysz);
  const int32_t valid = static_cast<int32_t>(rows);
  backend_->upload(v.ptrs[v.valid], &valid, sizeof(valid));
}

bool Trainer::needs_compile(int64_t rows, const char* fn) const {
  const int64_t B = current_->input_shape[0];
  if (rows == B) return false;
  switch (options_.shape_policy) {
    case ShapePolicy::Recapture: return true;
    case ShapePolicy::Pad:
      SG_REQUIRE(rows < B, fn, ": batch has ", rows, " rows, more than the compiled ", B,
                 "; the pad policy only pads smaller batches (compile the larger shape)");
      return false;
    case ShapePolicy::Error:
      throw Error(cat(fn, ": batch has ", rows, " rows but the step was compiled for ", B,
                      " and the shape policy is 'error' (use 'pad' or 'recapture', or compile that shape)"));
  }
  return false;
}

void Trainer::set_batch(const HostArray& X, const HostArray& y) {
  settle();
  SG_REQUIRE(current_, "set_batch: the trainer is not compiled: call compile({batch, features}) first");
  SG_REQUIRE(!current_->resident, "set_batch: this trainer gathers its batches from the device-resident "
             "data set (set_dataset); call launch(), or compile() to feed batches from the host");
  check_batch(*current_, X, y, "batch");
  const int64_t rows = X.shape()[0];
  if (needs_compile(rows, "set_batch")) compile({rows, current_->input_shape[1]});
  upload_batch(*current_, X, y, 0, rows);
}

void Trainer::set_batch_device(const void* X, const void* y, int64_t rows) {
  settle();
  SG_REQUIRE(current_, "set_batch_device: the trainer is not compiled: call compile({batch, features}) first");
  SG_REQUIRE(!current_->resident, "set_batch_device: this trainer gathers its batches from the device-resident data set");
  SG_REQUIRE(!graph_, "set_batch_device: a graph model's batches are arrays by name (set_batch with NamedArrays)");
  SG_REQUIRE(X && y, "set_batch_device: null pointer");
  SG_REQUIRE(rows > 0, "set_batch_device: rows must be positive, got ", rows);
  const int64_t D = current_->input_shape[1];
  if (needs_compile(rows, "set_batch_device")) compile({rows, D});
  Variant& v = *current_;
  const TensorInfo& yt = v.program.tensor(v.y);
  const size_t yrow = static_cast<size_t>(numel(yt.shape) / yt.shape[0]) * dtype_size(yt.dtype);
  backend_->copy_on_device(v.ptrs[v.X], X, static_cast<size_t>(rows * D) * sizeof(float));
  backend_->copy_on_device(v.ptrs[v.y], y, static_cast<size_t>(rows) * yrow);
  const int32_t valid = static_cast<int32_t>(rows);
  backend_->upload(v.ptrs[v.valid], &valid, sizeof(valid));
}

void* Trainer::device_ptr(const std::string& tensor) const {
  SG_REQUIRE(current_, "device_ptr: the trainer is not compiled");
  if (persistent_) {
    auto it = persistent_->slots.find(tensor);
    if (it != persistent_->slots.end()) return persistent_->buffer.data() + it->second.offset;
  }
  TensorId t = current_->program.find(tensor);
  SG_REQUIRE(t != kNone, "device_ptr: no tensor named '", tensor, "'");
  return current_->ptrs[t];
}

std::string Trainer::output_name() const {
  SG_REQUIRE(current_, "output_name: the trainer is not compiled");
  return current_->program.tensor(current_->pred).name;
}

void Trainer::launch() {
  SG_REQUIRE(current_, "launch: the trainer is not compiled: call compile({batch, features}) first");
  Executable& exe = *current_->exe;
  if (options_.mode == ExecMode::Graph && exe.can_capture()) {
    if (exe.is_captured()) {
      exe.replay();
    } else {
      exe.run();  // the warm-up: a real step, op by op, with every plan and handle in place
      exe.capture();
      ++captures_;
    }
  } else {
    exe.run();
  }
  ++launches_;
}

// Data parallel: every launched step has finished (bounded by the communicator's timeout; a
// failed or hung rank becomes an Error) before the host reads or writes device memory, which
// would otherwise wait on the stream without a deadline.
void Trainer::settle() const {
  if (options_.lower.comm && current_) current_->exe->wait_collectives();
}

void Trainer::one_step_async(const HostArray& X, const HostArray& y) {
  SG_REQUIRE(current_, "one_step: the trainer is not compiled: call compile({batch, features}) first");
  set_batch(X, y);
  launch();
}

float Trainer::one_step(const HostArray& X, const HostArray& y) {
  one_step_async(X, y);
  return loss();
}

std::vector<std::pair<std::string, double>> Trainer::profile(int reps) {
  SG_REQUIRE(current_, "profile: the trainer is not compiled");
  return current_->exe->profile(reps);
}

size_t Trainer::graph_nodes() const { return current_ ? current_->exe->graph_nodes() : 0; }

float Trainer::loss() const {
  settle();
  SG_REQUIRE(current_, "loss: the trainer is not compiled");
  float l = 0;
  backend_->download(&l, current_->ptrs[current_->loss], sizeof(float));
  return l;
}

HostArray Trainer::logits() const {
  settle();
  SG_REQUIRE(current_, "logits: the trainer is not compiled");
  SG_REQUIRE(current_->pred != kNone, "logits: a custom step has no single output: use predict()");
  HostArray out(DType::F32, current_->program.tensor(current_->pred).shape);
  backend_->download(out.raw(), current_->ptrs[current_->pred], out.nbytes());
  return out;
}

std::string Trainer::explain() const {
  std::ostringstream os;
  os << "backend: " << backend_->describe() << "\n";
  os << "model: " << model_->describe() << "\n";
  if (!current_) {
    os << "(not compiled: call compile({batch, features}) to see the program and memory plan)\n";
    return os.str();
  }
  const Program& p = current_->program;
  if (loss_) {
    const Shape pred = p.tensor(current_->pred).shape;
    const double scale = loss_->grad_scale(pred);
    os << "loss: " << loss_->describe() << "; gradient scale " << scale << " ("
       << reduction_name(loss_->reduction()) << (loss_->reduction() == Reduction::Mean
                                                      ? cat(" over ", std::llround(1 / scale), " ",
                                                            loss_->target_dtype() == DType::I32 || std::llround(1 / scale) == pred[0]
                                                                ? "rows"
                                                                : "elements")
                                                      : std::string())
       << ")\n";
    os << "input: " << shape_str(current_->input_shape) << ", output: " << shape_str(pred) << "\n";
  } else if (graph_) {
    os << "loss: " << loss_description() << "\n";
    os << "inputs:";
    for (const std::string& name : graph_->input_names()) os << " " << name << shape_str(graph_->input_shape(name));
    os << "; outputs:";
    for (const std::string& name : graph_->output_names()) os << " " << name << shape_str(graph_->output_shape(name));
    os << " (per sample), batch " << current_->input_shape[0] << "\n";
  } else {
    os << "loss: custom step with " << current_->terms.size() << " terms:";
    for (const auto& t : current_->terms) os << " " << t.first;
    os << "\n";
  }
  os << "optimizer: " << optimizer_->describe() << "\n";
  int64_t nparam = 0;
  for (const ParamSpec& s : persistent_->specs) nparam += numel(s.shape);
  os << "parameters: " << nparam << " in " << persistent_->specs.size() << " tensors\n";
  os << "step program: " << p.ops().size() << " ops\n" << print_program(p);
  os << "memory plan:\n" << describe_plan(p, current_->plan);
  const std::string lowering = current_->exe->describe();
  if (!lowering.empty()) os << "lowering (" << device_name(backend_->device()) << "):\n" << lowering;
  os << "execution: mode " << exec_mode_name(options_.mode) << ", shape policy "
     << shape_policy_name(options_.shape_policy) << " (at most " << options_.max_shapes
     << " shapes), autotune " << autotune_name(options_.lower.autotune) << ", precision "
     << precision_name(options_.lower.precision) << ", attention "
     << attention_mode_name(options_.lower.attention)
     << (options_.lower.deterministic ? ", deterministic" : ", nondeterministic engines allowed") << ", fusion "
     << (options_.lower.fusion ? "on" : "off") << ", concurrent branches " << (options_.lower.concurrent ? "on" : "off")
     << "\n";
  os << "compiles: " << compiles_ << " (train shapes: " << train_variants_.size()
     << ", eval shapes: " << eval_variants_.size() << "), graph captures: " << captures_
     << ", graph nodes per step: " << graph_nodes() << ", launches: " << launches_ << "\n";
  return os.str();
}

}  // namespace sg
