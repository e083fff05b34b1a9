// Core vocabulary shared by every part of stepgraph: errors, dtypes, shapes, host arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sg {

// The one exception type the library throws. Messages say what, where (JSON path, tensor name,
// shape) and what was expected. The CLI turns it into a message and a non-zero exit; Python into
// an exception with the same text.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable: cat("expected ", 3, " got ", x).
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// SG_REQUIRE: a precondition a caller can violate (bad input): message for the user.
// SG_ASSERT: an internal invariant: message carries the expression and file:line.
#define SG_REQUIRE(cond, ...)                              \
  do {                                                     \
    if (!(cond)) throw ::sg::Error(::sg::cat(__VA_ARGS__)); \
  } while (0)
#define SG_ASSERT(cond)                                                                   \
  do {                                                                                    \
    if (!(cond))                                                                          \
      throw ::sg::Error(::sg::cat("internal error: ", #cond, " (", __FILE__, ":", __LINE__, \
                                  ")"));                                                  \
  } while (0)

// A whole file's bytes. Errors: "cannot open <what> '<path>': <reason>" and "error while
// reading <what> '<path>'" (what: "CSV file", "text file", ...).
std::string read_file(const std::string& path, const std::string& what);

enum class DType : uint8_t { F32, I32, U64 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "i32", "u64"

using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);              // throws when the count overflows int64
size_t nbytes(const Shape& s, DType t);     // numel * dtype_size; throws when it overflows
std::string shape_str(const Shape& s);
// The items with `sep` between them: joined({"a", "b"}) is "a, b".
std::string joined(const std::vector<std::string>& items, const char* sep = ", ");  // "[64, 128]"

// An owned, contiguous, row-major array in host memory. The currency of the public API:
// batches in, parameters and logits out.
class HostArray {
 public:
  HostArray() = default;
  HostArray(DType dtype, Shape shape);  // zero-filled; a size beyond the host's free memory is an Error

  static HostArray f32(Shape shape, std::vector<float> values);
  static HostArray i32(Shape shape, std::vector<int32_t> values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return sg::numel(shape_); }
  size_t nbytes() const { return sg::nbytes(shape_, dtype_); }
  bool empty() const { return shape_.empty() && storage_.empty(); }

  void* raw() { return storage_.data(); }
  const void* raw() const { return storage_.data(); }

  template <class T>
  T* data() {
    check_type(type_of<T>());
    return reinterpret_cast<T*>(storage_.data());
  }
  template <class T>
  const T* data() const {
    check_type(type_of<T>());
    return reinterpret_cast<const T*>(storage_.data());
  }

  // Same bytes, new shape (element count must match).
  HostArray reshaped(Shape shape) const;

 private:
  template <class T>
  static constexpr DType type_of();
  void check_type(DType want) const;

  DType dtype_ = DType::F32;
  Shape shape_;
  std::vector<uint64_t> storage_;  // uint64_t keeps every element type aligned
};

template <>
constexpr DType HostArray::type_of<float>() {
  return DType::F32;
}
template <>
constexpr DType HostArray::type_of<int32_t>() {
  return DType::I32;
}
template <>
constexpr DType HostArray::type_of<uint64_t>() {
  return DType::U64;
}

}  // namespace sg
