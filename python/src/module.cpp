// The stepgraph._stepgraph extension: exceptions, layers, losses, optimizers, schedules, timing.
// The Trainer is in trainer.cpp, whole runs from configurations in run.cpp.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cctype>
#include <cstdlib>

#include "common.h"
#include "stepgraph/custom_optimizer.h"
#include "stepgraph/graph.h"
#include "stepgraph/loss.h"
#include "stepgraph/nn.h"
#include "stepgraph/optim.h"

namespace sgpy {

namespace {

PyObject* g_error = nullptr;        // stepgraph.Error(RuntimeError)
PyObject* g_input_error = nullptr;  // stepgraph.InputError(Error, ValueError)

// "he" | "xavier" | "zeros" | "normal" (std 0.02, as the config) | "normal(STD)" | an Init.
sg::Init parse_init(nb::handle h) {
  if (nb::isinstance<sg::Init>(h)) return nb::cast<sg::Init>(h);
  if (!nb::isinstance<nb::str>(h))
    throw InputError("init: expected a string (he, xavier, zeros, normal, normal(STD)) or a stepgraph.Init, got " +
                     py_type_name(h));
  const std::string s = nb::cast<std::string>(h);
  if (s == "he") return sg::Init::he();
  if (s == "xavier") return sg::Init::xavier();
  if (s == "zeros") return sg::Init::zeros();
  if (s == "normal") return sg::Init::normal(0.02);
  if (s.size() > 8 && s.compare(0, 7, "normal(") == 0 && s.back() == ')') {
    const std::string num = s.substr(7, s.size() - 8);
    char* end = nullptr;
    const double std = std::strtod(num.c_str(), &end);
    if (!num.empty() && end == num.c_str() + num.size() && std > 0) return sg::Init::normal(std);
  }
  throw InputError("unknown init '" + s + "': expected one of he, xavier, zeros, normal, normal(STD) with STD > 0");
}

sg::Reduction parse_reduction(const std::string& s) {
  if (s == "mean") return sg::Reduction::Mean;
  if (s == "sum") return sg::Reduction::Sum;
  throw InputError("unknown reduction '" + s + "': expected mean or sum");
}

const char* schedule_kind_name(sg::ScheduleKind k) {
  switch (k) {
    case sg::ScheduleKind::Constant: return "constant";
    case sg::ScheduleKind::Step: return "step";
    case sg::ScheduleKind::Cosine: return "cosine";
  }
  return "?";
}

sg::Schedule schedule_or_constant(const std::optional<sg::Schedule>& s) {
  return s ? *s : sg::Schedule::constant();
}

// A CUDA stream argument: None (host clock / private stream), an int (cudaStream_t; 0 is the
// legacy default stream), or an object with .cuda_stream (PyTorch) or .ptr (CuPy).
void* stream_arg(nb::handle h, bool zero_is_null) {
  if (h.is_none()) return nullptr;
  nb::handle v = h;
  nb::object tmp;
  if (!nb::isinstance<nb::int_>(h)) {
    if (nb::hasattr(h, "cuda_stream")) tmp = h.attr("cuda_stream");
    else if (nb::hasattr(h, "ptr")) tmp = h.attr("ptr");
    else
      throw InputError("stream: expected None, an int (cudaStream_t) or a stream object with .cuda_stream or .ptr");
    v = tmp;
  }
  const uintptr_t p = nb::cast<uintptr_t>(v);
  if (p == 0) return zero_is_null ? nullptr : reinterpret_cast<void*>(uintptr_t{1});  // cudaStreamLegacy
  return reinterpret_cast<void*>(p);
}

struct PyTimer {
  explicit PyTimer(void* stream) : t(stream) {}
  sg::Timer t;
  double elapsed_ms = 0;
};

}  // namespace

}  // namespace sgpy

using namespace sgpy;
namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_stepgraph, m) {
  m.doc() = "stepgraph: whole-step training of small neural networks (C++ extension).";
  m.attr("__version__") = STEPGRAPH_VERSION;
  // Objects still referenced at interpreter exit (module globals, pytest parametrizations) are
  // not leaks of the bindings; SG_NB_LEAK_WARNINGS=1 turns nanobind's report back on.
  {
    const char* w = std::getenv("SG_NB_LEAK_WARNINGS");
    nb::set_leak_warnings(w != nullptr && std::string(w) == "1");
  }

  // ---- exceptions ----
  g_error = PyErr_NewExceptionWithDoc(
      "stepgraph.Error",
      "An error raised by the stepgraph engine; the message is the C++ sg::Error's text.",
      PyExc_RuntimeError, nullptr);
  nb::object bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_input_error = PyErr_NewExceptionWithDoc(
      "stepgraph.InputError",
      "A bad argument: wrong dtype, shape or device of an input array, or an unknown option "
      "string. A subclass of both stepgraph.Error and ValueError.",
      bases.ptr(), nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("InputError") = nb::handle(g_input_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(g_input_error, e.what());
    } catch (const sg::Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });

  // ---- build information ----
  m.def("cuda_enabled", &sg::cuda_enabled, "Whether this build has the CUDA backend compiled in.");
  m.def("cuda_available", [] { return sg::cuda_available(nullptr); },
        "Whether a CUDA trainer can be made here (CUDA compiled in and a GPU present).");
  m.def("cuda_unavailable_reason", [] {
          std::string why;
          return sg::cuda_available(&why) ? std::string() : why;
        },
        "Why cuda_available() is False (an empty string when it is True).");

  // ---- initialisation ----
  nb::class_<sg::Init>(m, "Init",
                       "Weight initialisation (biases start at zero):\n"
                       "  he:     N(0, 2 / fan_in)                    (Kaiming normal, for relu/gelu)\n"
                       "  xavier: U(-a, a), a = sqrt(6 / (fan_in + fan_out))   (Glorot uniform)\n"
                       "  normal: N(0, std^2)\n"
                       "  zeros\n"
                       "Dense(init=...) also takes the strings 'he', 'xavier', 'zeros', 'normal' "
                       "(std 0.02) and 'normal(STD)'.")
      .def_static("he", &sg::Init::he, "Kaiming normal: N(0, 2 / fan_in).")
      .def_static("xavier", &sg::Init::xavier, "Glorot uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).")
      .def_static("normal", [](double std) { return as_input_error([&] {
                    if (!(std > 0)) throw sg::Error(sg::cat("Init.normal: std must be positive, got ", std));
                    return sg::Init::normal(std); }); },
                  "std"_a, "N(0, std^2).")
      .def_static("zeros", &sg::Init::zeros, "All zeros.")
      .def_static("parse", [](nb::handle h) { return parse_init(h); }, "spec"_a,
                  "An Init from 'he', 'xavier', 'zeros', 'normal' or 'normal(STD)'.")
      .def_prop_ro("kind", [](const sg::Init& i) {
          switch (i.kind) {
            case sg::Init::Kind::He: return "he";
            case sg::Init::Kind::Xavier: return "xavier";
            case sg::Init::Kind::Normal: return "normal";
            case sg::Init::Kind::Zeros: return "zeros";
            case sg::Init::Kind::Ones: return "ones";
            case sg::Init::Kind::Constant: return "constant";
          }
          return "?";
        }, "'he', 'xavier', 'normal' or 'zeros'.")
      .def_prop_ro("std", [](const sg::Init& i) { return i.std; }, "The standard deviation (normal only).")
      .def("__str__", &sg::Init::str)
      .def("__repr__", [](const sg::Init& i) { return "Init(" + i.str() + ")"; });

  // ---- layers ----
  nb::class_<sg::Layer>(m, "Layer", "Base class of the layers (Dense, Sequential, Residual).")
      .def("describe", &sg::Layer::describe, "One line of hyperparameters, e.g. 'dense(256, relu, init=he, bias)'.")
      .def("__repr__", &sg::Layer::describe)
      .def("__call__",
           [](std::shared_ptr<sg::Layer> self, const sg::SymbolicTensor& x) {
             return as_input_error([&] { return sg::call(self, x); });
           },
           "x"_a,
           "The layer applied to a symbolic tensor (a model graph); calling one layer twice shares its "
           "parameters.")
      .def_prop_rw("name", &sg::Layer::name,
                   [](sg::Layer& l, const std::string& n) { as_input_error([&] { l.set_name(n); }); },
                   "Names its parameters '<name>.weight', ... in a Sequential or Model ('' : by position).");

  nb::class_<sg::Dense, sg::Layer>(
      m, "Dense",
      "A fully connected layer y = activation(x W^T + b) with W of shape [units, in] (like "
      "torch.nn.Linear) and b of shape [units]; its parameters are named '<index>.weight' and "
      "'<index>.bias' inside a Sequential.")
      .def("__init__",
           [](sg::Dense* self, int64_t units, const std::string& activation, nb::handle init, bool bias, bool amax,
              const std::string& name) {
             std::optional<sg::Init> i;
             if (!init.is_none()) i = parse_init(init);
             as_input_error([&] {
               const sg::Activation a = sg::parse_activation(activation);
               new (self) sg::Dense(units, a, i, bias, amax);
               self->set_name(name);
             });
           },
           "units"_a, "activation"_a = "none", "init"_a = nb::none(), "bias"_a = true, "amax"_a = false,
           "name"_a = "",
           "units: output width (> 0).\n"
           "activation: 'none', 'relu', 'gelu' (the tanh form; also 'gelu_tanh'), 'gelu_erf' (the exact erf form, "
           "PyTorch's default F.gelu), 'tanh', 'sigmoid', 'sin', 'softplus', 'silu', 'leaky_relu', 'elu', 'exp' or "
           "'square'.\n"
           "init: None (he for relu/gelu, xavier otherwise), 'he', 'xavier', 'zeros', 'normal', "
           "'normal(STD)' or a stepgraph.Init.\n"
           "bias: whether the layer has a bias.\n"
           "amax: also record max |output| every step (Trainer.amax; CPU backend in this version).\n"
           "name: names its parameters '<name>.weight', '<name>.bias' (default: by position).")
      .def_prop_ro("units", &sg::Dense::units, "The output width.");

  nb::class_<sg::Sequential, sg::Layer>(
      m, "Sequential",
      "Layers applied in order: Sequential(Dense(256, activation='relu'), Dense(10)). The i-th "
      "layer's parameters are named 'i.weight', 'i.bias' (nested: 'i.j.weight').")
      .def("__init__",
           [](sg::Sequential* self, nb::args args) {
             std::vector<sg::LayerPtr> layers;
             auto add = [&](nb::handle h) {
               if (!nb::isinstance<sg::Layer>(h) && nb::hasattr(h, "_as_layer")) {  // a stepgraph.CustomOp
                 layers.push_back(nb::cast<sg::LayerPtr>(h.attr("_as_layer")()));
                 return;
               }
               if (!nb::isinstance<sg::Layer>(h))
                 throw InputError("Sequential: expected layers (Dense, Sequential, Residual), got " +
                                  py_type_name(h));
               layers.push_back(nb::cast<sg::LayerPtr>(h));
             };
             if (args.size() == 1 && (nb::isinstance<nb::list>(args[0]) || nb::isinstance<nb::tuple>(args[0]))) {
               for (nb::handle h : args[0]) add(h);
             } else {
               for (nb::handle h : args) add(h);
             }
             new (self) sg::Sequential(std::move(layers));
           },
           "Sequential(*layers) or Sequential([layers]).")
      .def("add", [](sg::Sequential& s, sg::LayerPtr l) -> sg::Sequential& {
             if (!l) throw InputError("Sequential.add: expected a layer, got None");
             return s.add(std::move(l));
           },
           "layer"_a, nb::rv_policy::reference, "Appends a layer; returns self.")
      .def("set_input_shape",
           [](sg::Sequential& s, std::vector<int64_t> shape) -> sg::Sequential& {
             as_input_error([&] { s.set_input_shape(sg::Shape(shape.begin(), shape.end())); });
             return s;
           },
           "shape"_a, nb::rv_policy::reference,
           "Views each input row as this per-sample shape (e.g. (8, 8, 1): a 64-feature row as an NHWC "
           "image) before the first layer; returns self.")
      .def_prop_ro("layers", &sg::Sequential::layers, "The layers, in order.")
      .def("__len__", [](const sg::Sequential& s) { return s.layers().size(); })
      .def("__getitem__", [](const sg::Sequential& s, int64_t i) {
             const int64_t n = static_cast<int64_t>(s.layers().size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw nb::index_error("Sequential index out of range");
             return s.layers()[static_cast<size_t>(i)];
           });

  nb::class_<sg::Residual, sg::Layer>(m, "Residual",
                                      "y = x + body(x); the body must keep the width. Its parameters "
                                      "take the residual's position as prefix ('1.0.weight' for the first "
                                      "layer of a Sequential body at position 1).")
      .def("__init__", [](sg::Residual* self, sg::LayerPtr body) {
             if (!body) throw InputError("Residual: expected a body layer, got None");
             as_input_error([&] { new (self) sg::Residual(std::move(body)); });
           },
           "body"_a);

  nb::class_<sg::FourierFeatures, sg::Layer>(
      m, "FourierFeatures",
      "Random Fourier features x -> [sin(2 pi x B^T), cos(2 pi x B^T)], B ~ N(0, sigma^2) of shape "
      "[features, inputs]; output width 2 * features. Fixed (a constant saved in checkpoints) unless "
      "trainable. For physics-informed networks (CPU and CUDA).")
      .def("__init__",
           [](sg::FourierFeatures* self, int64_t features, double sigma, bool trainable) {
             as_input_error([&] { new (self) sg::FourierFeatures(features, sigma, trainable); });
           },
           "features"_a, "sigma"_a = 1.0, "trainable"_a = false);

  nb::class_<sg::Conv2d, sg::Layer>(
      m, "Conv2d",
      "2-D convolution over NHWC images [batch, height, width, channels] with filters [filters, "
      "kernel, kernel, channels] (KRSC) and a bias per filter, optionally followed by relu.")
      .def("__init__",
           [](sg::Conv2d* self, int64_t filters, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation,
              const std::string& activation, nb::handle init, bool bias) {
             sg::Conv2dOptions o;
             o.kernel = kernel, o.stride = stride, o.padding = padding, o.dilation = dilation, o.bias = bias;
             if (!init.is_none()) o.init = parse_init(init);
             as_input_error([&] {
               o.act = sg::parse_activation(activation);
               new (self) sg::Conv2d(filters, o);
             });
           },
           "filters"_a, "kernel"_a = 3, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "activation"_a = "none",
           "init"_a = nb::none(), "bias"_a = true,
           "filters: output channels. kernel: square window size. activation: 'none' or 'relu'.\n"
           "init: None (he for relu, xavier otherwise; fan_in = kernel * kernel * channels) or as for Dense.")
      .def_prop_ro("filters", &sg::Conv2d::filters, "The output channels.");

  nb::class_<sg::MaxPool2d, sg::Layer>(m, "MaxPool2d",
                                       "Max over windows of NHWC images; stride defaults to the window. "
                                       "The gradient goes to the first maximum in scan order.")
      .def("__init__",
           [](sg::MaxPool2d* self, int64_t window, std::optional<int64_t> stride, int64_t padding) {
             as_input_error([&] { new (self) sg::MaxPool2d(window, stride, padding); });
           },
           "window"_a, "stride"_a = nb::none(), "padding"_a = 0);

  nb::class_<sg::GlobalAvgPool, sg::Layer>(m, "GlobalAvgPool",
                                           "Mean over height and width: [batch, h, w, c] -> [batch, c].")
      .def(nb::init<>());

  nb::class_<sg::Flatten, sg::Layer>(m, "Flatten", "[batch, h, w, c] -> [batch, h * w * c] (NHWC order).")
      .def(nb::init<>());

  nb::class_<sg::Dropout, sg::Layer>(
      m, "Dropout",
      "Zeroes each element with probability p in training steps and scales the rest by 1 / (1 - p), as "
      "torch.nn.Dropout; predict and evaluate pass the input through. The mask comes from a counter-based "
      "generator keyed by the trainer's seed, the layer's output and the step, inside the step graph.")
      .def("__init__", [](sg::Dropout* self, double p) { as_input_error([&] { new (self) sg::Dropout(p); }); },
           "p"_a = 0.5)
      .def_prop_ro("p", &sg::Dropout::p);

  nb::class_<sg::BatchNorm, sg::Layer>(
      m, "BatchNorm",
      "Batch norm over the channels (the last axis: [batch, channels] features, [batch, h, w, channels] images), as torch.nn.BatchNorm1d / BatchNorm2d: training steps normalize with the batch's mean and biased variance and update running_mean / running_var (unbiased variance) inside the step; predict and evaluate use the running statistics. Gain starts at 1, shift at 0; not with padded batches or data-parallel training.")
      .def("__init__",
           [](sg::BatchNorm* self, double momentum, double eps) {
             as_input_error([&] { new (self) sg::BatchNorm(momentum, eps); });
           },
           "momentum"_a = 0.1, "eps"_a = 1e-5)
      .def_prop_ro("momentum", &sg::BatchNorm::momentum)
      .def_prop_ro("eps", &sg::BatchNorm::eps);

  nb::class_<sg::Embedding, sg::Layer>(
      m, "Embedding",
      "Token ids [batch, positions] -> vectors [batch, positions, dim], plus a learned position "
      "embedding when positions > 0.")
      .def("__init__",
           [](sg::Embedding* self, int64_t vocab, int64_t dim, int64_t positions) {
             as_input_error([&] { new (self) sg::Embedding(vocab, dim, positions); });
           },
           "vocab"_a, "dim"_a, "positions"_a = 0);

  nb::class_<sg::LayerNorm, sg::Layer>(m, "LayerNorm", "Normalizes the last dimension, with a gain and a bias.")
      .def("__init__", [](sg::LayerNorm* self, double eps) { as_input_error([&] { new (self) sg::LayerNorm(eps); }); },
           "eps"_a = 1e-5);

  nb::class_<sg::SelfAttention, sg::Layer>(
      m, "SelfAttention",
      "Multi-head self-attention over [batch, positions, width]: q, k, v projections, scaled "
      "dot-product attention (causal=True: each position sees itself and earlier ones; off by default, as "
      "the config's \"causal\": false and torch.nn.MultiheadAttention), an output projection.")
      .def("__init__",
           [](sg::SelfAttention* self, int64_t heads, bool causal, bool bias) {
             as_input_error([&] { new (self) sg::SelfAttention(heads, causal, bias); });
           },
           "heads"_a, "causal"_a = false, "bias"_a = true);

  nb::class_<sg::TransformerBlock, sg::Layer>(
      m, "TransformerBlock",
      "A pre-norm transformer block: x + attention(layer_norm(x)), then + mlp(layer_norm(.)) with a gelu "
      "hidden layer of width mlp; causal=True (off by default) makes it a decoder block.")
      .def("__init__",
           [](sg::TransformerBlock* self, int64_t heads, int64_t mlp, bool causal) {
             as_input_error([&] { new (self) sg::TransformerBlock(heads, causal, mlp); });
           },
           "heads"_a, "mlp"_a, "causal"_a = false);

  // ---- losses ----
  nb::class_<sg::Loss>(m, "Loss", "Base class of the losses.")
      .def("describe", &sg::Loss::describe)
      .def("__repr__", &sg::Loss::describe)
      .def_prop_ro("reduction", [](const sg::Loss& l) { return std::string(sg::reduction_name(l.reduction())); },
                   "'mean' or 'sum'.")
      .def_prop_ro("task", [](const sg::Loss& l) { return std::string(sg::task_name(l.task())); },
                   "'classification' or 'regression'.");
  nb::class_<sg::SoftmaxCrossEntropy, sg::Loss>(
      m, "SoftmaxCrossEntropy",
      "Softmax + cross-entropy on logits [B, C] with integer labels [B] (as "
      "torch.nn.CrossEntropyLoss); reduction 'mean' over the batch or 'sum'. label_smoothing in [0, 1) "
      "and class_weights (one number >= 0 per class) as torch.nn.functional.cross_entropy's "
      "label_smoothing and weight: a weighted mean divides by the summed weights of the labelled targets.")
      .def("__init__",
           [](sg::SoftmaxCrossEntropy* self, const std::string& r, double label_smoothing,
              std::optional<std::vector<float>> class_weights) {
             as_input_error([&] {
               new (self) sg::SoftmaxCrossEntropy(parse_reduction(r), label_smoothing,
                                                  class_weights ? std::move(*class_weights) : std::vector<float>{});
             });
           },
           "reduction"_a = "mean", "label_smoothing"_a = 0.0, "class_weights"_a = nb::none())
      .def_prop_ro("label_smoothing", &sg::SoftmaxCrossEntropy::label_smoothing, "The smoothing eps (0: none).")
      .def_prop_ro("class_weights", &sg::SoftmaxCrossEntropy::class_weights,
                   "The per-class weights (empty: every class 1).");
  nb::class_<sg::MeanSquaredError, sg::Loss>(
      m, "MeanSquaredError",
      "Squared error on predictions [B, T] with float targets [B, T] (or [B] when T = 1); "
      "reduction 'mean' over all B*T elements (as torch.nn.MSELoss) or 'sum'.")
      .def("__init__", [](sg::MeanSquaredError* self, const std::string& r) {
             new (self) sg::MeanSquaredError(parse_reduction(r));
           },
           "reduction"_a = "mean");
  nb::class_<sg::ElementwiseLoss, sg::Loss>(m, "ElementwiseLoss", "Base class of L1Loss, HuberLoss and "
                                            "BinaryCrossEntropyWithLogits.");
  nb::class_<sg::L1Loss, sg::ElementwiseLoss>(
      m, "L1Loss", "|pred - target| on [B, T] with float targets (as torch.nn.L1Loss); 'mean' or 'sum'.")
      .def("__init__", [](sg::L1Loss* self, const std::string& r) { new (self) sg::L1Loss(parse_reduction(r)); },
           "reduction"_a = "mean");
  nb::class_<sg::HuberLoss, sg::ElementwiseLoss>(
      m, "HuberLoss",
      "0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta), d = pred - target (as torch.nn.HuberLoss); "
      "'mean' or 'sum'.")
      .def("__init__", [](sg::HuberLoss* self, double delta, const std::string& r) {
             as_input_error([&] { new (self) sg::HuberLoss(delta, parse_reduction(r)); });
           },
           "delta"_a = 1.0, "reduction"_a = "mean");
  nb::class_<sg::BinaryCrossEntropyWithLogits, sg::ElementwiseLoss>(
      m, "BinaryCrossEntropyWithLogits",
      "Binary cross-entropy on logits [B, T] with float targets in [0, 1] of the same shape, in the stable "
      "form max(z, 0) - z t + log1p(exp(-|z|)) (as torch.nn.BCEWithLogitsLoss); 'mean' or 'sum'.")
      .def("__init__", [](sg::BinaryCrossEntropyWithLogits* self, const std::string& r) {
             new (self) sg::BinaryCrossEntropyWithLogits(parse_reduction(r));
           },
           "reduction"_a = "mean");

  // ---- schedules ----
  nb::class_<sg::Schedule>(
      m, "Schedule",
      "Learning-rate schedule as a function of the step t = 1, 2, ...:\n"
      "  constant: base\n"
      "  step:     base * gamma^floor((t - 1) / step_size)\n"
      "  cosine:   t <= warmup: base * t / warmup; then min + (base - min) * (1 + cos(pi p)) / 2,\n"
      "            p = (t - warmup) / (total - warmup), min = base * min_lr_ratio once t >= total.")
      .def_static("constant", &sg::Schedule::constant, "The base learning rate at every step.")
      .def_static("step", [](int64_t step_size, double gamma) {
                    return as_input_error([&] { return sg::Schedule::step(step_size, gamma); });
                  },
                  "step_size"_a, "gamma"_a = 0.1, "Multiply the learning rate by gamma every step_size steps.")
      .def_static("cosine", [](int64_t warmup, int64_t total, double min_ratio) {
                    return as_input_error([&] { return sg::Schedule::cosine(warmup, total, min_ratio); });
                  },
                  "warmup_steps"_a, "total_steps"_a, "min_lr_ratio"_a = 0.0,
                  "Linear warm-up over warmup_steps, then cosine decay to base * min_lr_ratio at total_steps.")
      .def_prop_ro("kind", [](const sg::Schedule& s) { return std::string(schedule_kind_name(s.kind)); },
                   "'constant', 'step' or 'cosine'.")
      .def_ro("warmup_steps", &sg::Schedule::warmup_steps)
      .def_ro("total_steps", &sg::Schedule::total_steps)
      .def_ro("min_lr_ratio", &sg::Schedule::min_lr_ratio)
      .def_ro("step_size", &sg::Schedule::step_size)
      .def_ro("gamma", &sg::Schedule::gamma)
      .def("lr_at", &sg::Schedule::lr_at, "base_lr"_a, "t"_a,
           "The learning rate at step t (1-based) for base learning rate base_lr.")
      .def("describe", &sg::Schedule::describe)
      .def("__repr__", &sg::Schedule::describe);

  // ---- optimizers ----
  nb::class_<sg::Optimizer>(m, "Optimizer", "Base class of the optimizers.")
      .def("describe", &sg::Optimizer::describe)
      .def("__repr__", &sg::Optimizer::describe)
      .def_prop_ro("lr", &sg::Optimizer::lr, "The base learning rate given at construction.")
      .def_prop_ro("weight_decay", &sg::Optimizer::weight_decay)
      .def_prop_ro("schedule", &sg::Optimizer::schedule)
      .def_prop_ro("clip_norm", &sg::Optimizer::clip_norm,
                   "Gradient clipping by global norm before each update (0: none), as torch.nn.utils.clip_grad_norm_.");
  nb::class_<sg::SGD, sg::Optimizer>(
      m, "SGD",
      "SGD as PyTorch: g += wd*p; buf = momentum*buf + (1 - dampening)*g (buf = g on step 1); "
      "g = nesterov ? g + momentum*buf : buf; p -= lr*g.")
      .def("__init__",
           [](sg::SGD* self, double lr, double momentum, bool nesterov, double wd, double dampening,
              std::optional<sg::Schedule> s, double clip) {
             as_input_error([&] {
               new (self) sg::SGD(lr, momentum, nesterov, wd, dampening, schedule_or_constant(s));
               self->set_clip_norm(clip);
             });
           },
           "lr"_a, "momentum"_a = 0.0, "nesterov"_a = false, "weight_decay"_a = 0.0, "dampening"_a = 0.0,
           "schedule"_a = nb::none(), "clip_norm"_a = 0.0);
  nb::class_<sg::Adam, sg::Optimizer>(
      m, "Adam", "Adam as PyTorch (weight decay added to the gradient, L2).")
      .def("__init__",
           [](sg::Adam* self, double lr, double beta1, double beta2, double eps, double wd,
              std::optional<sg::Schedule> s, double clip) {
             as_input_error([&] {
               new (self) sg::Adam(lr, beta1, beta2, eps, wd, schedule_or_constant(s));
               self->set_clip_norm(clip);
             });
           },
           "lr"_a = 1e-3, "beta1"_a = 0.9, "beta2"_a = 0.999, "eps"_a = 1e-8, "weight_decay"_a = 0.0,
           "schedule"_a = nb::none(), "clip_norm"_a = 0.0);
  nb::class_<sg::AdamW, sg::Adam>(
      m, "AdamW", "AdamW as PyTorch (decoupled weight decay: p *= 1 - lr*wd).")
      .def("__init__",
           [](sg::AdamW* self, double lr, double beta1, double beta2, double eps, double wd,
              std::optional<sg::Schedule> s, double clip) {
             as_input_error([&] {
               new (self) sg::AdamW(lr, beta1, beta2, eps, wd, schedule_or_constant(s));
               self->set_clip_norm(clip);
             });
           },
           "lr"_a = 1e-3, "beta1"_a = 0.9, "beta2"_a = 0.999, "eps"_a = 1e-8, "weight_decay"_a = 1e-2,
           "schedule"_a = nb::none(), "clip_norm"_a = 0.0);
  nb::class_<sg::Lion, sg::Optimizer>(
      m, "Lion",
      "Lion (Chen et al. 2023) as lion-pytorch: c = beta1 m + (1 - beta1) g; p *= 1 - lr*wd; "
      "p -= lr sign(c); m = beta2 m + (1 - beta2) g. Use a learning rate 3-10x smaller than AdamW's "
      "and a larger weight decay. Written as a user-defined update rule (docs/extending.md).")
      .def("__init__",
           [](sg::Lion* self, double lr, double beta1, double beta2, double wd, std::optional<sg::Schedule> s,
              double clip) {
             as_input_error([&] {
               new (self) sg::Lion(lr, beta1, beta2, wd, schedule_or_constant(s));
               self->set_clip_norm(clip);
             });
           },
           "lr"_a = 1e-4, "beta1"_a = 0.9, "beta2"_a = 0.99, "weight_decay"_a = 0.0, "schedule"_a = nb::none(),
           "clip_norm"_a = 0.0);

  // ---- timing ----
  nb::class_<PyTimer>(
      m, "Timer",
      "Times a region: CUDA events on `stream` when one is given (an int cudaStream_t, 0 for "
      "the legacy default stream, or a torch/cupy stream object), else the host clock. "
      "ms() ends the region (waiting for the stream) and returns its length in milliseconds. "
      "As a context manager it restarts on entry and sets .elapsed_ms on exit.")
      .def("__init__", [](PyTimer* self, nb::handle stream) {
             void* s = stream_arg(stream, false);
             new (self) PyTimer(s);
             self->t.restart();
           },
           "stream"_a = nb::none())
      .def("restart", [](PyTimer& t) { t.t.restart(); }, "Starts the region now.")
      .def("ms", [](PyTimer& t) {
             nb::gil_scoped_release r;
             return t.t.ms();
           },
           "Ends the region and returns its length in milliseconds.")
      .def_ro("elapsed_ms", &PyTimer::elapsed_ms, "The length of the last `with` region, in milliseconds.")
      .def("__enter__", [](PyTimer& t) -> PyTimer& {
             t.t.restart();
             return t;
           },
           nb::rv_policy::reference)
      .def("__exit__", [](PyTimer& t, nb::args) {
             nb::gil_scoped_release r;
             t.elapsed_ms = t.t.ms();
             return false;
           });

  nb::class_<sg::StepGraph>(
      m, "StepGraph",
      "The seed's graph object: record work once on a CUDA stream, replay it with one launch.\n"
      "  g = StepGraph(stream)            # None: a private non-blocking stream\n"
      "  g.capture((64, 128), fn)         # fn(stream: int) enqueues the work\n"
      "  g.launch()\n"
      "capture() skips when already captured for the same shape key; another key re-records. "
      "Without CUDA every method raises stepgraph.Error('CUDA feature not enabled').")
      .def("__init__", [](sg::StepGraph* self, nb::handle stream) {
             new (self) sg::StepGraph(stream_arg(stream, true));
           },
           "stream"_a = nb::none())
      .def("capture",
           [](sg::StepGraph& g, const sg::Shape& key, nb::callable fn) {
             g.capture(key, [&](void* stream) { fn(reinterpret_cast<uintptr_t>(stream)); });
           },
           "key"_a, "fn"_a, "Records fn(stream) once for this shape key.")
      .def("launch", [](sg::StepGraph& g) {
             nb::gil_scoped_release r;
             g.launch();
           },
           "Replays the recorded work.")
      .def("invalidate", &sg::StepGraph::invalidate, "Drops the recording.")
      .def_prop_ro("launch_count", &sg::StepGraph::launch_count)
      .def_prop_ro("is_captured", &sg::StepGraph::is_captured)
      .def_prop_ro("input_shape", [](const sg::StepGraph& g) { return shape_tuple(g.input_shape()); })
      .def_prop_ro("num_nodes", &sg::StepGraph::num_nodes)
      .def_prop_ro("stream", [](const sg::StepGraph& g) { return reinterpret_cast<uintptr_t>(g.stream()); },
                   "The cudaStream_t it captures on and launches into, as an int.");

  bind_model(m);
  bind_custom_ops(m);
  bind_trainer(m);
  bind_problem(m);
  bind_run(m);
}
