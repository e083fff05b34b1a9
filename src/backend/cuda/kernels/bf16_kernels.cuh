// fp32 <-> bf16 conversion around library calls that take bf16 (cuDNN's fused attention, see
// lower/sequence.cpp): up to three tensors of one size per launch (Q, K, V; dQ, dK, dV).
// To bf16 rounds to nearest, ties to even (__float2bfloat16_rn; NaN stays NaN); back to fp32 is
// exact, and can add into the output (a gradient that accumulates).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace sg::cuda {

constexpr int kMaxBf16Tensors = 3;

// Tensors [k] = (fp32, bf16) pairs of n elements each; count of them in use (1..3).
struct Bf16Pairs {
  const float* f32_in[kMaxBf16Tensors] = {};            // to_bf16: sources
  float* f32_out[kMaxBf16Tensors] = {};                 // from_bf16: destinations
  __nv_bfloat16* bf16_out[kMaxBf16Tensors] = {};        // to_bf16: destinations
  const __nv_bfloat16* bf16_in[kMaxBf16Tensors] = {};   // from_bf16: sources
  bool accumulate[kMaxBf16Tensors] = {};                // from_bf16: out += value
  int count = 0;
};

// bf16_out[k][i] = round_to_nearest_even(f32_in[k][i]).
void to_bf16(const Bf16Pairs& p, int64_t n, cudaStream_t s);
// f32_out[k][i] (+)= bf16_in[k][i].
void from_bf16(const Bf16Pairs& p, int64_t n, cudaStream_t s);

}  // namespace sg::cuda
