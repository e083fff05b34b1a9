// Model graphs from Python: Input, layers called on symbolic tensors, operators and tensor ops,
// Model; and what a Trainer of a graph model takes (a loss per output, batches as dicts).
#include <nanobind/operators.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <climits>

#include "common.h"

namespace sgpy {

namespace {

using namespace nb::literals;

sg::Shape shape_of(nb::handle h, const std::string& what) {
  if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h)};
  sg::Shape s;
  try {
    for (nb::handle d : h) s.push_back(nb::cast<int64_t>(d));
  } catch (const std::exception&) {
    throw InputError(what + ": expected an int or a tuple of ints, got " + py_type_name(h));
  }
  return s;
}

// x[:, a:b] (or x[:, :, a:b]): one sliced feature axis, every other axis whole.
sg::SymbolicTensor getitem(const sg::SymbolicTensor& x, nb::handle key) {
  std::vector<nb::handle> parts;
  if (nb::isinstance<nb::tuple>(key)) {
    for (nb::handle k : key) parts.push_back(k);
  } else {
    parts.push_back(key);
  }
  const int rank = static_cast<int>(x.shape().size()) + 1;
  const std::string usage = "index a symbolic tensor as x[:, a:b] (the batch axis whole, one feature axis sliced)";
  int axis = -1;
  int64_t begin = 0, end = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!nb::isinstance<nb::slice>(parts[i])) throw InputError("'" + x.name() + "'[...]: " + usage);
    const int64_t n = i == 0 ? 0 : (static_cast<int>(i) < rank ? x.shape()[i - 1] : 0);
    if (static_cast<int>(i) >= rank) throw InputError(sg::cat("'", x.name(), "'[...]: more axes than its rank ", rank));
    nb::object start = parts[i].attr("start"), stop = parts[i].attr("stop"), step = parts[i].attr("step");
    if (!step.is_none() && nb::cast<int64_t>(step) != 1)
      throw InputError("'" + x.name() + "'[...]: slices with a step are not supported");
    if (start.is_none() && stop.is_none()) continue;
    if (i == 0) throw InputError("'" + x.name() + "'[...]: the batch axis cannot be sliced; " + usage);
    if (axis >= 0) throw InputError("'" + x.name() + "'[...]: one feature axis at a time; " + usage);
    axis = static_cast<int>(i);
    begin = start.is_none() ? 0 : nb::cast<int64_t>(start);
    end = stop.is_none() ? n : nb::cast<int64_t>(stop);
    if (begin < 0) begin += n;
    if (end < 0) end += n;
  }
  if (axis < 0) return x;
  return as_input_error([&] { return x.slice(axis, begin, end); });
}

}  // namespace

std::vector<sg::LossTerm> loss_terms_of(nb::handle losses, const sg::Model& model) {
  if (!nb::isinstance<nb::dict>(losses))
    throw InputError("Trainer: a model with outputs " + sg::joined(model.output_names()) +
                     " takes its losses as a dict by output name: {'u': MeanSquaredError(), 'v': (MeanSquaredError(), 0.5)}");
  std::vector<sg::LossTerm> terms;
  for (auto [k, v] : nb::cast<nb::dict>(losses)) {
    sg::LossTerm t;
    t.output = nb::cast<std::string>(k);
    nb::handle loss = v;
    if (nb::isinstance<nb::tuple>(v)) {
      nb::tuple tup = nb::cast<nb::tuple>(v);
      if (tup.size() != 2) throw InputError("Trainer: loss '" + t.output + "': expected a loss or (loss, weight)");
      loss = tup[0];
      t.weight = nb::cast<double>(tup[1]);
    }
    nb::object user_loss;  // a stepgraph.CustomLoss: its registered engine loss
    if (nb::hasattr(loss, "_stepgraph_loss")) loss = user_loss = loss.attr("_stepgraph_loss");
    if (!nb::isinstance<sg::Loss>(loss))
      throw InputError("Trainer: loss '" + t.output + "': expected a stepgraph loss, got " + py_type_name(loss));
    t.loss = nb::cast<sg::LossPtr>(loss);
    terms.push_back(std::move(t));
  }
  return terms;
}

nb::dict to_dict(sg::NamedArrays arrays) {
  nb::dict d;
  for (auto& [name, a] : arrays) d[name.c_str()] = to_numpy(std::move(a));
  return d;
}

void bind_model(nb::module_& m) {
  nb::class_<sg::SymbolicTensor>(
      m, "SymbolicTensor",
      "One output of a model-graph node (Input, a layer called on a tensor, an op). Its shape is per "
      "sample (no batch axis) and known when it is made. Operators + - * / between symbolic tensors "
      "broadcast per axis (equal sizes, or one of them 1; the same rank); with numbers they scale and "
      "shift. x[:, a:b] slices a feature axis.")
      .def_prop_ro("shape", [](const sg::SymbolicTensor& t) { return shape_tuple(t.shape()); }, "Per sample.")
      .def_prop_ro("name", &sg::SymbolicTensor::name, "The node's name, or its kind when it has none.")
      .def("sum", [](const sg::SymbolicTensor& t, int axis, bool keepdims) {
             return as_input_error([&] { return t.sum(axis, keepdims); });
           }, "axis"_a = -1, "keepdims"_a = false, "The sum over a feature axis.")
      .def("mean", [](const sg::SymbolicTensor& t, int axis, bool keepdims) {
             return as_input_error([&] { return t.mean(axis, keepdims); });
           }, "axis"_a = -1, "keepdims"_a = false, "The mean over a feature axis.")
      .def("transpose", [](const sg::SymbolicTensor& t, int a, int b) {
             return as_input_error([&] { return t.transpose(a, b); });
           }, "axis_a"_a = -2, "axis_b"_a = -1, "Two feature axes swapped.")
      .def("reshape", [](const sg::SymbolicTensor& t, nb::handle shape) {
             return as_input_error([&] { return t.reshape(shape_of(shape, "reshape of '" + t.name() + "': shape")); });
           }, "shape"_a, "The same values per sample in another shape (row-major; one size may be -1: inferred).")
      .def("__matmul__", [](const sg::SymbolicTensor& a, const sg::SymbolicTensor& b) {
             return as_input_error([&] { return sg::matmul(a, b); });
           })
      .def("__getitem__", &getitem)
      .def("__add__", [](const sg::SymbolicTensor& a, const sg::SymbolicTensor& b) { return as_input_error([&] { return a + b; }); })
      .def("__sub__", [](const sg::SymbolicTensor& a, const sg::SymbolicTensor& b) { return as_input_error([&] { return a - b; }); })
      .def("__mul__", [](const sg::SymbolicTensor& a, const sg::SymbolicTensor& b) { return as_input_error([&] { return a * b; }); })
      .def("__truediv__", [](const sg::SymbolicTensor& a, const sg::SymbolicTensor& b) { return as_input_error([&] { return a / b; }); })
      .def("__add__", [](const sg::SymbolicTensor& a, double c) { return a + c; })
      .def("__radd__", [](const sg::SymbolicTensor& a, double c) { return c + a; })
      .def("__sub__", [](const sg::SymbolicTensor& a, double c) { return a - c; })
      .def("__rsub__", [](const sg::SymbolicTensor& a, double c) { return c - a; })
      .def("__mul__", [](const sg::SymbolicTensor& a, double c) { return a * c; })
      .def("__rmul__", [](const sg::SymbolicTensor& a, double c) { return c * a; })
      .def("__truediv__", [](const sg::SymbolicTensor& a, double c) { return as_input_error([&] { return a / c; }); })
      .def("__neg__", [](const sg::SymbolicTensor& a) { return -a; })
      .def("__repr__", [](const sg::SymbolicTensor& t) {
        return sg::cat("SymbolicTensor(", t.name(), ", shape=", sg::shape_str(t.shape()), ")");
      });

  m.def("Input", [](nb::handle shape, const std::string& name, const std::string& dtype) {
          if (dtype != "float32" && dtype != "int32")
            throw InputError("Input '" + name + "': dtype must be 'float32' or 'int32' (token ids), got '" + dtype + "'");
          return as_input_error([&] {
            return sg::Input(shape_of(shape, "Input '" + name + "': shape"), name,
                             dtype == "int32" ? sg::DType::I32 : sg::DType::F32);
          });
        },
        "shape"_a, "name"_a, "dtype"_a = "float32",
        "A model input: its per-sample shape (an int or a tuple: 3, or (8, 8, 1) for NHWC images) and "
        "its name (the key of its array in batches).");
  m.def("concat", [](const std::vector<sg::SymbolicTensor>& xs, int axis, const std::string& name) {
          return as_input_error([&] { return sg::concat(xs, axis, name); });
        },
        "tensors"_a, "axis"_a = -1, "name"_a = "", "Joins tensors along a feature axis.");
  m.def("split", [](const sg::SymbolicTensor& x, const std::vector<int64_t>& sizes, int axis, const std::string& name) {
          return as_input_error([&] { return sg::split(x, sizes, axis, name); });
        },
        "x"_a, "sizes"_a, "axis"_a = -1, "name"_a = "", "Pieces of the given sizes along a feature axis.");
  m.def("activation",
        [](const sg::SymbolicTensor& x, const std::string& act, double negative_slope, double alpha,
           const std::string& name) {
          return as_input_error([&] {
            sg::ActivationAttrs a;
            a.act = sg::parse_activation(act);
            a.negative_slope = negative_slope;
            a.alpha = alpha;
            return sg::activation(x, a, name);
          });
        },
        "x"_a, "activation"_a, "negative_slope"_a = 0.01, "alpha"_a = 1.0, "name"_a = "",
        "A standalone activation (any of Dense's; leaky_relu's slope, elu's alpha).");
  m.def("matmul", [](const sg::SymbolicTensor& a, const sg::SymbolicTensor& b, bool transpose_a, bool transpose_b,
                     const std::string& name) {
          return as_input_error([&] { return sg::matmul(a, b, transpose_a, transpose_b, name); });
        },
        "a"_a, "b"_a, "transpose_a"_a = false, "transpose_b"_a = false, "name"_a = "",
        "Batched matrix products: per sample a [..., M, K] times b [..., K, N] (the same leading axes), "
        "either operand transposed over its last two axes (a @ b is matmul(a, b)).");
  m.def("named", [](const sg::SymbolicTensor& x, const std::string& name) {
          return as_input_error([&] { return sg::named(x, name); });
        },
        "x"_a, "name"_a, "The op's result under a name (for explain, errors and describe).");

  nb::class_<sg::Model, sg::Layer>(
      m, "Model",
      "A model graph from its inputs to named outputs:\n"
      "  model = Model(inputs=[x1, x2], outputs={'u': u, 'v': v})\n"
      "outputs may also be one tensor (named 'output'). A model of one input and one output is also a "
      "layer (Sequential, Trainer with one loss and array batches); with several, a Trainer takes a "
      "dict of losses by output and batches as dicts by name.")
      .def("__init__",
           [](sg::Model* self, const std::vector<sg::SymbolicTensor>& inputs, nb::handle outputs) {
             std::vector<std::pair<std::string, sg::SymbolicTensor>> outs;
             if (nb::isinstance<sg::SymbolicTensor>(outputs)) {
               outs.emplace_back("output", nb::cast<sg::SymbolicTensor>(outputs));
             } else if (nb::isinstance<nb::dict>(outputs)) {
               for (auto [k, v] : nb::cast<nb::dict>(outputs)) {
                 if (!nb::isinstance<sg::SymbolicTensor>(v))
                   throw InputError("Model: output '" + nb::cast<std::string>(k) + "' is not a symbolic tensor but " +
                                    py_type_name(v));
                 outs.emplace_back(nb::cast<std::string>(k), nb::cast<sg::SymbolicTensor>(v));
               }
             } else {
               throw InputError("Model: outputs must be a symbolic tensor or a dict of them by name, got " +
                                py_type_name(outputs));
             }
             as_input_error([&] { new (self) sg::Model(inputs, std::move(outs)); });
           },
           "inputs"_a, "outputs"_a)
      .def_prop_ro("input_names", &sg::Model::input_names)
      .def_prop_ro("output_names", &sg::Model::output_names)
      .def("input_shape", [](const sg::Model& mo, const std::string& n) { return shape_tuple(mo.input_shape(n)); }, "name"_a)
      .def("output_shape", [](const sg::Model& mo, const std::string& n) { return shape_tuple(mo.output_shape(n)); }, "name"_a)
      .def_prop_ro("warnings", &sg::Model::warnings, "What is legal but probably a mistake (an unused input).");
}

}  // namespace sgpy
