// Fuzzes the .npy reader (magic, version, the Python-dict header, dtype, shape, data) through a
// file. sg::Error is the expected outcome of bad input.
#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "stepgraph/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sg::fuzz::InputFile file("input.npy");
  const std::string& path = file.write(data, size);
  try {
    sg::HostArray a = sg::read_npy(path);
    (void)a;
  } catch (const sg::Error&) {
  }
  return 0;
}
