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
  // Tensors stored in another type, converted on reading: name -> the file's dtype ("F64").
  std::map<std::string, std::string> converted_from;

  const HostArray* find(const std::string& name) const;  // nullptr if absent
};

// Writes atomically: to a temporary file beside `path`, flushed and fsync'ed, then renamed over
// `path`. On any failure the previous file at `path` is untouched and an Error is thrown.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, HostArray>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads and validates the whole file (header JSON, dtypes, shapes, offsets within the file and
// non-overlapping, no trailing garbage). Errors name the file and the tensor. F32, I32 and U64
// are read as they are; F64, F16 and BF16 become f32 and I64 becomes i32, an element out of the
// new type's range being an Error (never clamped).
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace sg
