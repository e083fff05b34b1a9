// Helpers of the safetensors tests (test_safetensors.cpp, test_safetensors_corrupt.cpp): files
// built byte by byte, the reference implementation's bytes, and error expectations.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "stepgraph/safetensors.h"

namespace safetensors_test {

namespace fs = std::filesystem;

using Tensors = std::vector<std::pair<std::string, sg::HostArray>>;

// A fresh, empty directory per test.
inline std::string test_dir(const std::string& name) {
  fs::path dir = fs::path(SG_TEST_TMPDIR) / ("safetensors_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file from a header JSON (unpadded) and a data buffer.
inline std::string make_file(const std::string& json, const std::string& data) {
  return le64(json.size()) + json + data;
}

inline std::string raw_bytes(const sg::HostArray& a) {
  return std::string(static_cast<const char*>(a.raw()), a.nbytes());
}

inline sg::HostArray u64(sg::Shape shape, const std::vector<uint64_t>& values) {
  sg::HostArray a(sg::DType::U64, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(a.numel()), values.size());
  if (!values.empty()) std::memcpy(a.raw(), values.data(), a.nbytes());
  return a;
}

inline void expect_same(const sg::HostArray& want, const sg::HostArray& got, const std::string& name) {
  EXPECT_EQ(want.dtype(), got.dtype()) << name;
  EXPECT_EQ(want.shape(), got.shape()) << name;
  ASSERT_EQ(want.nbytes(), got.nbytes()) << name;
  EXPECT_EQ(raw_bytes(want), raw_bytes(got)) << name;
}

// Reads `path`, expecting an sg::Error whose message names the path and contains `needle`.
inline void expect_read_error(const std::string& path, const std::string& needle) {
  try {
    sg::read_safetensors(path);
    ADD_FAILURE() << "reading " << path << " did not throw (expected '" << needle << "')";
  } catch (const sg::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("safetensors file '" + path + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
  }
}

// Writes `bytes` to a file and expects reading it to fail with `needle` in the message.
inline void expect_bytes_error(const std::string& dir, const std::string& bytes,
                        const std::string& needle) {
  const std::string path = dir + "/bad.safetensors";
  spit(path, bytes);
  expect_read_error(path, needle);
}

inline std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The bytes safetensors 0.8.0 (the Python/Rust reference) produces for
//   save({"w": float32 [[1.5, -2], [0.25, 3]], "idx": int32 [7, -1, 2], "step": uint64 42},
//        metadata={"format": "np", "step": "42"})
// It orders tensors by alignment, then name: step (U64), w (F32), idx (I32).
inline const std::string& reference_file() {
  static const std::string bytes = [] {
    const std::string header =
        "{\"__metadata__\":{\"format\":\"np\",\"step\":\"42\"},"
        "\"step\":{\"dtype\":\"U64\",\"shape\":[],\"data_offsets\":[0,8]},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]},"
        "\"idx\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[24,36]}}    ";
    const unsigned char data[] = {
        0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // step = 42
        0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // 1.5, -2
        0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x40, 0x40,  // 0.25, 3
        0x07, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00};  // 7, -1, 2
    const std::string len("\xd8\0\0\0\0\0\0\0", 8);  // 216
    return len + header + std::string(reinterpret_cast<const char*>(data), sizeof data);
  }();
  return bytes;
}

inline Tensors reference_tensors() {
  return {{"step", u64({}, {42})},
          {"w", sg::HostArray::f32({2, 2}, {1.5f, -2.0f, 0.25f, 3.0f})},
          {"idx", sg::HostArray::i32({3}, {7, -1, 2})}};
}

// A small valid file with two tensors and metadata, written by our writer.
inline std::string small_valid_file(const std::string& dir) {
  const std::string path = dir + "/small.safetensors";
  sg::write_safetensors(path,
                        {{"a", sg::HostArray::f32({2}, {1.0f, 2.0f})},
                         {"e", sg::HostArray(sg::DType::I32, {0})},
                         {"b", sg::HostArray::i32({1}, {3})}},
                        {{"k", "v"}});
  return slurp(path);
}

}  // namespace safetensors_test
