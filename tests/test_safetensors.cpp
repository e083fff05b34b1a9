// Tests for the safetensors reader/writer: round trips, byte-exact compatibility with the
// reference implementation and atomic writes (corrupt files: test_safetensors_corrupt.cpp).
#include "stepgraph/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "safetensors_test_util.h"

namespace fs = std::filesystem;
using namespace safetensors_test;

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
