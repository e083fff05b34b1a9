#include "backend/cuda/kernels/bf16_kernels.cuh"
#include "backend/cuda/runtime/cuda_check.h"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

// Blocks along x stride over the elements; blockIdx.y picks the tensor.
unsigned blocks_for(int64_t n) {
  const int64_t per = kBlock * 4;  // about 4 elements per thread before the grid caps
  int64_t g = (n + per - 1) / per;
  return static_cast<unsigned>(g < 1 ? 1 : g > 4096 ? 4096 : g);
}

__global__ void to_bf16_kernel(Bf16Pairs p, int64_t n) {
  const float* src = p.f32_in[blockIdx.y];
  __nv_bfloat16* dst = p.bf16_out[blockIdx.y];
  for (int64_t i = blockIdx.x * int64_t(kBlock) + threadIdx.x; i < n; i += int64_t(gridDim.x) * kBlock)
    dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void from_bf16_kernel(Bf16Pairs p, int64_t n) {
  const __nv_bfloat16* src = p.bf16_in[blockIdx.y];
  float* dst = p.f32_out[blockIdx.y];
  const bool acc = p.accumulate[blockIdx.y];
  for (int64_t i = blockIdx.x * int64_t(kBlock) + threadIdx.x; i < n; i += int64_t(gridDim.x) * kBlock) {
    const float v = __bfloat162float(src[i]);
    dst[i] = acc ? dst[i] + v : v;
  }
}

void check_pairs(const Bf16Pairs& p, int64_t n, bool to) {
  SG_REQUIRE(p.count >= 1 && p.count <= kMaxBf16Tensors, "bf16 conversion: ", p.count, " tensors (expected 1 to ",
             kMaxBf16Tensors, ")");
  SG_REQUIRE(n >= 0, "bf16 conversion: negative element count ", n);
  for (int k = 0; k < p.count; ++k)
    SG_REQUIRE(to ? (p.f32_in[k] && p.bf16_out[k]) : (p.bf16_in[k] && p.f32_out[k]), "bf16 conversion: tensor ", k,
               " has a null pointer");
}

}  // namespace

void to_bf16(const Bf16Pairs& p, int64_t n, cudaStream_t s) {
  check_pairs(p, n, true);
  if (n == 0) return;
  to_bf16_kernel<<<dim3(blocks_for(n), p.count), kBlock, 0, s>>>(p, n);
  KERNEL_LAUNCH_CHECK();
}

void from_bf16(const Bf16Pairs& p, int64_t n, cudaStream_t s) {
  check_pairs(p, n, false);
  if (n == 0) return;
  from_bf16_kernel<<<dim3(blocks_for(n), p.count), kBlock, 0, s>>>(p, n);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
