// Tests for the safetensors reader/writer: round trips, byte-exact compatibility with the
// reference implementation, atomic writes, and rejection of every kind of corrupt file.
#include "stepgraph/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Tensors = std::vector<std::pair<std::string, sg::HostArray>>;

// A fresh, empty directory per test.
std::string test_dir(const std::string& name) {
  fs::path dir = fs::path(SG_TEST_TMPDIR) / ("safetensors_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file from a header JSON (unpadded) and a data buffer.
std::string make_file(const std::string& json, const std::string& data) {
  return le64(json.size()) + json + data;
}

std::string raw_bytes(const sg::HostArray& a) {
  return std::string(static_cast<const char*>(a.raw()), a.nbytes());
}

sg::HostArray u64(sg::Shape shape, const std::vector<uint64_t>& values) {
  sg::HostArray a(sg::DType::U64, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(a.numel()), values.size());
  if (!values.empty()) std::memcpy(a.raw(), values.data(), a.nbytes());
  return a;
}

void expect_same(const sg::HostArray& want, const sg::HostArray& got, const std::string& name) {
  EXPECT_EQ(want.dtype(), got.dtype()) << name;
  EXPECT_EQ(want.shape(), got.shape()) << name;
  ASSERT_EQ(want.nbytes(), got.nbytes()) << name;
  EXPECT_EQ(raw_bytes(want), raw_bytes(got)) << name;
}

// Reads `path`, expecting an sg::Error whose message names the path and contains `needle`.
void expect_read_error(const std::string& path, const std::string& needle) {
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
void expect_bytes_error(const std::string& dir, const std::string& bytes,
                        const std::string& needle) {
  const std::string path = dir + "/bad.safetensors";
  spit(path, bytes);
  expect_read_error(path, needle);
}

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The bytes safetensors 0.8.0 (the Python/Rust reference) produces for
//   save({"w": float32 [[1.5, -2], [0.25, 3]], "idx": int32 [7, -1, 2], "step": uint64 42},
//        metadata={"format": "np", "step": "42"})
// It orders tensors by alignment, then name: step (U64), w (F32), idx (I32).
const std::string& reference_file() {
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

Tensors reference_tensors() {
  return {{"step", u64({}, {42})},
          {"w", sg::HostArray::f32({2, 2}, {1.5f, -2.0f, 0.25f, 3.0f})},
          {"idx", sg::HostArray::i32({3}, {7, -1, 2})}};
}

// A small valid file with two tensors and metadata, written by our writer.
std::string small_valid_file(const std::string& dir) {
  const std::string path = dir + "/small.safetensors";
  sg::write_safetensors(path,
                        {{"a", sg::HostArray::f32({2}, {1.0f, 2.0f})},
                         {"e", sg::HostArray(sg::DType::I32, {0})},
                         {"b", sg::HostArray::i32({1}, {3})}},
                        {{"k", "v"}});
  return slurp(path);
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypesAndRanks) {
  const std::string dir = test_dir("roundtrip");
  const std::string path = dir + "/t.safetensors";
  Tensors tensors = {
      {"scalar_f32", sg::HostArray::f32({}, {3.25f})},
      {"vec_i32", sg::HostArray::i32({4}, {1, -2, 2147483647, -2147483647 - 1})},
      {"cube_f32", sg::HostArray::f32({2, 3, 2}, {0.f, 1.f, -1.f, 1e-30f, 1e30f, 2.5f, -0.f,
                                                  7.f, 8.f, 9.f, 10.f, 11.f})},
      {"empty_f32", sg::HostArray(sg::DType::F32, {0})},
      {"u64_vec", u64({3}, {0, 1, 0xfedcba9876543210ULL})},
      {"u64_scalar", u64({}, {12345678901234ULL})},
      {"empty_i32_rank3", sg::HostArray(sg::DType::I32, {2, 0, 5})},
      {"layers.0.weight", sg::HostArray::f32({1, 1, 1}, {42.f})},
  };
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", "1000"}, {"note", "quotes \" and \\ and unicode \xc3\xa9"}};
  sg::write_safetensors(path, tensors, metadata);

  const std::string bytes = slurp(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i)
    header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(header_len % 8, 0u) << "header is padded to a multiple of 8";

  const sg::SafetensorsFile f = sg::read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, tensors[i].first) << "file order is write order";
    expect_same(tensors[i].second, f.tensors[i].second, tensors[i].first);
  }
  EXPECT_EQ(f.metadata, metadata);
  ASSERT_NE(f.find("u64_vec"), nullptr);
  EXPECT_EQ(f.find("u64_vec")->data<uint64_t>()[2], 0xfedcba9876543210ULL);
  EXPECT_EQ(f.find("vec_i32")->data<int32_t>()[3], -2147483647 - 1);
  EXPECT_EQ(f.find("scalar_f32")->shape(), sg::Shape{});
  EXPECT_EQ(f.find("scalar_f32")->data<float>()[0], 3.25f);
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(Safetensors, RoundTripNoTensorsNoMetadata) {
  const std::string dir = test_dir("empty");
  const std::string path = dir + "/t.safetensors";
  sg::write_safetensors(path, {});
  // "{}" padded to 8 bytes.
  EXPECT_EQ(slurp(path), le64(8) + "{}      ");
  const sg::SafetensorsFile f = sg::read_safetensors(path);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());

  sg::write_safetensors(path, {}, {{"only", "metadata"}});
  const sg::SafetensorsFile g = sg::read_safetensors(path);
  EXPECT_TRUE(g.tensors.empty());
  EXPECT_EQ(g.metadata, (std::map<std::string, std::string>{{"only", "metadata"}}));
}

TEST(Safetensors, ReadsReferenceImplementationBytes) {
  const std::string dir = test_dir("reference_read");
  const std::string path = dir + "/ref.safetensors";
  spit(path, reference_file());
  const sg::SafetensorsFile f = sg::read_safetensors(path);
  const Tensors want = reference_tensors();
  ASSERT_EQ(f.tensors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, want[i].first);
    expect_same(want[i].second, f.tensors[i].second, want[i].first);
  }
  EXPECT_EQ(f.find("w")->data<float>()[1], -2.0f);
  EXPECT_EQ(f.find("idx")->data<int32_t>()[1], -1);
  EXPECT_EQ(f.find("step")->data<uint64_t>()[0], 42u);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "np"}, {"step", "42"}}));
}

TEST(Safetensors, WritesReferenceImplementationBytes) {
  const std::string dir = test_dir("reference_write");
  const std::string path = dir + "/ours.safetensors";
  sg::write_safetensors(path, reference_tensors(), {{"format", "np"}, {"step", "42"}});
  EXPECT_EQ(slurp(path), reference_file()) << "byte-identical to the reference implementation";
}

TEST(Safetensors, ReturnsTensorsInDataOffsetOrder) {
  // Header order (and alphabetical order) differ from data order; the header is not padded,
  // has whitespace, and names an empty tensor whose offsets sit between two others.
  const std::string dir = test_dir("order");
  const std::string path = dir + "/o.safetensors";
  const std::string json =
      "{ \"a\": {\"data_offsets\": [8, 12], \"shape\": [1], \"dtype\": \"I32\"},\n"
      "  \"m\": {\"shape\": [0, 3], \"dtype\": \"F32\", \"data_offsets\": [8, 8]},\n"
      "  \"z\": {\"dtype\": \"U64\", \"shape\": [1], \"data_offsets\": [0, 8], \"extra\": 1} }";
  std::string data = le64(0x0102030405060708ULL);
  data += std::string("\x05\0\0\0", 4);
  spit(path, make_file(json, data));
  const sg::SafetensorsFile f = sg::read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].first, "z");
  EXPECT_EQ(f.tensors[1].first, "m");
  EXPECT_EQ(f.tensors[2].first, "a");
  EXPECT_EQ(f.tensors[0].second.data<uint64_t>()[0], 0x0102030405060708ULL);
  EXPECT_EQ(f.tensors[1].second.shape(), (sg::Shape{0, 3}));
  EXPECT_EQ(f.tensors[2].second.data<int32_t>()[0], 5);
}

TEST(Safetensors, WriterRejectsBadInput) {
  const std::string dir = test_dir("writer_input");
  const std::string path = dir + "/w.safetensors";
  auto expect_write_error = [&](const Tensors& t, const std::map<std::string, std::string>& md,
                                const std::string& needle) {
    try {
      sg::write_safetensors(path, t, md);
      ADD_FAILURE() << "write did not throw (expected '" << needle << "')";
    } catch (const sg::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  };
  const auto one = sg::HostArray::f32({1}, {1.f});
  expect_write_error({{"x", one}, {"y", one}, {"x", one}}, {}, "'x' appears more than once");
  expect_write_error({{"__metadata__", one}}, {}, "__metadata__");
  expect_write_error({{"x", sg::HostArray()}}, {}, "empty (default-constructed)");
  expect_write_error({{"bad\xff", one}}, {}, "UTF-8");
  expect_write_error({{"x", one}}, {{"k", "bad\xc3"}}, "UTF-8");
  EXPECT_TRUE(dir_entries(dir).empty()) << "a rejected write leaves nothing behind";
}

TEST(Safetensors, AtomicWriteLeavesNoTempFile) {
  const std::string dir = test_dir("atomic_ok");
  const std::string path = dir + "/ckpt.safetensors";
  sg::write_safetensors(path, {{"a", sg::HostArray::f32({1}, {1.f})}});
  sg::write_safetensors(path, {{"a", sg::HostArray::f32({2}, {2.f, 3.f})}});  // overwrite
  EXPECT_EQ(dir_entries(dir), std::vector<std::string>{"ckpt.safetensors"});
  const sg::SafetensorsFile f = sg::read_safetensors(path);
  ASSERT_NE(f.find("a"), nullptr);
  EXPECT_EQ(f.find("a")->shape(), sg::Shape{2});
  EXPECT_EQ(f.find("a")->data<float>()[1], 3.f);
}

TEST(Safetensors, FailedWriteLeavesExistingFileIntact) {
  const std::string dir = test_dir("atomic_fail");
  const std::string path = dir + "/ckpt.safetensors";
  sg::write_safetensors(path, {{"a", sg::HostArray::f32({1}, {1.f})}});
  const std::string before = slurp(path);

  auto expect_write_error = [](const std::string& target, const Tensors& t,
                               const std::string& needle) {
    try {
      sg::write_safetensors(target, t);
      ADD_FAILURE() << "write to " << target << " did not throw";
    } catch (const sg::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + target + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in " << msg;
    }
  };
  const Tensors big = {{"a", sg::HostArray(sg::DType::F32, {1 << 16})}};

  // 1. The target's directory does not exist: creating the temp file fails.
  expect_write_error(dir + "/no_such_dir/ckpt.safetensors", big, "No such file or directory");

  // 2. The rename fails: the target is a non-empty directory. The temp file must be removed.
  fs::create_directories(dir + "/occupied");
  spit(dir + "/occupied/keep", "x");
  expect_write_error(dir + "/occupied", big, "cannot rename");
  EXPECT_EQ(dir_entries(dir), (std::vector<std::string>{"ckpt.safetensors", "occupied"}));
  EXPECT_EQ(slurp(dir + "/occupied/keep"), "x");

  // 3. Writing the data fails half way (file size limit => EFBIG) while overwriting the
  //    existing checkpoint: the old file is untouched, the temp file is gone.
  {
    struct rlimit old_limit {};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    struct sigaction ignore {}, old_action {};
    ignore.sa_handler = SIG_IGN;
    ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old_action), 0);
    struct rlimit small = old_limit;
    small.rlim_cur = 1000;  // the data is 256 KiB
    const bool limited = setrlimit(RLIMIT_FSIZE, &small) == 0;
    bool threw = false;
    std::string msg;
    try {
      sg::write_safetensors(path, big);
    } catch (const sg::Error& e) {
      threw = true;
      msg = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old_limit);
    sigaction(SIGXFSZ, &old_action, nullptr);
    if (limited) {
      EXPECT_TRUE(threw);
      EXPECT_NE(msg.find("'" + path + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(slurp(path), before) << "the existing file is untouched";
  EXPECT_EQ(dir_entries(dir), (std::vector<std::string>{"ckpt.safetensors", "occupied"}));

  // 4. Invalid input: nothing is written at all.
  const auto one = sg::HostArray::f32({1}, {1.f});
  expect_write_error(path, {{"x", one}, {"x", one}}, "more than once");
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(sg::read_safetensors(path).find("a")->data<float>()[0], 1.f);
}

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
