// What stepgraph's dense-product kernels share: dense_kernels.cu (SIMT tiles, split-k row slabs,
// the ordered sum of split partials), dense_tc.cu (3xTF32 on tensor cores), skinny_dense.cu
// (layers of at most 4 outputs), dense_sliced.cu (the k-sliced kernel) and dense_wgrad.cu (batched
// weight gradients; these two share the FP64 tensor-core mma). Internal to those files; the
// interface is dense_kernels.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/activation_math.h"
#include "backend/cuda/kernels/activation.cuh"
#include "backend/cuda/kernels/dense_dispatch.h"
#include "backend/cuda/kernels/dense_kernels.cuh"

namespace sg::cuda::detail {

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The per-element epilogue: (+= old C) (+ bias) (Z = v) (v = act(v)) (v *= dact'). bias false:
// the caller added it already (in fp64, before rounding: the FP64 tensor cores' forward).
__device__ __forceinline__ void store_output(const DenseGemm& g, int64_t m, int64_t n, float v, bool bias = true) {
  const int64_t idx = m * g.ldc + n;
  if (g.accumulate) v += g.C[idx];
  if (bias && g.bias && m < g.bias_rows) v += g.bias[n];
  if (g.Z) g.Z[idx] = v;
  v = epilogue_act(g.act, v);
  if (g.dact != Activation::None)
    v *= epilogue_dact(g.dact, g.dact_y ? g.dact_y[idx] : 0.0f, g.dact_z ? g.dact_z[idx] : 0.0f);
  g.C[idx] = v;
}
// The same for four consecutive outputs (m, n .. n + 3) as float4 loads and stores: ldc, n and
// the pointers 16-byte aligned (the caller checks).
__device__ __forceinline__ void store_output4(const DenseGemm& g, int64_t m, int64_t n, float4 v, bool bias = true) {
  const int64_t idx = m * g.ldc + n;
  float r[4] = {v.x, v.y, v.z, v.w};
  auto add = [&](const float* p) {
    const float4 o = *reinterpret_cast<const float4*>(p);
    r[0] += o.x, r[1] += o.y, r[2] += o.z, r[3] += o.w;
  };
  if (g.accumulate) add(g.C + idx);
  if (bias && g.bias && m < g.bias_rows) add(g.bias + n);
  if (g.Z) *reinterpret_cast<float4*>(g.Z + idx) = make_float4(r[0], r[1], r[2], r[3]);
  for (float& x : r) x = epilogue_act(g.act, x);
  if (g.dact != Activation::None) {
    const float4 y = g.dact_y ? *reinterpret_cast<const float4*>(g.dact_y + idx) : make_float4(0, 0, 0, 0);
    const float4 z = g.dact_z ? *reinterpret_cast<const float4*>(g.dact_z + idx) : make_float4(0, 0, 0, 0);
    r[0] *= epilogue_dact(g.dact, y.x, z.x), r[1] *= epilogue_dact(g.dact, y.y, z.y);
    r[2] *= epilogue_dact(g.dact, y.z, z.z), r[3] *= epilogue_dact(g.dact, y.w, z.w);
  }
  *reinterpret_cast<float4*>(g.C + idx) = make_float4(r[0], r[1], r[2], r[3]);
}
// Whether g's outputs (C, Z, bias, the activation's y and z) take store_output4.
inline bool output_vec4(const DenseGemm& g) {
  return g.ldc % 4 == 0 && g.N % 4 == 0 && aligned16(g.C) && aligned16(g.Z) && aligned16(g.bias) &&
         aligned16(g.dact_y) && aligned16(g.dact_z);
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

// The current device's SM count, for launches that size their grids in waves of it.
inline int sm_count() { return DenseDevice::current().sms; }

// 16-byte asynchronous copies into shared memory, zero-filled where !valid (nothing read). Before
// sm_80 (a build for older GPUs) they are plain copies, and the commit and wait do nothing.
__device__ __forceinline__ void cp_async16(float* smem, const float* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
#else
  *reinterpret_cast<float4*>(smem) = valid ? *reinterpret_cast<const float4*>(gmem) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// D (16 x 8) += A (16 x 8) B (8 x 8) in fp64 on the tensor cores (mma.sync m16n8k8 .f64, compute
// capability 9.0). Lane (g, t) = (lane / 4, lane % 4) holds A(g, t), A(g + 8, t), A(g, t + 4),
// A(g + 8, t + 4); B(t, g), B(t + 4, g); D(g, 2t), D(g, 2t + 1), D(g + 8, 2t), D(g + 8, 2t + 1).
__device__ __forceinline__ void mma_f64_16x8x8(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#endif
}

// Adds the `splits` partial sums of a split product (or of the skinny backward's blocks) in
// split order, then applies g's epilogue (dense_kernels.cu).
void launch_reduce(const DenseGemm& g, cudaStream_t s);

// The 3xTF32 tensor-core kernel (dense_tc.cu; which products it takes: own_gemm_tensor_cores),
// and its launch (split partials still need launch_reduce).
void launch_tc(const DenseGemm& g, cudaStream_t s);

// The k-sliced kernel for medium products (dense_sliced.cu; its shape in dense_kernels.cuh, which
// products it takes in dense_dispatch.h), alone and as a layer's two gradient products.
void launch_sliced(const DenseGemm& g, cudaStream_t s);
void launch_sliced_pair(const DenseGemm& w, const DenseGemm& x, cudaStream_t s);

}  // namespace sg::cuda::detail
