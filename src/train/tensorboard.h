// TensorBoard scalars (--tensorboard DIR), written without TensorFlow or protobuf: an event file is
// TFRecord framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data) around
// Event protos, which are hand-encoded here (only the few fields scalars need).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

namespace sg {

namespace tensorboard {
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing.
uint32_t crc32c(const void* data, size_t bytes);
}  // namespace tensorboard

// Errors (the folder or the file cannot be created or written) are sg::Errors naming the file.
class TensorBoardWriter {
 public:
  // Creates `dir` (and parents) and a new file events.out.tfevents.<unix seconds>.<hostname>.stepgraph
  // in it (".1", ".2", ... appended when a run of the same second has that name already), whose
  // first record says the format version ("brain.Event:2").
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();  // closes; a failure there cannot be reported (call flush() to see one)
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event at `step` holding one value, or several (TensorBoard stores simple_value as float).
  void scalar(const std::string& tag, int64_t step, double value);
  void scalars(int64_t step, const std::map<std::string, double>& values);
  void flush();  // to the OS: what a killed run wrote so far stays readable

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace sg
