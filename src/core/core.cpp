#include "stepgraph/core.h"

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "core/host_memory.h"

namespace sg {

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  SG_REQUIRE(!std::filesystem::is_directory(st), "cannot read ", what, " '", path, "': it is a directory, not a file");
  // A device (/dev/zero) would be read forever; a pipe ends.
  SG_REQUIRE(!std::filesystem::is_character_file(st) && !std::filesystem::is_block_file(st), "cannot read ", what,
             " '", path, "': it is a device, not a file");
  std::ifstream in(path, std::ios::binary);
  SG_REQUIRE(in, "cannot open ", what, " '", path, "': ", std::strerror(errno));
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) require_host_memory(size, cat("reading ", what, " '", path, "'"));
  std::ostringstream buf;
  errno = 0;
  buf << in.rdbuf();
  SG_REQUIRE(!in.bad(), "error while reading ", what, " '", path, "'", errno ? ": " : "",
             errno ? std::strerror(errno) : "");
  return buf.str();
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::I32: return 4;
    case DType::U64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::U64: return "u64";
  }
  return "?";
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    SG_REQUIRE(!__builtin_mul_overflow(n, d, &n), "shape ", shape_str(s),
               " has more elements than a 64-bit count can hold");
  return n;
}

size_t nbytes(const Shape& s, DType t) {
  size_t bytes = 0;
  const int64_t n = numel(s);
  SG_REQUIRE(n >= 0 && !__builtin_mul_overflow(static_cast<size_t>(n), dtype_size(t), &bytes), "shape ",
             shape_str(s), " of ", dtype_name(t), " has more bytes than a 64-bit size can hold");
  return bytes;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

HostArray::HostArray(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) SG_REQUIRE(d >= 0, "array shape ", shape_str(shape_), " has a negative dimension");
  const size_t bytes = nbytes();
  require_host_memory(bytes, cat("an array of shape ", shape_str(shape_)));
  storage_.assign(bytes / 8 + (bytes % 8 != 0), 0);
}

HostArray HostArray::f32(Shape shape, std::vector<float> values) {
  HostArray a(DType::F32, std::move(shape));
  SG_REQUIRE(static_cast<int64_t>(values.size()) == a.numel(), "f32 array of shape ",
             shape_str(a.shape_), " needs ", a.numel(), " values, got ", values.size());
  if (!values.empty()) std::memcpy(a.raw(), values.data(), a.nbytes());
  return a;
}

HostArray HostArray::i32(Shape shape, std::vector<int32_t> values) {
  HostArray a(DType::I32, std::move(shape));
  SG_REQUIRE(static_cast<int64_t>(values.size()) == a.numel(), "i32 array of shape ",
             shape_str(a.shape_), " needs ", a.numel(), " values, got ", values.size());
  if (!values.empty()) std::memcpy(a.raw(), values.data(), a.nbytes());
  return a;
}

HostArray HostArray::reshaped(Shape shape) const {
  SG_REQUIRE(sg::numel(shape) == numel(), "cannot reshape ", shape_str(shape_), " to ",
             shape_str(shape));
  HostArray a = *this;
  a.shape_ = std::move(shape);
  return a;
}

void HostArray::check_type(DType want) const {
  SG_REQUIRE(want == dtype_, "array holds ", dtype_name(dtype_), " but was read as ",
             dtype_name(want));
}

}  // namespace sg
