// Elementwise and reduction kernels of the dense layers: bias + activation, the activation
// derivative in place, column sums (bias gradients), Add and its backward, and max |x| (AbsMax).
#include <cstdlib>
#include <string>

#include "backend/activation_math.h"
#include "backend/cuda/kernels/activation.cuh"
#include "backend/cuda/kernels/grid.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "backend/cuda/kernels/reduce.cuh"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

__global__ void bias_act_kernel(const float* in, const float* bias, float* z, float* y, int64_t B,
                                int64_t O, Activation act) {
  PDL_PROLOGUE();
  const int64_t n = B * O;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float v = in[i] + (bias ? bias[i % O] : 0.0f);
    if (z) z[i] = v;
    y[i] = act_forward<float>(act, v);
  }
}

__global__ void act_backward_kernel(float* dy, const float* y, const float* z, int64_t n, Activation act) {
  PDL_PROLOGUE();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dy[i] *= act_derivative<float>(act, y ? y[i] : 0.0f, z ? z[i] : 0.0f);
}

// Block (32, 8): x walks columns, y splits the block's rows; grid (column groups, row chunks).
// Each block sums its chunk (8 row partials combined in a fixed order); with several chunks the
// last block of a column group to finish adds the chunks' sums in chunk order (deterministic).
__global__ void column_sum_kernel(const float* dz, float* db, int64_t B, int64_t O, bool acc, ColumnSumScratch sc) {
  PDL_PROLOGUE();
  __shared__ float part[8][33];
  __shared__ bool last;
  const int64_t o = blockIdx.x * 32 + threadIdx.x;
  const int64_t rows = (B + gridDim.y - 1) / gridDim.y, r0 = blockIdx.y * rows, r1 = r0 + rows < B ? r0 + rows : B;
  float s = 0.0f;
  if (o < O)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) s += dz[r * O + o];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  float t = 0.0f;
  if (threadIdx.y == 0)
    for (int k = 0; k < 8; ++k) t += part[k][threadIdx.x];
  if (gridDim.y == 1) {
    if (threadIdx.y == 0 && o < O) db[o] = acc ? db[o] + t : t;
    return;
  }
  if (threadIdx.y == 0 && o < O) sc.partials[blockIdx.y * O + o] = t;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) last = atomicAdd(sc.counters + blockIdx.x, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last || threadIdx.y != 0) return;
  __threadfence();
  if (o < O) {
    float all = 0.0f;
    for (unsigned c = 0; c < gridDim.y; ++c) all += static_cast<volatile float*>(sc.partials)[c * O + o];
    db[o] = acc ? db[o] + all : all;
  }
  if (threadIdx.x == 0) sc.counters[blockIdx.x] = 0u;  // ready for the next launch
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  PDL_PROLOGUE();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = a[i] + b[i];
}

__global__ void add_backward_kernel(const float* dy, float* da, float* db, int64_t n, bool acc_a, bool acc_b) {
  PDL_PROLOGUE();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float g = dy[i];
    if (da) da[i] = acc_a ? da[i] + g : g;
    if (db) db[i] = acc_b ? db[i] + g : g;
  }
}

}  // namespace

void bias_act_forward(const float* in, const float* bias, float* z, float* y, int64_t B, int64_t O,
                      Activation act, cudaStream_t s) {
  launch_pdl(bias_act_kernel, grid_for(B * O), kBlock, 0, s, in, bias, z, y, B, O, act);
  KERNEL_LAUNCH_CHECK();
}

void act_backward_inplace(float* dy, const float* y, const float* z, int64_t n, Activation act, cudaStream_t s) {
  launch_pdl(act_backward_kernel, grid_for(n), kBlock, 0, s, dy, y, z, n, act);
  KERNEL_LAUNCH_CHECK();
}

int column_sum_chunks(int64_t B, int64_t O) {
  // Enough blocks to fill the GPU, each over at least 256 rows.
  const int64_t groups = (O + 31) / 32, by_rows = (B + 255) / 256, want = (264 + groups - 1) / groups;
  const int64_t c = by_rows < want ? by_rows : want;
  return static_cast<int>(c < 1 ? 1 : c);
}

void column_sum(const float* dz, float* db, int64_t B, int64_t O, bool accumulate, ColumnSumScratch sc,
                cudaStream_t s) {
  const int chunks = column_sum_chunks(B, O);
  SG_REQUIRE(chunks == 1 || sc.partials != nullptr, "column sum over ", B, " rows: scratch needed");
  const dim3 grid(static_cast<unsigned>((O + 31) / 32), static_cast<unsigned>(chunks));
  launch_pdl(column_sum_kernel, grid, dim3(32, 8), 0, s, dz, db, B, O, accumulate, sc);
  KERNEL_LAUNCH_CHECK();
}

void add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  launch_pdl(add_kernel, grid_for(n), kBlock, 0, s, a, b, y, n);
  KERNEL_LAUNCH_CHECK();
}

void add_backward(const float* dy, float* da, float* db, int64_t n, bool acc_a, bool acc_b, cudaStream_t s) {
  launch_pdl(add_backward_kernel, grid_for(n), kBlock, 0, s, dy, da, db, n, acc_a, acc_b);
  KERNEL_LAUNCH_CHECK();
}

// One warp per row (rows in parallel: a warp's rows are done one after another), <= 1024 blocks.

namespace {

__device__ __forceinline__ float nan_max(float a, float b) { return a != a || b != b ? NAN : fmaxf(a, b); }

// Max over the block's values (valid in thread 0), NaN winning.
__device__ float block_nan_max(float v) {
  __shared__ float warps[32];
  for (int off = 16; off > 0; off >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) warps[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < static_cast<int>((blockDim.x + 31) / 32) ? warps[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, off));
  }
  return v;
}

// Grid-stride max |X[i]| per block into out[blockIdx.x]; run again with one block over the
// blocks' maxima (non-negative or NaN, so |.| leaves them as they are) for the total.
__global__ void abs_max_kernel(const float* X, int64_t n, float* out) {
  PDL_PROLOGUE();
  float v = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    v = nan_max(v, fabsf(X[i]));
  v = block_nan_max(v);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

}  // namespace

int abs_max_blocks(int64_t n) {
  const int64_t b = (n + 256 * 8 - 1) / (256 * 8);  // at least 8 elements per thread
  return static_cast<int>(b < 1 ? 1 : b > 264 ? 264 : b);
}

void abs_max(const float* X, int64_t n, float* partials, float* out, cudaStream_t s) {
  const int blocks = abs_max_blocks(n);
  launch_pdl(abs_max_kernel, blocks, 256, 0, s, X, n, partials);
  KERNEL_LAUNCH_CHECK();
  launch_pdl(abs_max_kernel, 1, 256, 0, s, partials, blocks, out);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
