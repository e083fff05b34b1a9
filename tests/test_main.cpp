#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::filesystem::create_directories(SG_TEST_TMPDIR);
  // The GPU tests' cuDNN plans go to a cache of their own in the build folder, not the user's
  // ~/.cache (a test that needs another folder, or none, says so in its options).
  setenv("SG_PLAN_CACHE", (std::string(SG_TEST_TMPDIR) + "/plan_cache_suite").c_str(), 0);
  return RUN_ALL_TESTS();
}
