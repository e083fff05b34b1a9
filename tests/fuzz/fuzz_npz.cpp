// Fuzzes the .npz reader: the zip structures (end record, zip64, central directory, local
// headers), stored and deflated members, and the .npy inside. Sizes that a small archive claims
// must not turn into huge allocations (libFuzzer's -rss_limit_mb / -malloc_limit_mb catch it).
#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "stepgraph/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sg::fuzz::InputFile file("input.npz");
  const std::string& path = file.write(data, size);
  try {
    auto arrays = sg::read_npz(path);
    (void)arrays;
  } catch (const sg::Error&) {
  }
  return 0;
}
