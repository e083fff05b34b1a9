#include <gtest/gtest.h>

#include <filesystem>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::filesystem::create_directories(SG_TEST_TMPDIR);
  return RUN_ALL_TESTS();
}
