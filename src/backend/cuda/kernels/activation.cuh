// Activations in CUDA kernels' epilogues (the dense kernels', the fused loss's input gradient).
#pragma once

#include "backend/activation_math.h"

namespace sg::cuda {

// An epilogue's activation and activation derivative. Inlined at every output, act_forward's and
// act_derivative's switches (tanh, GELU, sin with its range reduction, ...) made the k-sliced
// kernel's epilogue ~50 KB of code for 8 outputs a thread, and on an H200 fetching it cost ~1.2
// us of a 1024 x 256 x 256 product's 8 (bench/RESULTS.md, 2026-11-30 12:15-12:55 UTC). ReLU
// stays inline; the others are one out-of-line call each.
__device__ __noinline__ inline float act_forward_call(Activation a, float z) { return act_forward<float>(a, z); }
__device__ __noinline__ inline float act_derivative_call(Activation a, float y, float z) {
  return act_derivative<float>(a, y, z);
}
__device__ __forceinline__ float epilogue_act(Activation a, float z) {
  if (a == Activation::None) return z;
  return a == Activation::ReLU ? act_forward<float>(Activation::ReLU, z) : act_forward_call(a, z);
}
__device__ __forceinline__ float epilogue_dact(Activation a, float y, float z) {
  if (a == Activation::None) return 1.0f;
  return a == Activation::ReLU ? act_derivative<float>(Activation::ReLU, y, z) : act_derivative_call(a, y, z);
}

}  // namespace sg::cuda
