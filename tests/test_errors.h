// Helpers for tests of bad input: the message an sg::Error carries, checks on its content, and
// files in a fresh folder under SG_TEST_TMPDIR.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "stepgraph/core.h"

namespace sg::test {

// A fresh folder SG_TEST_TMPDIR/<group>/<name> for one test.
inline std::string fresh_dir(const std::string& group, const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(SG_TEST_TMPDIR) / group / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string p = (std::filesystem::path(dir) / name).string();
  std::ofstream f(p, std::ios::binary);
  f << text;
  EXPECT_TRUE(f.good()) << p;
  return p;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// The message of the sg::Error `f` throws; a marker (which fails every content check) when it
// throws nothing or another exception type.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not an sg::Error: ") + e.what() + ">";
  }
  return "<no error thrown>";
}

inline ::testing::AssertionResult contains_all(const std::string& msg, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    if (msg.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks \"" << p << "\":\n  " << msg;
  return ::testing::AssertionSuccess() << msg;
}

#define EXPECT_ERROR(expr, ...) EXPECT_TRUE(::sg::test::contains_all(::sg::test::error_of([&] { expr; }), {__VA_ARGS__}))

}  // namespace sg::test
