// Trainers of graph models: named inputs, several outputs and several weighted loss terms
// (trainer.h, the LossTerm constructor). The step is built as for a one-input model, with one
// input slot per model input, one target slot per term, and the terms' gradients scaled by
// their weights seeding one backward pass.
#include <algorithm>
#include <cmath>
#include <set>

#include "stepgraph/autodiff.h"
#include "train/trainer_state.h"

namespace sg {

namespace {

Shape with_batch(int64_t batch, const Shape& per_sample) {
  Shape s{batch};
  s.insert(s.end(), per_sample.begin(), per_sample.end());
  return s;
}

// y = a * x as a new op (a loss value or a gradient scaled by its term's weight).
TensorId scaled(GraphBuilder& g, TensorId x, double a, const std::string& name) {
  const TensorInfo& info = g.program().tensor(x);
  TensorId y = g.tensor(name, info.shape, Role::Activation);
  Op op;
  op.kind = OpKind::ScaleShift;
  op.name = name;
  op.in = {x};
  op.out = {y};
  ScaleShiftAttrs attrs;
  attrs.a = a;
  op.attrs = attrs;
  g.program().add_op(std::move(op));
  return y;
}

TensorId added(GraphBuilder& g, TensorId a, TensorId b, const std::string& name) {
  TensorId y = g.tensor(name, g.program().tensor(a).shape, Role::Activation);
  Op op;
  op.kind = OpKind::Add;
  op.name = name;
  op.in = {a, b};
  op.out = {y};
  g.program().add_op(std::move(op));
  return y;
}

}  // namespace

Trainer::Trainer(ModelPtr model, std::vector<LossTerm> losses, OptimizerPtr optimizer, Device device, uint64_t seed,
                 TrainerOptions options)
    : model_(model), graph_(std::move(model)), terms_(std::move(losses)), optimizer_(std::move(optimizer)),
      seed_(seed), options_(options) {
  SG_REQUIRE(graph_ && optimizer_, "Trainer needs a model and an optimizer");
  SG_REQUIRE(!terms_.empty(), "Trainer: a graph model needs at least one loss term (a loss on one of its outputs: ",
             joined(graph_->output_names()), ")");
  std::set<std::string> seen;
  for (const LossTerm& t : terms_) {
    const auto& outs = graph_->output_names();
    SG_REQUIRE(std::find(outs.begin(), outs.end(), t.output) != outs.end(), "loss term on '", t.output,
               "': the model has no output of that name (its outputs: ", joined(outs), ")");
    SG_REQUIRE(seen.insert(t.output).second, "loss terms: output '", t.output,
               "' has two; give each output one loss (combine losses in the model instead)");
    SG_REQUIRE(t.loss, "loss term on '", t.output, "': the loss is null");
    SG_REQUIRE(std::isfinite(t.weight) && t.weight >= 0, "loss term on '", t.output,
               "': the weight must be finite and >= 0, got ", t.weight);
  }
  SG_REQUIRE(options_.max_shapes >= 1, "TrainerOptions.max_shapes must be at least 1, got ", options_.max_shapes);
  SG_REQUIRE(!options_.lower.comm, "data-parallel training of graph models is not supported yet");
  backend_ = make_backend(device);
}

std::string Trainer::loss_description() const {
  if (loss_) return loss_->describe();
  if (!graph_) return "custom step";
  std::vector<std::string> parts;
  for (const LossTerm& t : terms_) parts.push_back(cat(t.output, ": ", t.loss->describe(), " x ", t.weight));
  return joined(parts, "; ");
}

void Trainer::build_graph_step(Variant& v, GraphBuilder& g, int64_t batch, bool training, const Resident* resident) {
  const Role slot = resident ? Role::Activation : Role::Input;  // resident: written by the gather
  for (const std::string& name : graph_->input_names())
    v.inputs.push_back(g.tensor(name, with_batch(batch, graph_->input_shape(name)), slot, graph_->input_dtype(name)));
  v.valid = g.tensor("valid_rows", {1}, slot, DType::I32);
  if (resident) {
    // One gather of every array (inputs, then targets) opens the step.
    v.resident = true;
    Op op;
    op.kind = OpKind::GatherBatch;
    op.name = "data.gather";
    op.in = {g.tensor(kStepTensor, {1}, Role::StepScalar, DType::I32)};
    op.out = {v.valid};
    for (size_t i = 0; i < v.inputs.size(); ++i) {
      const HostArray& a = resident->inputs[i];
      op.in.push_back(g.tensor("data." + graph_->input_names()[i], a.shape(), Role::Input, a.dtype()));
      op.out.push_back(v.inputs[i]);
    }
    for (size_t i = 0; i < terms_.size(); ++i) {
      const HostArray& a = resident->targets[i];
      op.in.push_back(g.tensor("data.target." + terms_[i].output, a.shape(), Role::Input, a.dtype()));
      op.out.push_back(g.tensor("target." + terms_[i].output, with_batch(batch, Shape(a.shape().begin() + 1, a.shape().end())),
                                Role::Activation, a.dtype()));
      v.targets.push_back(op.out.back());
    }
    op.attrs = resident->attrs;
    v.program.add_op(std::move(op));
  }
  v.outputs = graph_->build_all(g, v.inputs, "");
  for (TensorId t : v.outputs) v.program.tensor(t).live_out = true;
  const size_t forward_ops = v.program.ops().size();
  std::vector<std::pair<TensorId, TensorId>> seeds;
  const auto& outs = graph_->output_names();
  for (const LossTerm& t : terms_) {
    const size_t k = static_cast<size_t>(std::find(outs.begin(), outs.end(), t.output) - outs.begin());
    const TensorId pred = v.outputs[k];
    const Shape ps = v.program.tensor(pred).shape;
    if (!resident)
      v.targets.push_back(g.tensor("target." + t.output, t.loss->target_shape(ps), Role::Input, t.loss->target_dtype()));
    const TensorId y = v.targets[&t - terms_.data()];
    LossOutputs lo;
    try {
      lo = t.loss->build(g, pred, y, v.valid);
    } catch (const Error& e) {
      throw Error(cat("loss term on '", t.output, "' ", shape_str(ps), ": ", e.what()));
    }
    v.program.tensor(lo.loss).live_out = true;
    v.terms.emplace_back(t.output, lo.loss);
    const TensorId contribution = t.weight == 1 ? lo.loss : scaled(g, lo.loss, t.weight, "loss." + t.output + ".weighted");
    v.loss = v.loss == kNone ? contribution : added(g, v.loss, contribution, "loss.total");
    seeds.emplace_back(pred, t.weight == 1 ? lo.dpred : scaled(g, lo.dpred, t.weight, "d." + t.output + ".weighted"));
  }
  v.program.tensor(v.loss).live_out = true;
  if (training) {
    g.watch_loss(v.loss, options_.on_nan);
    optimizer_->build(g, append_backward(v.program, seeds, forward_ops));
  }
}

int64_t Trainer::check_named(const Variant& v, const NamedArrays& inputs, const NamedArrays* targets,
                             const std::string& what) const {
  auto refs = [](const NamedArrays& arrays) {
    std::map<std::string, ArrayRef> r;
    for (const auto& [name, a] : arrays) r.emplace(name, ArrayRef{a.shape(), a.dtype(), &a});
    return r;
  };
  const std::map<std::string, ArrayRef> in = refs(inputs), tg = targets ? refs(*targets) : std::map<std::string, ArrayRef>{};
  return check_named(v, in, targets ? &tg : nullptr, what);
}

// Checks the arrays against the variant's slots; returns the rows (the same for every array).
int64_t Trainer::check_named(const Variant& v, const std::map<std::string, ArrayRef>& inputs,
                             const std::map<std::string, ArrayRef>* targets, const std::string& what) const {
  SG_REQUIRE(graph_, "this trainer's model takes one X (and one y): pass arrays, not arrays by name");
  int64_t rows = -1;
  std::string first;
  auto check_rows = [&](const std::string& label, const ArrayRef& a) {
    SG_REQUIRE(!a.shape.empty(), what, " ", label, " is a scalar: expected [rows, ...]");
    if (rows < 0) rows = a.shape[0], first = label;
    SG_REQUIRE(a.shape[0] == rows, what, " ", label, " has ", a.shape[0], " rows but ", first, " has ", rows);
  };
  const auto& names = graph_->input_names();
  for (const auto& [name, a] : inputs)
    SG_REQUIRE(std::find(names.begin(), names.end(), name) != names.end(), what, ": the model has no input '", name,
               "' (its inputs: ", joined(names), ")");
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = inputs.find(names[i]);
    SG_REQUIRE(it != inputs.end(), what, ": input '", names[i], "' is missing (the model's inputs: ", joined(names), ")");
    const ArrayRef& a = it->second;
    const TensorInfo& slot = v.program.tensor(v.inputs[i]);
    const Shape per = graph_->input_shape(names[i]);
    SG_REQUIRE(a.dtype == slot.dtype, what, " input '", names[i], "' must be ", dtype_name(slot.dtype), ", got ",
               dtype_name(a.dtype));
    check_rows(cat("input '", names[i], "'"), a);
    const Shape got(a.shape.begin() + 1, a.shape.end());
    SG_REQUIRE(got == per || (got.size() == 1 && got[0] == numel(per)), what, " input '", names[i], "' has shape ",
               shape_str(a.shape), " but the model takes ", shape_str(with_batch(rows, per)));
    if (a.host) check_token_ids(v.program, v.inputs[i], *a.host, cat(what, " input '", names[i], "'"));
  }
  if (!targets) return rows;
  for (const auto& target : *targets) {
    const std::string& name = target.first;  // a structured binding cannot be captured in C++17
    SG_REQUIRE(std::any_of(terms_.begin(), terms_.end(), [&](const LossTerm& t) { return t.output == name; }), what,
               ": target '", name, "' has no loss term (terms on: ", [&] {
                 std::vector<std::string> on;
                 for (const LossTerm& t : terms_) on.push_back(t.output);
                 return joined(on);
               }(), ")");
  }
  for (size_t i = 0; i < terms_.size(); ++i) {
    const std::string& name = terms_[i].output;
    const auto it = targets->find(name);
    SG_REQUIRE(it != targets->end(), what, ": the target of output '", name, "' is missing (", terms_[i].loss->describe(),
               " needs one)");
    const ArrayRef& a = it->second;
    const TensorInfo& slot = v.program.tensor(v.targets[i]);
    SG_REQUIRE(a.dtype == slot.dtype, what, " target '", name, "' must be ", dtype_name(slot.dtype), " (",
               terms_[i].loss->describe(), "), got ", dtype_name(a.dtype));
    check_rows(cat("target '", name, "'"), a);
    Shape want = slot.shape, got = a.shape;
    want[0] = rows;
    if (got.size() == 1 && want.size() == 2 && want[1] == 1) got.push_back(1);  // [N] for one value per row
    SG_REQUIRE(got == want, what, " target '", name, "' has shape ", shape_str(a.shape), " but output '", name,
               "' needs ", shape_str(want));
    if (slot.dtype == DType::I32 && a.host) {
      const int64_t C = v.program.tensor(v.outputs[static_cast<size_t>(
                                            std::find(graph_->output_names().begin(), graph_->output_names().end(), name) -
                                            graph_->output_names().begin())])
                            .shape.back();
      const int32_t lowest = slot.shape.size() > 1 ? -1 : 0;
      for (int64_t k = 0; k < a.host->numel(); ++k) {
        const int32_t l = a.host->data<int32_t>()[k];
        SG_REQUIRE(l >= lowest && l < C, what, " target '", name, "': label ", l, " at element ", k, " is outside [",
                   lowest, ", ", C, ")");
      }
    }
  }
  return rows;
}

void Trainer::check_data(const NamedArrays& inputs, const NamedArrays& targets, const std::string& what) const {
  SG_REQUIRE(current_, "check_data: call compile first");
  check_named(*current_, inputs, &targets, what);
}

void Trainer::upload_named(Variant& v, const NamedArrays& inputs, const NamedArrays& targets, int64_t row0,
                           int64_t rows) {
  auto copy = [&](TensorId slot, const HostArray& a) {
    const size_t row = static_cast<size_t>(a.numel() / std::max<int64_t>(a.shape()[0], 1)) * dtype_size(a.dtype());
    backend_->upload(v.ptrs[slot], static_cast<const char*>(a.raw()) + row0 * row, rows * row);
  };
  const auto& names = graph_->input_names();
  for (size_t i = 0; i < names.size(); ++i) copy(v.inputs[i], inputs.at(names[i]));
  for (size_t i = 0; i < terms_.size(); ++i) {
    const auto it = targets.find(terms_[i].output);
    if (it != targets.end()) {
      copy(v.targets[i], it->second);
    } else {  // predict: zeros are valid targets for every loss
      const TensorInfo& t = v.program.tensor(v.targets[i]);
      HostArray zeros(t.dtype, t.shape);
      backend_->upload(v.ptrs[v.targets[i]], zeros.raw(), zeros.nbytes());
    }
  }
  const int32_t valid = static_cast<int32_t>(rows);
  backend_->upload(v.ptrs[v.valid], &valid, sizeof(valid));
}

void Trainer::set_batch(const NamedArrays& inputs, const NamedArrays& targets) {
  settle();
  SG_REQUIRE(current_, "set_batch: the trainer is not compiled: call compile({batch}) first");
  const int64_t rows = check_named(*current_, inputs, &targets, "batch");
  SG_REQUIRE(rows > 0, "set_batch: the batch has no rows");
  if (needs_compile(rows, "set_batch")) compile({rows});
  upload_named(*current_, inputs, targets, 0, rows);
}

void Trainer::set_batch_device(const NamedDeviceArrays& inputs, const NamedDeviceArrays& targets) {
  settle();
  SG_REQUIRE(current_, "set_batch_device: the trainer is not compiled: call compile({batch}) first");
  SG_REQUIRE(!current_->resident, "set_batch_device: this trainer gathers its batches from the device-resident data set");
  auto refs = [](const NamedDeviceArrays& arrays) {
    std::map<std::string, ArrayRef> r;
    for (const auto& [name, a] : arrays) {
      SG_REQUIRE(a.data, "set_batch_device: '", name, "' is a null pointer");
      r.emplace(name, ArrayRef{a.shape, a.dtype, nullptr});
    }
    return r;
  };
  const std::map<std::string, ArrayRef> in = refs(inputs), tg = refs(targets);
  const int64_t rows = check_named(*current_, in, &tg, "batch");
  SG_REQUIRE(rows > 0, "set_batch_device: the batch has no rows");
  if (needs_compile(rows, "set_batch_device")) compile({rows});
  Variant& v = *current_;
  auto copy = [&](TensorId slot, const DeviceArray& a) {
    backend_->copy_on_device(v.ptrs[slot], a.data, static_cast<size_t>(numel(a.shape)) * dtype_size(a.dtype));
  };
  const auto& names = graph_->input_names();
  for (size_t i = 0; i < names.size(); ++i) copy(v.inputs[i], inputs.at(names[i]));
  for (size_t i = 0; i < terms_.size(); ++i) copy(v.targets[i], targets.at(terms_[i].output));
  const int32_t valid = static_cast<int32_t>(rows);
  backend_->upload(v.ptrs[v.valid], &valid, sizeof(valid));
}

void Trainer::one_step_async(const NamedArrays& inputs, const NamedArrays& targets) {
  SG_REQUIRE(current_, "one_step: the trainer is not compiled: call compile({batch}) first");
  set_batch(inputs, targets);
  launch();
}

float Trainer::one_step(const NamedArrays& inputs, const NamedArrays& targets) {
  one_step_async(inputs, targets);
  return loss();
}

NamedArrays Trainer::predict(const NamedArrays& inputs) {
  settle();
  SG_REQUIRE(current_, "predict: the trainer is not compiled: call compile({batch}) first");
  const int64_t N = check_named(*current_, inputs, nullptr, "predict");
  SG_REQUIRE(N > 0, "predict: no rows");
  const int64_t chunk = current_->input_shape[0];
  NamedArrays out;
  const auto& names = graph_->output_names();
  for (int64_t row0 = 0; row0 < N; row0 += chunk) {
    const int64_t rows = std::min(chunk, N - row0);
    Variant& v = eval_variant(rows);
    upload_named(v, inputs, {}, row0, rows);
    v.exe->run();
    for (size_t k = 0; k < names.size(); ++k) {
      const Shape s = v.program.tensor(v.outputs[k]).shape;
      const int64_t per_row = numel(s) / s[0];
      if (row0 == 0) out.emplace(names[k], HostArray(DType::F32, with_batch(N, Shape(s.begin() + 1, s.end()))));
      backend_->download(out.at(names[k]).data<float>() + row0 * per_row, v.ptrs[v.outputs[k]],
                         static_cast<size_t>(rows * per_row) * sizeof(float));
    }
  }
  return out;
}

namespace {

// What a mean term of these rows divides by: its rows (every row holds as many elements), or for
// a cross-entropy the labelled targets (-1: none), each counted by its class weight when it has
// class weights. Chunks of an evaluation combine by it exactly.
double mean_units(const Loss& loss, const HostArray& target, int64_t row0, int64_t rows) {
  if (target.dtype() != DType::I32) return static_cast<double>(rows);
  const auto* ce = dynamic_cast<const SoftmaxCrossEntropy*>(&loss);
  const std::vector<float>* cw = ce && !ce->class_weights().empty() ? &ce->class_weights() : nullptr;
  const int64_t per_row = target.numel() / std::max<int64_t>(target.shape()[0], 1);
  const int32_t* lab = target.data<int32_t>() + row0 * per_row;
  double units = 0;
  for (int64_t k = 0; k < rows * per_row; ++k)
    if (lab[k] >= 0) units += cw ? (*cw)[static_cast<size_t>(lab[k])] : 1.0;
  return units;
}

}  // namespace

// Each term over all rows: a mean term's chunks weighted by what their means divide by
// (mean_units), a sum term's added; the total is the weighted sum of the terms.
EvalResult Trainer::evaluate(const NamedArrays& inputs, const NamedArrays& targets) {
  settle();
  SG_REQUIRE(current_, "evaluate: the trainer is not compiled: call compile({batch}) first");
  const int64_t N = check_named(*current_, inputs, &targets, "evaluate");
  SG_REQUIRE(N > 0, "evaluate: no rows");
  const int64_t chunk = current_->input_shape[0];
  std::vector<double> sums(terms_.size(), 0.0), units(terms_.size(), 0.0);
  for (int64_t row0 = 0; row0 < N; row0 += chunk) {
    const int64_t rows = std::min(chunk, N - row0);
    Variant& v = eval_variant(rows);
    upload_named(v, inputs, targets, row0, rows);
    v.exe->run();
    for (size_t i = 0; i < terms_.size(); ++i) {
      float l = 0;
      backend_->download(&l, v.ptrs[v.terms[i].second], sizeof(float));
      const double u = mean_units(*terms_[i].loss, targets.at(terms_[i].output), row0, rows);
      units[i] += u;
      sums[i] += terms_[i].loss->reduction() == Reduction::Mean ? l * u : l;
    }
  }
  EvalResult r;
  r.count = N;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const bool mean = terms_[i].loss->reduction() == Reduction::Mean;
    const double term = mean ? (units[i] > 0 ? sums[i] / units[i] : 0.0) : sums[i];  // no target: 0, as the step
    r.terms[terms_[i].output] = term;
    r.loss += terms_[i].weight * term;
  }
  return r;
}

}  // namespace sg
