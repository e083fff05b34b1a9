// The in-graph batch gather (GatherBatch) from a device-resident data set: one block per batch row.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "data/feistel.h"

namespace sg::cuda {

namespace {

constexpr int kArraysPerLaunch = 8;

// Passed by value: the kernel argument space holds the pointers.
struct ArrayGroup {
  const void* data[kArraysPerLaunch];
  void* batch[kArraysPerLaunch];
  size_t row_words[kArraysPerLaunch];  // rows are copied as 4-byte words: every dtype is a multiple of them
  int count;
  bool write_valid;
};

__global__ void gather_batch_kernel(ArrayGroup g, const int32_t* step, int32_t* valid, int64_t N, int64_t B,
                                    GatherAttrs a) {
  PDL_PROLOGUE();
  const int64_t G = B * a.shards;  // the global batch; this one is its slice a.shard
  const int64_t bpe = a.partial_last ? (N + G - 1) / G : N / G;
  const int64_t s = *step, epoch = s / bpe, pos0 = (s % bpe) * G + a.shard * B;
  const int64_t v = B < N - pos0 ? B : N - pos0;
  const int64_t j = blockIdx.x;
  if (g.write_valid && j == 0 && threadIdx.x == 0) *valid = static_cast<int32_t>(v);
  const uint64_t pos = static_cast<uint64_t>(pos0 + (j < v ? j : 0));
  const int64_t r = a.shuffle ? static_cast<int64_t>(feistel_permute(pos, N, a.seed, epoch)) : static_cast<int64_t>(pos);
  for (int k = 0; k < g.count; ++k) {
    const size_t row = g.row_words[k];
    const uint32_t* src = reinterpret_cast<const uint32_t*>(g.data[k]) + r * row;
    uint32_t* dst = reinterpret_cast<uint32_t*>(g.batch[k]) + j * row;
    for (size_t w = threadIdx.x; w < row; w += blockDim.x) dst[w] = src[w];
  }
}

bool word_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

}  // namespace

void gather_batch(const GatherRows* arrays, int count, const int32_t* step, int32_t* valid, int64_t N, int64_t B,
                  const GatherAttrs& a, cudaStream_t s) {
  SG_REQUIRE(B <= 2147483647, "gather_batch: batch too large");
  for (int first = 0; first < count; first += kArraysPerLaunch) {
    ArrayGroup g{};
    g.count = count - first < kArraysPerLaunch ? count - first : kArraysPerLaunch;
    g.write_valid = first == 0;
    for (int k = 0; k < g.count; ++k) {
      const GatherRows& r = arrays[first + k];
      g.data[k] = r.data;
      g.batch[k] = r.batch;
      SG_REQUIRE(r.row_bytes % 4 == 0 && word_aligned(r.data) && word_aligned(r.batch),
                 "gather_batch: rows of ", r.row_bytes, " bytes at unaligned addresses");
      g.row_words[k] = r.row_bytes / 4;
    }
    launch_pdl(gather_batch_kernel, static_cast<unsigned>(B), 128, 0, s, g, step, valid, N, B, a);
    KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace sg::cuda
