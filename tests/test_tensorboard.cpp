// TensorBoard event files (src/train/tensorboard.h), read back by a reader of the format's own: the
// TFRecord framing and both CRCs of every record, then the Event protos in it.
#include "train/tensorboard.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "test_errors.h"

namespace sg::test {
namespace {

uint64_t little_endian(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(s.at(at + i))) << (8 * i);
  return v;
}

uint32_t masked_crc(const std::string& s) {
  const uint32_t c = tensorboard::crc32c(s.data(), s.size());
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// The records' data; throws unless every length and both CRCs of every record check out.
std::vector<std::string> read_records(const std::string& path) {
  const std::string raw = read_bytes(path);
  std::vector<std::string> out;
  for (size_t at = 0; at < raw.size();) {
    if (raw.size() - at < 12) throw std::runtime_error("a record header cut short");
    const uint64_t n = little_endian(raw, at, 8);
    if (little_endian(raw, at + 8, 4) != masked_crc(raw.substr(at, 8))) throw std::runtime_error("length CRC");
    if (raw.size() - at - 12 < n + 4) throw std::runtime_error("a record cut short");
    out.push_back(raw.substr(at + 12, n));
    if (little_endian(raw, at + 12 + n, 4) != masked_crc(out.back())) throw std::runtime_error("data CRC");
    at += 12 + n + 4;
  }
  return out;
}

// A protobuf message's fields: number, wire type, and the varint or the bytes (fixed or length-delimited).
struct Field {
  uint64_t number = 0, type = 0, varint = 0;
  std::string bytes;
};
std::vector<Field> fields(const std::string& m) {
  std::vector<Field> out;
  size_t at = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto b = static_cast<unsigned char>(m.at(at++));
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("a varint of more than 10 bytes");
  };
  while (at < m.size()) {
    Field f;
    const uint64_t key = varint();
    f.number = key >> 3;
    f.type = key & 7;
    if (f.type == 0) {
      f.varint = varint();
    } else {
      const uint64_t n = f.type == 1 ? 8 : f.type == 5 ? 4 : f.type == 2 ? varint() : throw std::runtime_error("type");
      if (m.size() - at < n) throw std::runtime_error("a field cut short");
      f.bytes = m.substr(at, n);
      at += n;
    }
    out.push_back(f);
  }
  return out;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
};
Event decode(const std::string& data) {
  Event e;
  for (const Field& f : fields(data)) {
    if (f.number == 1 && f.type == 1) std::memcpy(&e.wall_time, f.bytes.data(), 8);
    if (f.number == 2 && f.type == 0) e.step = static_cast<int64_t>(f.varint);
    if (f.number == 3 && f.type == 2) e.file_version = f.bytes;
    if (f.number == 5 && f.type == 2)
      for (const Field& v : fields(f.bytes)) {  // Summary.value
        std::pair<std::string, float> tv;
        for (const Field& g : fields(v.bytes)) {
          if (g.number == 1 && g.type == 2) tv.first = g.bytes;
          if (g.number == 2 && g.type == 5) std::memcpy(&tv.second, g.bytes.data(), 4);
        }
        e.values.push_back(tv);
      }
  }
  return e;
}

TEST(TensorBoard, Crc32cMatchesTheStandardCheckValues) {
  EXPECT_EQ(tensorboard::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(tensorboard::crc32c("", 0), 0u);
  EXPECT_EQ(tensorboard::crc32c(std::string(32, '\0').data(), 32), 0x8A9136AAu);  // RFC 3720, B.4
  EXPECT_EQ(tensorboard::crc32c(std::string(32, '\xff').data(), 32), 0x62A8AB43u);
}

TEST(TensorBoard, ScalarsReadBackWithValidFraming) {
  const std::string dir = fresh_dir("tensorboard", "scalars") + "/a/b";  // parents are created
  TensorBoardWriter w(dir);
  EXPECT_EQ(w.path().rfind(dir + "/events.out.tfevents.", 0), 0u) << w.path();
  EXPECT_EQ(w.path().substr(w.path().size() - 10), ".stepgraph") << w.path();
  w.scalar("loss", 10, 0.5);
  w.scalars(20, {{"val/accuracy", 0.75}, {"loss", 0.1}});
  w.scalar("big", -1, 1e300);  // a negative step (10-byte varint); a value beyond float's range
  w.flush();                   // readable while the writer is open: a killed run keeps this much

  const std::vector<std::string> records = read_records(w.path());
  ASSERT_EQ(records.size(), 4u);
  std::vector<size_t> lengths;
  for (const std::string& r : records) lengths.push_back(r.size());
  // wall_time 9 bytes, step 2 (11 when negative), then file_version 2 + 13 or a summary: 2, and per value
  // 2 + (2 + tag) + 5.
  EXPECT_EQ(lengths, (std::vector<size_t>{26, 26, 47, 34}));

  const Event first = decode(records[0]);
  EXPECT_EQ(first.file_version, "brain.Event:2");
  EXPECT_TRUE(first.values.empty());
  EXPECT_GT(first.wall_time, 1.5e9);
  const Event loss = decode(records[1]), both = decode(records[2]), big = decode(records[3]);
  EXPECT_EQ(loss.step, 10);
  EXPECT_EQ(loss.values, (std::vector<std::pair<std::string, float>>{{"loss", 0.5f}}));
  EXPECT_GE(loss.wall_time, first.wall_time);
  EXPECT_EQ(both.step, 20);
  EXPECT_EQ(both.values, (std::vector<std::pair<std::string, float>>{{"loss", 0.1f}, {"val/accuracy", 0.75f}}));
  EXPECT_EQ(big.step, -1);
  EXPECT_EQ(big.values, (std::vector<std::pair<std::string, float>>{{"big", INFINITY}}));
}

TEST(TensorBoard, ASecondWriterNeverOverwritesTheFirst) {
  const std::string dir = fresh_dir("tensorboard", "two");
  TensorBoardWriter a(dir);
  a.scalar("loss", 1, 1.0);
  a.flush();
  TensorBoardWriter b(dir);  // most likely the same second: the name gets a suffix
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(read_records(a.path()).size(), 2u);
  EXPECT_EQ(read_records(b.path()).size(), 1u);
}

TEST(TensorBoard, AFolderThatCannotBeMadeOrWrittenIsAnError) {
  const std::string dir = fresh_dir("tensorboard", "bad");
  const std::string file = write_file(dir, "plain", "a file, not a folder");
  EXPECT_ERROR(TensorBoardWriter{file + "/tb"}, "cannot create TensorBoard folder '" + file + "/tb': ");
  EXPECT_ERROR(TensorBoardWriter{file}, "cannot create TensorBoard folder '" + file + "': ");
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string locked = dir + "/locked";
    ASSERT_EQ(::mkdir(locked.c_str(), 0555), 0);
    EXPECT_ERROR(TensorBoardWriter{locked}, "cannot create TensorBoard event file '" + locked + "/events.out.tfevents.",
                 "Permission denied (errno 13)");
  }
}

}  // namespace
}  // namespace sg::test
