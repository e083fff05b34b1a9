#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/dense_common.cuh"
#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

using namespace detail;

namespace {

constexpr int kThreads = 256;  // a 16 x 16 grid of threads, each TILE/16 x TILE/16 outputs

// The k-slab per iteration is as deep as 32 KB of shared memory allows (TILE * kBK = 4096), so
// small layers load their whole reduction in one or a few rounds: these products are bound by
// memory latency, not arithmetic, and every round costs a full load latency.
// One launch may carry two independent products (a layer's dW and dX): the first `tiles0`
// blocks work on g0, the rest on g1. Blocks are numbered row tile major.
// The per-element epilogue: (+= old C) (+ bias) (Z = v) (v = act(v)) (v *= dact').
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
// transpose. A TM x TN output tile (128 x 128, 128 x 64 or 64 x 64) is spread over 16 x 16
// threads, each holding (TM/16) x (TN/16) outputs in groups of 4 rows and 4 columns 64 apart,
// read from shared memory as float4 (a warp's reads then cover consecutive words: no bank
// conflicts). The next slab is loaded into registers while the current one is multiplied. Each
// block writes the raw partial sums of its k-range (blockIdx.y); split_reduce_kernel adds them.
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

template <int TM, int TN>
struct RowsTile {
  static constexpr int BK = 2048 / TM;  // 32 or 16 rows: 2 float4 of A per thread (and of B at TN = TM)
  static constexpr int TPM = TM / 16, TPN = TN / 16;  // outputs per thread in each direction
  static constexpr int kLoadsA = BK * TM / 4 / kThreads, kLoadsB = BK * TN / 4 / kThreads;
  // Offset of a thread's i-th row (or column) within the tile: groups of 4, 64 apart.
  __device__ static int at(int t, int i) { return (i / 4) * 64 + t * 4 + i % 4; }
};

template <int TM, int TN, bool VEC>
__global__ void __launch_bounds__(kThreads, TM == 128 ? 2 : 1) split_gemm_rows_kernel(DenseGemm g) {
  PDL_PROLOGUE();
  using R = RowsTile<TM, TN>;
  constexpr int BK = R::BK, TPM = R::TPM, TPN = R::TPN, kLoadsA = R::kLoadsA, kLoadsB = R::kLoadsB;
  __shared__ __align__(16) float As[2][BK][TM];  // As[k][m]
  __shared__ __align__(16) float Bs[2][BK][TN];  // Bs[k][n]
  const int64_t n_tiles = (g.N + TN - 1) / TN;
  const int64_t tn = blockIdx.x % n_tiles, tm = blockIdx.x / n_tiles;
  const int64_t m0 = tm * TM, n0 = tn * TN;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  int64_t k_begin = 0, k_end = 0;
  split_range<BK>(g, blockIdx.y, &k_begin, &k_end);
  // The bias gradient (row sums of A over its first rowsum_k values of k) in the first column
  // tile's blocks: thread tid sums row tid % T over the slab rows k = tid / T, + G, ... (all
  // threads, reads of consecutive words), and the G groups add up at the end.
  constexpr int G = kThreads / TM;
  const bool do_rowsum = g.rowsum != nullptr && tn == 0;
  float acc[TPM][TPN];
#pragma unroll
  for (int i = 0; i < TPM; ++i)
#pragma unroll
    for (int j = 0; j < TPN; ++j) acc[i][j] = 0.0f;
  float rs = 0.0f;
  // A's and B's loads (and reads below) interleave as far as both go: ptxas schedules the
  // square tiles' loops as it did before the 128 x 64 tile (grouped, the 128 x 128 tile's
  // backward measured 11 us slower per Fourier layer).
  constexpr int kLoads = kLoadsA > kLoadsB ? kLoadsA : kLoadsB;
  float4 ra[kLoadsA], rb[kLoadsB];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      if (r < kLoadsA) {
        const int kk = e / (TM / 4), c = (e % (TM / 4)) * 4;
        ra[r] = load_row4<VEC>(g.A, k0 + kk, g.sak, m0 + c, g.M, k0 + kk < k_end);
      }
      if (r < kLoadsB) {
        const int kk = e / (TN / 4), c = (e % (TN / 4)) * 4;
        rb[r] = load_row4<VEC>(g.B, k0 + kk, g.sbk, n0 + c, g.N, k0 + kk < k_end);
      }
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      if (r < kLoadsA) *reinterpret_cast<float4*>(&As[buf][e / (TM / 4)][(e % (TM / 4)) * 4]) = ra[r];
      if (r < kLoadsB) *reinterpret_cast<float4*>(&Bs[buf][e / (TN / 4)][(e % (TN / 4)) * 4]) = rb[r];
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
    if (do_rowsum) {
      const int64_t left = g.rowsum_k - k0;
      const int rdepth = left < 0 ? 0 : left < BK ? static_cast<int>(left) : BK;
      for (int kk = tid / TM; kk < rdepth; kk += G) rs += As[buf][kk][tid % TM];
    }
    // Rows past k_end were loaded as zeros: the whole slab is multiplied.
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TPM], b[TPN];
#pragma unroll
      for (int q = 0; q < (TPM > TPN ? TPM : TPN) / 4; ++q) {
        if (q < TPM / 4) {
          const float4 a4 = *reinterpret_cast<const float4*>(&As[buf][kk][q * 64 + ty * 4]);
          a[q * 4] = a4.x, a[q * 4 + 1] = a4.y, a[q * 4 + 2] = a4.z, a[q * 4 + 3] = a4.w;
        }
        if (q < TPN / 4) {
          const float4 b4 = *reinterpret_cast<const float4*>(&Bs[buf][kk][q * 64 + tx * 4]);
          b[q * 4] = b4.x, b[q * 4 + 1] = b4.y, b[q * 4 + 2] = b4.z, b[q * 4 + 3] = b4.w;
        }
      }
#pragma unroll
      for (int i = 0; i < TPM; ++i)
#pragma unroll
        for (int j = 0; j < TPN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) store(buf ^ 1);  // that buffer's last readers passed the barrier below
    __syncthreads();
    buf ^= 1;
  }
  // A thread's columns come in groups of 4 (R::at): float4 stores where the rows allow (VEC:
  // N % 4 == 0; the scratch is 256-byte aligned), so a warp writes whole 64-byte runs.
  float* P = g.partial + blockIdx.y * g.M * g.N;
#pragma unroll
  for (int i = 0; i < TPM; ++i) {
    const int64_t m = m0 + R::at(ty, i);
    if (m >= g.M) continue;
#pragma unroll
    for (int j = 0; j < TPN; j += 4) {
      const int64_t n = n0 + R::at(tx, j);
      if (VEC && n + 3 < g.N) {
        *reinterpret_cast<float4*>(P + m * g.N + n) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        continue;
      }
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (n + c < g.N) P[m * g.N + n + c] = acc[i][j + c];
    }
  }
  if (!do_rowsum) return;
  float* sums = &As[0][0][0];  // free: every thread is past the loop's last barrier
  sums[tid] = rs;
  __syncthreads();
  if (tid >= TM || m0 + tid >= g.M) return;
  float r = 0.0f;
#pragma unroll
  for (int q = 0; q < G; ++q) r += sums[q * TM + tid];
  g.partial[g.splits * g.M * g.N + blockIdx.y * g.M + m0 + tid] = r;
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

// Sums the splits' partials, then the epilogue. A block takes 32 consecutive outputs, and its
// warp w adds splits w, w + W, ... in order, so each load of a warp is 128 contiguous bytes (eight
// lanes per output, each over its own splits, read half of every 32-byte sector); then the W
// warps' sums combine in a fixed order (deterministic). W = 8; 16 from 128 splits on, where eight
// warps per block filled half the SMs' warp slots and each warp waited on a chain of 33 loads
// from memory (a 128 x 128 weight gradient over 264 partials: 7.2 -> 6 us, H200); or 32 for a
// few outputs over many splits (a one-output layer's weight gradient over hundreds of blocks'
// partials), where eight warps per block left most of the GPU idle (a 1 x 128 weight gradient
// over 528 partials: 10 us, H200).
constexpr int kReduceWarps = 8, kWideReduceWarps = 16, kTallReduceWarps = 32;
template <int W>
__global__ void __launch_bounds__(32 * W) split_reduce_kernel(DenseGemm g) {
  static_assert(W % 4 == 0, "the warps' sums go into four accumulators");
  PDL_PROLOGUE();
  __shared__ float part[W][32];
  const int64_t mn = g.M * g.N, total = mn + (g.rowsum ? g.M : 0);
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int64_t e = blockIdx.x * int64_t{32} + lane;
  const bool out = e < mn;
  float v = 0.0f;
  if (e < total) {
    const float* p = out ? g.partial + e : g.partial + g.splits * mn + (e - mn);
    const int64_t stride = out ? mn : g.M;
#pragma unroll 4
    for (int s = w; s < g.splits; s += W) v += p[s * stride];
  }
  part[w][lane] = v;
  __syncthreads();
  if (w != 0 || e >= total) return;
  // Warps k, k + 4, ... into q[k % 4], then a pair tree: for W = 8 the tree
  // ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)).
  float q[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int k = 0; k < W; ++k) q[k % 4] += part[k][lane];
  const float r = (q[0] + q[2]) + (q[1] + q[3]);
  if (out) store_output(g, e / g.N, e % g.N, r);
  else store_rowsum(g, e - mn, r);
}

// Whether a weight gradient's rows (rows_layout) load as float4.
bool rows_vec4(const DenseGemm& g) {
  return g.M % 4 == 0 && g.N % 4 == 0 && g.sak % 4 == 0 && g.sbk % 4 == 0 && aligned16(g.A) && aligned16(g.B);
}
}  // namespace

void detail::launch_reduce(const DenseGemm& g, cudaStream_t s) {
  const int64_t n = g.M * g.N + (g.rowsum ? g.M : 0), blocks = (n + 31) / 32;
  if (2 * blocks <= sm_count() && g.splits >= 4 * kTallReduceWarps)
    launch_pdl(split_reduce_kernel<kTallReduceWarps>, static_cast<unsigned>(blocks), 32 * kTallReduceWarps, 0, s, g);
  else if (g.splits >= 128)
    launch_pdl(split_reduce_kernel<kWideReduceWarps>, static_cast<unsigned>(blocks), 32 * kWideReduceWarps, 0, s, g);
  else
    launch_pdl(split_reduce_kernel<kReduceWarps>, static_cast<unsigned>(blocks), 32 * kReduceWarps, 0, s, g);
  KERNEL_LAUNCH_CHECK();
}

int64_t own_gemm_counters(const DenseGemm& g) {
  return g.splits > 1 && g.sliced ? sliced_tiles(g.M, g.N, g.paired ? kSlicedPairRows : kSlicedRows) : 0;
}

int64_t own_gemm_partial_floats(int64_t M, int64_t N, int splits) {
  return splits > 1 ? splits * (M * N + M) : 0;
}


void dense_gemm(const DenseGemm& g, const DenseGemm* second, cudaStream_t s) {
  const DenseDevice& dev = DenseDevice::current();
  if (g.paired) {
    SG_REQUIRE(second && second->paired && (g.splits == 1 || g.partial) && (second->splits == 1 || second->partial),
               "dense kernel: a paired product needs its partner (sliced_pair) and its scratch");
    return launch_sliced_pair(g, *second, s);
  }
  // The tensor-core and k-sliced kernels take one product per launch.
  if (second && (own_gemm_tensor_cores(g, dev) || own_gemm_tensor_cores(*second, dev) || g.sliced || second->sliced)) {
    dense_gemm(g, nullptr, s);
    return dense_gemm(*second, nullptr, s);
  }
  if (own_gemm_tensor_cores(g, dev)) {
    SG_REQUIRE(g.splits == 1 || g.partial != nullptr, "dense kernel: a split product needs scratch");
    launch_tc(g, s);
    if (g.splits > 1) launch_reduce(g, s);
    return;
  }
  if (g.sliced) {
    SG_REQUIRE(g.splits == 1 || g.partial != nullptr, "dense kernel: a split product needs scratch");
    launch_sliced(g, s);
    if (g.splits > 1 && !g.counters) launch_reduce(g, s);
    return;
  }
  if (g.splits > 1) {
    SG_REQUIRE(second == nullptr && g.partial != nullptr, "dense kernel: a split product runs alone, with scratch");
    if (small_output(g.M, g.N)) {
      launch_pdl(split_gemm_small_kernel, static_cast<unsigned>(g.splits), kSmallOutputs, 0, s, g);
    } else if (rows_layout(g)) {
      const GemmTile t = rows_tile(g.M, g.N, g.K, dev);
      const dim3 grid(static_cast<unsigned>(tiles(g.M, g.N, t)), static_cast<unsigned>(g.splits));
      const bool v = rows_vec4(g);
      if (t.cols == 128) launch_pdl(v ? split_gemm_rows_kernel<128, 128, true> : split_gemm_rows_kernel<128, 128, false>, grid, kThreads, 0, s, g);
      else if (t.rows == 128) launch_pdl(v ? split_gemm_rows_kernel<128, 64, true> : split_gemm_rows_kernel<128, 64, false>, grid, kThreads, 0, s, g);
      else launch_pdl(v ? split_gemm_rows_kernel<64, 64, true> : split_gemm_rows_kernel<64, 64, false>, grid, kThreads, 0, s, g);
    } else {
      const dim3 grid(static_cast<unsigned>(tiles(g.M, g.N, 64)), static_cast<unsigned>(g.splits));
      launch_pdl(dense_gemm_kernel<64>, grid, kThreads, 0, s, g, g, static_cast<int>(grid.x));
    }
    KERNEL_LAUNCH_CHECK();
    return launch_reduce(g, s);
  }
  const int t = own_gemm_tile(g, second, dev).rows;
  const int64_t t0 = tiles(g.M, g.N, t), total = t0 + (second ? tiles(second->M, second->N, t) : 0);
  SG_REQUIRE(total <= (int64_t{1} << 31) - 1, "dense kernel: too many tiles (", total, ")");
  const DenseGemm& g1 = second ? *second : g;
  const unsigned grid = static_cast<unsigned>(total);
  if (t == 64) launch_pdl(dense_gemm_kernel<64>, grid, kThreads, 0, s, g, g1, static_cast<int>(t0));
  else if (t == 32) launch_pdl(dense_gemm_kernel<32>, grid, kThreads, 0, s, g, g1, static_cast<int>(t0));
  else launch_pdl(dense_gemm_kernel<16>, grid, kThreads, 0, s, g, g1, static_cast<int>(t0));
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
