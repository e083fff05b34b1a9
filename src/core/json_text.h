// Strict JSON from untrusted text (configs, safetensors headers): bounded size and nesting, no
// duplicate keys, no numbers out of range, no bytes after the value. Every error names the
// source, the line and column, and the JSON path it happened at:
//   config 'run.json': line 3, column 18 (train.steps): duplicate key "steps" (first at line 3, column 5)
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace sg {

struct JsonLimits {
  // Deeper nesting is refused before it is built: copies and dumps of nlohmann values recurse,
  // and a config needs a handful of levels.
  size_t max_depth = 64;
  size_t max_bytes = size_t{64} << 20;
};

// `what` names the source in errors, e.g. "config 'run.json'". Throws sg::Error.
template <class BasicJson>
BasicJson parse_json_text(const std::string& text, const std::string& what, const JsonLimits& limits = {});

extern template nlohmann::json parse_json_text<nlohmann::json>(const std::string&, const std::string&,
                                                               const JsonLimits&);
extern template nlohmann::ordered_json parse_json_text<nlohmann::ordered_json>(const std::string&,
                                                                               const std::string&,
                                                                               const JsonLimits&);

}  // namespace sg
