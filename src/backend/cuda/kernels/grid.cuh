// Grids for grid-stride loops: the block count for n elements, and the loop itself.
#pragma once

#include <cstdint>

namespace sg::cuda {

// Blocks of `block` threads for n elements: at least one, at most `cap` (a grid-stride loop
// covers what lies beyond).
inline unsigned grid_for(int64_t n, int block = 256, int64_t cap = 65535 * 8) {
  const int64_t g = (n + block - 1) / block;
  return static_cast<unsigned>(g < 1 ? 1 : g < cap ? g : cap);
}

}  // namespace sg::cuda

#define SG_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)
