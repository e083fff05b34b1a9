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

// One op timed alone (`stepgraph bench-op sdpa`): cuDNN's fused scaled dot-product attention in
// bf16 on random data, [B, S, H*D] rows as the attention layer's. Reports the median forward and
// backward times of `iters` back-to-back calls, the two captured in one CUDA graph and replayed,
// TFLOP/s, and the plans cuDNN built. Needs a GPU and a build with cuDNN.
struct SdpaBench {
  int64_t batch = 4, heads = 16, seq = 1024, dim = 64;
  bool causal = true;
  bool deterministic = true;  // the backward engine that sums dQ in a fixed order
  int iters = 50;
};
nlohmann::json bench_sdpa(const SdpaBench& b);

// One op timed alone (`stepgraph bench-op conv`): one cuDNN graph conv_fprop -> bias add -> ReLU
// in bf16 (bf16 tensors, fp32 sums, bias and ReLU), NHWC images and KRSC filters, on random data
// in [-1, 1). The plan is chosen as a network's convolution plans are (`autotune`; no plan
// cache), its output checked against a double-precision reference at 4096 sampled points (an
// Error when one is off by more than bf16 rounding), then timed: the median of 5 repeats of
// `iters` eager calls, and of `iters` replays of a CUDA graph holding one call (whose output must
// equal the eager one bit for bit). Reports us, TFLOP/s and the engine. Defaults: the seed's
// shape, N32 C128 56x56 -> K256 3x3, padding 1, stride 1. Needs a GPU and a build with cuDNN.
struct ConvBench {
  int64_t batch = 32, channels = 128, height = 56, width = 56;
  int64_t filters = 256, kernel = 3, pad = 1, stride = 1;
  bool bias = true, relu = true;
  Autotune autotune = Autotune::Heuristic;
  int iters = 50;
};
// Checks the options (no GPU needed): every size positive, padding >= 0, the kernel no larger
// than the padded image. Throws an Error naming the option; returns the output's {height, width}.
std::pair<int64_t, int64_t> conv_bench_output_size(const ConvBench& b);
nlohmann::json bench_conv(const ConvBench& b);

}  // namespace sg
