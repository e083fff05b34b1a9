// stepgraph.Trainer: the seed's workflow (compile, one_step, set_batch, launch, logits) with
// numpy and DLPack inputs, parameters in and out and zero-copy views (checkpoints and weights
// files: trainer_weights.cpp).
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <map>

#include "common.h"

namespace sgpy {

namespace {

using namespace nb::literals;

// What the compiled step expects of a batch (read under the trainer's lock).
struct Expect {
  bool compiled = false;
  int64_t features = 0;  // D
  int64_t outputs = 0;   // C (classification) or T (regression)
  int64_t positions = 0; // sequence models: labels [rows, positions], -1 = no target
  bool labels = true;    // classification: i32 labels [rows]; else f32 targets [rows, T]
};

Expect expect_of(PyTrainer& s) {
  std::lock_guard<std::mutex> lock(s.mu);
  Expect e;
  const sg::LossPtr& loss = s.t.loss_fn();  // null: a physics-informed (custom) step
  e.labels = loss && loss->target_dtype() == sg::DType::I32;
  e.compiled = s.t.is_compiled();
  if (e.compiled) {
    e.features = s.t.input_shape()[1];
    if (!loss) return e;  // no single output (its predictions: predict)
    const sg::Shape& out = s.t.output_shape();
    e.outputs = out.back();
    if (out.size() == 3) e.positions = out[1];
  }
  return e;
}


// A batch ready for the engine: host copies, or device tensors kept alive for a D2D copy.
struct Batch {
  bool device = false;
  int64_t rows = 0;
  Imported X, y;
  sg::HostArray hX, hy;
};


Imported prepare_X(PyTrainer& s, const Expect& e, nb::handle X, const std::string& fn, bool allow_device) {
  Imported x = import_array(X, fn + ": X");
  check_device(s, x, fn, "X", allow_device);
  if (x.ndim() != 2 || x.dim(1) != e.features)
    throw InputError(sg::cat(fn, ": X: expected shape [rows, ", e.features, "] (the model takes ", e.features,
                             " features), got ", x.describe()));
  if (x.dim(0) == 0) throw InputError(fn + ": X: expected at least one row, got " + x.describe());
  if (x.on_device) {
    if (!x.is(kFloat, 32))
      throw InputError(fn + ": X: expected float32, got " + x.describe() +
                       " (convert on the device first: X.float() / X.astype('float32'))");
    if (!x.c_contiguous())
      throw InputError(fn + ": X: a CUDA tensor must be C-contiguous (row-major), got " + x.describe() +
                       " with other strides (use X.contiguous() / cupy.ascontiguousarray(X))");
  }
  return x;
}

Imported prepare_y(PyTrainer& s, const Expect& e, nb::handle y, int64_t rows, const std::string& fn,
                   bool allow_device) {
  Imported t = import_array(y, fn + ": y");
  check_device(s, t, fn, "y", allow_device);
  if (e.labels && e.positions > 0) {
    if (t.ndim() != 2 || t.dim(0) != rows || t.dim(1) != e.positions)
      throw InputError(sg::cat(fn, ": y: expected token labels of shape [", rows, ", ", e.positions,
                               "] (one per position, -1 for none), got ", t.describe()));
  } else if (e.labels) {
    if (t.ndim() != 1 || t.dim(0) != rows)
      throw InputError(sg::cat(fn, ": y: expected class labels of shape [", rows, "] (one per row of X), got ",
                               t.describe()));
  }
  if (e.labels) {
    if (t.on_device && t.is(kInt, 64)) {
      // int64 (torch.long) labels: converted to int32 on the device by their own framework.
      nb::object conv;
      if (nb::hasattr(t.source, "astype")) conv = t.source.attr("astype")("int32");
      else if (nb::hasattr(t.source, "int")) conv = t.source.attr("int")();
      else
        throw InputError(fn + ": y: expected int32 labels, got " + t.describe() + " (convert with y.astype('int32'))");
      t = import_array(conv, fn + ": y");
    }
    if (t.on_device && !t.is(kInt, 32))
      throw InputError(fn + ": y: expected int32 (or int64) class labels, got " + t.describe());
  } else {
    const bool ok = (t.ndim() == 2 && t.dim(0) == rows && t.dim(1) == e.outputs) ||
                    (e.outputs == 1 && t.ndim() == 1 && t.dim(0) == rows);
    if (!ok)
      throw InputError(sg::cat(fn, ": y: expected float targets of shape [", rows, ", ", e.outputs, "]",
                               e.outputs == 1 ? sg::cat(" (or [", rows, "])") : std::string(), ", got ",
                               t.describe()));
    if (t.on_device && !t.is(kFloat, 32))
      throw InputError(fn + ": y: expected float32 targets, got " + t.describe() +
                       " (convert on the device first: y.float() / y.astype('float32'))");
  }
  if (t.on_device && !t.c_contiguous())
    throw InputError(fn + ": y: a CUDA tensor must be C-contiguous, got " + t.describe() + " with other strides");
  return t;
}

Batch prepare_batch(PyTrainer& s, nb::handle X, nb::handle y, const std::string& fn, bool allow_device) {
  const Expect e = expect_of(s);
  if (!e.compiled) not_compiled(fn);
  Batch b;
  b.X = prepare_X(s, e, X, fn, allow_device);
  b.rows = b.X.dim(0);
  b.y = prepare_y(s, e, y, b.rows, fn, allow_device);
  if (b.X.on_device != b.y.on_device)
    throw InputError(fn + ": X is " + b.X.describe() + " but y is " + b.y.describe() +
                     ": pass both as CUDA tensors or both as host arrays");
  b.device = b.X.on_device;
  if (!b.device) {
    b.hX = host_f32(b.X, fn + ": X");
    b.hy = e.labels ? host_labels(b.y, fn + ": y", e.outputs, e.positions > 0) : host_f32(b.y, fn + ": y");
    if (!e.labels && b.hy.shape().size() == 1) b.hy = b.hy.reshaped({b.rows, 1});
  }
  return b;
}

// Copies a device batch into the input slots. The device is synchronized first (the producer's
// framework may still be writing the tensors on its own stream) and the trainer's stream after
// the copy (so the caller may free or overwrite the tensors at once).
void feed_device(sg::Trainer& t, const Batch& b) {
  cuda_device_synchronize();
  t.set_batch_device(b.X.array.data(), b.y.array.data(), b.rows);
  t.backend().synchronize();
}



}  // namespace

[[noreturn]] void not_compiled(const std::string& fn) {
  throw sg::Error(fn + ": the trainer is not compiled: call compile((batch, features)) first");
}

void check_device(const PyTrainer& s, const Imported& a, const std::string& fn, const std::string& what,
                  bool allow_device) {
  if (!a.on_device) return;
  if (!allow_device)
    throw InputError(fn + ": " + what + ": expected a host array (numpy or a CPU tensor), got " + a.describe() +
                     " (CUDA tensors are taken by one_step and set_batch only)");
  if (!s.cuda)
    throw InputError(fn + ": " + what + ": the trainer runs on cpu, so it takes host arrays (numpy or CPU "
                     "tensors), got " + a.describe());
  if (a.device_id != s.device_id)
    throw InputError(sg::cat(fn, ": ", what, ": the trainer runs on cuda:", s.device_id, ", got ", a.describe()));
}

std::vector<std::string> param_names(sg::Trainer& t) {
  std::vector<std::string> names;
  if (t.is_compiled()) {
    for (const sg::TensorInfo& ti : t.program().tensors())
      if (ti.role == sg::Role::Parameter) names.push_back(ti.name);
  }
  return names;
}

// params() / state() as an ordered dict of numpy arrays: model order when known, else by name.
nb::dict to_dict(std::map<std::string, sg::HostArray> m, const std::vector<std::string>& order) {
  nb::dict d;
  for (const std::string& n : order) {
    auto it = m.find(n);
    if (it == m.end()) continue;
    d[n.c_str()] = to_numpy(std::move(it->second));
    m.erase(it);
  }
  for (auto& [n, a] : m) d[n.c_str()] = to_numpy(std::move(a));
  return d;
}

void bind_trainer(nb::module_& m) {
  nb::class_<sg::EvalResult>(m, "EvalResult", "The result of Trainer.evaluate.")
      .def_ro("loss", &sg::EvalResult::loss, "Loss over all rows, with the loss's reduction.")
      .def_ro("accuracy", &sg::EvalResult::accuracy,
              "Classification: the fraction of rows whose argmax is the label (0 for regression).")
      .def_ro("count", &sg::EvalResult::count, "Rows evaluated.")
      .def_ro("terms", &sg::EvalResult::terms, "A graph model's loss terms by output (unweighted).")
      .def("__repr__", [](const sg::EvalResult& r) {
        return sg::cat("EvalResult(loss=", r.loss, ", accuracy=", r.accuracy, ", count=", r.count, ")");
      });

  auto cls = nb::class_<PyTrainer>(
      m, "Trainer",
      "Builds the whole training step (forward, loss, backward, optimizer) as one program, plans "
      "its memory and runs it on a backend; on CUDA every step after the first is one CUDA graph "
      "replay.\n\n"
      "  t = Trainer(model, SoftmaxCrossEntropy(), Adam(1e-3), device='cuda')\n"
      "  t.compile((64, 128))\n"
      "  loss = t.one_step(X, y)\n\n"
      "Inputs are numpy arrays or any object with __dlpack__ (PyTorch, CuPy, JAX). Host arrays: X "
      "float32 (float64 is converted), labels of any integer dtype (range checked), regression "
      "targets float32/float64; any strides. CUDA tensors (CUDA trainers only): float32 X and "
      "targets, int32 labels (int64 converted on the device), C-contiguous; they are copied "
      "device to device into the input slots, never through the host. Bad inputs raise "
      "stepgraph.InputError (a ValueError); engine errors raise stepgraph.Error.\n"
      "Calls release the GIL; one trainer runs one call at a time.")
      .def("__init__",
           [](PyTrainer* self, sg::LayerPtr model, nb::handle loss, nb::handle optimizer, const std::string& device,
              uint64_t seed, const std::string& mode, const std::string& shape_policy, int max_shapes,
              const std::string& autotune, const std::string& precision, const std::string& attention,
              bool deterministic, bool fusion, bool concurrent, const std::string& plan_cache,
              const std::string& on_nan) {
             if (!model) throw InputError("Trainer: model is None");
             if (loss.is_none()) throw InputError("Trainer: loss is None");
             const bool problem = nb::hasattr(loss, "_stepgraph_problem_json");
             nb::object user_loss;  // a stepgraph.CustomLoss: its registered engine loss
             if (nb::hasattr(loss, "_stepgraph_loss")) loss = user_loss = loss.attr("_stepgraph_loss");
             auto graph = std::dynamic_pointer_cast<sg::Model>(model);
             const bool named = !problem && (nb::isinstance<nb::dict>(loss) ||
                                (graph && (graph->input_names().size() > 1 || graph->output_names().size() > 1)));
             std::vector<sg::LossTerm> terms;
             if (named) {
               if (!graph) throw InputError("Trainer: losses by output name need a stepgraph.Model, got " + model->describe());
               terms = loss_terms_of(loss, *graph);
             } else if (!problem && !nb::isinstance<sg::Loss>(loss)) {
               throw nb::type_error(("Trainer: loss must be a stepgraph loss (or a dict of them by output, or a "
                                     "stepgraph.pinn.Problem), got " +
                                     py_type_name(loss))
                                        .c_str());
             }
             // A stepgraph.CustomOptimizer stands for its registered engine optimizer.
             nb::object engine_opt = nb::hasattr(optimizer, "_stepgraph_optimizer")
                                         ? nb::object(optimizer.attr("_stepgraph_optimizer"))
                                         : nb::borrow(optimizer);
             if (engine_opt.is_none()) throw InputError("Trainer: optimizer is None");
             if (!nb::isinstance<sg::Optimizer>(engine_opt))
               throw nb::type_error(("Trainer: optimizer must be a stepgraph optimizer (or a stepgraph.CustomOptimizer), "
                                     "got " + py_type_name(engine_opt)).c_str());
             const sg::OptimizerPtr opt = nb::cast<sg::OptimizerPtr>(engine_opt);
             sg::TrainerOptions o;
             sg::Device d = sg::Device::CPU;
             as_input_error([&] {
               o = trainer_options(mode, shape_policy, max_shapes, autotune, precision, attention, deterministic, fusion,
                                   concurrent, plan_cache, on_nan);
               if (device == "auto") d = sg::cuda_available(nullptr) ? sg::Device::CUDA : sg::Device::CPU;
               else d = sg::parse_device(device);
             });
             if (problem) {
               const std::string text = nb::cast<std::string>(loss.attr("_stepgraph_problem_json")());
               new_problem_trainer(self, model, text, opt, d, seed, o);
               return;
             }
             {
               nb::gil_scoped_release r;
               if (named) as_input_error([&] { new (self) PyTrainer(graph, std::move(terms), opt, d, seed, o); });
               else new (self) PyTrainer(model, nb::cast<sg::LossPtr>(loss), opt, d, seed, o);
             }
             self->cuda = d == sg::Device::CUDA;
             self->device_id = self->cuda ? current_cuda_device() : 0;
           },
           "model"_a, "loss"_a, "optimizer"_a, "device"_a = "auto", "seed"_a = 0, nb::kw_only(), "mode"_a = "graph",
           "shape_policy"_a = "recapture", "max_shapes"_a = 8, "autotune"_a = "off", "precision"_a = "fp32",
           "attention"_a = "fp32", "deterministic"_a = true, "fusion"_a = true, "concurrent"_a = true,
           "plan_cache"_a = "", "on_nan"_a = "stop",
           "model, loss, optimizer: the step's pieces.\n"
           "device: 'cpu', 'cuda', or 'auto' (CUDA when available, else the CPU).\n"
           "seed: fixes the initial parameters (per parameter name); kept in checkpoints.\n"
           "mode: 'graph' (capture the step as one CUDA graph after a warm-up step) or 'eager'.\n"
           "shape_policy: what a batch with another row count does: 'recapture' (compile that "
           "shape too, at most max_shapes cached), 'pad' (pad to the compiled size, exact), 'error'.\n"
           "autotune: 'off', 'heuristic' or 'exhaustive' (cuBLASLt algorithms and cuDNN plans chosen by "
           "timing).\n"
           "precision: 'fp32', 'tf32' (dense layers and convolutions on CUDA) or 'tf32x3' (fp32 "
           "accuracy on tensor cores: plain dense products may run as CUTLASS 3xTF32).\n"
           "attention: 'fp32' (the project's own attention kernels) or 'cudnn_bf16' (cuDNN's fused "
           "attention with Q, K, V, O and gradients rounded to bf16: relative errors ~1e-2; needs cuDNN "
           "and a head size that is a multiple of 8). CUDA only: the CPU always runs fp32.\n"
           "deterministic: True (default): every kernel and cuDNN plan sums in a fixed order, so runs "
           "repeat bit for bit; False: cuDNN may pick nondeterministic (atomic) engines for convolution "
           "gradients and the SDPA backward, as PyTorch does by default (often faster).\n"
           "fusion: True (default): ops share launches on CUDA (cuBLASLt epilogues, the output layer in "
           "the loss kernel, the jet dense kernel, conv + bias + relu in one cuDNN graph, ...); False: "
           "every op computes on its own, for debugging numerics (slower).\n"
           "concurrent: True (default): independent branches of the step run on a second CUDA stream "
           "inside the graph (results bitwise the same); False: one stream.\n"
           "plan_cache: the folder of the on-disk cache of built cuDNN plans, or 'off'; '' (default): "
           "$SG_PLAN_CACHE, else ~/.cache/stepgraph/cudnn.\n"
           "on_nan: a step whose loss (or clipped gradient norm) is NaN or inf is recorded on the device "
           "(nonfinite_steps); 'skip' also leaves its update out (parameters and optimizer state keep "
           "their values); 'stop' (default) and 'continue' apply it. stepgraph.train stops a run at its "
           "next log point under 'stop'.")

      .def("compile",
           [](PyTrainer& s, nb::handle input_shape) {
             if (s.t.has_named_io()) {
               const int64_t batch = nb::isinstance<nb::int_>(input_shape) ? nb::cast<int64_t>(input_shape) : -1;
               if (batch <= 0)
                 throw InputError("compile: a graph model takes the batch size (an int > 0; shapes come from its "
                                  "Inputs), got " + nb::cast<std::string>(nb::repr(input_shape)));
               locked(s, [&](sg::Trainer& t) { t.compile({batch}); });
               return;
             }
             std::vector<int64_t> shape;
             try {
               shape = nb::cast<std::vector<int64_t>>(input_shape);
             } catch (const std::exception&) {
               throw InputError("compile: expected the input shape (batch, features), got " +
                                nb::cast<std::string>(nb::repr(input_shape)));
             }
             if (shape.size() != 2 || shape[0] <= 0 || shape[1] <= 0)
               throw InputError("compile: expected the input shape (batch, features) with both > 0, got " +
                                sg::shape_str(shape));
             locked(s, [&](sg::Trainer& t) { t.compile(shape); });
           },
           "input_shape"_a,
           "Builds, plans and lowers the step for inputs of shape (batch, features). The first "
           "compile creates and initialises the parameters and optimizer state; later compiles "
           "(another batch size) reuse them.")
      .def("one_step",
           [](PyTrainer& s, nb::handle X, nb::handle y) {
             if (s.t.has_named_io()) {
               const NamedBatch b = named_batch(s, X, y, "one_step");
               return locked(s, [&](sg::Trainer& t) {
                 feed_named(t, b);
                 t.launch();
                 return t.loss();
               });
             }
             Batch b = prepare_batch(s, X, y, "one_step", true);
             return locked(s, [&](sg::Trainer& t) {
               if (!b.device) return t.one_step(b.hX, b.hy);
               feed_device(t, b);
               t.launch();
               return t.loss();
             });
           },
           "X"_a.none(), "y"_a.none(),
           "Copies the batch into the input slots, runs one whole step and returns its loss "
           "(waiting for the step).")
      .def("one_step_async",
           [](PyTrainer& s, nb::handle X, nb::handle y) {
             if (s.t.has_named_io()) {
               const NamedBatch b = named_batch(s, X, y, "one_step_async");
               return locked(s, [&](sg::Trainer& t) {
                 feed_named(t, b);
                 t.launch();
               });
             }
             Batch b = prepare_batch(s, X, y, "one_step_async", true);
             locked(s, [&](sg::Trainer& t) {
               if (!b.device) return t.one_step_async(b.hX, b.hy);
               feed_device(t, b);
               t.launch();
             });
           },
           "X"_a.none(), "y"_a.none(), "As one_step without waiting: read the loss later with .loss.")
      .def("set_batch",
           [](PyTrainer& s, nb::handle X, nb::handle y) {
             if (s.t.has_named_io()) {
               const NamedBatch b = named_batch(s, X, y, "set_batch");
               return locked(s, [&](sg::Trainer& t) { feed_named(t, b); });
             }
             Batch b = prepare_batch(s, X, y, "set_batch", true);
             locked(s, [&](sg::Trainer& t) {
               if (b.device) feed_device(t, b);
               else t.set_batch(b.hX, b.hy);
             });
           },
           "X"_a.none(), "y"_a.none(),
           "Copies a batch into the input slots (CUDA tensors device to device). A batch with "
           "another row count follows the shape policy.")
      .def("launch", [](PyTrainer& s) { locked(s, [](sg::Trainer& t) { t.launch(); }); },
           "Runs one step on the batch in the input slots (or, after set_dataset, on the next "
           "batch gathered on the device). Does not wait: read .loss to wait.")
      .def("synchronize", [](PyTrainer& s) { locked(s, [](sg::Trainer& t) { t.backend().synchronize(); }); },
           "Waits for every queued step.")
      .def_prop_ro("loss", [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.loss(); }); },
                   "The last step's loss (waits for it).")
      .def_prop_ro("amax", [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.amax(); }); },
                   "max |output| of the last step for every Dense built with amax=True, by name "
                   "('0.amax', ...); empty if none.")
      .def_prop_ro("logits",
                   [](PyTrainer& s) { return to_numpy(locked(s, [](sg::Trainer& t) { return t.logits(); })); },
                   "The last step's predictions [batch, outputs] as a numpy copy.")
      .def("logits_view",
           [](nb::handle self) {
             PyTrainer& s = nb::cast<PyTrainer&>(self);
             std::string name;
             {
               std::lock_guard<std::mutex> lock(s.mu);
               name = s.t.output_name();
             }
             return self.attr("tensor_view")(name);
           },
           "A zero-copy view of the predictions slot (see tensor_view).")
      .def("tensor_view",
           [](nb::handle self, const std::string& name) {
             PyTrainer& s = nb::cast<PyTrainer&>(self);
             std::lock_guard<std::mutex> lock(s.mu);
             void* p = s.t.device_ptr(name);
             const sg::Program& prog = s.t.program();
             const sg::TensorId id = prog.find(name);
             if (id == sg::kNone) throw sg::Error("tensor_view: no tensor named '" + name + "' in the step");
             const sg::TensorInfo& ti = prog.tensor(id);
             return make_view(p, ti.shape, ti.dtype, s.cuda, s.device_id, self);
           },
           "name"_a,
           "A zero-copy view of a tensor of the current step ('input', 'target', 'loss', "
           "output_name, parameters by name): a numpy array on the CPU backend, on CUDA an "
           "array with __dlpack__ / __dlpack_device__ (torch.from_dlpack, cupy.from_dlpack, "
           "jax.dlpack.from_dlpack). It keeps the trainer alive. Parameter views stay valid for "
           "the trainer's life; other views until the next compile, invalidate or batch of a "
           "new size. Read it after the step finished (.loss or synchronize()).")
      .def("param_views",
           [](nb::handle self) {
             PyTrainer& s = nb::cast<PyTrainer&>(self);
             std::vector<std::string> names;
             {
               std::lock_guard<std::mutex> lock(s.mu);
               if (!s.t.is_compiled()) not_compiled("param_views");
               names = param_names(s.t);
             }
             nb::dict d;
             for (const std::string& n : names) d[n.c_str()] = self.attr("tensor_view")(n);
             return d;
           },
           "Zero-copy views of every parameter by name (see tensor_view); writing to them "
           "changes the parameters.")
      .def("predict",
           [](PyTrainer& s, nb::handle X) -> nb::object {
             if (s.t.has_named_io()) {
               sg::NamedArrays in = named_arrays(X, "predict: inputs");
               return to_dict(locked(s, [&](sg::Trainer& t) { return t.predict(in); }));
             }
             const Expect e = expect_of(s);
             if (!e.compiled) not_compiled("predict");
             Imported x = prepare_X(s, e, X, "predict", false);
             sg::HostArray hx = host_f32(x, "predict: X");
             return to_numpy(locked(s, [&](sg::Trainer& t) { return t.predict(hx); }));
           },
           "X"_a.none(),
           "Forward only, in batches of the compiled size: predictions [rows, outputs] as numpy. "
           "Parameters are not changed.")
      .def("evaluate",
           [](PyTrainer& s, nb::handle X, nb::handle y) {
             if (s.t.has_named_io()) {
               sg::NamedArrays in = named_arrays(X, "evaluate: inputs"), tg = named_arrays(y, "evaluate: targets");
               return locked(s, [&](sg::Trainer& t) { return t.evaluate(in, tg); });
             }
             Batch b = prepare_batch(s, X, y, "evaluate", false);
             return locked(s, [&](sg::Trainer& t) { return t.evaluate(b.hX, b.hy); });
           },
           "X"_a.none(), "y"_a.none(), "Loss (and accuracy for classification) over all rows, in batches; no update.")
      .def("set_dataset",
           [](PyTrainer& s, nb::handle X, nb::handle y, int64_t batch_size, bool shuffle, const std::string& last,
              uint64_t seed) {
             if (batch_size <= 0) throw InputError(sg::cat("set_dataset: batch_size must be positive, got ", batch_size));
             sg::LastBatch lb;
             if (last == "drop") lb = sg::LastBatch::Drop;
             else if (last == "partial") lb = sg::LastBatch::Partial;
             else throw InputError("set_dataset: unknown last_batch '" + last + "': expected drop or partial");
             if (s.t.has_named_io()) {
               sg::NamedArrays in = named_arrays(X, "set_dataset: inputs"), tg = named_arrays(y, "set_dataset: targets");
               return locked(s, [&](sg::Trainer& t) { t.set_dataset(in, tg, batch_size, shuffle, lb, seed); });
             }
             Batch b = prepare_batch(s, X, y, "set_dataset", false);
             locked(s, [&](sg::Trainer& t) { t.set_dataset(b.hX, b.hy, batch_size, shuffle, lb, seed); });
           },
           "X"_a.none(), "y"_a.none(), "batch_size"_a, "shuffle"_a = true, "last_batch"_a = "drop", "seed"_a = 0,
           "Device-resident training: uploads the whole data set once; every launch() then "
           "gathers (and shuffles, per epoch, from the step counter) its own batch inside the "
           "step. A graph model takes dicts of arrays by name (every input, every term's target). "
           "last_batch: 'drop' or 'partial'. compile() switches back to fed batches.")
      .def_prop_rw("lr", [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.lr(); }); },
                   [](PyTrainer& s, double lr) {
                     if (!(lr > 0)) throw InputError(sg::cat("lr: the learning rate must be a positive number, got ", lr));
                     locked(s, [&](sg::Trainer& t) { t.set_lr(lr); });
                   },
                   "The base learning rate (settable without a recompile).")
      .def("set_lr",
           [](PyTrainer& s, double lr) {
             if (!(lr > 0)) throw InputError(sg::cat("set_lr: the learning rate must be a positive number, got ", lr));
             locked(s, [&](sg::Trainer& t) { t.set_lr(lr); });
           },
           "lr"_a, "Sets the base learning rate (no recompile).")
      .def_prop_ro("step", [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.step(); }); },
                   "Optimizer steps taken.")
      .def_prop_ro("seed", [](PyTrainer& s) { return s.t.seed(); })
      .def_prop_ro("loss_terms",
                   [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.loss_terms(); }); },
                   "Each named loss term of the last step (a physics-informed step's residual and conditions), "
                   "read from the device.")
      .def("explain", [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.explain(); }); },
           "The step program, shapes, memory plan and loss scale as text.")
      .def("invalidate", [](PyTrainer& s) { locked(s, [](sg::Trainer& t) { t.invalidate(); }); },
           "Drops every compiled step (parameters and optimizer state are kept).")
      .def("profile",
           [](PyTrainer& s, int reps) { return locked(s, [&](sg::Trainer& t) { return t.profile(reps); }); },
           "reps"_a = 50, "Per-op device time of the current step: a list of (op name, microseconds).")
      .def("device_ptr",
           [](PyTrainer& s, const std::string& name) {
             std::lock_guard<std::mutex> lock(s.mu);
             return reinterpret_cast<uintptr_t>(s.t.device_ptr(name));
           },
           "name"_a, "The address of a tensor of the current step, as an int.")
      .def_prop_ro("launch_count", [](PyTrainer& s) { return s.t.launch_count(); }, "Steps launched.")
      .def_prop_ro("compile_count", [](PyTrainer& s) { return s.t.compile_count(); }, "Step programs built.")
      .def_prop_ro("capture_count", [](PyTrainer& s) { return s.t.capture_count(); },
                   "CUDA graphs recorded (recaptures included).")
      .def_prop_ro("graph_nodes", [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.graph_nodes(); }); },
                   "Nodes of the current step's CUDA graph (0: none).")
      .def_prop_ro("is_compiled", [](PyTrainer& s) { return s.t.is_compiled(); })
      .def_prop_ro("is_resident", [](PyTrainer& s) { return s.t.is_resident(); },
                   "Whether launches gather batches from a set_dataset data set.")
      .def_prop_ro("input_shape",
                   [](PyTrainer& s) {
                     std::lock_guard<std::mutex> lock(s.mu);
                     if (!s.t.is_compiled()) not_compiled("input_shape");
                     return shape_tuple(s.t.input_shape());
                   },
                   "The compiled (batch, features).")
      .def_prop_ro("output_shape",
                   [](PyTrainer& s) {
                     std::lock_guard<std::mutex> lock(s.mu);
                     if (!s.t.is_compiled()) not_compiled("output_shape");
                     return shape_tuple(s.t.output_shape());
                   },
                   "The model's prediction shape (batch, outputs).")
      .def_prop_ro("output_name", [](PyTrainer& s) {
                     std::lock_guard<std::mutex> lock(s.mu);
                     return s.t.output_name();
                   },
                   "The name of the predictions tensor.")
      .def_prop_ro("device", [](PyTrainer& s) { return std::string(s.cuda ? "cuda" : "cpu"); },
                   "'cpu' or 'cuda'.")
      .def_prop_ro("device_id", [](PyTrainer& s) { return s.device_id; }, "The CUDA device (0 on the CPU).")
      .def_prop_ro("backend", [](PyTrainer& s) { return s.t.backend().describe(); }, "The backend, described.")
      .def_prop_ro("allocated_bytes", [](PyTrainer& s) { return s.t.backend().allocated_bytes(); })
      .def_prop_ro("peak_allocated_bytes", [](PyTrainer& s) { return s.t.backend().peak_allocated_bytes(); })
      .def_prop_ro("options",
                   [](PyTrainer& s) { return options_dict(s.t.options()); },
                   "mode, shape_policy, max_shapes, autotune, precision, attention, deterministic, fusion, concurrent "
                   "plan_cache and on_nan.")
      .def_prop_ro("nonfinite_steps",
                   [](PyTrainer& s) {
                     const sg::NonFiniteSteps w = locked(s, [](sg::Trainer& t) { return t.nonfinite_steps(); });
                     return nb::make_tuple(w.first, w.count);
                   },
                   "(first, count): the first step whose loss or gradient norm was NaN or inf (0: none) and "
                   "how many were, as the step recorded them on the device.")
      .def_prop_ro("model", [](PyTrainer& s) { return s.t.model(); })
      .def_prop_ro("loss_fn", [](PyTrainer& s) { return s.t.loss_fn(); })
      .def_prop_ro("optimizer", [](PyTrainer& s) { return s.t.optimizer(); })
      .def("__repr__", [](PyTrainer& s) {
        std::lock_guard<std::mutex> lock(s.mu);
        const sg::LossPtr& loss = s.t.loss_fn();
        return sg::cat("Trainer(device=", s.cuda ? "cuda" : "cpu", ", model=", s.t.model()->describe(), ", loss=",
                       loss ? loss->describe() : std::string("custom step"), ", optimizer=", s.t.optimizer()->describe(), ", ",
                       options_repr(s.t.options()), ", compiled=",
                       s.t.is_compiled() ? sg::shape_str(s.t.input_shape()) : std::string("no"), ")");
      });
  bind_trainer_weights(m, cls);
}

}  // namespace sgpy
