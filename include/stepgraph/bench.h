// Measuring and checking a configuration on the GPU: `stepgraph bench` and `--mode verify`.
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "stepgraph/run.h"

namespace sg {

struct BenchResult {
  std::string config, device, gpu;
  int64_t batch = 0, steps = 0;
  double eager_us_per_step = 0, graph_us_per_step = 0;
  size_t graph_nodes = 0;
  size_t peak_device_bytes = 0;  // everything the backend allocated at its peak (arenas, workspace)
  size_t arena_bytes = 0;        // the step's memory plan: persistent + transient peak
  bool tf32 = false;                 // precision tf32 (TF32 inputs: not fp32-accurate)
  std::string precision = "fp32";  // train.precision: fp32, tf32 or tf32x3
  std::string attention = "fp32";  // train.attention: fp32 | cudnn_bf16
  bool deterministic = true;       // train.deterministic
  bool fusion = true;              // train.fusion
  bool concurrent = true;          // train.concurrent
  std::vector<std::pair<std::string, double>> per_op_us;  // each op timed alone (eager)
  std::string lowering;                                   // explain's lowering notes
  // Data parallel (`stepgraph launch --gpus N bench`): every rank times its own steps with the
  // gradient all-reduces in them; graph_us_per_step is the slowest rank's, rank_graph_us each one's.
  int ranks = 1, rank = 0;
  std::vector<double> rank_graph_us;
  nlohmann::json to_json() const;
};

// Times `steps` steps in eager mode and `steps` graph replays (median of 5 repeats after a
// warm-up) on one batch already on the device, as the framework baselines are timed. In a
// data-parallel launch every rank does so (per-op timings are skipped) and rank 0 reports.
BenchResult bench_run(const RunConfig& cfg, const RunOptions& opt, int64_t steps,
                      const std::string& config_name);

struct VerifyResult {
  int64_t steps = 0;
  double graph_vs_eager = 0;  // largest relative difference (losses and final state): 0 expected
  double gpu_vs_cpu = 0;      // largest relative difference to the CPU reference, per step
  // Where: "loss at step S", a state tensor's name (graph vs eager: the final state), or a state
  // tensor "NAME at step S" (the CPU after step S from the graph's state before it).
  std::string graph_vs_eager_at, gpu_vs_cpu_at;
  double tolerance = 0;
  bool ok = false;
  nlohmann::json to_json() const;
};

// Runs the same batches through CUDA eager, CUDA graph and the CPU backend for `steps` steps.
// Eager and graph run free: their losses every step and their final states must be bitwise equal.
// The CPU starts every step from the graph's state (a temporary checkpoint), and its loss and
// whole state after the step are compared with the graph's (relative L2 per tensor). ok is false
// when graph and eager differ or a CPU difference is above `tolerance`.
VerifyResult verify_run(const RunConfig& cfg, const RunOptions& opt, int64_t steps, double tolerance);

}  // namespace sg
