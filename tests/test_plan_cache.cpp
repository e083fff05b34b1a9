// The plan cache's file format without a GPU: round trip, and every way an entry can be wrong
// (truncated, a flipped byte, another key, another format version, trailing bytes) is detected,
// warned about and reported as Rejected, never used.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backend/plan_cache.h"

namespace sg::test {
namespace {

namespace fs = std::filesystem;
using namespace sg::plan_cache;

Entry sample_entry() {
  Entry e;
  e.key = "op: conv_fprop + bias + relu\nx: 256x32x32x3\ngpu: test\ncudnn: 91400\n";
  e.note = "engine eng0_k2=1; tuned: 3 plans";
  for (int i = 0; i < 1000; ++i) e.payload.push_back(static_cast<uint8_t>((i * 37 + 11) & 0xff));
  return e;
}

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::path(SG_TEST_TMPDIR) / "plan_cache" / name;
  fs::remove_all(p);
  return p;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_all(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

TEST(PlanCache, EncodeDecodeRoundTrip) {
  const Entry e = sample_entry();
  const std::vector<uint8_t> b = encode(e);
  Entry d;
  ASSERT_EQ(decode(b, e.key, &d), "");
  EXPECT_EQ(d.key, e.key);
  EXPECT_EQ(d.note, e.note);
  EXPECT_EQ(d.payload, e.payload);
  Entry empty;
  empty.key = "k";
  ASSERT_EQ(decode(encode(empty), "k", &d), "");
  EXPECT_TRUE(d.payload.empty());
}

TEST(PlanCache, EveryTruncationIsDetected) {
  const Entry e = sample_entry();
  const std::vector<uint8_t> b = encode(e);
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + n);
    EXPECT_NE(decode(cut, e.key, nullptr), "") << "truncated to " << n << " of " << b.size() << " bytes";
  }
  std::vector<uint8_t> longer = b;
  longer.push_back(0);
  EXPECT_NE(decode(longer, e.key, nullptr).find("trailing bytes"), std::string::npos);
}

TEST(PlanCache, EveryFlippedByteIsDetected) {
  const Entry e = sample_entry();
  const std::vector<uint8_t> b = encode(e);
  for (size_t i = 0; i < b.size(); ++i) {
    std::vector<uint8_t> bad = b;
    bad[i] ^= 0x20;
    EXPECT_NE(decode(bad, e.key, nullptr), "") << "byte " << i << " flipped";
  }
}

TEST(PlanCache, ForeignKeyAndOtherVersionAreRefused) {
  const Entry e = sample_entry();
  const std::vector<uint8_t> b = encode(e);
  const std::string why = decode(b, e.key + "cudnn: 91900\n", nullptr);
  EXPECT_NE(why.find("another key"), std::string::npos) << why;
  std::vector<uint8_t> v2 = b;
  v2[8] = static_cast<uint8_t>(kFormatVersion + 1);  // the version field follows the magic
  const std::string why2 = decode(v2, e.key, nullptr);
  EXPECT_NE(why2.find("format version"), std::string::npos) << why2;
  std::vector<uint8_t> junk = {'{', '"', 'a', '"', ':', '1', '}', '\n', 0, 0, 0, 0};
  EXPECT_NE(decode(junk, e.key, nullptr).find("magic"), std::string::npos);
}

TEST(PlanCache, KeyHashNamesTheFile) {
  EXPECT_EQ(key_hash("a").size(), 16u);
  EXPECT_NE(key_hash("a"), key_hash("b"));
  EXPECT_EQ(key_hash("same"), key_hash("same"));
  PlanCache c("/some/dir");
  EXPECT_EQ(c.path_for("same"), "/some/dir/" + key_hash("same") + ".sgplan");
}

TEST(PlanCache, StoreLoadAndRecoverOnDisk) {
  const fs::path dir = fresh_dir("store_load");
  PlanCache c(dir.string());
  const Entry e = sample_entry();
  EXPECT_EQ(c.load(e.key).status, PlanCache::Status::Miss);
  ASSERT_EQ(c.store(e), "");  // creates the folder
  PlanCache::Lookup l = c.load(e.key);
  ASSERT_EQ(l.status, PlanCache::Status::Hit) << l.problem;
  EXPECT_EQ(l.entry.payload, e.payload);
  EXPECT_EQ(l.entry.note, e.note);
  EXPECT_EQ(l.path, c.path_for(e.key));
  // No temporary file is left behind.
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(f.path().extension(), ".sgplan");
  }
  EXPECT_EQ(files, 1);

  // Garbled: rejected with a warning naming the file, then store() replaces it.
  std::vector<uint8_t> b = read_all(l.path);
  b[b.size() / 2] ^= 0xff;
  write_all(l.path, b);
  testing::internal::CaptureStderr();
  PlanCache::Lookup bad = c.load(e.key);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(bad.status, PlanCache::Status::Rejected);
  EXPECT_NE(err.find(l.path), std::string::npos) << err;
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
  ASSERT_EQ(c.store(e), "");
  EXPECT_EQ(c.load(e.key).status, PlanCache::Status::Hit);

  // Truncated.
  b = read_all(l.path);
  b.resize(b.size() - 10);
  write_all(l.path, b);
  testing::internal::CaptureStderr();
  EXPECT_EQ(c.load(e.key).status, PlanCache::Status::Rejected);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;

  // Foreign: a valid entry for another key copied under this key's name.
  Entry other = e;
  other.key = e.key + "autotune: exhaustive\n";
  write_all(l.path, encode(other));
  testing::internal::CaptureStderr();
  EXPECT_EQ(c.load(e.key).status, PlanCache::Status::Rejected);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("another key"), std::string::npos) << err;
}

TEST(PlanCache, DirectoryResolution) {
  const char* saved = std::getenv("SG_PLAN_CACHE");
  const std::string keep = saved ? saved : "";
  unsetenv("SG_PLAN_CACHE");
  EXPECT_EQ(resolve_dir("/x/y"), "/x/y");
  EXPECT_EQ(resolve_dir("off"), "");
  setenv("SG_PLAN_CACHE", "/from/env", 1);
  EXPECT_EQ(resolve_dir(""), "/from/env");
  EXPECT_EQ(resolve_dir("/config/wins"), "/config/wins");
  setenv("SG_PLAN_CACHE", "off", 1);
  EXPECT_EQ(resolve_dir(""), "");
  unsetenv("SG_PLAN_CACHE");
  if (std::getenv("XDG_CACHE_HOME") == nullptr && std::getenv("HOME") != nullptr)
    EXPECT_EQ(resolve_dir(""), std::string(std::getenv("HOME")) + "/.cache/stepgraph/cudnn");
  PlanCache off("");
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.load("k").status, PlanCache::Status::Miss);
  if (!keep.empty()) setenv("SG_PLAN_CACHE", keep.c_str(), 1);
}

TEST(PlanCache, UnwritableFolderWarnsAndDoesNotThrow) {
  const fs::path dir = fresh_dir("unwritable");
  fs::create_directories(dir.parent_path());
  write_all(dir.string(), {1, 2, 3});  // a file where the folder should be
  PlanCache c(dir.string());
  testing::internal::CaptureStderr();
  const std::string why = c.store(sample_entry());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(why, "");
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  fs::remove(dir);
}

}  // namespace
}  // namespace sg::test
