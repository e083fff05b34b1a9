// Gradient clipping by global norm (the ClipGradNorm op): one launch sums every gradient's
// squares (a block per chunk, the last block to finish adding the blocks' sums in block order:
// deterministic) and stores the norm and the factor; a second scales the gradients in place.
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/reduce.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

__global__ void clip_norm_kernel(const ChunkRef* chunks, int nchunks, double* partials, unsigned* counter,
                                 float* norm, float max_norm) {
  PDL_PROLOGUE();
  const ChunkRef c = chunks[blockIdx.x];
  const int64_t end = c.start + kOptimChunk < c.d.n ? c.start + kOptimChunk : c.d.n;
  double v = 0;
  for (int64_t k = c.start + threadIdx.x; k < end; k += blockDim.x) v += static_cast<double>(c.d.p[k]) * c.d.p[k];
  double total = 0;
  if (!sum_across_blocks(block_sum(v), partials, counter, &total, blockIdx.x, nchunks)) return;
  if (threadIdx.x != 0) return;
  // As the CPU reference (cpu::clip_grad_norm): the factor from the f32 norm, clamped at 1.
  const float n = static_cast<float>(sqrt(total));
  norm[0] = n;
  norm[1] = isnan(n) ? n : fminf(max_norm / (n + 1e-6f), 1.0f);
}

__global__ void clip_scale_kernel(const ChunkRef* chunks, const float* norm) {
  PDL_PROLOGUE();
  const float f = norm[1];
  if (f == 1.0f) return;
  const ChunkRef c = chunks[blockIdx.x];
  const int64_t end = c.start + kOptimChunk < c.d.n ? c.start + kOptimChunk : c.d.n;
  for (int64_t k = c.start + threadIdx.x; k < end; k += blockDim.x) c.d.p[k] *= f;
}

}  // namespace

void clip_grad_norm(const ChunkRef* chunks, int nchunks, double* partials, unsigned* counter, float* norm,
                    float max_norm, cudaStream_t s) {
  launch_pdl(clip_norm_kernel, nchunks, kBlock, 0, s, chunks, nchunks, partials, counter, norm, max_norm);
  KERNEL_LAUNCH_CHECK();
  launch_pdl(clip_scale_kernel, nchunks, kBlock, 0, s, chunks, static_cast<const float*>(norm));
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
