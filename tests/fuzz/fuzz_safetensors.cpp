// Fuzzes the checkpoint reader (header JSON, dtypes, shapes, offsets, data) through a file, as
// train --resume and eval read it. sg::Error is the expected outcome of bad input.
#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "stepgraph/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sg::fuzz::InputFile file("input.safetensors");
  const std::string& path = file.write(data, size);
  try {
    sg::SafetensorsFile st = sg::read_safetensors(path);
    (void)st;
  } catch (const sg::Error&) {
  }
  return 0;
}
