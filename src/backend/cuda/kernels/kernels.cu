#include <cstdlib>
#include <string>

#include "backend/activation_math.h"
#include "backend/cuda/kernels/activation.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "backend/cuda/kernels/reduce.cuh"
#include "data/feistel.h"

namespace sg::cuda {

bool pdl_enabled() {
  static const bool on = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return on;
}

namespace {

constexpr int kBlock = 256;

inline unsigned grid_for(int64_t n, int block = kBlock, int64_t cap = 65535 * 8) {
  int64_t g = (n + block - 1) / block;
  if (g < 1) g = 1;
  return static_cast<unsigned>(g < cap ? g : cap);
}

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
      float mx = -INFINITY;
      for (int64_t c = lane; c < C; c += 32) mx = fmaxf(mx, z[c]);
      mx = warp_max(mx);
      float se = 0.0f;
      for (int64_t c = lane; c < C; c += 32) se += expf(z[c] - mx);
      se = warp_sum(se);
      const float lse = mx + logf(se);
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

struct SchedValues {
  float lr, bias1, bias2, step;
};

// The learning-rate schedule and Adam bias corrections at step t (formulas as in optim.h).
__device__ SchedValues schedule_at(int32_t t, const float* hyper, const ScheduleAttrs& a) {
  const double base = hyper[hyper::kBaseLr];
  double lr = base;
  if (a.kind == ScheduleKind::Step) {
    lr = base * pow(a.gamma, static_cast<double>((t - 1) / a.step_size));
  } else if (a.kind == ScheduleKind::Cosine) {
    if (t <= a.warmup_steps) {
      lr = base * t / static_cast<double>(a.warmup_steps);
    } else {
      double span = static_cast<double>(a.total_steps - a.warmup_steps > 1 ? a.total_steps - a.warmup_steps : 1);
      double prog = fmin(1.0, (t - a.warmup_steps) / span);
      double lo = base * a.min_lr_ratio;
      lr = lo + (base - lo) * 0.5 * (1.0 + cos(3.141592653589793 * prog));
    }
  }
  return {static_cast<float>(lr), static_cast<float>(1.0 - pow(a.beta1, static_cast<double>(t))),
          static_cast<float>(1.0 - pow(a.beta2, static_cast<double>(t))), static_cast<float>(t)};
}

__device__ void store_sched(float* sched, const SchedValues& v) {
  sched[sched::kLr] = v.lr;
  sched[sched::kBias1] = v.bias1;
  sched[sched::kBias2] = v.bias2;
  sched[sched::kStep] = v.step;
}

__global__ void schedule_kernel(int32_t* step, const float* hyper, float* sched, ScheduleAttrs a) {
  PDL_PROLOGUE();
  const int32_t t = ++step[0];
  store_sched(sched, schedule_at(t, hyper, a));
}

// This step's schedule values: computed here when fused, else read from the schedule op's output.
// Once per block, by its first thread: the double-precision powers are ~400 instructions, and
// with every thread computing them they were most of an optimizer launch's instructions
// (mlp_8x256's 909 blocks: IPC 2.2 for 13 MB of traffic). Every thread of the block must call it.
__device__ SchedValues current_sched(const float* hyper, const float* sched, const FusedSchedule& fs, bool fused) {
  __shared__ SchedValues sv;
  if (threadIdx.x == 0)
    sv = fused ? schedule_at(*fs.step + 1, hyper, fs.attrs)
               : SchedValues{sched[sched::kLr], sched[sched::kBias1], sched[sched::kBias2], sched[sched::kStep]};
  __syncthreads();
  return sv;
}

// The last block of a fused launch advances the step (every block has read it by then) and
// stores the schedule values every block derived from it (`sv`, this step's).
__device__ void finish_fused_schedule(const SchedValues& sv, const FusedSchedule& fs, bool fused) {
  if (!fused) return;
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(fs.counter, 1u) != gridDim.x - 1) return;
  store_sched(fs.sched, sv);
  *fs.step = *fs.step + 1;  // the step sv was derived from (no block writes it before this one)
  *fs.counter = 0u;
}

__global__ void sgd_kernel(const ChunkRef* chunks, const float* hyper,
                           const float* sched, SgdAttrs a, FusedSchedule fs, bool fused) {
  PDL_PROLOGUE();
  const ChunkRef c = chunks[blockIdx.x];
  const ParamDesc& d = c.d;
  const SchedValues sv = current_sched(hyper, sched, fs, fused);
  const float lr = sv.lr, wd = hyper[hyper::kWeightDecay];
  const bool first = sv.step <= 1.0f;
  const float mu = static_cast<float>(a.momentum), damp = static_cast<float>(a.dampening);
  const int64_t end = c.start + kOptimChunk < d.n ? c.start + kOptimChunk : d.n;
  for (int64_t i = c.start + threadIdx.x; i < end; i += blockDim.x) {
    float g = d.g[i] + wd * d.p[i];
    if (d.m) {
      float buf = first ? g : mu * d.m[i] + (1.0f - damp) * g;
      d.m[i] = buf;
      g = a.nesterov ? g + mu * buf : buf;
    }
    d.p[i] -= lr * g;
  }
  finish_fused_schedule(sv, fs, fused);
}

// As PyTorch's AdamW / Adam: step_size = lr / bc1, denom = sqrt(v) / sqrt(bc2) + eps.
__global__ void adam_kernel(const ChunkRef* chunks, const float* hyper,
                            const float* sched, AdamAttrs a, FusedSchedule fs, bool fused) {
  PDL_PROLOGUE();
  const ChunkRef c = chunks[blockIdx.x];
  const ParamDesc& d = c.d;
  const int64_t end = c.start + kOptimChunk < d.n ? c.start + kOptimChunk : d.n;
  // Every element's loads are issued before the schedule math and any store (stores through
  // these pointers would otherwise order the next element's loads after them).
  static_assert(kOptimChunk % kBlock == 0, "whole chunks per thread");
  constexpr int kPer = kOptimChunk / kBlock;
  float p[kPer], g[kPer], m[kPer], v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = c.start + threadIdx.x + k * kBlock;
    const bool in = i < end;
    p[k] = in ? d.p[i] : 0.0f, g[k] = in ? d.g[i] : 0.0f, m[k] = in ? d.m[i] : 0.0f, v[k] = in ? d.v[i] : 0.0f;
  }
  const SchedValues sv = current_sched(hyper, sched, fs, fused);
  const float lr = sv.lr, wd = hyper[hyper::kWeightDecay];
  const float step_size = lr / sv.bias1, bc2_sqrt = sqrtf(sv.bias2);
  const float b1 = static_cast<float>(a.beta1), b2 = static_cast<float>(a.beta2), eps = static_cast<float>(a.eps);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = c.start + threadIdx.x + k * kBlock;
    if (i >= end) continue;
    float pk = p[k], gk = g[k];
    if (a.decoupled_weight_decay) pk *= 1.0f - lr * wd;
    else gk += wd * pk;
    const float mk = b1 * m[k] + (1.0f - b1) * gk;
    const float vk = b2 * v[k] + (1.0f - b2) * gk * gk;
    d.m[i] = mk;
    d.v[i] = vk;
    d.p[i] = pk - step_size * mk / (sqrtf(vk) / bc2_sqrt + eps);
  }
  finish_fused_schedule(sv, fs, fused);
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

void schedule(int32_t* step, const float* hyper, float* sched, const ScheduleAttrs& a, cudaStream_t s) {
  launch_pdl(schedule_kernel, 1, 1, 0, s, step, hyper, sched, a);
  KERNEL_LAUNCH_CHECK();
}

void sgd_update(const ChunkRef* chunks, int num_chunks, const float* hyper,
                const float* sched, const SgdAttrs& a, const FusedSchedule* fs, cudaStream_t s) {
  launch_pdl(sgd_kernel, static_cast<unsigned>(num_chunks), kBlock, 0, s, chunks, hyper, sched, a,
                                                                  fs ? *fs : FusedSchedule{}, fs != nullptr);
  KERNEL_LAUNCH_CHECK();
}

void adam_update(const ChunkRef* chunks, int num_chunks, const float* hyper,
                 const float* sched, const AdamAttrs& a, const FusedSchedule* fs, cudaStream_t s) {
  launch_pdl(adam_kernel, static_cast<unsigned>(num_chunks), kBlock, 0, s, chunks, hyper, sched, a,
                                                                   fs ? *fs : FusedSchedule{}, fs != nullptr);
  KERNEL_LAUNCH_CHECK();
}

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
