// Reading and writing the safetensors format (https://huggingface.co/docs/safetensors):
// 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, ...,
// "__metadata__": {string: string}}, then the raw little-endian tensor bytes.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/core.h"

namespace sg {

struct SafetensorsFile {
  std::vector<std::pair<std::string, HostArray>> tensors;  // in file order
  std::map<std::string, std::string> metadata;

  const HostArray* find(const std::string& name) const;  // nullptr if absent
};

// Writes atomically: to a temporary file beside `path`, flushed and fsync'ed, then renamed over
// `path`. On any failure the previous file at `path` is untouched and an Error is thrown.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, HostArray>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads and validates the whole file (header JSON, dtypes F32/I32/U64, shapes, offsets within
// the file and non-overlapping, no trailing garbage). Errors name the file and the tensor.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace sg
