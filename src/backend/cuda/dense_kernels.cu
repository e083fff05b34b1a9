#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/activation_math.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dense_kernels.cuh"
#include "backend/cuda/pdl.cuh"

namespace sg::cuda {

namespace {

constexpr int kThreads = 256;  // a 16 x 16 grid of threads, each TILE/16 x TILE/16 outputs

// The k-slab per iteration is as deep as 32 KB of shared memory allows (TILE * kBK = 4096), so
// small layers load their whole reduction in one or a few rounds: these products are bound by
// memory latency, not arithmetic, and every round costs a full load latency.
// One launch may carry two independent products (a layer's dW and dX): the first `tiles0`
// blocks work on g0, the rest on g1. Blocks are numbered row tile major.
// The per-element epilogue: (+= old C) (+ bias) (Z = v) (v = act(v)) (v *= dact').
__device__ __forceinline__ void store_output(const DenseGemm& g, int64_t m, int64_t n, float v) {
  const int64_t idx = m * g.ldc + n;
  if (g.accumulate) v += g.C[idx];
  if (g.bias && m < g.bias_rows) v += g.bias[n];
  if (g.Z) g.Z[idx] = v;
  if (g.act != Activation::None) v = act_forward<float>(g.act, v);
  if (g.dact != Activation::None)
    v *= act_derivative<float>(g.dact, g.dact_y ? g.dact_y[idx] : 0.0f, g.dact_z ? g.dact_z[idx] : 0.0f);
  g.C[idx] = v;
}
__device__ __forceinline__ void store_rowsum(const DenseGemm& g, int64_t m, float rs) {
  float* r = g.rowsum + m;
  *r = g.rowsum_accumulate ? *r + rs : rs;
}

// k-range of split `s`: whole slabs of kBK, so every split but the last is full.
template <int kBK>
__device__ __forceinline__ void split_range(const DenseGemm& g, int s, int64_t* k_begin, int64_t* k_end) {
  const int64_t per = ((g.K + g.splits - 1) / g.splits + kBK - 1) / kBK * kBK;
  *k_begin = s * per;
  *k_end = *k_begin + per < g.K ? *k_begin + per : g.K;
}

template <int TILE>
__global__ void __launch_bounds__(kThreads) dense_gemm_kernel(DenseGemm g0, DenseGemm g1, int tiles0) {
  PDL_PROLOGUE();
  constexpr int TPT = TILE / 16;
  constexpr int kBK = 4096 / TILE;
  __shared__ float As[kBK][TILE + 1];  // As[k][m]
  __shared__ float Bs[kBK][TILE + 1];  // Bs[k][n]
  const bool first = static_cast<int>(blockIdx.x) < tiles0;
  const DenseGemm& g = first ? g0 : g1;
  const int64_t t = first ? blockIdx.x : blockIdx.x - tiles0;
  const int64_t n_tiles = (g.N + TILE - 1) / TILE;
  const int64_t tn = t % n_tiles, tm = t / n_tiles;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t n0 = tn * TILE, m0 = tm * TILE;
  const bool do_rowsum = g.rowsum != nullptr && tn == 0;
  float acc[TPT][TPT];
#pragma unroll
  for (int i = 0; i < TPT; ++i)
#pragma unroll
    for (int j = 0; j < TPT; ++j) acc[i][j] = 0.0f;
  float rs = 0.0f;
  int64_t k_begin = 0, k_end = g.K;
  if (g.splits > 1) split_range<kBK>(g, blockIdx.y, &k_begin, &k_end);

  constexpr int kLoads = TILE * kBK / kThreads;  // 16 elements of A and 16 of B per thread
  const bool a_k_fast = g.sak == 1, b_n_fast = g.sbn == 1;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK) {
    // All loads are issued before the first shared-memory store, so their latencies overlap;
    // the order follows the unit stride so global reads coalesce.
    float ra[kLoads], rb[kLoads];
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      const int mm = a_k_fast ? e / kBK : e % TILE, kk = a_k_fast ? e % kBK : e / TILE;
      const int64_t m = m0 + mm, k = k0 + kk;
      ra[r] = (m < g.M && k < k_end) ? __ldg(g.A + m * g.sam + k * g.sak) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      const int nn = b_n_fast ? e % TILE : e / kBK, kk = b_n_fast ? e / TILE : e % kBK;
      const int64_t n = n0 + nn, k = k0 + kk;
      rb[r] = (n < g.N && k < k_end) ? __ldg(g.B + k * g.sbk + n * g.sbn) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      As[a_k_fast ? e % kBK : e / TILE][a_k_fast ? e / kBK : e % TILE] = ra[r];
      Bs[b_n_fast ? e / TILE : e % kBK][b_n_fast ? e % TILE : e / kBK] = rb[r];
    }
    __syncthreads();
    // Only the slab's real depth: a short reduction (K < kBK) does not multiply padding zeros.
    const int depth = k_end - k0 < kBK ? static_cast<int>(k_end - k0) : kBK;
    if (do_rowsum && tid < TILE) {
      const int rdepth = g.rowsum_k - k0 < depth ? static_cast<int>(g.rowsum_k - k0) : depth;
      for (int kk = 0; kk < rdepth; ++kk) rs += As[kk][tid];
    }
#pragma unroll 8
    for (int kk = 0; kk < depth; ++kk) {
      float a[TPT], b[TPT];
#pragma unroll
      for (int i = 0; i < TPT; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < TPT; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < TPT; ++i)
#pragma unroll
        for (int j = 0; j < TPT; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

  if (g.splits > 1) {  // raw partial sums; split_reduce_kernel finishes
    float* P = g.partial + blockIdx.y * g.M * g.N;
#pragma unroll
    for (int i = 0; i < TPT; ++i) {
      const int64_t m = m0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < TPT; ++j) {
        const int64_t n = n0 + tx + 16 * j;
        if (m < g.M && n < g.N) P[m * g.N + n] = acc[i][j];
      }
    }
    if (do_rowsum && tid < TILE && m0 + tid < g.M) g.partial[g.splits * g.M * g.N + blockIdx.y * g.M + m0 + tid] = rs;
    return;
  }
#pragma unroll
  for (int i = 0; i < TPT; ++i) {
    const int64_t m = m0 + ty + 16 * i;
    if (m >= g.M) continue;
#pragma unroll
    for (int j = 0; j < TPT; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (n < g.N) store_output(g, m, n, acc[i][j]);
    }
  }
  if (do_rowsum && tid < TILE && m0 + tid < g.M) store_rowsum(g, m0 + tid, rs);
}

// A split product laid out as a weight gradient (A(m, k) = dZ[k, m] with m fastest, B(k, n) =
// X[k, n] with n fastest): both operands' rows are contiguous, so each slab of BK rows goes into
// shared memory as it lies in memory (float4 loads when widths and pointers allow), with no
// transpose. A T x T output tile (T = 64 or 128) is spread over 16 x 16 threads, each holding
// (T/16) x (T/16) outputs in groups of 4 rows and 4 columns 64 apart, read from shared memory
// as float4 (a warp's reads then cover consecutive words: no bank conflicts). The next slab is
// loaded into registers while the current one is multiplied. Each block writes the raw partial
// sums of its k-range (blockIdx.y); split_reduce_kernel adds them.
template <bool VEC>
__device__ __forceinline__ float4 load_row4(const float* p, int64_t k, int64_t ld, int64_t c, int64_t lim, bool in) {
  if constexpr (VEC) {
    return in && c < lim ? __ldg(reinterpret_cast<const float4*>(p + k * ld + c)) : make_float4(0, 0, 0, 0);
  } else {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = in && c + j < lim ? __ldg(p + k * ld + c + j) : 0.0f;
    return make_float4(v[0], v[1], v[2], v[3]);
  }
}

template <int T>
struct RowsTile {
  static constexpr int BK = 2048 / T;                  // 32 or 16 rows: 2 float4 of A and of B per thread
  static constexpr int TPT = T / 16;                   // outputs per thread in each direction
  static constexpr int kLoads = BK * T / 4 / kThreads;
  // Offset of a thread's i-th row (or column) within the tile: groups of 4, 64 apart.
  __device__ static int at(int t, int i) { return (i / 4) * 64 + t * 4 + i % 4; }
};

template <int T, bool VEC>
__global__ void __launch_bounds__(kThreads) split_gemm_rows_kernel(DenseGemm g) {
  PDL_PROLOGUE();
  using R = RowsTile<T>;
  constexpr int BK = R::BK, TPT = R::TPT, kLoads = R::kLoads;
  __shared__ __align__(16) float As[2][BK][T];  // As[k][m]
  __shared__ __align__(16) float Bs[2][BK][T];  // Bs[k][n]
  const int64_t n_tiles = (g.N + T - 1) / T;
  const int64_t tn = blockIdx.x % n_tiles, tm = blockIdx.x / n_tiles;
  const int64_t m0 = tm * T, n0 = tn * T;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  int64_t k_begin = 0, k_end = 0;
  split_range<BK>(g, blockIdx.y, &k_begin, &k_end);
  const bool do_rowsum = g.rowsum != nullptr && tn == 0 && tx == 0;
  float acc[TPT][TPT];
#pragma unroll
  for (int i = 0; i < TPT; ++i)
#pragma unroll
    for (int j = 0; j < TPT; ++j) acc[i][j] = 0.0f;
  float rs[TPT];
#pragma unroll
  for (int i = 0; i < TPT; ++i) rs[i] = 0.0f;
  float4 ra[kLoads], rb[kLoads];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads, kk = e / (T / 4), c = (e % (T / 4)) * 4;
      const bool in = k0 + kk < k_end;
      ra[r] = load_row4<VEC>(g.A, k0 + kk, g.sak, m0 + c, g.M, in);
      rb[r] = load_row4<VEC>(g.B, k0 + kk, g.sbk, n0 + c, g.N, in);
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads, kk = e / (T / 4), c = (e % (T / 4)) * 4;
      *reinterpret_cast<float4*>(&As[buf][kk][c]) = ra[r];
      *reinterpret_cast<float4*>(&Bs[buf][kk][c]) = rb[r];
    }
  };
  if (k_begin < k_end) {
    load(k_begin);
    store(0);
  }
  __syncthreads();
  int buf = 0;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += BK) {
    const bool more = k0 + BK < k_end;
    if (more) load(k0 + BK);  // in flight while this slab is multiplied
    if (do_rowsum) {          // the bias gradient: sum of A over the first rowsum_k values of k
      const int64_t left = g.rowsum_k - k0;
      const int rdepth = left < 0 ? 0 : left < BK ? static_cast<int>(left) : BK;
      for (int kk = 0; kk < rdepth; ++kk)
#pragma unroll
        for (int i = 0; i < TPT; ++i) rs[i] += As[buf][kk][R::at(ty, i)];
    }
    // Rows past k_end were loaded as zeros: the whole slab is multiplied.
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TPT], b[TPT];
#pragma unroll
      for (int q = 0; q < TPT / 4; ++q) {
        const float4 a4 = *reinterpret_cast<const float4*>(&As[buf][kk][q * 64 + ty * 4]);
        const float4 b4 = *reinterpret_cast<const float4*>(&Bs[buf][kk][q * 64 + tx * 4]);
        a[q * 4] = a4.x, a[q * 4 + 1] = a4.y, a[q * 4 + 2] = a4.z, a[q * 4 + 3] = a4.w;
        b[q * 4] = b4.x, b[q * 4 + 1] = b4.y, b[q * 4 + 2] = b4.z, b[q * 4 + 3] = b4.w;
      }
#pragma unroll
      for (int i = 0; i < TPT; ++i)
#pragma unroll
        for (int j = 0; j < TPT; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) store(buf ^ 1);  // that buffer's last readers passed the barrier below
    __syncthreads();
    buf ^= 1;
  }
  float* P = g.partial + blockIdx.y * g.M * g.N;
#pragma unroll
  for (int i = 0; i < TPT; ++i) {
    const int64_t m = m0 + R::at(ty, i);
    if (m >= g.M) continue;
#pragma unroll
    for (int j = 0; j < TPT; ++j) {
      const int64_t n = n0 + R::at(tx, j);
      if (n < g.N) P[m * g.N + n] = acc[i][j];
    }
    if (do_rowsum) g.partial[g.splits * g.M * g.N + blockIdx.y * g.M + m] = rs[i];
  }
}

// A split product onto at most 256 outputs (the weight gradient of a first layer fed by a few
// coordinates, or of a one-unit output layer): no tile computes padding. The block's threads
// are G lanes per output (G = 256 / outputs, rounded down to a power of two); lane g sums k =
// k_begin + g, + G, ... into four accumulators (loads in flight), and lane 0 adds the lanes in
// order (deterministic). Row sums (A summed over k < rowsum_k) likewise, by the threads of
// outputs m < M in a second pass.
constexpr int kSmallOutputs = 256;
__device__ __forceinline__ float small_sum(const float* a, int64_t sa, const float* b, int64_t sb, int64_t k0,
                                           int64_t k1, int64_t step) {
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t k = k0;
  for (; k + 3 * step < k1; k += 4 * step)
#pragma unroll
    for (int u = 0; u < 4; ++u) s[u] = fmaf(__ldg(a + (k + u * step) * sa), b ? __ldg(b + (k + u * step) * sb) : 1.0f, s[u]);
  for (; k < k1; k += step) s[0] = fmaf(__ldg(a + k * sa), b ? __ldg(b + k * sb) : 1.0f, s[0]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}
__global__ void __launch_bounds__(kSmallOutputs) split_gemm_small_kernel(DenseGemm g) {
  PDL_PROLOGUE();
  __shared__ float lanes[kSmallOutputs];
  int64_t k_begin = 0, k_end = 0;
  split_range<32>(g, blockIdx.x, &k_begin, &k_end);
  const int mn = static_cast<int>(g.M * g.N);
  int G = 1;
  while (2 * G * mn <= kSmallOutputs) G *= 2;
  const int t = threadIdx.x, o = t % mn, lane = t / mn;
  const bool active = t < G * mn;
  const int64_t m = o / g.N, n = o % g.N;
  float v = 0.0f;
  if (active) v = small_sum(g.A + m * g.sam, g.sak, g.B + n * g.sbn, g.sbk, k_begin + lane, k_end, G);
  lanes[t] = v;
  __syncthreads();
  if (active && lane == 0) {
    float s = 0.0f;
    for (int q = 0; q < G; ++q) s += lanes[q * mn + o];
    g.partial[blockIdx.x * g.M * g.N + o] = s;
  }
  if (!g.rowsum) return;
  // Row sums: G' lanes per row.
  __syncthreads();
  const int rows = static_cast<int>(g.M);
  int R = 1;
  while (2 * R * rows <= kSmallOutputs) R *= 2;
  const int r = t % rows, rl = t / rows;
  const bool ractive = t < R * rows;
  const int64_t r_end = g.rowsum_k < k_end ? g.rowsum_k : k_end;
  float rv = 0.0f;
  if (ractive) rv = small_sum(g.A + r * g.sam, g.sak, nullptr, 0, k_begin + rl, r_end, R);
  lanes[t] = rv;
  __syncthreads();
  if (ractive && rl == 0) {
    float s = 0.0f;
    for (int q = 0; q < R; ++q) s += lanes[q * rows + r];
    g.partial[g.splits * g.M * g.N + blockIdx.x * g.M + r] = s;
  }
}

// Sums the splits' partials, then the epilogue. Eight lanes share an output: lane j adds splits
// j, j + 8, ... in order, then a fixed shuffle tree combines the eight (deterministic).
constexpr int kReduceLanes = 8;
__global__ void split_reduce_kernel(DenseGemm g) {
  PDL_PROLOGUE();
  const int64_t mn = g.M * g.N, total = mn + (g.rowsum ? g.M : 0);
  const int64_t e = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kReduceLanes;
  const int sub = threadIdx.x % kReduceLanes;
  const bool out = e < mn;
  float v = 0.0f;
  if (e < total) {
    const float* p = out ? g.partial + e : g.partial + g.splits * mn + (e - mn);
    const int64_t stride = out ? mn : g.M;
#pragma unroll 4
    for (int s = sub; s < g.splits; s += kReduceLanes) v += p[s * stride];
  }
  for (int off = kReduceLanes / 2; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off, kReduceLanes);
  if (sub != 0 || e >= total) return;
  if (out) store_output(g, e / g.N, e % g.N, v);
  else store_rowsum(g, e - mn, v);
}

// ---- 3xTF32 on tensor cores (precision: tf32x3) --------------------------------------------
// The same products (and the same epilogue, split-k partials and row sums) with the arithmetic on
// tensor cores: each fp32 operand is split into a TF32 part and a TF32 remainder, and big*small +
// small*big + big*big are accumulated in fp32 (the dropped small*small is ~2^-22 of a product),
// so the error stays at fp32's level. A 64 x 64 output tile per block of 4 warps, each warp
// 32 x 32 as 2 x 4 mma.m16n8k8 tiles; k-slabs of 32 double-buffered through cp.async. Each operand
// tile is kept in shared memory as it lies in global memory: [k][m] when m is the unit stride (a
// weight gradient's dZ and X), [m][k] when k is (activations, W as [out][in] in the forward). The
// row pads (+8 and +4 floats) make the fragment reads (8 rows x 4 columns per warp) hit 32 banks.
namespace tc {
// kStages slabs in flight per block (cp.async): a split weight gradient's block runs only ~10-20
// slabs, where double buffering left the loads exposed (Fourier 4x128's 128 x 64 x 67584 at
// 1.5 TB/s and ~30% of the tensor cores' rate).
constexpr int kT = 64, kBK = 32, kThreads = 128, kStages = 4;
template <bool MFAST>
struct Tile {  // one operand's 64 x 32 slab in shared memory
  static constexpr int LD = MFAST ? kT + 8 : kBK + 4;
  static constexpr int kFloats = MFAST ? kBK * LD : kT * LD;  // 2304 either way
  __device__ static int at(int mn, int k) { return MFAST ? k * LD + mn : mn * LD + k; }
};

__device__ __forceinline__ void cp_async16(float* smem, const float* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// x = big + small with big x rounded to TF32's 10 mantissa bits: half an ulp added and the low
// 13 bits cleared, two integer operations at full rate (cvt.rna.tf32 runs at the conversion
// units' quarter rate, and at 32 conversions per 24 mma it held the kernel to about half the
// tensor cores' rate). small = x - big is exact; the tensor cores read its top 19 bits.
__device__ __forceinline__ void split(float x, uint32_t& big, uint32_t& small) {
  big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(x - __uint_as_float(big));
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Loads rows [k0, k0 + kBK) x [mn0, mn0 + kT) of an operand (element (mn, k) at p[mn*smn + k*sk],
// one of the strides 1) into `dst`, 16 bytes per cp.async; outside [0, MN) x [k0, k_end) zeros.
template <bool MFAST>
__device__ __forceinline__ void load_slab(float* dst, const float* p, int64_t smn, int64_t sk, int64_t mn0,
                                          int64_t MN, int64_t k0, int64_t k_end, int tid) {
  constexpr int kChunks = kT * kBK / 4 / kThreads;  // 4 per thread
#pragma unroll
  for (int r = 0; r < kChunks; ++r) {
    const int e = tid + r * kThreads;
    // MFAST: 16 chunks along m per k row; else 8 chunks along k per m row.
    const int mn = MFAST ? (e % (kT / 4)) * 4 : e / (kBK / 4), k = MFAST ? e / (kT / 4) : (e % (kBK / 4)) * 4;
    const bool in = mn0 + mn < MN && k0 + k < k_end;
    const float* src = in ? p + (mn0 + mn) * smn + (k0 + k) * sk : p;
    cp_async16(dst + Tile<MFAST>::at(mn, k), src, in);
  }
}

template <bool AM, bool BN>
__global__ void __launch_bounds__(kThreads) gemm_kernel(DenseGemm g) {
  PDL_PROLOGUE();
  using TA = Tile<AM>;
  using TB = Tile<BN>;
  extern __shared__ __align__(16) float smem[];  // kStages A slabs, then kStages B slabs
  float* As = smem;
  float* Bs = smem + kStages * TA::kFloats;
  const int64_t n_tiles = (g.N + kT - 1) / kT;
  const int64_t m0 = blockIdx.x / n_tiles * kT, n0 = blockIdx.x % n_tiles * kT;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gq = lane / 4, tq = lane % 4;              // the fragment's row group and column
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;  // the warp's 32 x 32 within the tile
  int64_t k_begin = 0, k_end = g.K;
  if (g.splits > 1) split_range<kBK>(g, blockIdx.y, &k_begin, &k_end);
  const bool do_rowsum = g.rowsum != nullptr && n0 == 0 && tid < kT;
  float rs = 0.0f;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  // Slab n of the block's k-range goes to stage n % kStages. Every iteration commits one group
  // (empty past the range), so waiting for all but the newest kStages - 2 groups means the
  // current slab has landed.
  auto load = [&](int64_t n) {
    const int64_t k0 = k_begin + n * kBK;
    if (k0 < k_end) {
      const int st = static_cast<int>(n % kStages);
      load_slab<AM>(As + st * TA::kFloats, g.A, g.sam, g.sak, m0, g.M, k0, k_end, tid);
      load_slab<BN>(Bs + st * TB::kFloats, g.B, g.sbn, g.sbk, n0, g.N, k0, k_end, tid);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) load(i);
  int64_t slab = 0;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK, ++slab) {
    cp_async_wait<kStages - 2>();
    // This slab is visible to every thread, and every thread is done with the one before, whose
    // stage the next load refills.
    __syncthreads();
    load(slab + kStages - 1);
    const float* a = As + (slab % kStages) * TA::kFloats;
    const float* b = Bs + (slab % kStages) * TB::kFloats;
    if (do_rowsum) {  // the bias gradient: A summed over its first rowsum_k values of k
      const int64_t left = g.rowsum_k - k0;
      const int depth = left < 0 ? 0 : left < kBK ? static_cast<int>(left) : kBK;
      for (int k = 0; k < depth; ++k) rs += a[TA::at(tid, k)];
    }
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t ab[2][4], as[2][4], bb[4][2], bs[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int m = wm + i * 16 + gq;
        split(a[TA::at(m, kk + tq)], ab[i][0], as[i][0]);
        split(a[TA::at(m + 8, kk + tq)], ab[i][1], as[i][1]);
        split(a[TA::at(m, kk + tq + 4)], ab[i][2], as[i][2]);
        split(a[TA::at(m + 8, kk + tq + 4)], ab[i][3], as[i][3]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + j * 8 + gq;
        split(b[TB::at(n, kk + tq)], bb[j][0], bs[j][0]);
        split(b[TB::at(n, kk + tq + 4)], bb[j][1], bs[j][1]);
      }
      // Small terms first; each pass is 8 independent products (a dependent chain would stall).
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma(acc[i][j], as[i], bb[j]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma(acc[i][j], ab[i], bs[j]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma(acc[i][j], ab[i], bb[j]);
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)

  // acc[i][j]: rows wm + 16i + gq (+8), columns wn + 8j + 2tq (+1).
  float* P = g.splits > 1 ? g.partial + blockIdx.y * g.M * g.N : nullptr;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = m0 + wm + i * 16 + gq + h * 8;
      if (m >= g.M) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t n = n0 + wn + j * 8 + 2 * tq + c;
          if (n >= g.N) continue;
          if (P) P[m * g.N + n] = acc[i][j][2 * h + c];
          else store_output(g, m, n, acc[i][j][2 * h + c]);
        }
    }
  if (do_rowsum && m0 + tid < g.M) {
    if (P) g.partial[g.splits * g.M * g.N + blockIdx.y * g.M + m0 + tid] = rs;
    else store_rowsum(g, m0 + tid, rs);
  }
}
}  // namespace tc

// ---- Skinny layers: at most kSkinnyMax outputs over many rows (a network's last layer) -------
// Bound by reading X (forward, weight gradient) and writing dX, not by arithmetic. A row is
// C chunks of V floats (float4 when the widths and pointers allow); P lanes share a row (P =
// C rounded up to a power of two, at most 32), so a warp covers G = 32 / P rows per pass and
// kPasses passes are in flight at once (coalesced loads, several per lane). W in shared memory.
namespace skinny {
constexpr int kThreads = 256, kWarps = kThreads / 32, kPasses = 4;

template <int V>
struct Vec;
template <>
struct Vec<1> {
  using T = float;
  __device__ static float at(const float& v, int) { return v; }
};
template <>
struct Vec<4> {
  using T = float4;
  __device__ static float at(const float4& v, int j) { return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w; }
};

struct Lanes {  // how a warp's lanes cover rows of C chunks
  int P, G, row, chunk;
  __device__ Lanes(int64_t C, int lane) {
    P = 1;
    while (P < C && P < 32) P *= 2;
    G = 32 / P, row = lane / P, chunk = lane % P;
  }
};

template <int N, int V>
__global__ void __launch_bounds__(kThreads) forward_kernel(SkinnyDense g) {
  PDL_PROLOGUE();
  using T = typename Vec<V>::T;
  extern __shared__ float w[];  // [N][I]
  for (int64_t e = threadIdx.x; e < N * g.I; e += kThreads) w[e] = g.W[e];
  __syncthreads();
  const int64_t C = g.I / V;
  const Lanes L(C, threadIdx.x % 32);
  const T* X = reinterpret_cast<const T*>(g.X);
  const int64_t per_iter = int64_t(kPasses) * L.G, warps = int64_t(gridDim.x) * kWarps;
  for (int64_t r0 = (blockIdx.x * int64_t(kWarps) + threadIdx.x / 32) * per_iter; r0 < g.R; r0 += warps * per_iter) {
    float acc[kPasses][N] = {};
    for (int64_t c = L.chunk; c - L.chunk < C; c += L.P) {
      T x[kPasses];
#pragma unroll
      for (int u = 0; u < kPasses; ++u) {
        const int64_t r = r0 + u * L.G + L.row;
        x[u] = r < g.R && c < C ? __ldg(X + r * C + c) : T{};
      }
      if (c >= C) continue;
#pragma unroll
      for (int o = 0; o < N; ++o)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float wv = w[o * g.I + c * V + j];
#pragma unroll
          for (int u = 0; u < kPasses; ++u) acc[u][o] = fmaf(Vec<V>::at(x[u], j), wv, acc[u][o]);
        }
    }
#pragma unroll
    for (int u = 0; u < kPasses; ++u)
#pragma unroll
      for (int o = 0; o < N; ++o)
        for (int off = L.P / 2; off > 0; off >>= 1) acc[u][o] += __shfl_xor_sync(0xffffffffu, acc[u][o], off);
    if (L.chunk != 0) continue;
#pragma unroll
    for (int u = 0; u < kPasses; ++u) {
      const int64_t r = r0 + u * L.G + L.row;
      if (r >= g.R) break;
#pragma unroll
      for (int o = 0; o < N; ++o) {
        float v = acc[u][o];
        if (g.bias && r < g.bias_rows) v += g.bias[o];
        if (g.Z) g.Z[r * N + o] = v;
        g.Y[r * N + o] = act_forward<float>(g.act, v);
      }
    }
  }
}

// dX = dZ W, and this block's partial sums of dW = dZ^T X and of db (dZ over rows <
// bias_rows) in split_reduce_kernel's layout: [block][N][I], then [block][N]. The block takes a
// contiguous range of rows; each lane keeps its chunks' dW sums in registers (S slots).
template <int N, int V, int S>
__global__ void __launch_bounds__(kThreads) backward_kernel(SkinnyDense g, float* partial, int64_t rows_per_block) {
  PDL_PROLOGUE();
  using T = typename Vec<V>::T;
  extern __shared__ float w[];  // [N][I], then the warps' sums [kWarps][N][I] and db [kWarps][N]
  float* sums = w + N * g.I;
  for (int64_t e = threadIdx.x; e < N * g.I; e += kThreads) w[e] = g.W[e];
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t C = g.I / V;
  const Lanes L(C, lane);
  const T* X = reinterpret_cast<const T*>(g.X);
  T* dX = reinterpret_cast<T*>(g.dX);
  const int64_t r_begin = blockIdx.x * rows_per_block;
  const int64_t r_end = r_begin + rows_per_block < g.R ? r_begin + rows_per_block : g.R;
  float dw[S][N][V] = {}, db[N] = {};
  const int64_t per_iter = int64_t(kPasses) * L.G;
  for (int64_t r0 = r_begin + warp * per_iter; r0 < r_end; r0 += kWarps * per_iter) {
    float dz[kPasses][N];
#pragma unroll
    for (int u = 0; u < kPasses; ++u) {
      const int64_t r = r0 + u * L.G + L.row;
#pragma unroll
      for (int o = 0; o < N; ++o) dz[u][o] = r < r_end ? __ldg(g.dZ + r * N + o) : 0.0f;
      if (L.chunk == 0 && r < g.bias_rows)
#pragma unroll
        for (int o = 0; o < N; ++o) db[o] += dz[u][o];
    }
#pragma unroll
    for (int sl = 0; sl < S; ++sl) {
      const int64_t c = L.chunk + sl * L.P;
      if (c >= C) break;
      T x[kPasses];
#pragma unroll
      for (int u = 0; u < kPasses; ++u) {
        const int64_t r = r0 + u * L.G + L.row;
        x[u] = r < r_end ? __ldg(X + r * C + c) : T{};
      }
#pragma unroll
      for (int o = 0; o < N; ++o)
#pragma unroll
        for (int j = 0; j < V; ++j)
#pragma unroll
          for (int u = 0; u < kPasses; ++u) dw[sl][o][j] = fmaf(dz[u][o], Vec<V>::at(x[u], j), dw[sl][o][j]);
      if (!dX) continue;
#pragma unroll
      for (int u = 0; u < kPasses; ++u) {
        const int64_t r = r0 + u * L.G + L.row;
        if (r >= r_end) break;
        float v[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          v[j] = 0.0f;
#pragma unroll
          for (int o = 0; o < N; ++o) v[j] = fmaf(dz[u][o], w[o * g.I + c * V + j], v[j]);
        }
        T out;
        if constexpr (V == 4) out = make_float4(v[0], v[1], v[2], v[3]);
        else out = v[0];
        if (g.dX_accumulate) {
          const T old = dX[r * C + c];
          if constexpr (V == 4) out.x += old.x, out.y += old.y, out.z += old.z, out.w += old.w;
          else out += old;
        }
        dX[r * C + c] = out;
      }
    }
  }
  // Lanes of a chunk (one per row of the warp's pass) add up, then the warps in order.
#pragma unroll
  for (int sl = 0; sl < S; ++sl)
#pragma unroll
    for (int o = 0; o < N; ++o)
#pragma unroll
      for (int j = 0; j < V; ++j)
        for (int off = L.P; off < 32; off <<= 1) dw[sl][o][j] += __shfl_xor_sync(0xffffffffu, dw[sl][o][j], off);
  for (int o = 0; o < N; ++o)
    for (int off = 16; off > 0; off >>= 1) db[o] += __shfl_xor_sync(0xffffffffu, db[o], off);
  if (L.row == 0)
#pragma unroll
    for (int sl = 0; sl < S; ++sl) {
      const int64_t c = L.chunk + sl * L.P;
      if (c >= C) break;
#pragma unroll
      for (int o = 0; o < N; ++o)
#pragma unroll
        for (int j = 0; j < V; ++j) sums[(warp * N + o) * g.I + c * V + j] = dw[sl][o][j];
    }
  float* dbs = sums + kWarps * N * g.I;
  if (lane == 0)
    for (int o = 0; o < N; ++o) dbs[warp * N + o] = db[o];
  __syncthreads();
  float* P = partial + blockIdx.x * N * g.I;
  for (int64_t e = threadIdx.x; e < N * g.I; e += kThreads) {
    float t = 0.0f;
    for (int q = 0; q < kWarps; ++q) t += sums[q * N * g.I + e];
    P[e] = t;
  }
  if (threadIdx.x < N) {
    float t = 0.0f;
    for (int q = 0; q < kWarps; ++q) t += dbs[q * N + threadIdx.x];
    partial[int64_t(gridDim.x) * N * g.I + blockIdx.x * N + threadIdx.x] = t;
  }
}
}  // namespace skinny

int64_t tiles(int64_t M, int64_t N, int t) { return ((M + t - 1) / t) * ((N + t - 1) / t); }

// The weight-gradient layout split_gemm_rows_kernel takes, and whether its rows load as float4.
bool rows_layout(const DenseGemm& g) { return g.sam == 1 && g.sbn == 1; }
// The row-slab kernel's tile: 128 x 128 (8 x 8 outputs per thread) for outputs of at least that
// size, 64 x 64 below, and when k is too short to give 128-tiles two waves of blocks.
int rows_tile(int64_t M, int64_t N, int64_t K) {
  if (M < 128 || N < 128) return 64;
  return K / 128 * tiles(M, N, 128) >= 2 * 132 ? 128 : 64;
}
// Split products onto at most 256 outputs run on split_gemm_small_kernel.
bool small_output(int64_t M, int64_t N) { return M * N <= 256 && M <= 256; }
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Whether the tensor-core kernel takes this product: each operand's slabs load as 16-byte
// chunks along its unit stride (the extent there and the other stride multiples of 4).
bool tc_operand(const void* p, int64_t s_mn, int64_t s_k, int64_t MN, int64_t K) {
  if (!aligned16(p)) return false;
  if (s_mn == 1) return MN % 4 == 0 && s_k % 4 == 0;
  return s_k == 1 && K % 4 == 0 && s_mn % 4 == 0;
}
// ... and whether its 64 x 64 tiles (times the k splits) give every SM of an H200 a block: fewer
// would leave most tensor cores idle where the SIMT kernel's smaller tiles spread out.
bool tc_layout(const DenseGemm& g) {
  return g.tf32x3 && !small_output(g.M, g.N) && tiles(g.M, g.N, tc::kT) * g.splits >= 132 && tc_operand(g.A, g.sam, g.sak, g.M, g.K) && tc_operand(g.B, g.sbn, g.sbk, g.N, g.K);
}
void launch_reduce(const DenseGemm& g, cudaStream_t s) {
  const int64_t n = (g.M * g.N + (g.rowsum ? g.M : 0)) * kReduceLanes;
  launch_pdl(split_reduce_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, s, g);
  KERNEL_LAUNCH_CHECK();
}
template <bool AM, bool BN>
void launch_tc_kernel(const DenseGemm& g, dim3 grid, cudaStream_t s) {
  constexpr size_t smem = tc::kStages * (tc::Tile<AM>::kFloats + tc::Tile<BN>::kFloats) * sizeof(float);
  static const cudaError_t opt_in =  // past the 48 KiB default: once per kernel, before any launch
      cudaFuncSetAttribute(tc::gemm_kernel<AM, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  CUDA_CHECK(opt_in);
  launch_pdl(tc::gemm_kernel<AM, BN>, grid, tc::kThreads, smem, s, g);
}
void launch_tc(const DenseGemm& g, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(tiles(g.M, g.N, tc::kT)), static_cast<unsigned>(g.splits));
  const bool am = g.sam == 1, bn = g.sbn == 1;
  if (am && bn) launch_tc_kernel<true, true>(g, grid, s);
  else if (am) launch_tc_kernel<true, false>(g, grid, s);
  else if (bn) launch_tc_kernel<false, true>(g, grid, s);
  else launch_tc_kernel<false, false>(g, grid, s);
  KERNEL_LAUNCH_CHECK();
}
bool rows_vec4(const DenseGemm& g) {
  return g.M % 4 == 0 && g.N % 4 == 0 && g.sak % 4 == 0 && g.sbk % 4 == 0 && aligned16(g.A) && aligned16(g.B);
}

}  // namespace

bool prefer_own_gemm(int64_t M, int64_t N, int64_t K, bool rows) {
  const char* v = std::getenv("SG_OWN_GEMM");
  if (v && std::string(v) == "0") return false;
  if (v && std::string(v) == "1") return true;
  // Up to ~4M multiply-adds (the seed MLP's products) the library's fixed costs dominate; above
  // that cuBLASLt's tuned kernels win (measured on an H200, see bench/RESULTS.md). A long
  // reduction over few output tiles (a weight gradient over many jet rows: 32 x 32 x 2560) runs
  // serially in our kernel's few blocks (55 us measured), where cuBLASLt splits it.
  // Tall products (M rows of jets, N = 1 output) waste most of a tile: cuBLASLt.
  return (M * N * K <= (int64_t{1} << 22) && K <= 512 && M <= 16384) || own_gemm_splits(M, N, K, rows) > 1;
}

int own_gemm_splits(int64_t M, int64_t N, int64_t K, bool rows, bool tensor_cores) {
  const char* v = std::getenv("SG_SPLIT_K");
  if (v && std::string(v) == "0") return 1;  // such products go to cuBLASLt
  if (tensor_cores) {
    // 64 x 64 tiles, three blocks per SM, each over at least 256 values of k. Fourier 4x128's
    // 128 x 128 x 81920 weight gradients (H200, whole step at tf32x3): two waves 1282 us per
    // step, three 1252, four 1274, six 1316.
    if (K < 1024) return 1;
    const int64_t t = tiles(M, N, tc::kT), want = (3 * 132 + t - 1) / t, most = K / 256;
    const int64_t s = want < most ? want : most;
    return s < 2 ? 1 : static_cast<int>(s);
  }
  // A small output (a few 64 x 64 tiles) over a long reduction, each block over at least 128
  // values of k. From k = 1024 for outputs up to 128 x 128 (a PINN's boundary points), from 2048
  // up to 256 x 256 (cuBLASLt is faster for an MLP's 256 x 256 x 1024 weight gradient: 287
  // against 355 us per step on mlp_8x256).
  if (K < 1024 || M * N > 256 * 256 || (K < 2048 && M * N > 128 * 128)) return 1;
  // Weight gradients (split_gemm_rows_kernel) take two waves of blocks on an H200's 132 SMs
  // (Poisson 4x64: 476 -> 445 us per step against one wave; four: 456) and any size (Fourier
  // 4x128's 128 x 128 x 81920: 1563 us against cuBLASLt's 1576). Other layouts (the generic
  // kernel) one wave, and cuBLASLt past ~2^28 multiply-adds (Fourier: 1919 against 2112 us).
  if (!rows && M * N * K > (int64_t{1} << 28)) return 1;
  // At most 256 outputs (split_gemm_small_kernel): four waves, each block over at least 64 rows.
  if (small_output(M, N)) {
    const int64_t s = std::min<int64_t>(4 * 132, K / 64);
    return s < 2 ? 1 : static_cast<int>(s);
  }
  const int64_t waves = rows ? 2 : 1;
  const int64_t t = tiles(M, N, rows ? rows_tile(M, N, K) : 64), want = (waves * 132 + t - 1) / t, most = K / 128;
  const int64_t s = want < most ? want : most;
  return s < 2 ? 1 : static_cast<int>(s);
}

int64_t own_gemm_partial_floats(int64_t M, int64_t N, int splits) {
  return splits > 1 ? splits * (M * N + M) : 0;
}


bool own_gemm_tensor_cores(const DenseGemm& g) { return tc_layout(g); }

bool tf32_tensor_cores() {
  static const bool on = [] {
    int dev = 0, major = 0;
    cudaFuncAttributes fa{};
    const bool ok = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaFuncGetAttributes(&fa, tc::gemm_kernel<true, true>) == cudaSuccess;
    if (!ok) cudaGetLastError();
    return ok && major >= 8 && fa.binaryVersion >= 80;  // mma.sync on TF32: sm_80 and newer code
  }();
  return on;
}

int own_gemm_tile(const DenseGemm& a, const DenseGemm* b) {
  if (tc_layout(a)) return tc::kT;
  if (a.splits > 1) return small_output(a.M, a.N) ? 0 : rows_layout(a) ? rows_tile(a.M, a.N, a.K) : 64;
  int64_t t64 = tiles(a.M, a.N, 64) + (b ? tiles(b->M, b->N, 64) : 0);
  int64_t t32 = tiles(a.M, a.N, 32) + (b ? tiles(b->M, b->N, 32) : 0);
  return t64 >= 128 ? 64 : t32 >= 128 ? 32 : 16;
}

void dense_gemm(const DenseGemm& g, const DenseGemm* second, cudaStream_t s) {
  if (second && (tc_layout(g) || tc_layout(*second))) {  // the tensor-core kernel takes one product
    dense_gemm(g, nullptr, s);
    return dense_gemm(*second, nullptr, s);
  }
  if (tc_layout(g)) {
    SG_REQUIRE(g.splits == 1 || g.partial != nullptr, "dense kernel: a split product needs scratch");
    launch_tc(g, s);
    if (g.splits > 1) launch_reduce(g, s);
    return;
  }
  if (g.splits > 1) {
    SG_REQUIRE(second == nullptr && g.partial != nullptr, "dense kernel: a split product runs alone, with scratch");
    if (small_output(g.M, g.N)) {
      launch_pdl(split_gemm_small_kernel, static_cast<unsigned>(g.splits), kSmallOutputs, 0, s, g);
    } else if (rows_layout(g)) {
      const int t = rows_tile(g.M, g.N, g.K);
      const dim3 grid(static_cast<unsigned>(tiles(g.M, g.N, t)), static_cast<unsigned>(g.splits));
      const bool v = rows_vec4(g);
      if (t == 128) launch_pdl(v ? split_gemm_rows_kernel<128, true> : split_gemm_rows_kernel<128, false>, grid, kThreads, 0, s, g);
      else launch_pdl(v ? split_gemm_rows_kernel<64, true> : split_gemm_rows_kernel<64, false>, grid, kThreads, 0, s, g);
    } else {
      const dim3 grid(static_cast<unsigned>(tiles(g.M, g.N, 64)), static_cast<unsigned>(g.splits));
      launch_pdl(dense_gemm_kernel<64>, grid, kThreads, 0, s, g, g, static_cast<int>(grid.x));
    }
    KERNEL_LAUNCH_CHECK();
    return launch_reduce(g, s);
  }
  const int t = own_gemm_tile(g, second);
  const int64_t t0 = tiles(g.M, g.N, t), total = t0 + (second ? tiles(second->M, second->N, t) : 0);
  SG_REQUIRE(total <= (int64_t{1} << 31) - 1, "dense kernel: too many tiles (", total, ")");
  const DenseGemm& g1 = second ? *second : g;
  const unsigned grid = static_cast<unsigned>(total);
  if (t == 64) launch_pdl(dense_gemm_kernel<64>, grid, kThreads, 0, s, g, g1, static_cast<int>(t0));
  else if (t == 32) launch_pdl(dense_gemm_kernel<32>, grid, kThreads, 0, s, g, g1, static_cast<int>(t0));
  else launch_pdl(dense_gemm_kernel<16>, grid, kThreads, 0, s, g, g1, static_cast<int>(t0));
  KERNEL_LAUNCH_CHECK();
}

bool skinny_dense(int64_t R, int64_t O, int64_t I) {
  const char* v = std::getenv("SG_SKINNY");
  if (v && std::string(v) == "0") return false;
  // From a few thousand rows (below, the fused small-layer kernel); W and the backward's
  // per-warp sums in 48 KB of shared memory, each lane's dW sums in registers.
  return O <= kSkinnyMax && R >= 4096 && O * I <= 1024;
}

namespace {
int skinny_backward_blocks(int64_t R) {
  const int64_t b = std::min<int64_t>(4 * 132, (R + 63) / 64);
  return static_cast<int>(std::max<int64_t>(1, b));
}
// float4 chunks when the width and the pointers allow.
int skinny_vec(const SkinnyDense& g) {
  bool ok = g.I % 4 == 0 && aligned16(g.X);
  if (g.dX) ok = ok && aligned16(g.dX);
  return ok ? 4 : 1;
}
// Register slots per lane for the backward's dW sums: the chunks a lane covers.
int skinny_slots(const SkinnyDense& g, int vec) { return static_cast<int>((g.I / vec + 31) / 32); }
}  // namespace

int64_t skinny_backward_partial_floats(const SkinnyDense& g) {
  return int64_t(skinny_backward_blocks(g.R)) * g.O * (g.I + 1);
}

template <int N>
void skinny_forward_n(const SkinnyDense& g, cudaStream_t s) {
  const int64_t warps = (g.R + skinny::kPasses - 1) / skinny::kPasses;
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(4 * 132, (warps + 7) / 8)));
  const size_t smem = g.O * g.I * sizeof(float);
  if (skinny_vec(g) == 4) launch_pdl(skinny::forward_kernel<N, 4>, grid, skinny::kThreads, smem, s, g);
  else launch_pdl(skinny::forward_kernel<N, 1>, grid, skinny::kThreads, smem, s, g);
  KERNEL_LAUNCH_CHECK();
}
template <int N, int V, int S>
void skinny_backward_launch(const SkinnyDense& g, float* partial, cudaStream_t s) {
  const int blocks = skinny_backward_blocks(g.R);
  const int64_t per = (g.R + blocks - 1) / blocks;
  const size_t smem = ((1 + skinny::kWarps) * g.O * g.I + skinny::kWarps * g.O) * sizeof(float);
  launch_pdl(skinny::backward_kernel<N, V, S>, static_cast<unsigned>(blocks), skinny::kThreads, smem, s, g, partial, per);
  KERNEL_LAUNCH_CHECK();
}
template <int N>
void skinny_backward_n(const SkinnyDense& g, float* partial, cudaStream_t s) {
  const int v = skinny_vec(g), slots = skinny_slots(g, v);
  // O * I <= 1024: float4 chunks need at most 8, 4, 3, 2 slots for N = 1..4 (12 / N covers
  // them), floats 32, 16, 11, 8 (48 / N): 48 registers of sums at most.
  static_assert(kSkinnyMax == 4, "check the slot bounds");
  if (v == 4) {
    if (slots <= 1) skinny_backward_launch<N, 4, 1>(g, partial, s);
    else skinny_backward_launch<N, 4, 12 / N>(g, partial, s);
  } else {
    if (slots <= 1) skinny_backward_launch<N, 1, 1>(g, partial, s);
    else skinny_backward_launch<N, 1, 48 / N>(g, partial, s);
  }
}

void skinny_forward(const SkinnyDense& g, cudaStream_t s) {
  switch (g.O) {
    case 1: return skinny_forward_n<1>(g, s);
    case 2: return skinny_forward_n<2>(g, s);
    case 3: return skinny_forward_n<3>(g, s);
    case 4: return skinny_forward_n<4>(g, s);
    default: SG_REQUIRE(false, "skinny dense kernel: ", g.O, " outputs (at most ", kSkinnyMax, ")");
  }
}

void skinny_backward(const SkinnyDense& g, float* partial, cudaStream_t s) {
  switch (g.O) {
    case 1: skinny_backward_n<1>(g, partial, s); break;
    case 2: skinny_backward_n<2>(g, partial, s); break;
    case 3: skinny_backward_n<3>(g, partial, s); break;
    case 4: skinny_backward_n<4>(g, partial, s); break;
    default: SG_REQUIRE(false, "skinny dense kernel: ", g.O, " outputs (at most ", kSkinnyMax, ")");
  }
  DenseGemm r;  // dW[o, i] and db[o]: the blocks' partials summed in order, then the epilogue
  r.M = g.O, r.N = g.I, r.K = g.R;
  r.C = g.dW, r.ldc = g.I, r.accumulate = g.dW_accumulate;
  r.rowsum = g.db, r.rowsum_accumulate = g.db_accumulate;
  r.splits = skinny_backward_blocks(g.R), r.partial = partial;
  launch_reduce(r, s);
}

}  // namespace sg::cuda
