// What stepgraph's dense-product kernels share: dense_kernels.cu (SIMT tiles, split-k row slabs,
// the ordered sum of split partials), dense_tc.cu (3xTF32 on tensor cores) and skinny_dense.cu
// (layers of at most 4 outputs). Internal to those files; the interface is dense_kernels.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/activation_math.h"
#include "backend/cuda/dense_kernels.cuh"

namespace sg::cuda::detail {

// The per-element epilogue: (+= old C) (+ bias) (Z = v) (v = act(v)) (v *= dact').
__device__ __forceinline__ void store_output(const DenseGemm& g, int64_t m, int64_t n, float v) {
  const int64_t idx = m * g.ldc + n;
  if (g.accumulate) v += g.C[idx];
  if (g.bias && m < g.bias_rows) v += g.bias[n];
  if (g.Z) g.Z[idx] = v;
  if (g.act != Activation::None) v = act_forward<float>(g.act, v);
  if (g.dact != Activation::None)
    v *= act_derivative<float>(g.dact, g.dact_y ? g.dact_y[idx] : 0.0f, g.dact_z ? g.dact_z[idx] : 0.0f);
  g.C[idx] = v;
}
__device__ __forceinline__ void store_rowsum(const DenseGemm& g, int64_t m, float rs) {
  float* r = g.rowsum + m;
  *r = g.rowsum_accumulate ? *r + rs : rs;
}

// k-range of split `s`: whole slabs of kBK, so every split but the last is full.
template <int kBK>
__device__ __forceinline__ void split_range(const DenseGemm& g, int s, int64_t* k_begin, int64_t* k_end) {
  const int64_t per = ((g.K + g.splits - 1) / g.splits + kBK - 1) / kBK * kBK;
  *k_begin = s * per;
  *k_end = *k_begin + per < g.K ? *k_begin + per : g.K;
}

inline int64_t tiles(int64_t M, int64_t N, int t) { return ((M + t - 1) / t) * ((N + t - 1) / t); }
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Split products onto at most 256 outputs run on split_gemm_small_kernel.
inline bool small_output(int64_t M, int64_t N) { return M * N <= 256 && M <= 256; }

// Adds the `splits` partial sums of a split product (or of the skinny backward's blocks) in
// split order, then applies g's epilogue (dense_kernels.cu).
void launch_reduce(const DenseGemm& g, cudaStream_t s);

// The 3xTF32 tensor-core kernel (dense_tc.cu): its output tile, whether it takes a product
// (own_gemm_tensor_cores), and its launch (split partials still need launch_reduce).
constexpr int kTcTile = 64;
bool tc_layout(const DenseGemm& g);
void launch_tc(const DenseGemm& g, cudaStream_t s);

}  // namespace sg::cuda::detail
