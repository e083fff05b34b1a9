// The safetensors reader refuses every kind of corrupt file with an error that names it:
// truncations, flipped bytes, bad headers, entries and offsets; it converts the dtypes it takes.
#include "stepgraph/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "safetensors_test_util.h"

namespace fs = std::filesystem;
using namespace safetensors_test;

TEST(Safetensors, MissingFileAndNotAFile) {
  const std::string dir = test_dir("missing");
  expect_read_error(dir + "/nope.safetensors", "No such file or directory");
  expect_read_error(dir, "not a regular file");
}

TEST(Safetensors, EveryTruncationIsAnError) {
  const std::string dir = test_dir("truncated");
  const std::string good = small_valid_file(dir);
  ASSERT_GT(good.size(), 16u);
  ASSERT_NO_THROW(sg::read_safetensors(dir + "/small.safetensors"));
  const std::string path = dir + "/cut.safetensors";
  for (size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE("prefix length " + std::to_string(n));
    spit(path, good.substr(0, n));
    expect_read_error(path, "");  // any Error that names the file
  }
  // Specific messages at a few lengths.
  spit(path, good.substr(0, 5));
  expect_read_error(path, "too short");
  spit(path, good.substr(0, 20));
  expect_read_error(path, "runs past the end of the file");
  spit(path, good.substr(0, good.size() - 1));
  expect_read_error(path, "tensor 'b': data_offsets [8, 12] run past the end of the data buffer");
}

TEST(Safetensors, EveryByteFlipIsAnErrorOrValid) {
  // Corrupting any single byte must never crash; it either still reads or throws sg::Error.
  const std::string dir = test_dir("flips");
  const std::string good = small_valid_file(dir);
  const std::string path = dir + "/flip.safetensors";
  int errors = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int v : {0x00, 0x01, 0x22, 0x30, 0x39, 0x5b, 0x7d, 0x80, 0xff}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(v);
      spit(path, bytes);
      try {
        sg::read_safetensors(path);
      } catch (const sg::Error& e) {
        ++errors;
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(Safetensors, HeaderLengthErrors) {
  const std::string dir = test_dir("header_len");
  expect_bytes_error(dir, le64(0xffffffffffffffffULL) + "{}", "exceeds the limit");
  expect_bytes_error(dir, le64(100'000'001) + "{}", "exceeds the limit");
  expect_bytes_error(dir, le64(3) + "{}", "runs past the end of the file");
  expect_bytes_error(dir, le64(0), "not valid JSON");
  expect_bytes_error(dir, "", "too short");
}

TEST(Safetensors, InvalidJson) {
  const std::string dir = test_dir("bad_json");
  expect_bytes_error(dir, make_file("{\"a\": ", ""), "not valid JSON");
  expect_bytes_error(dir, make_file("{\"a\": {}} x", ""), "line 1, column 11: syntax error");
  expect_bytes_error(dir, make_file("{\"n\xff\": 1}", ""), "not valid JSON");  // bad UTF-8
  expect_bytes_error(dir, make_file("[1, 2]", ""), "expected an object");
  expect_bytes_error(dir, make_file("\"str\"", ""), "expected an object");
  expect_bytes_error(dir, make_file(std::string("{}\0", 3), ""), "NUL byte at offset 2");
  expect_bytes_error(dir, make_file(std::string("{\"a\0\": 1}", 9), ""), "NUL byte");
}

// Weights saved by other tools (numpy float64, torch half and bfloat16, int64 ids) read as f32
// and i32; a value the narrower type cannot hold is an error naming the tensor and the element.
TEST(Safetensors, ConvertsOtherFloatAndIntegerTypes) {
  const std::string dir = test_dir("convert");
  auto bytes = [](const auto& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0]));
  };
  const std::vector<double> f64 = {1.5, -2.25, 1e-40};
  // f16: 1.0, -2.0, 65504 (largest), 2^-24 (smallest subnormal), inf; bf16: 1.0, -3.0, 1e38 (approximately)
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc040, 0x7e96};
  const std::vector<int64_t> i64 = {-7, 2147483647};
  const std::string data = bytes(f64) + bytes(f16) + bytes(bf16) + bytes(i64);
  const std::string json =
      "{\"a\": {\"dtype\": \"F64\", \"shape\": [3], \"data_offsets\": [0, 24]},"
      " \"b\": {\"dtype\": \"F16\", \"shape\": [5], \"data_offsets\": [24, 34]},"
      " \"c\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [34, 40]},"
      " \"d\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [40, 56]}}";
  const std::string path = dir + "/mixed.safetensors";
  spit(path, make_file(json, data));
  const sg::SafetensorsFile f = sg::read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 4u);
  const float* a = f.find("a")->data<float>();
  EXPECT_EQ(f.find("a")->dtype(), sg::DType::F32);
  EXPECT_EQ(a[0], 1.5f);
  EXPECT_EQ(a[1], -2.25f);
  EXPECT_EQ(a[2], static_cast<float>(1e-40));  // an f32 subnormal
  const float* b = f.find("b")->data<float>();
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -2.0f);
  EXPECT_EQ(b[2], 65504.0f);
  EXPECT_EQ(b[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(b[4]) && b[4] > 0);
  const float* c = f.find("c")->data<float>();
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], -3.0f);
  EXPECT_NEAR(c[2], 1e38f, 1e36f);
  EXPECT_EQ(f.find("d")->dtype(), sg::DType::I32);
  EXPECT_EQ(f.find("d")->data<int32_t>()[0], -7);
  EXPECT_EQ(f.find("d")->data<int32_t>()[1], 2147483647);
  EXPECT_EQ(f.converted_from.at("a"), "F64");
  EXPECT_EQ(f.converted_from.at("c"), "BF16");
  EXPECT_EQ(f.converted_from.count("e"), 0u);

  const std::vector<double> too_big = {0.0, 1e39};
  expect_bytes_error(dir,
                     make_file("{\"w\": {\"dtype\": \"F64\", \"shape\": [2], \"data_offsets\": [0, 16]}}",
                               bytes(too_big)),
                     "tensor 'w' (F64) element 1: 1e+39 is outside the range of f32");
  const std::vector<int64_t> wide = {1, -2147483649LL};
  expect_bytes_error(dir,
                     make_file("{\"ids\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [0, 16]}}",
                               bytes(wide)),
                     "tensor 'ids' (I64) element 1: -2147483649 does not fit in i32");
}

TEST(Safetensors, BadEntries) {
  const std::string dir = test_dir("bad_entries");
  const std::string f4(4, '\0');
  auto entry = [](const std::string& body) { return "{\"t\": " + body + "}"; };
  // Missing keys.
  expect_bytes_error(dir, make_file(entry("{\"shape\": [1], \"data_offsets\": [0, 4]}"), f4),
                     "tensor 't': entry has no 'dtype'");
  expect_bytes_error(dir, make_file(entry("{\"dtype\": \"F32\", \"data_offsets\": [0, 4]}"), f4),
                     "tensor 't': entry has no 'shape'");
  expect_bytes_error(dir, make_file(entry("{\"dtype\": \"F32\", \"shape\": [1]}"), f4),
                     "tensor 't': entry has no 'data_offsets'");
  expect_bytes_error(dir, make_file(entry("[1]"), f4), "tensor 't': entry is JSON array");
  // Wrong types.
  expect_bytes_error(
      dir, make_file(entry("{\"dtype\": 3, \"shape\": [1], \"data_offsets\": [0, 4]}"), f4),
      "'dtype' is number");
  expect_bytes_error(
      dir, make_file(entry("{\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}"), f4),
      "'shape' is number");
  expect_bytes_error(
      dir,
      make_file(entry("{\"dtype\": \"F32\", \"shape\": [1.0], \"data_offsets\": [0, 4]}"), f4),
      "non-integer dimension");
  expect_bytes_error(
      dir, make_file(entry("{\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}"), f4),
      "negative dimension");
  expect_bytes_error(
      dir,
      make_file(entry("{\"dtype\": \"F32\", \"shape\": [\"1\"], \"data_offsets\": [0, 4]}"), f4),
      "non-integer dimension");
  expect_bytes_error(
      dir, make_file(entry("{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}"), f4),
      "'data_offsets' is [0]");
  expect_bytes_error(
      dir,
      make_file(entry("{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-1, 3]}"), f4),
      "expected [begin, end]");
  expect_bytes_error(
      dir,
      make_file(entry("{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4.0]}"), f4),
      "expected [begin, end]");
  // Unsupported dtypes.
  for (const char* dt : {"U8", "F8_E4M3", "f32", ""}) {
    expect_bytes_error(
        dir,
        make_file(entry(std::string("{\"dtype\": \"") + dt +
                        "\", \"shape\": [1], \"data_offsets\": [0, 4]}"),
                  f4),
        std::string("tensor 't': dtype '") + dt + "' is not supported (supported: F32, F64, F16, BF16 as f32; I32, I64 as i32; U64)");
  }
  // Shapes whose element count overflows.
  expect_bytes_error(dir,
                     make_file(entry("{\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], "
                                     "\"data_offsets\": [0, 4]}"),
                               f4),
                     "too many elements");
  expect_bytes_error(dir,
                     make_file(entry("{\"dtype\": \"F32\", \"shape\": [9223372036854775808], "
                                     "\"data_offsets\": [0, 4]}"),
                               f4),
                     "too large");
  expect_bytes_error(dir,
                     make_file(entry("{\"dtype\": \"U64\", \"shape\": [4611686018427387904], "
                                     "\"data_offsets\": [0, 4]}"),
                               f4),
                     "more than 2^64 bytes");
  // Metadata must be an object of strings.
  expect_bytes_error(dir, make_file("{\"__metadata__\": {\"a\": 1}}", ""),
                     "'__metadata__' entry 'a' is number, expected a string");
  expect_bytes_error(dir, make_file("{\"__metadata__\": [\"a\"]}", ""),
                     "'__metadata__' is array");
  // Duplicate keys would hide a tensor.
  expect_bytes_error(dir,
                     make_file("{\"t\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": "
                               "[0, 0]}, \"t\": {\"dtype\": \"F32\", \"shape\": [1], "
                               "\"data_offsets\": [0, 4]}}",
                               f4),
                     "key 't' appears more than once");
  expect_bytes_error(dir, make_file("{\"__metadata__\": {\"a\": \"1\", \"a\": \"2\"}}", ""),
                     "key 'a' appears more than once");
}

TEST(Safetensors, WrongOffsets) {
  const std::string dir = test_dir("bad_offsets");
  const std::string path = dir + "/bad.safetensors";
  // Offsets that disagree with the shape (the example from the spec).
  expect_bytes_error(
      dir,
      make_file("{\"0.weight\": {\"dtype\": \"F32\", \"shape\": [4, 8], \"data_offsets\": "
                "[0, 100]}}",
                std::string(100, '\0')),
      "tensor '0.weight': data_offsets [0, 100] do not match shape [4, 8] f32 (128 bytes)");
  expect_bytes_error(
      dir,
      make_file("{\"t\": {\"dtype\": \"U64\", \"shape\": [], \"data_offsets\": [0, 4]}}",
                std::string(4, '\0')),
      "do not match shape [] u64 (8 bytes)");
  // End before begin.
  expect_bytes_error(
      dir,
      make_file("{\"t\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 0]}}",
                std::string(4, '\0')),
      "data_offsets [4, 0] end before they begin");
  // Past the end of the buffer.
  expect_bytes_error(
      dir,
      make_file("{\"t\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                std::string(8, '\0')),
      "run past the end of the data buffer (8 bytes");
  expect_bytes_error(dir,
                     make_file("{\"t\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": "
                               "[18446744073709551615, 18446744073709551615]}}",
                               ""),
                     "run past the end of the data buffer");
  // A gap at the start.
  expect_bytes_error(
      dir,
      make_file("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
                std::string(8, '\0')),
      "tensor 't': data_offsets [4, 8] leave a gap of 4 bytes");
  // A gap between tensors.
  expect_bytes_error(dir,
                     make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": "
                               "[0, 4]}, \"b\": {\"dtype\": \"F32\", \"shape\": [1], "
                               "\"data_offsets\": [8, 12]}}",
                               std::string(12, '\0')),
                     "tensor 'b': data_offsets [8, 12] leave a gap of 4 bytes");
}

TEST(Safetensors, OverlappingTensors) {
  const std::string dir = test_dir("overlap");
  // Same range twice.
  expect_bytes_error(dir,
                     make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": "
                               "[0, 8]}, \"b\": {\"dtype\": \"I32\", \"shape\": [2], "
                               "\"data_offsets\": [0, 8]}}",
                               std::string(8, '\0')),
                     "tensor 'b': data_offsets [0, 8] overlap tensor 'a' [0, 8]");
  // Partial overlap, listed in reverse order in the header.
  expect_bytes_error(dir,
                     make_file("{\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": "
                               "[4, 12]}, \"a\": {\"dtype\": \"F32\", \"shape\": [2], "
                               "\"data_offsets\": [0, 8]}}",
                               std::string(12, '\0')),
                     "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
  // An empty tensor inside another tensor's range.
  expect_bytes_error(dir,
                     make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": "
                               "[0, 8]}, \"e\": {\"dtype\": \"F32\", \"shape\": [0], "
                               "\"data_offsets\": [4, 4]}}",
                               std::string(8, '\0')),
                     "tensor 'e': data_offsets [4, 4] overlap tensor 'a' [0, 8]");
}

TEST(Safetensors, TrailingBytes) {
  const std::string dir = test_dir("trailing");
  const std::string good = small_valid_file(dir);
  expect_bytes_error(dir, good + "x", "1 trailing bytes after the last tensor data");
  expect_bytes_error(dir, good + std::string(100, '\0'), "100 trailing bytes");
  expect_bytes_error(dir, make_file("{}", "abc"), "3 trailing bytes");
  // The reference file plus one byte.
  expect_bytes_error(dir, reference_file() + "\n", "1 trailing bytes");
}
