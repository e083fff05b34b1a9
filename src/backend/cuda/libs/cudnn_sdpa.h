// Scaled dot-product attention through cuDNN's fused SDPA graphs (cudnn_sdpa.cpp, compiled only
// with the frontend headers: STEPGRAPH_HAVE_CUDNN). Like cudnn_conv.h, this header keeps the
// frontend out of every other translation unit.
//
// Layout as the CPU reference (cpu_kernels.h AttentionShape): Q, K, V, O and their gradients are
// [B, S, H*D] (heads interleaved in each row, as a projection writes them), bf16; the softmax
// statistics are the natural-log logsumexp of each score row, [B, H, S] fp32 (the CPU's L).
// cuDNN's SDPA engines take fp16/bf16 only; their products accumulate in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/libs/cudnn_conv.h"

namespace sg::cuda {

struct SdpaGeometry {
  int64_t B = 0, S = 0, H = 1, D = 0;
  bool causal = false;  // key j attends to query i only when j <= i
  float scale = 1.0f;   // scores = scale * q . k (usually 1/sqrt(D))
};

// Any built cuDNN graph with its device pointers bound (the interface conv plans have).
using CudnnPlan = ConvPlan;

// O = softmax(scale * Q K^T (masked)) V, and the statistics backward needs.
std::unique_ptr<CudnnPlan> sdpa_forward_plan(const std::shared_ptr<CudnnContext>& ctx, const SdpaGeometry& g,
                                             const void* Q, const void* K, const void* V, void* O, float* stats,
                                             std::string* why);
// dQ, dK, dV from dO, the forward's inputs, output and statistics. `deterministic` picks the
// engine that sums dQ in a fixed order (needed for graph replay to equal eager bitwise).
std::unique_ptr<CudnnPlan> sdpa_backward_plan(const std::shared_ptr<CudnnContext>& ctx, const SdpaGeometry& g,
                                              const void* Q, const void* K, const void* V, const void* O,
                                              const void* dO, const float* stats, void* dQ, void* dK, void* dV,
                                              bool deterministic, std::string* why);

}  // namespace sg::cuda
