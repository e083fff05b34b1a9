// Helpers of the configuration and run tests: train_run with its progress kept in a string, a
// small valid configuration, and the message parse_config gives for a bad one.
#pragma once

#include <sstream>
#include <string>

#include "stepgraph/config.h"
#include "stepgraph/run.h"
#include "test_errors.h"

namespace sg::test {

// train_run with its progress in `sink` and its files in `out` (none when empty); `o` may be
// changed before train.
struct Training {
  std::ostringstream sink;
  RunOptions o;
  explicit Training(const std::string& out = "") {
    o.out = &sink;
    o.out_dir = out;
  }
  RunSummary train(const RunConfig& cfg) { return train_run(cfg, o); }
  RunSummary train(const nlohmann::json& j) { return train(parse_config(j)); }
};

// A run whose progress nobody reads.
inline RunSummary quiet_run(const RunConfig& cfg) { return Training().train(cfg); }

// A two-layer MLP on the default digits data, 5 steps on the CPU, nothing logged.
inline nlohmann::json small_config() {
  return nlohmann::json::parse(R"({
    "model": {"layers": [
      {"type": "dense", "units": 32, "activation": "relu"},
      {"type": "dense", "units": 10}
    ]},
    "train": {"steps": 5, "batch_size": 16, "log_every": 0, "device": "cpu"}
  })");
}

inline std::string parse_error(const nlohmann::json& j) { return error_of([&] { parse_config(j); }); }

}  // namespace sg::test
