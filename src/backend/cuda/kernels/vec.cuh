// V consecutive floats moved as one access (float, float2 or float4): the memory-bound kernels
// (jets, skinny layers, pooling) take V columns per thread where widths and alignment allow.
#pragma once

#include <cuda_runtime.h>

namespace sg::cuda {

template <int V>
struct VecOf;
template <>
struct VecOf<1> {
  using T = float;
};
template <>
struct VecOf<2> {
  using T = float2;
};
template <>
struct VecOf<4> {
  using T = float4;
};

// Component j of a vector (j known at compile time once loops unroll).
__device__ __forceinline__ float vec_at(const float& x, int) { return x; }
__device__ __forceinline__ float vec_at(const float2& x, int j) { return j == 0 ? x.x : x.y; }
__device__ __forceinline__ float vec_at(const float4& x, int j) { return j == 0 ? x.x : j == 1 ? x.y : j == 2 ? x.z : x.w; }

// p must be aligned to V floats.
template <int V>
__device__ __forceinline__ void load_vec(const float* p, float (&v)[V]) {
  const auto x = *reinterpret_cast<const typename VecOf<V>::T*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = vec_at(x, j);
}
template <int V>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[V]) {
  auto* q = reinterpret_cast<typename VecOf<V>::T*>(p);
  if constexpr (V == 1) *q = v[0];
  if constexpr (V == 2) *q = make_float2(v[0], v[1]);
  if constexpr (V == 4) *q = make_float4(v[0], v[1], v[2], v[3]);
}

}  // namespace sg::cuda
