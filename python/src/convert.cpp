// Arrays in and out: DLPack / numpy import with checks, host copies with dtype conversion,
// numpy arrays owning a HostArray, zero-copy views of device memory.
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "common.h"

#ifdef STEPGRAPH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sgpy {

namespace {

using code = nb::dlpack::dtype_code;

constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

std::string dtype_name(nb::dlpack::dtype d) {
  std::string base;
  switch (static_cast<code>(d.code)) {
    case code::Int: base = "int"; break;
    case code::UInt: base = "uint"; break;
    case code::Float: base = "float"; break;
    case code::Bfloat: base = "bfloat"; break;
    case code::Complex: base = "complex"; break;
    case code::Bool: return "bool";
    default: return "dtype(code " + std::to_string(d.code) + ")";
  }
  std::string s = base + std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

const char* device_type_name(int t) {
  switch (t) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case 4: return "opencl";
    case 7: return "vulkan";
    case 8: return "metal";
    case 10: return "rocm";
    case 11: return "rocm_host";
    case kDLCUDAManaged: return "cuda_managed";
    case 14: return "oneapi";
    default: return "unknown";
  }
}

// Visits every element of `a` in C order (any strides), calling f(i, value as T).
template <class Src, class F>
void for_each_element(const Imported& a, F&& f) {
  const size_t nd = a.ndim();
  const char* base = static_cast<const char*>(a.array.data());
  std::vector<int64_t> shape(nd), stride(nd), idx(nd, 0);
  int64_t n = 1;
  for (size_t k = 0; k < nd; ++k) {
    shape[k] = a.dim(k);
    stride[k] = a.array.stride(k);
    n *= shape[k];
  }
  if (n == 0) return;
  if (a.c_contiguous()) {
    const Src* p = reinterpret_cast<const Src*>(base);
    for (int64_t i = 0; i < n; ++i) f(i, p[i]);
    return;
  }
  int64_t off = 0;  // in elements
  for (int64_t i = 0; i < n; ++i) {
    Src v;
    std::memcpy(&v, base + off * static_cast<int64_t>(sizeof(Src)), sizeof(Src));
    f(i, v);
    for (size_t k = nd; k-- > 0;) {  // advance the multi-index
      if (++idx[k] < shape[k]) {
        off += stride[k];
        break;
      }
      off -= stride[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
}

// Dispatches on the source dtype (integers, floats) and calls f(i, double-or-int64 value).
template <class F>
bool visit_numeric(const Imported& a, F&& f) {
  const auto d = a.array.dtype();
  if (d.lanes != 1) return false;
  switch (static_cast<code>(d.code)) {
    case code::Float:
      if (d.bits == 32) for_each_element<float>(a, f);
      else if (d.bits == 64) for_each_element<double>(a, f);
      else return false;
      return true;
    case code::Int:
      if (d.bits == 8) for_each_element<int8_t>(a, f);
      else if (d.bits == 16) for_each_element<int16_t>(a, f);
      else if (d.bits == 32) for_each_element<int32_t>(a, f);
      else if (d.bits == 64) for_each_element<int64_t>(a, f);
      else return false;
      return true;
    case code::UInt:
      if (d.bits == 8) for_each_element<uint8_t>(a, f);
      else if (d.bits == 16) for_each_element<uint16_t>(a, f);
      else if (d.bits == 32) for_each_element<uint32_t>(a, f);
      else if (d.bits == 64) for_each_element<uint64_t>(a, f);
      else return false;
      return true;
    default: return false;
  }
}

sg::Shape shape_of(const Imported& a) {
  sg::Shape s(a.ndim());
  for (size_t k = 0; k < a.ndim(); ++k) s[k] = a.dim(k);
  return s;
}

}  // namespace

// ---- Imported ------------------------------------------------------------------------------------

std::string Imported::dtype() const { return dtype_name(array.dtype()); }

std::string Imported::shape() const { return sg::shape_str(shape_of(*this)); }

std::string Imported::where() const {
  const int t = array.device_type();
  if (t == kDLCPU) return "cpu";
  return std::string(device_type_name(t)) + ":" + std::to_string(array.device_id());
}

std::string Imported::describe() const { return dtype() + " " + shape() + " on " + where(); }

bool Imported::c_contiguous() const {
  int64_t expect = 1;
  for (size_t k = ndim(); k-- > 0;) {
    if (dim(k) != 1 && array.stride(k) != expect) return false;
    expect *= dim(k);
  }
  return true;
}

bool Imported::is(uint8_t c, uint8_t bits) const {
  const auto d = array.dtype();
  return d.code == c && d.bits == bits && d.lanes == 1;
}

bool Imported::is_float() const {
  return array.dtype().code == static_cast<uint8_t>(code::Float);
}

bool Imported::is_integer() const {
  const uint8_t c = array.dtype().code;
  return c == static_cast<uint8_t>(code::Int) || c == static_cast<uint8_t>(code::UInt);
}

Imported import_array(nb::handle obj, const std::string& what) {
  Imported out;
  nb::ndarray<nb::ro> arr;
  nb::object src = nb::borrow(obj);
  bool ok = nb::try_cast(src, arr, false);
  if (!ok) {
    // nanobind swallows the producer's own error (e.g. PyTorch's "Can't export tensors that
    // require gradient"): call __dlpack__ ourselves so that message reaches the user.
    if (nb::hasattr(src, "__dlpack__")) {
      try {
        src.attr("__dlpack__")();
      } catch (nb::python_error& e) {
        throw InputError(what + ": the " + py_type_name(src) + " cannot be exported through DLPack: " +
                         e.what());
      }
      throw InputError(what + ": could not import the " + py_type_name(src) +
                       " through DLPack (its dtype or layout is not supported)");
    }
    // Lists, scalars, objects with __array__: through numpy.
    nb::object converted;
    try {
      converted = nb::module_::import_("numpy").attr("asarray")(src);
    } catch (nb::python_error& e) {
      throw InputError(what + ": expected a numpy array or a tensor with __dlpack__, got " +
                       py_type_name(src) + " (" + e.what() + ")");
    }
    if (!nb::try_cast(converted, arr, false)) {
      std::string dt = nb::hasattr(converted, "dtype") ? py_str(converted.attr("dtype")) : "?";
      throw InputError(what + ": expected a numpy array or a tensor with __dlpack__, got " +
                       py_type_name(src) + " (as numpy: dtype " + dt + ", which cannot be read)");
    }
    src = converted;
  }
  out.source = src;
  out.array = arr;
  const int t = arr.device_type();
  if (t == kDLCPU || t == kDLCUDAHost) {
    out.on_device = false;
  } else if (t == kDLCUDA || t == kDLCUDAManaged) {
    out.on_device = true;
    out.device_id = arr.device_id();
  } else {
    throw InputError(what + ": arrays on " + device_type_name(t) +
                     " devices are not supported (expected host memory or a CUDA tensor), got " +
                     out.describe());
  }
  return out;
}

sg::HostArray host_f32(const Imported& a, const std::string& what) {
  if (!(a.is(static_cast<uint8_t>(code::Float), 32) || a.is(static_cast<uint8_t>(code::Float), 64)))
    throw InputError(what + ": expected float32 (float64 is converted), got " + a.describe());
  sg::HostArray h(sg::DType::F32, shape_of(a));
  float* dst = h.data<float>();
  if (a.is(static_cast<uint8_t>(code::Float), 32) && a.c_contiguous()) {
    if (h.nbytes()) std::memcpy(dst, a.array.data(), h.nbytes());
  } else {
    visit_numeric(a, [&](int64_t i, auto v) { dst[i] = static_cast<float>(v); });
  }
  return h;
}

sg::HostArray host_labels(const Imported& a, const std::string& what, int64_t classes, bool allow_none) {
  if (!a.is_integer())
    throw InputError(what + ": expected integer class labels (int32, or int64 converted), got " +
                     a.describe());
  sg::HostArray h(sg::DType::I32, shape_of(a));
  int32_t* dst = h.data<int32_t>();
  const int64_t hi = classes > 0 ? classes : std::numeric_limits<int32_t>::max();
  bool bad = false;
  int64_t bad_row = 0;
  long long bad_value = 0;
  visit_numeric(a, [&](int64_t i, auto v) {
    using V = decltype(v);
    bool in_range;
    if constexpr (std::is_unsigned_v<V>) in_range = static_cast<uint64_t>(v) < static_cast<uint64_t>(hi);
    else in_range = static_cast<int64_t>(v) >= (allow_none ? -1 : 0) && static_cast<int64_t>(v) < hi;
    if (!in_range && !bad) {
      bad = true;
      bad_row = i;
      bad_value = static_cast<long long>(v);
    }
    dst[i] = in_range ? static_cast<int32_t>(v) : 0;
  });
  if (bad) {
    if (classes > 0)
      throw InputError(sg::cat(what, ": label ", bad_value, " at ", allow_none ? "index " : "row ", bad_row,
                               " is outside [", allow_none ? "-1" : "0", ", ", classes, ") for a model with ",
                               classes, " outputs"));
    throw InputError(sg::cat(what, ": label ", bad_value, " at row ", bad_row,
                             " is not a valid class index (expected 0 <= label < 2^31)"));
  }
  return h;
}

// ---- arrays out ----------------------------------------------------------------------------------

nb::dlpack::dtype dlpack_dtype(sg::DType t) {
  switch (t) {
    case sg::DType::F32: return nb::dtype<float>();
    case sg::DType::I32: return nb::dtype<int32_t>();
    case sg::DType::U64: return nb::dtype<uint64_t>();
  }
  return nb::dtype<float>();
}

nb::object to_numpy(sg::HostArray a) {
  auto* h = new sg::HostArray(std::move(a));
  nb::capsule owner(h, [](void* p) noexcept { delete static_cast<sg::HostArray*>(p); });
  std::vector<size_t> shape(h->shape().begin(), h->shape().end());
  static float dummy = 0;  // numpy wants a non-null pointer even for empty arrays
  void* data = h->nbytes() ? h->raw() : &dummy;
  return nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), owner, nullptr, dlpack_dtype(h->dtype()))
      .cast();
}

nb::object make_view(void* ptr, const sg::Shape& shape, sg::DType dtype, bool cuda, int device_id,
                     nb::handle owner) {
  std::vector<size_t> s(shape.begin(), shape.end());
  if (!cuda)
    return nb::ndarray<nb::numpy>(ptr, s.size(), s.data(), owner, nullptr, dlpack_dtype(dtype),
                                  nb::device::cpu::value)
        .cast();
  return nb::ndarray<>(ptr, s.size(), s.data(), owner, nullptr, dlpack_dtype(dtype), nb::device::cuda::value,
                       device_id)
      .cast();
}

// ---- CUDA ----------------------------------------------------------------------------------------

int current_cuda_device() {
#ifdef STEPGRAPH_HAVE_CUDA
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return dev;
#else
  return 0;
#endif
}

void cuda_device_synchronize() {
#ifdef STEPGRAPH_HAVE_CUDA
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) throw sg::Error(sg::cat("CUDA error: ", cudaGetErrorString(e)));
#endif
}

}  // namespace sgpy
