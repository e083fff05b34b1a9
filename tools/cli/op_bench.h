// `stepgraph bench-op`: single cuDNN ops timed alone, for bench/bench_ops_vs_torch.py. A tool
// of the command line, not of the library: it reaches into the CUDA backend's cuDNN wrappers.
#pragma once

#include <cstdint>
#include <utility>

#include <nlohmann/json.hpp>

#include "stepgraph/backend.h"

namespace sg {

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
