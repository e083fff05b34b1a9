// Shared pieces of the Python bindings: the exception types, the array conversions (numpy and
// DLPack in, numpy and DLPack views out) and the Python-side Trainer wrapper.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/pinn.h"
#include "stepgraph/trainer.h"

namespace sgpy {

namespace nb = nanobind;

// Bad input detected by the bindings (wrong dtype, shape, device, unknown option string):
// raised as stepgraph.InputError, a subclass of both stepgraph.Error and ValueError.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `f`, turning an sg::Error into an InputError with the same message: for calls whose only
// failure mode is a bad argument (parsing option strings, constructor argument checks).
template <class F>
auto as_input_error(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const sg::Error& e) {
    throw InputError(e.what());
  }
}

// The name of an object's type ("ndarray", "Tensor", "list").
inline std::string py_type_name(nb::handle h) {
  nb::object n = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr())), "__name__"));
  if (!n.is_valid()) {
    PyErr_Clear();
    return "?";
  }
  return nb::cast<std::string>(n);
}

// str(obj).
inline std::string py_str(nb::handle h) {
  nb::object s = nb::steal(PyObject_Str(h.ptr()));
  if (!s.is_valid()) throw nb::python_error();
  return nb::cast<std::string>(s);
}

// ---- arrays in ---------------------------------------------------------------------------------

constexpr uint8_t kInt = static_cast<uint8_t>(nb::dlpack::dtype_code::Int);
constexpr uint8_t kFloat = static_cast<uint8_t>(nb::dlpack::dtype_code::Float);

// An array-like argument imported through DLPack (or the buffer protocol / numpy.asarray).
struct Imported {
  nb::object source;                // keeps the producer (or a converted copy) alive
  nb::ndarray<nb::ro> array;
  bool on_device = false;           // CUDA memory (kDLCUDA / kDLCUDAManaged)
  int device_id = 0;

  std::string dtype() const;        // numpy-style name: "float32", "int64", ...
  std::string shape() const;        // "[64, 16]"
  std::string where() const;        // "cpu" or "cuda:0"
  std::string describe() const;     // "float64 [64, 16] on cpu"
  int64_t dim(size_t i) const { return static_cast<int64_t>(array.shape(i)); }
  size_t ndim() const { return array.ndim(); }
  bool c_contiguous() const;
  bool is_float() const;
  bool is_integer() const;          // signed or unsigned integers (not bool)
  bool is(uint8_t code, uint8_t bits) const;
};

// Imports `obj` (a numpy array, any object with __dlpack__, or anything numpy.asarray accepts).
// `what` names the argument in errors ("X", "y", "set_params['0.weight']").
Imported import_array(nb::handle obj, const std::string& what);

// Host copies with conversion (any strides): float32/float64 → f32; integers → i32 (range
// checked). Raise InputError naming `what`, the expected and the given dtype.
sg::HostArray host_f32(const Imported& a, const std::string& what);
// allow_none: -1 is accepted (a sequence position without a target).
sg::HostArray host_labels(const Imported& a, const std::string& what, int64_t classes, bool allow_none = false);

// ---- arrays out --------------------------------------------------------------------------------

nb::dlpack::dtype dlpack_dtype(sg::DType t);
// A numpy array owning `a` (no copy).
nb::object to_numpy(sg::HostArray a);
// A zero-copy view of `bytes` at `ptr`, owned by `owner`: a numpy array for host memory, a
// DLPack-capable nanobind ndarray for CUDA memory.
nb::object make_view(void* ptr, const sg::Shape& shape, sg::DType dtype, bool cuda, int device_id,
                     nb::handle owner);

// A tuple of ints from a shape.
inline nb::tuple shape_tuple(const sg::Shape& s) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(s.size()));
  if (!t) throw nb::python_error();
  for (size_t i = 0; i < s.size(); ++i) PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), PyLong_FromLongLong(s[i]));
  return nb::steal<nb::tuple>(t);
}

// ---- CUDA helpers (no-ops without CUDA) ---------------------------------------------------------

int current_cuda_device();  // the calling thread's CUDA device (0 without CUDA)
void cuda_device_synchronize();

// ---- the trainer -------------------------------------------------------------------------------

struct PyTrainer {
  PyTrainer(sg::LayerPtr model, sg::LossPtr loss, sg::OptimizerPtr opt, sg::Device d, uint64_t seed,
            sg::TrainerOptions o)
      : owned(std::make_unique<sg::Trainer>(std::move(model), std::move(loss), std::move(opt), d, seed, o)), t(*owned) {}
  PyTrainer(sg::ModelPtr model, std::vector<sg::LossTerm> terms, sg::OptimizerPtr opt, sg::Device d, uint64_t seed,
            sg::TrainerOptions o)
      : owned(std::make_unique<sg::Trainer>(std::move(model), std::move(terms), std::move(opt), d, seed, o)),
        t(*owned) {}
  // One made elsewhere (a run's, a configuration's), on the calling thread's device.
  explicit PyTrainer(std::unique_ptr<sg::Trainer> made) : owned(std::move(made)), t(*owned) {
    cuda = t.backend().device() == sg::Device::CUDA;
    device_id = cuda ? current_cuda_device() : 0;
  }
  PyTrainer(const PyTrainer&) = delete;
  PyTrainer& operator=(const PyTrainer&) = delete;
  std::unique_ptr<sg::Trainer> owned;
  sg::Trainer& t;
  std::mutex mu;       // one call at a time: calls release the GIL while they run
  bool cuda = false;   // the backend is CUDA
  int device_id = 0;   // the CUDA device the backend was created on
  std::shared_ptr<const sg::pinn::Problem> problem;  // a physics-informed trainer's problem
};

// Runs f(trainer) with the GIL released and the trainer's mutex held.
template <class F>
auto locked(PyTrainer& s, F&& f) -> decltype(f(s.t)) {
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(s.mu);
  return f(s.t);
}

// The trainer's shared checks and conversions (trainer.cpp).
[[noreturn]] void not_compiled(const std::string& fn);
// A CUDA array for `fn`'s argument `what`: refused unless allowed and on the trainer's device.
void check_device(const PyTrainer& s, const Imported& a, const std::string& fn, const std::string& what,
                  bool allow_device);
std::vector<std::string> param_names(sg::Trainer& t);  // model order (none before compile)
// params() / state() as an ordered dict of numpy arrays: model order when known, else by name.
nb::dict to_dict(std::map<std::string, sg::HostArray> m, const std::vector<std::string>& order);

void bind_model(nb::module_& m);
void bind_custom_ops(nb::module_& m);  // custom_op.cpp: stepgraph.CustomOp's registry entries
void bind_trainer(nb::module_& m);
// Trainer.params, set_params, state, save, load, load_weights, export, torch_module and the
// exporters' _inference_graph (trainer_weights.cpp).
void bind_trainer_weights(nb::module_& m, nb::class_<PyTrainer>& cls);
void bind_problem(nb::module_& m);  // problem.cpp: stepgraph.pinn.Problem's checks, coefficients, rel_l2_error
// A trainer for the physics-informed problem given as the config's JSON `problem` section (the
// text of stepgraph.pinn.Problem), compiled.
void new_problem_trainer(PyTrainer* self, sg::LayerPtr model, const std::string& problem_json, sg::OptimizerPtr opt,
                         sg::Device d, uint64_t seed, sg::TrainerOptions o);

// Graph models (model.cpp): the losses by output from {'u': loss, 'v': (loss, weight)}, batches
// as dicts of host arrays by name, and arrays by name back as a dict of numpy arrays.
std::vector<sg::LossTerm> loss_terms_of(nb::handle losses, const sg::Model& model);
sg::NamedArrays named_arrays(nb::handle arrays, const std::string& what);  // host arrays only
// A training batch by name (named_batch.cpp): host arrays, or CUDA tensors kept alive for a
// device-to-device copy; feed_named makes it the trainer's current batch (with the GIL released).
struct NamedBatch {
  bool device = false;
  sg::NamedArrays host_inputs, host_targets;
  std::vector<Imported> keep;
  sg::NamedDeviceArrays device_inputs, device_targets;
};
NamedBatch named_batch(const PyTrainer& s, nb::handle X, nb::handle y, const std::string& fn);
void feed_named(sg::Trainer& t, const NamedBatch& b);
nb::dict to_dict(sg::NamedArrays arrays);
void bind_run(nb::module_& m);
// The Trainer's keyword options (trainer_options.cpp): parsed (an sg::Error on a bad one), as
// repr shows them, and as Trainer.options returns them.
sg::TrainerOptions trainer_options(const std::string& mode, const std::string& shape_policy, int max_shapes,
                                   const std::string& autotune, const std::string& precision,
                                   const std::string& attention, bool deterministic, bool fusion, bool concurrent,
                                   const std::string& plan_cache, const std::string& on_nan);
std::string options_repr(const sg::TrainerOptions& o);
nb::dict options_dict(const sg::TrainerOptions& o);

}  // namespace sgpy
