// The environment variables the library reads, and the one place that reads them. Each is
// documented (docs/configuration.md, "Environment variables") and says where things are (a cache folder, the
// CUDA runtime's name) or how a process joins a distributed run; none changes what a step
// computes or how: that is an option (LowerOptions, the config's train.*).
#pragma once

#include <string>
#include <vector>

namespace sg::env {

// The value of `name`, or nullptr when it is unset. `name` must be one of documented(): asking
// for another is a programming error (an Error naming it), so a new variable needs its row
// there, and in docs/configuration.md, before anything can read it.
const char* get(const char* name);

// Sets `name` (documented) for this process unless it is set already: a default chosen by the
// library for a dependency that reads the environment itself (NCCL, the cuDNN frontend).
void set_default(const char* name, const char* value);

// Every variable of this process as NAME=VALUE, in order: what a launcher hands its children.
std::vector<std::string> snapshot();

// The variables get() reads.
const std::vector<std::string>& documented();

}  // namespace sg::env
