// The in-graph batch gather (GatherBatch) from a device-resident data set: one block per batch row.
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "data/feistel.h"

namespace sg::cuda {

namespace {

__global__ void gather_batch_kernel(const float* dataX, const char* dataY, const int32_t* step, float* X,
                                    char* y, int32_t* valid, int64_t N, int64_t D, int64_t B, size_t row_bytes,
                                    GatherAttrs a) {
  PDL_PROLOGUE();
  const int64_t G = B * a.shards;  // the global batch; this one is its slice a.shard
  const int64_t bpe = a.partial_last ? (N + G - 1) / G : N / G;
  const int64_t s = *step, epoch = s / bpe, pos0 = (s % bpe) * G + a.shard * B;
  const int64_t v = B < N - pos0 ? B : N - pos0;
  const int64_t j = blockIdx.x;
  if (j == 0 && threadIdx.x == 0) *valid = static_cast<int32_t>(v);
  const uint64_t pos = static_cast<uint64_t>(pos0 + (j < v ? j : 0));
  const int64_t r = a.shuffle ? static_cast<int64_t>(feistel_permute(pos, N, a.seed, epoch)) : static_cast<int64_t>(pos);
  for (int64_t k = threadIdx.x; k < D; k += blockDim.x) X[j * D + k] = dataX[r * D + k];
  for (size_t k = threadIdx.x; k < row_bytes; k += blockDim.x) y[j * row_bytes + k] = dataY[r * row_bytes + k];
}

}  // namespace

void gather_batch(const float* dataX, const void* dataY, const int32_t* step, float* X, void* y,
                  int32_t* valid, int64_t N, int64_t D, int64_t B, size_t y_row_bytes, const GatherAttrs& a,
                  cudaStream_t s) {
  SG_REQUIRE(B <= 2147483647, "gather_batch: batch too large");
  launch_pdl(gather_batch_kernel, static_cast<unsigned>(B), 128, 0, s, dataX, static_cast<const char*>(dataY), step, X,
                                                                static_cast<char*>(y), valid, N, D, B, y_row_bytes, a);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
