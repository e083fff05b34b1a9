// Deterministic reductions shared by the loss kernels: warp shuffles, then one warp over the
// warps' sums, then (across blocks) the last block to finish sums every block's partial in
// block order. No floating-point atomics, so a loss is bitwise the same on every run.
#pragma once

#include <cuda_runtime.h>

namespace sg::cuda {

template <class T>
__device__ T warp_sum(T v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Block-level sum of one value per thread in a fixed order; the result is valid in thread 0.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T warps[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) warps[w] = v;
  __syncthreads();
  T t = T(0);
  if (w == 0) {
    t = lane < static_cast<int>((blockDim.x + 31) / 32) ? warps[lane] : T(0);
    t = warp_sum(t);
  }
  __syncthreads();
  return t;
}

// Stores this block's total (valid in thread 0) in partials[blockIdx.x]. Returns true in every
// thread of the block that finishes last, with *all (thread 0) the sum of all partials in block
// order; that block also resets the counter (zero at rest, so graph replays can reuse it).
// The same over blocks [0, nblocks) of a part of the grid (this block is `block` of them).
template <class T>
__device__ bool sum_across_blocks(T block_total, T* partials, unsigned* counter, T* all, int block, int nblocks) {
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[block] = block_total;
    __threadfence();
    const unsigned done = atomicAdd(counter, 1u);
    last = done == static_cast<unsigned>(nblocks) - 1;
  }
  __syncthreads();
  if (!last) return false;
  __threadfence();
  T t = T(0);
  for (int i = threadIdx.x; i < nblocks; i += blockDim.x) t += static_cast<volatile T*>(partials)[i];
  t = block_sum(t);
  if (threadIdx.x == 0) {
    *all = t;
    *counter = 0u;
  }
  return true;
}
template <class T>
__device__ bool sum_across_blocks(T block_total, T* partials, unsigned* counter, T* all) {
  return sum_across_blocks(block_total, partials, counter, all, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

}  // namespace sg::cuda
