// Where two describe() strings differ ("sequential(dense(256, relu, ...), ...)"), for messages
// such as a checkpoint saved from another model: the innermost call that differs, both ways.
#pragma once

#include <string>

namespace sg {

// "" when equal; otherwise e.g.
//   "dense(256, relu, init=he, bias) in the checkpoint, dense(256, tanh, init=he, bias) here
//    (item 1 of sequential(...))"
std::string describe_diff(const std::string& saved, const std::string& here);

}  // namespace sg
