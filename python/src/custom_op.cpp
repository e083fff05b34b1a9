// User-defined ops written in Python (stepgraph.CustomOp): a registry entry whose kernels call the
// object's output_shapes / forward / backward with views of the plan's buffers: writable numpy
// arrays on the CPU backend, DLPack-capable device views and the cudaStream_t on CUDA. On CUDA
// they run at warm-up and capture only; replays re-run the kernels they launched.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "stepgraph/custom_loss.h"
#include "stepgraph/custom_op.h"
#include "stepgraph/custom_optimizer.h"

namespace sgpy {

namespace {

using namespace nb::literals;

// The Python object stays alive for the process: registry entries are never removed, and
// dropping the reference at exit would run after the interpreter is gone.
struct PyOp {
  PyObject* obj;
  std::string name;  // the op's name in errors ("cube1")
};

sg::Shape shape_from(nb::handle h, const std::string& where) {
  if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h)};
  sg::Shape s;
  try {
    for (nb::handle d : h) s.push_back(nb::cast<int64_t>(d));
  } catch (const std::exception&) {
    throw sg::Error(where + ": output_shapes must return a list of shapes (tuples of ints), got an item of type " +
                    py_type_name(h));
  }
  return s;
}

// Runs f with the GIL held; a Python exception comes back as an sg::Error with its type and text.
template <class F>
void with_python(const PyOp& op, const char* method, F&& f) {
  std::string failure;
  {
    nb::gil_scoped_acquire gil;
    try {
      f(nb::handle(op.obj));
    } catch (nb::python_error& e) {
      failure = sg::cat(op.name, ".", method, " raised ", py_type_name(e.value()), ": ", py_str(e.value()));
    } catch (const sg::Error& e) {
      failure = sg::cat(op.name, ".", method, ": ", e.what());
    } catch (const std::exception& e) {
      failure = sg::cat(op.name, ".", method, ": ", e.what());
    }
  }
  if (!failure.empty()) throw sg::Error(failure);
}

// A view of the plan's buffer, valid during the call: without an owner nanobind would copy it,
// so the reference policy keeps it a view (writes reach the buffer).
nb::object device_view(float* ptr, const sg::Shape& shape, bool cuda, int device) {
  std::vector<size_t> s(shape.begin(), shape.end());
  if (!cuda)
    return nb::ndarray<nb::numpy, float>(ptr, s.size(), s.data(), nb::handle()).cast(nb::rv_policy::reference);
  return nb::ndarray<float>(ptr, s.size(), s.data(), nb::handle(), nullptr, nb::dtype<float>(), nb::device::cuda::value,
                            device)
      .cast(nb::rv_policy::reference);
}

nb::list views(const std::vector<float*>& ptrs, const std::vector<sg::Shape>& shapes, size_t from, size_t n, bool cuda,
               int device) {
  nb::list l;
  for (size_t i = from; i < from + n; ++i) {
    if (!ptrs[i]) l.append(nb::none());
    else l.append(device_view(ptrs[i], shapes[i], cuda, device));
  }
  return l;
}

// Calls forward(inputs, outputs, stream) or, for the backward,
// backward(grad_outputs, inputs, outputs, grad_inputs, stream) on views of a's buffers.
void call_kernel(const PyOp& op, bool backward, bool cuda, const sg::CustomOpArgs& a) {
  with_python(op, backward ? "backward" : "forward", [&](nb::handle self) {
    const int device = cuda ? current_cuda_device() : 0;
    std::vector<float*> in(a.in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = const_cast<float*>(a.in[i]);
    nb::object stream = nb::none();
    if (cuda) stream = nb::int_(reinterpret_cast<uintptr_t>(a.stream));
    if (!backward) {
      self.attr("forward")(views(in, a.in_shapes, 0, in.size(), cuda, device),
                           views(a.out, a.out_shapes, 0, a.out.size(), cuda, device), stream);
      return;
    }
    // The backward's inputs are (dY..., X..., Y...) and its outputs one dX per X.
    const size_t nx = a.out.size(), ny = (in.size() - nx) / 2;
    self.attr("backward")(views(in, a.in_shapes, 0, ny, cuda, device), views(in, a.in_shapes, ny, nx, cuda, device),
                          views(in, a.in_shapes, ny + nx, ny, cuda, device),
                          views(a.out, a.out_shapes, 0, nx, cuda, device), stream);
  });
}

// Registers `obj` (a stepgraph.CustomOp) under a fresh registry name made from `name` ("Cube",
// then "Cube-2", ...); returns that name.
std::string register_python_op(nb::handle obj, const std::string& name, bool has_backward) {
  std::string key = name;
  for (int k = 2; sg::is_registered_op(key); ++k) key = sg::cat(name, "-", k);
  Py_INCREF(obj.ptr());
  auto op = std::make_shared<const PyOp>(PyOp{obj.ptr(), name});
  sg::CustomOpDef d;
  d.name = key;
  d.output_shapes = [op](const std::vector<sg::Shape>& in) {
    std::vector<sg::Shape> out;
    with_python(*op, "output_shapes", [&](nb::handle self) {
      nb::list args;
      for (const sg::Shape& s : in) args.append(shape_tuple(s));
      nb::object r = self.attr("output_shapes")(*nb::tuple(args));
      // One shape given bare ((4,) or 4) rather than in a list.
      if (nb::isinstance<nb::int_>(r) || (nb::isinstance<nb::tuple>(r) && nb::len(r) > 0 && nb::isinstance<nb::int_>(r[0])))
        r = nb::make_tuple(r);
      for (nb::handle h : r) out.push_back(shape_from(h, op->name));
    });
    if (out.empty()) throw sg::Error(op->name + ": output_shapes returned no shapes");
    return out;
  };
  d.cpu = [op](const sg::CustomOpArgs& a) { call_kernel(*op, false, false, a); };
  d.cuda = [op](const sg::CustomOpArgs& a) { call_kernel(*op, false, true, a); };
  if (has_backward) {
    d.cpu_backward = [op](const sg::CustomOpArgs& a) { call_kernel(*op, true, false, a); };
    d.cuda_backward = [op](const sg::CustomOpArgs& a) { call_kernel(*op, true, true, a); };
  }
  sg::register_op(std::move(d));
  return key;
}

// A stepgraph.CustomLoss object as a registered user loss: forward(pred, target, valid_rows,
// loss, dpred, stream) on views of the step's buffers (valid_rows an int32 [1] view).
std::string register_python_loss(nb::handle obj, const std::string& name, bool has_target_shape) {
  std::string key = name;
  for (int k = 2; sg::is_registered_loss(key); ++k) key = sg::cat(name, "-", k);
  Py_INCREF(obj.ptr());
  auto op = std::make_shared<const PyOp>(PyOp{obj.ptr(), name});
  auto kernel = [op](bool cuda) {
    return [op, cuda](const sg::LossArgs& a) {
      with_python(*op, "forward", [&](nb::handle self) {
        const int device = cuda ? current_cuda_device() : 0;
        nb::object valid = nb::none();
        if (a.valid_rows) {
          size_t one = 1;
          auto* v = const_cast<int32_t*>(a.valid_rows);
          if (cuda)
            valid = nb::ndarray<int32_t>(v, 1, &one, nb::handle(), nullptr, nb::dtype<int32_t>(), nb::device::cuda::value,
                                         device)
                        .cast(nb::rv_policy::reference);
          else
            valid = nb::ndarray<nb::numpy, int32_t>(v, 1, &one, nb::handle()).cast(nb::rv_policy::reference);
        }
        self.attr("forward")(device_view(const_cast<float*>(a.pred), a.pred_shape, cuda, device),
                             device_view(const_cast<float*>(a.target), a.target_shape, cuda, device), valid,
                             device_view(a.loss, {1}, cuda, device), device_view(a.dpred, a.pred_shape, cuda, device),
                             cuda ? nb::object(nb::int_(reinterpret_cast<uintptr_t>(a.stream))) : nb::none());
      });
    };
  };
  sg::CustomLossDef d;
  d.name = key;
  d.cpu = kernel(false);
  d.cuda = kernel(true);
  if (has_target_shape)
    d.target_shape = [op](const sg::Shape& pred) {
      sg::Shape out;
      with_python(*op, "target_shape", [&](nb::handle self) {
        out = shape_from(self.attr("target_shape")(shape_tuple(pred)), op->name);
      });
      return out;
    };
  sg::register_loss(std::move(d));
  return key;
}

// A stepgraph.CustomOptimizer object as a registered update rule: update(params, grads, states,
// hyper, sched, stream) on views of every parameter, its gradient and its states.
std::string register_python_rule(nb::handle obj, const std::string& name,
                                 const std::vector<std::pair<std::string, double>>& state) {
  std::string key = name;
  for (int k = 2; sg::is_registered_update_rule(key); ++k) key = sg::cat(name, "-", k);
  Py_INCREF(obj.ptr());
  auto op = std::make_shared<const PyOp>(PyOp{obj.ptr(), name});
  auto kernel = [op](bool cuda) {
    return [op, cuda](const sg::UpdateArgs& a) {
      with_python(*op, "update", [&](nb::handle self) {
        const int device = cuda ? current_cuda_device() : 0;
        nb::list params, grads, states;
        for (const sg::UpdateTensor& t : a.tensors) {
          params.append(device_view(t.param, {t.size}, cuda, device));
          grads.append(device_view(const_cast<float*>(t.grad), {t.size}, cuda, device));
          nb::list st;
          for (float* s : t.state) st.append(device_view(s, {t.size}, cuda, device));
          states.append(st);
        }
        self.attr("update")(params, grads, states, device_view(const_cast<float*>(a.hyper), {sg::hyper::kSize}, cuda, device),
                            device_view(const_cast<float*>(a.sched), {sg::sched::kSize}, cuda, device),
                            cuda ? nb::object(nb::int_(reinterpret_cast<uintptr_t>(a.stream))) : nb::none());
      });
    };
  };
  sg::UpdateRuleDef d;
  d.name = key;
  for (const auto& [n, v] : state) d.state.push_back({n, v});
  d.cpu = kernel(false);
  d.cuda = kernel(true);
  sg::register_update_rule(std::move(d));
  return key;
}

}  // namespace

void bind_custom_ops(nb::module_& m) {
  nb::class_<sg::CustomOptimizer, sg::Optimizer>(m, "_RegisteredOptimizer",
                                                 "A registered update rule as an optimizer (stepgraph.CustomOptimizer makes one).")
      .def("__init__",
           [](sg::CustomOptimizer* self, const std::string& rule, double lr, double wd, std::optional<sg::Schedule> s,
              double clip, const std::string& label) {
             as_input_error([&] {
               new (self) sg::CustomOptimizer(rule, lr, wd, s ? *s : sg::Schedule{}, {}, label);
               self->set_clip_norm(clip);
             });
           },
           "rule"_a, "lr"_a, "weight_decay"_a = 0.0, "schedule"_a = nb::none(), "clip_norm"_a = 0.0, "label"_a = "");
  m.def("_register_python_rule",
        [](nb::handle obj, const std::string& name, const std::vector<std::pair<std::string, double>>& state) {
          return as_input_error([&] { return register_python_rule(obj, name, state); });
        },
        "optimizer"_a, "name"_a, "state"_a,
        "Registers a stepgraph.CustomOptimizer object's update rule; returns its registry name.");
  nb::class_<sg::CustomLoss, sg::Loss>(m, "_RegisteredLoss", "A registered user-defined loss (stepgraph.CustomLoss makes one).")
      .def("__init__",
           [](sg::CustomLoss* self, const std::string& name, const std::string& label) {
             as_input_error([&] { new (self) sg::CustomLoss(name, label); });
           },
           "name"_a, "label"_a = "");
  m.def("_register_python_loss",
        [](nb::handle obj, const std::string& name, bool has_target_shape) {
          return as_input_error([&] { return register_python_loss(obj, name, has_target_shape); });
        },
        "loss"_a, "name"_a, "has_target_shape"_a,
        "Registers a stepgraph.CustomLoss object as a user-defined loss; returns its registry name.");
  m.def("_infer_grad_scale",
        [](const sg::Loss& loss, nb::handle pred_shape) {
          sg::Shape s;
          for (nb::handle d : pred_shape) s.push_back(nb::cast<int64_t>(d));
          const sg::GradScale g = as_input_error([&] { return sg::infer_grad_scale(loss, s); });
          return nb::make_tuple(g.scale, sg::reduction_name(g.reduction));
        },
        "loss"_a, "pred_shape"_a, "(scale, 'mean' | 'sum') of a loss for predictions of pred_shape (stepgraph.infer_grad_scale).");
  m.def("_register_python_op",
        [](nb::handle obj, const std::string& name, bool has_backward) {
          return as_input_error([&] { return register_python_op(obj, name, has_backward); });
        },
        "op"_a, "name"_a, "has_backward"_a,
        "Registers a stepgraph.CustomOp object as a user-defined op; returns its registry name.");
  m.def("custom",
        [](const std::string& op, const std::vector<sg::SymbolicTensor>& inputs, const std::string& name) {
          return as_input_error([&] { return sg::custom(op, inputs, name); });
        },
        "op"_a, "inputs"_a, "name"_a = "",
        "A registered user-defined op applied to symbolic tensors: one tensor per output.");
  m.def("custom_layer",
        [](const std::string& op, const std::string& name) {
          return as_input_error([&] { return sg::custom_layer(op, name); });
        },
        "op"_a, "name"_a = "", "A registered user-defined op of one input and one output as a layer.");
}

}  // namespace sgpy
