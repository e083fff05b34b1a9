// Fuzzes the config parser: JSON text -> model, loss, optimizer, data and train settings. It
// reads no data files and builds no parameters, so any large allocation here is a finding.
// A clear sg::Error is the right answer to bad input; a crash, a sanitizer report or any other
// exception (nlohmann's type_error, std::out_of_range, ...) escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "stepgraph/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    sg::RunConfig rc = sg::parse_config_text(text, "fuzz.json");
    (void)rc;
  } catch (const sg::Error&) {
  }
  return 0;
}
