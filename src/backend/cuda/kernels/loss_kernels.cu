// The loss kernels: softmax cross-entropy (alone, or with the last dense layer in the same
// launch) and mean squared error, each writing the loss and its gradient, reduced in a fixed order.
#include <cstdlib>
#include <string>

#include "backend/activation_math.h"
#include "backend/loss_math.h"
#include "backend/cuda/kernels/activation.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "backend/cuda/kernels/reduce.cuh"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

// Writes this block's partial; the last block to finish sums all partials in order.
__device__ void finish_reduction(float block_total, float scale, float* loss, ReduceScratch sc) {
  float all = 0.0f;
  if (sum_across_blocks(block_total, sc.partials, sc.counter, &all) && threadIdx.x == 0) *loss = all * scale;
}

constexpr int kRowsPerBlock = kBlock / 32;  // one warp per row

// Counts the labels >= 0 among the first (valid rows) x per_row (the tokens with a target), in
// one block: an integer sum, so the mean's denominator is exact and the same on every run.
__global__ void count_targets_kernel(const int32_t* labels, const int32_t* valid, int64_t B, int64_t per_row,
                                     int32_t* count) {
  PDL_PROLOGUE();
  const int64_t V = (valid ? *valid : B) * per_row;
  int32_t n = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) n += labels[i] >= 0;
  n = block_sum(n);
  if (threadIdx.x == 0) *count = n;
}

// The labels the mean divides by, of the V valid label rows: all of them, or with
// ignore_negative those >= 0: *count (count_targets_kernel), or with count null (few labels, see
// kCountInBlockRows) counted by the block itself, saving a launch. Every thread of the block
// must call it.
__device__ int64_t counted_targets(const int32_t* labels, int64_t V, bool ignore_negative, const int32_t* count) {
  if (!ignore_negative) return V;
  if (count) return *count;
  __shared__ int32_t block_count;
  int32_t n = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) n += labels[i] >= 0;
  n = block_sum(n);
  if (threadIdx.x == 0) block_count = n;
  __syncthreads();
  return block_count;
}

// log sum_c exp(z_c) over one row of C logits, by the warp (lane: this thread's lane), shifted
// by the row's max so no exp overflows; every lane gets it.
__device__ float warp_log_sum_exp(const float* z, int64_t C, int lane) {
  float mx = -INFINITY;
  for (int64_t c = lane; c < C; c += 32) mx = fmaxf(mx, z[c]);
  mx = warp_max(mx);
  float se = 0.0f;
  for (int64_t c = lane; c < C; c += 32) se += expf(z[c] - mx);
  return mx + logf(warp_sum(se));
}

// Rows are label rows: B batch rows of per_row labels each (per_row > 1: tokens of a sequence).
// With ignore_negative a label < 0 has no loss and no gradient, and the mean divides by the
// labels >= 0 instead of the valid label rows (counted_targets).
__global__ void softmax_ce_kernel(const float* logits, const int32_t* labels, const int32_t* valid,
                                  float* loss, float* dlogits, int64_t B, int64_t C, int64_t per_row,
                                  bool ignore_negative, const int32_t* count, bool mean, ReduceScratch sc) {
  PDL_PROLOGUE();
  const int lane = threadIdx.x & 31;
  const int64_t N = B * per_row, V = (valid ? *valid : B) * per_row;
  const int64_t counted = counted_targets(labels, V, ignore_negative, count);
  const float scale = mean ? 1.0f / static_cast<float>(counted > 0 ? counted : 1) : 1.0f;
  float row_loss = 0.0f;  // this lane's sum over its warp's rows (lane 0 only)
  for (int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5); row < N;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const float* z = logits + row * C;
    float* dz = dlogits + row * C;
    const int32_t y = row < V ? labels[row] : -1;
    if (row >= V || (ignore_negative && y < 0)) {  // padding, or a position without a target
      for (int64_t c = lane; c < C; c += 32) dz[c] = 0.0f;
    } else {
      const float lse = warp_log_sum_exp(z, C, lane);
      if (y < 0 || y >= C) {  // a label the model cannot predict: NaN loss, no gradient
        for (int64_t c = lane; c < C; c += 32) dz[c] = 0.0f;
        if (lane == 0) row_loss = NAN;
      } else {
        for (int64_t c = lane; c < C; c += 32) {
          float p = expf(z[c] - lse);
          dz[c] = (p - (c == y ? 1.0f : 0.0f)) * scale;
        }
        if (lane == 0) row_loss += lse - z[y];
      }
    }
  }
  finish_reduction(block_sum(row_loss), scale, loss, sc);
}

// Sums w[y] over the V valid label rows with a label in [0, C) (ignored, padding and bad labels
// add nothing), in one block: the weighted mean's denominator, in a fixed order.
__device__ float block_target_weights(const int32_t* labels, int64_t V, int64_t C, const float* w) {
  float t = 0.0f;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const int32_t y = labels[i];
    if (y >= 0 && y < C) t += w[y];
  }
  return block_sum(t);
}

__global__ void sum_target_weights_kernel(const int32_t* labels, const int32_t* valid, int64_t B, int64_t per_row,
                                          int64_t C, const float* w, float* out) {
  PDL_PROLOGUE();
  const float t = block_target_weights(labels, (valid ? *valid : B) * per_row, C, w);
  if (threadIdx.x == 0) *out = t;
}

// softmax_ce_kernel with label smoothing eps and class weights w (null: all 1), torch's formula:
// loss (1 - eps) w[y] (lse - z_y) + u sum_c w[c] (lse - z_c), u = eps / C; gradient
// a (p_c - [c = y]) + u (W p_c - w[c]), a = (1 - eps) w[y], W = sum_c w[c]. A separate kernel so
// the plain loss stays exactly as it was.
__global__ void softmax_ce_smoothed_kernel(const float* logits, const int32_t* labels, const int32_t* valid,
                                           float* loss, float* dlogits, int64_t B, int64_t C, int64_t per_row,
                                           bool ignore_negative, const int32_t* count, float eps, const float* w,
                                           float W, const float* weight_sum, bool mean, ReduceScratch sc) {
  PDL_PROLOGUE();
  const int lane = threadIdx.x & 31;
  const int64_t N = B * per_row, V = (valid ? *valid : B) * per_row;
  float denom;  // every thread of the block takes the same branch (w is uniform)
  if (!w) {
    denom = static_cast<float>(counted_targets(labels, V, ignore_negative, count));
  } else if (weight_sum) {
    denom = *weight_sum;
  } else {
    __shared__ float block_denom;
    const float t = block_target_weights(labels, V, C, w);
    if (threadIdx.x == 0) block_denom = t;
    __syncthreads();
    denom = block_denom;
  }
  // A zero denominator (no labelled rows, or all their weights 0): loss 0, no gradient.
  const float scale = mean ? (denom > 0.0f ? 1.0f / denom : 0.0f) : 1.0f;
  const float u = eps / static_cast<float>(C);
  float row_loss = 0.0f;  // lane 0's sum over its warp's rows
  for (int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5); row < N;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const float* z = logits + row * C;
    float* dz = dlogits + row * C;
    const int32_t y = row < V ? labels[row] : -1;
    if (row >= V || (ignore_negative && y < 0)) {
      for (int64_t c = lane; c < C; c += 32) dz[c] = 0.0f;
      continue;
    }
    const float lse = warp_log_sum_exp(z, C, lane);
    if (y < 0 || y >= C) {  // a label the model cannot predict: NaN loss, no gradient
      for (int64_t c = lane; c < C; c += 32) dz[c] = 0.0f;
      if (lane == 0) row_loss = NAN;
      continue;
    }
    const float a = (1.0f - eps) * (w ? w[y] : 1.0f), pw = a + u * W;
    float smooth = 0.0f;
    for (int64_t c = lane; c < C; c += 32) {
      const float wc = w ? w[c] : 1.0f;
      smooth += wc * (lse - z[c]);
      dz[c] = (expf(z[c] - lse) * pw - u * wc - (c == y ? a : 0.0f)) * scale;
    }
    smooth = warp_sum(smooth);
    if (lane == 0) row_loss += a * (lse - z[y]) + u * smooth;
  }
  finish_reduction(block_sum(row_loss), scale, loss, sc);
}

// Sums each of a lane's N values (N a power of two, 2..32) over the warp with N - 1 + 5 - log2 N
// shuffles instead of 5 N: each halving step pairs lanes `off` apart, and each lane keeps the
// half of the values its side owns, adding its partner's copy of them. Returns, in lane l, the
// sum of value l >> (5 - log2 N) (each 32 / N consecutive lanes hold the same one).
template <int N>
__device__ float warp_sum_scatter(float (&a)[N]) {
  static_assert(N >= 2 && N <= 32 && (N & (N - 1)) == 0, "a power of two up to 32");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int step = 0; step < 5; ++step) {
    const int off = 16 >> step, n = N >> step;  // n: values this lane still holds
    if (n >= 2) {
      const bool upper = lane & off;
#pragma unroll
      for (int j = 0; j < n / 2; ++j) {
        const float send = upper ? a[j] : a[j + n / 2];
        const float keep = upper ? a[j + n / 2] : a[j];
        a[j] = keep + __shfl_xor_sync(0xffffffffu, send, off);
      }
    } else {
      a[0] += __shfl_xor_sync(0xffffffffu, a[0], off);
    }
  }
  return a[0];
}

// Row stride of the transposed W in shared memory: CMAX + 4 floats, so the 16-byte loads of a
// quarter warp (8 lanes on consecutive inputs) fall on distinct banks.
template <int CMAX>
constexpr int fused_w_stride() {
  return CMAX + 4;
}

// The last dense layer and the loss in one launch, for up to 32 classes: one warp per row. The
// block stages W in shared memory transposed ([I][CMAX + 4], classes C..CMAX zero), so a lane
// reads all classes' weights of one input as float4s; the lanes split the row's inputs (read
// straight from global memory, all in flight), each keeping a partial product for every class;
// a reduce-scatter (warp_sum_scatter) sums them, and lane c takes class c's logit. Logits are
// written too (predictions read them).
template <int CMAX, bool DX>  // C <= CMAX, a power of two; DX: dx.dX set
__global__ void dense_softmax_ce_kernel(const float* X, const float* W, const float* bias, float* logits,
                                        const int32_t* labels, const int32_t* valid, float* loss, float* dlogits,
                                        int64_t B, int64_t I, int C, int64_t per_row, bool ignore_negative,
                                        const int32_t* count, bool mean, ReduceScratch sc, FusedInputGrad dx) {
  constexpr int S = fused_w_stride<CMAX>();
  extern __shared__ __align__(16) float Ws[];  // [I][S]
  PDL_PROLOGUE();  // before any read: the kernel before may be the optimizer writing W
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float b = bias && lane < C ? bias[lane] : 0.0f;
  // Thread k stages input k's weights of every class (padding classes zero): its CMAX loads are
  // all in flight at once (each is coalesced across the threads), then CMAX / 4 float4 stores.
  // An element-per-thread loop with a division had one load's latency per element in series.
  for (int64_t k = threadIdx.x; k < I; k += blockDim.x) {
    float w[CMAX];
#pragma unroll
    for (int c = 0; c < CMAX; ++c) w[c] = c < C ? __ldg(W + c * I + k) : 0.0f;
#pragma unroll
    for (int c = 0; c < CMAX; c += 4)
      *reinterpret_cast<float4*>(Ws + k * S + c) = make_float4(w[c], w[c + 1], w[c + 2], w[c + 3]);
  }
  const int64_t N = B * per_row, V = (valid ? *valid : B) * per_row;  // rows of X, valid label rows
  const int64_t counted = counted_targets(labels, V, ignore_negative, count);
  const float scale = mean ? 1.0f / static_cast<float>(counted > 0 ? counted : 1) : 1.0f;
  __syncthreads();  // Ws complete
  float row_loss = 0.0f;
  for (int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + warp; row < N; row += int64_t(gridDim.x) * kRowsPerBlock) {
    float acc[CMAX];
#pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.0f;
    const float* x = X + row * I;
    constexpr int kInFlight = 8;  // inputs per lane loaded before any is used
    for (int64_t k0 = lane; k0 < I; k0 += 32 * kInFlight) {
      float xv[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) xv[u] = k0 + 32 * u < I ? __ldg(x + k0 + 32 * u) : 0.0f;
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        if (k0 + 32 * u >= I) break;
        const float4* w = reinterpret_cast<const float4*>(Ws + (k0 + 32 * u) * S);
#pragma unroll
        for (int q = 0; q < CMAX / 4; ++q) {
          const float4 w4 = w[q];
          acc[4 * q + 0] = fmaf(xv[u], w4.x, acc[4 * q + 0]);
          acc[4 * q + 1] = fmaf(xv[u], w4.y, acc[4 * q + 1]);
          acc[4 * q + 2] = fmaf(xv[u], w4.z, acc[4 * q + 2]);
          acc[4 * q + 3] = fmaf(xv[u], w4.w, acc[4 * q + 3]);
        }
      }
    }
    const float sum = warp_sum_scatter(acc);
    float z = __shfl_sync(0xffffffffu, sum, (lane % CMAX) * (32 / CMAX)) + b;  // lane c: class c's logit
    if (lane >= C) z = -INFINITY;
    if (lane < C) logits[row * C + lane] = z;
    const int32_t y = row < V ? labels[row] : -1;
    float g = 0.0f;  // lane c: class c's gradient (0 for padding, no target, or a bad label)
    if (row < V && !(ignore_negative && y < 0)) {  // else padding, or a position without a target
      const float mx = warp_max(z);
      const float lse = mx + logf(warp_sum(lane < C ? expf(z - mx) : 0.0f));
      const float zy = __shfl_sync(0xffffffffu, z, (y >= 0 && y < C) ? y : 0);
      if (y < 0 || y >= C) {  // a label the model cannot predict: NaN loss, no gradient
        if (lane == 0) row_loss = NAN;
      } else {
        if (lane < C) g = (expf(z - lse) - (lane == y ? 1.0f : 0.0f)) * scale;
        if (lane == 0) row_loss += lse - zy;
      }
    }
    if (lane < C) dlogits[row * C + lane] = g;
    if constexpr (DX) {
      // The layer's input gradient dX = dlogits W (times the previous activation's derivative):
      // every lane takes every class's gradient, then its inputs' rows of the staged W.
      float gc[CMAX];
#pragma unroll
      for (int c = 0; c < CMAX; ++c) gc[c] = __shfl_sync(0xffffffffu, g, c);
      // A lane's kInFlight inputs at a time: the activation's y and z are loaded first, all in
      // flight (loaded after each dX store, each waited for a global load's latency).
      const bool dact = dx.dact != Activation::None;
      for (int64_t k0 = lane; k0 < I; k0 += 32 * kInFlight) {
        float yv[kInFlight], zv[kInFlight];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          const int64_t k = k0 + 32 * u;
          yv[u] = dact && dx.y && k < I ? dx.y[row * I + k] : 0.0f;
          zv[u] = dact && dx.z && k < I ? dx.z[row * I + k] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          const int64_t k = k0 + 32 * u;
          if (k >= I) continue;
          const float4* w = reinterpret_cast<const float4*>(Ws + k * S);
          float v = 0.0f;
#pragma unroll
          for (int q = 0; q < CMAX / 4; ++q) {
            const float4 w4 = w[q];
            v = fmaf(gc[4 * q], w4.x, v), v = fmaf(gc[4 * q + 1], w4.y, v);
            v = fmaf(gc[4 * q + 2], w4.z, v), v = fmaf(gc[4 * q + 3], w4.w, v);
          }
          if (dact) v *= epilogue_dact(dx.dact, yv[u], zv[u]);
          dx.dX[row * I + k] = v;
        }
      }
    }
  }
  finish_reduction(block_sum(row_loss), scale, loss, sc);
}

__global__ void mse_kernel(const float* pred, const float* target, const int32_t* valid, float* loss,
                           float* dpred, int64_t B, int64_t T, bool mean, ReduceScratch sc) {
  PDL_PROLOGUE();
  const int64_t V = valid ? *valid : B;
  const int64_t n_valid = V * T, n = B * T;
  const float scale = mean ? 1.0f / static_cast<float>(n_valid > 0 ? n_valid : 1) : 1.0f;
  float s = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (i < n_valid) {
      float d = pred[i] - target[i];
      s += d * d;
      dpred[i] = 2.0f * d * scale;
    } else {
      dpred[i] = 0.0f;
    }
  }
  finish_reduction(block_sum(s), scale, loss, sc);
}

__global__ void pointwise_loss_kernel(const float* pred, const float* target, const int32_t* valid, float* loss,
                                      float* dpred, int64_t B, int64_t T, bool mean, PointwiseForm form, float delta,
                                      ReduceScratch sc) {
  PDL_PROLOGUE();
  const int64_t V = valid ? *valid : B;
  const int64_t n_valid = V * T, n = B * T;
  const float scale = mean ? 1.0f / static_cast<float>(n_valid > 0 ? n_valid : 1) : 1.0f;
  float s = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (i < n_valid) {
      float g;
      s += sg::pointwise_loss<float>(form, delta, pred[i], target[i], &g);
      dpred[i] = g * scale;
    } else {
      dpred[i] = 0.0f;
    }
  }
  finish_reduction(block_sum(s), scale, loss, sc);
}

}  // namespace

// One warp per row (rows in parallel: a warp's rows are done one after another), <= 1024 blocks.
int softmax_ce_blocks(int64_t rows) {
  const int64_t g = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<int>(g < 1024 ? g : 1024);
}

bool softmax_ce_counts_in_block(int64_t rows) { return rows <= kCountInBlockRows; }

int mse_blocks(int64_t elements) {
  int64_t g = (elements + kBlock - 1) / kBlock;
  return static_cast<int>(g < 1 ? 1 : (g > 1024 ? 1024 : g));
}

namespace {
// With labels < 0 ignored and too many label rows for each block to count the targets itself,
// one block counts them first into sc.count. Returns where the loss kernel reads the count
// (null: each block counts).
const int32_t* count_targets_first(const int32_t* labels, const int32_t* valid, int64_t B, int64_t per_row,
                                   bool ignore_negative, const ReduceScratch& sc, cudaStream_t s) {
  if (!ignore_negative || softmax_ce_counts_in_block(B * per_row)) return nullptr;
  SG_ASSERT(sc.count != nullptr);
  launch_pdl(count_targets_kernel, 1, 1024, 0, s, labels, valid, B, per_row, sc.count);
  KERNEL_LAUNCH_CHECK();
  return sc.count;
}
}  // namespace

void softmax_cross_entropy(const float* logits, const int32_t* labels, const int32_t* valid,
                           float* loss, float* dlogits, int64_t B, int64_t C, Reduction r,
                           ReduceScratch sc, cudaStream_t s, int64_t per_row, bool ignore_negative) {
  const int blocks = softmax_ce_blocks(B * per_row);
  SG_ASSERT(blocks <= sc.max_blocks && per_row >= 1);
  const int32_t* count = count_targets_first(labels, valid, B, per_row, ignore_negative, sc, s);
  launch_pdl(softmax_ce_kernel, static_cast<unsigned>(blocks), kBlock, 0, s, 
      logits, labels, valid, loss, dlogits, B, C, per_row, ignore_negative, count, r == Reduction::Mean, sc);
  KERNEL_LAUNCH_CHECK();
}

void softmax_cross_entropy_smoothed(const float* logits, const int32_t* labels, const int32_t* valid, float* loss,
                                    float* dlogits, int64_t B, int64_t C, Reduction r, ReduceScratch sc,
                                    cudaStream_t s, int64_t per_row, bool ignore_negative, double label_smoothing,
                                    const float* class_weights, double weight_total) {
  const int blocks = softmax_ce_blocks(B * per_row);
  SG_ASSERT(blocks <= sc.max_blocks && per_row >= 1);
  const int32_t* count = class_weights ? nullptr : count_targets_first(labels, valid, B, per_row, ignore_negative, sc, s);
  const float* weight_sum = nullptr;
  if (class_weights && !softmax_ce_counts_in_block(B * per_row)) {
    SG_ASSERT(sc.weight_sum != nullptr);
    launch_pdl(sum_target_weights_kernel, 1, 1024, 0, s, labels, valid, B, per_row, C, class_weights, sc.weight_sum);
    KERNEL_LAUNCH_CHECK();
    weight_sum = sc.weight_sum;
  }
  launch_pdl(softmax_ce_smoothed_kernel, static_cast<unsigned>(blocks), kBlock, 0, s, logits, labels, valid, loss,
             dlogits, B, C, per_row, ignore_negative, count, static_cast<float>(label_smoothing), class_weights,
             static_cast<float>(weight_total), weight_sum, r == Reduction::Mean, sc);
  KERNEL_LAUNCH_CHECK();
}

void dense_softmax_cross_entropy(const float* X, const float* W, const float* bias, float* logits,
                                 const int32_t* labels, const int32_t* valid, float* loss, float* dlogits, int64_t B,
                                 int64_t I, int64_t C, Reduction r, ReduceScratch sc, cudaStream_t s, int64_t per_row,
                                 bool ignore_negative, const FusedInputGrad& dx) {
  SG_REQUIRE(fused_loss_fits(C, I), "fused dense + softmax cross-entropy: ", C, " classes x ", I,
             " inputs do not fit (at most 32 classes; W, transposed and padded, in 48 KB of shared memory)");
  const int blocks = softmax_ce_blocks(B * per_row);
  SG_ASSERT(blocks <= sc.max_blocks && per_row >= 1);
  const int32_t* count = count_targets_first(labels, valid, B, per_row, ignore_negative, sc, s);
  const int cmax = fused_loss_classes(C);
  const size_t smem = static_cast<size_t>(I * (cmax + 4)) * sizeof(float);
  const bool d = dx.dX != nullptr;
  auto* kernel = cmax == 8    ? (d ? dense_softmax_ce_kernel<8, true> : dense_softmax_ce_kernel<8, false>)
                 : cmax == 16 ? (d ? dense_softmax_ce_kernel<16, true> : dense_softmax_ce_kernel<16, false>)
                              : (d ? dense_softmax_ce_kernel<kMaxFusedClasses, true> : dense_softmax_ce_kernel<kMaxFusedClasses, false>);
  launch_pdl(kernel, static_cast<unsigned>(blocks), kBlock, smem, s, X, W, bias, logits, labels, valid, loss, dlogits, B,
             I, static_cast<int>(C), per_row, ignore_negative, count, r == Reduction::Mean, sc, dx);
  KERNEL_LAUNCH_CHECK();
}

void mean_squared_error(const float* pred, const float* target, const int32_t* valid, float* loss,
                        float* dpred, int64_t B, int64_t T, Reduction r, ReduceScratch sc, cudaStream_t s) {
  const int blocks = mse_blocks(B * T);
  SG_ASSERT(blocks <= sc.max_blocks);
  launch_pdl(mse_kernel, static_cast<unsigned>(blocks), kBlock, 0, s, pred, target, valid, loss, dpred, B, T,
                                                               r == Reduction::Mean, sc);
  KERNEL_LAUNCH_CHECK();
}

void pointwise_loss(const float* pred, const float* target, const int32_t* valid, float* loss, float* dpred,
                    int64_t B, int64_t T, Reduction r, PointwiseForm form, double delta, ReduceScratch sc,
                    cudaStream_t s) {
  const int blocks = mse_blocks(B * T);
  SG_ASSERT(blocks <= sc.max_blocks);
  launch_pdl(pointwise_loss_kernel, static_cast<unsigned>(blocks), kBlock, 0, s, pred, target, valid, loss, dpred, B,
             T, r == Reduction::Mean, form, static_cast<float>(delta), sc);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
