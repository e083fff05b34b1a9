#include "train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/files.h"
#include "stepgraph/core.h"

namespace sg {

namespace tensorboard {

namespace {

// Byte-at-a-time CRC of the reflected (LSB-first) polynomial: one table entry per byte value.
constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) c = kCrcTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

}  // namespace tensorboard

namespace {

// Little-endian whatever the host's byte order: the format fixes it.
void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// TFRecord masks its CRCs so that CRCs of data holding CRCs stay well distributed.
uint32_t masked_crc(const std::string& s) {
  const uint32_t c = tensorboard::crc32c(s.data(), s.size());
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Protobuf wire format: a key is (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_varint(std::string& s, uint64_t v) {
  for (; v >= 0x80; v >>= 7) s += static_cast<char>((v & 0x7F) | 0x80);
  s += static_cast<char>(v);
}
void put_bytes(std::string& s, int field, const std::string& bytes) {
  put_varint(s, (field << 3) | 2);
  put_varint(s, bytes.size());
  s += bytes;
}

// Event: 1 wall_time (double), 2 step (int64), 3 file_version (string), 5 summary (Summary).
std::string event(int64_t step) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  uint64_t bits = 0;
  std::memcpy(&bits, &now, sizeof bits);
  std::string e;
  put_varint(e, (1 << 3) | 1);
  put_le(e, bits, 8);
  put_varint(e, 2 << 3);
  put_varint(e, static_cast<uint64_t>(step));  // a negative int64 is 10 bytes, as protobuf encodes it
  return e;
}

// Summary: 1 value (repeated Value); Value: 1 tag (string), 2 simple_value (float).
void put_value(std::string& summary, const std::string& tag, double value) {
  // Beyond float's range it is an infinity (a plain cast would be undefined behaviour).
  const float f = static_cast<float>(std::fabs(value) > std::numeric_limits<float>::max() ? value * HUGE_VAL : value);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  std::string v;
  put_bytes(v, 1, tag);
  put_varint(v, (2 << 3) | 5);
  put_le(v, bits, 4);
  put_bytes(summary, 1, v);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  SG_REQUIRE(!ec, "cannot create TensorBoard folder '", dir, "': ", errno_text(ec.value()));
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string base =
      (std::filesystem::path(dir) / cat("events.out.tfevents.", seconds, ".", host_name(), ".stepgraph")).string();
  // O_EXCL: never write over another run's file (two runs of one second into one folder).
  int fd = -1;
  for (int n = 0; fd < 0; ++n) {
    path_ = n == 0 ? base : cat(base, ".", n);
    fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    SG_REQUIRE(fd >= 0 || errno == EEXIST, "cannot create TensorBoard event file '", path_, "': ", errno_text(errno));
  }
  f_ = ::fdopen(fd, "wb");
  if (!f_) {
    const int err = errno;
    ::close(fd);
    throw Error(cat("cannot open TensorBoard event file '", path_, "': ", errno_text(err)));
  }
  std::string first = event(0);
  put_bytes(first, 3, "brain.Event:2");  // the version TensorBoard expects of event files
  write_record(first);
  flush();  // the file is valid, and seen by TensorBoard, from the start
}

TensorBoardWriter::~TensorBoardWriter() { std::fclose(f_); }

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) { scalars(step, {{tag, value}}); }

void TensorBoardWriter::scalars(int64_t step, const std::map<std::string, double>& values) {
  if (values.empty()) return;
  std::string summary;
  for (const auto& [tag, value] : values) put_value(summary, tag, value);
  std::string e = event(step);
  put_bytes(e, 5, summary);
  write_record(e);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string r;
  put_le(r, data.size(), 8);
  put_le(r, masked_crc(r), 4);
  r += data;
  put_le(r, masked_crc(data), 4);
  SG_REQUIRE(std::fwrite(r.data(), 1, r.size(), f_) == r.size(), "cannot write TensorBoard event file '", path_,
             "': ", errno_text(errno));
}

void TensorBoardWriter::flush() {
  SG_REQUIRE(std::fflush(f_) == 0, "cannot write TensorBoard event file '", path_, "': ", errno_text(errno));
}

}  // namespace sg
