// Helpers of the data tests (test_data.cpp, test_csv.cpp): files in the test folder, errors that
// must name their parts, and arrays as vectors.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "npy_builders.h"
#include "stepgraph/core.h"

namespace sg::test {

inline std::string tmp_path(const std::string& name) { return std::string(SG_TEST_TMPDIR) + "/data_" + name; }

inline void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs f, which must throw sg::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const sg::Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message '" << msg << "' lacks '" << p << "'";
    return;
  }
  ADD_FAILURE() << "expected sg::Error mentioning '" << (parts.empty() ? "" : parts[0]) << "'";
}

inline std::vector<float> floats(const sg::HostArray& a) {
  return std::vector<float>(a.data<float>(), a.data<float>() + a.numel());
}
inline std::vector<int32_t> ints(const sg::HostArray& a) {
  return std::vector<int32_t>(a.data<int32_t>(), a.data<int32_t>() + a.numel());
}

}  // namespace sg::test
