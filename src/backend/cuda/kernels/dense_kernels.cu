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

// The weight-gradient layout split_gemm_rows_kernel takes, and whether its rows load as float4.
bool rows_layout(const DenseGemm& g) { return g.sam == 1 && g.sbn == 1; }
bool rows_vec4(const DenseGemm& g) {
  return g.M % 4 == 0 && g.N % 4 == 0 && g.sak % 4 == 0 && g.sbk % 4 == 0 && aligned16(g.A) && aligned16(g.B);
}
// The row-slab kernel's tile: 128 x 128 (8 x 8 outputs per thread) for outputs of at least that
// size; 128 x 64 (8 x 4) onto fewer than 128 columns, so each slab row of A is read by one block
// (a Fourier first layer's 128 x 64 weight gradient over 67584 jet rows with its ordered sum,
// H200: 44.3 -> 39.6 us);
// 64 x 64 below, and when k is too short to give the larger tiles two waves of blocks.
GemmTile rows_tile(int64_t M, int64_t N, int64_t K) {
  const GemmTile small{64, 64};
  if (M < 128) return small;
  const GemmTile t{128, N >= 128 ? 128 : 64};
  return K / 128 * tiles(M, N, t) >= 2 * sm_count() ? t : small;
}

}  // namespace

int detail::device_attribute(cudaDeviceAttr attr, int h200) {
  // Read when products are planned and by launches that size their grids (eager steps): after
  // the first read per device, one atomic load, no lock.
  constexpr int kDevices = 64;
  static std::atomic<int> sms[kDevices], smem[kDevices];  // 0: not read yet
  std::atomic<int>* table = attr == cudaDevAttrMultiProcessorCount            ? sms
                            : attr == cudaDevAttrMaxSharedMemoryPerBlockOptin ? smem
                                                                              : nullptr;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return h200;
  }
  std::atomic<int>* slot = table && dev >= 0 && dev < kDevices ? &table[dev] : nullptr;
  if (slot)
    if (const int v = slot->load(std::memory_order_relaxed)) return v;
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess || v <= 0) {
    cudaGetLastError();
    v = h200;
  }
  if (slot) slot->store(v, std::memory_order_relaxed);
  return v;
}

int detail::sm_count() { return device_attribute(cudaDevAttrMultiProcessorCount, 132); }

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

// The k-sliced kernel's split: as many blocks as one wave holds (one per SM), each over at least
// kSlicedDepth values of k (a weight gradient 256 x 256 x 1024 on an H200: 32 tiles x 4).
int64_t sliced_splits(int64_t M, int64_t N, int64_t K) {
  const int64_t t = sliced_tiles(M, N);
  return std::max<int64_t>(1, std::min(sm_count() / t, K / kSlicedDepth));
}

bool sliced_gemm(int64_t M, int64_t N, int64_t K) {
  // Above the small products and up to 2^28 multiply-adds; one wave of blocks (one per SM, at
  // least half the SMs), each over a whole k-range of 256 or more. Measured on an H200: mlp_8x256's
  // 1024 x 256 x 256 and 256 x 256 x 1024 products 298 -> 231 us per step; shorter k or a
  // second wave lose to cuBLASLt (a transformer's 4096 x 128 x 128: 18 against 10 us).
  // At most 16 splits: a tile's last block adds them serially (Poisson 4x64's 64 x 64 x 41984
  // weight gradients as 66 splits: 236 -> 295 us per step; the row-slab kernel keeps them).
  // And a device that gives a block the kernel's shared memory (Ampere's A100 and Hopper do;
  // sm_86/89 and consumer Blackwell, at 99 KB, do not).
  const int64_t splits = sliced_splits(M, N, K), blocks = sliced_tiles(M, N) * splits;
  return sliced_fits() && M * N * K > (int64_t{1} << 22) && M * N * K <= (int64_t{1} << 28) && K >= kSlicedDepth && splits <= 16 &&
         2 * blocks >= sm_count() && blocks <= sm_count();
}

bool prefer_own_gemm(int64_t M, int64_t N, int64_t K, bool rows) {
  if (sliced_gemm(M, N, K)) return true;
  // Up to ~4M multiply-adds (the seed MLP's products) the library's fixed costs dominate; above
  // that cuBLASLt's tuned kernels win (measured on an H200, see bench/RESULTS.md). A long
  // reduction over few output tiles (a weight gradient over many jet rows: 32 x 32 x 2560) runs
  // serially in our kernel's few blocks (55 us measured), where cuBLASLt splits it.
  // Tall products (M rows of jets, N = 1 output) waste most of a tile: cuBLASLt.
  return (M * N * K <= (int64_t{1} << 22) && K <= 512 && M <= 16384) || own_gemm_splits(M, N, K, rows) > 1;
}

int own_gemm_splits(int64_t M, int64_t N, int64_t K, bool rows, bool tensor_cores) {
  if (sliced_gemm(M, N, K) && !tensor_cores) return static_cast<int>(sliced_splits(M, N, K));
  if (tensor_cores) {
    // 64 x 64 tiles, three blocks per SM, each over at least 256 values of k. Fourier 4x128's
    // 128 x 128 x 81920 weight gradients (H200, whole step at tf32x3): two waves 1282 us per
    // step, three 1252, four 1274, six 1316.
    if (K < 1024) return 1;
    const int64_t t = tiles(M, N, kTcTile), want = (3 * sm_count() + t - 1) / t, most = K / 256;
    const int64_t s = want < most ? want : most;
    return s < 2 ? 1 : static_cast<int>(s);
  }
  // A small output (a few 64 x 64 tiles) over a long reduction. From k = 1024 for outputs up to
  // 128 x 128 (a PINN's boundary points), from 2048 up to 256 x 256 (cuBLASLt is faster for an
  // MLP's 256 x 256 x 1024 weight gradient: 287 against 355 us per step on mlp_8x256).
  if (K < 1024 || M * N > 256 * 256 || (K < 2048 && M * N > 128 * 128)) return 1;
  // Weight gradients (split_gemm_rows_kernel) take two waves of blocks on an H200's 132 SMs
  // (Poisson 4x64: 476 -> 445 us per step against one wave; four: 456) and any size (Fourier
  // 4x128's 128 x 128 x 81920: 1563 us against cuBLASLt's 1576). Other layouts (the generic
  // kernel) one wave, and cuBLASLt past ~2^28 multiply-adds (Fourier: 1919 against 2112 us).
  if (!rows && M * N * K > (int64_t{1} << 28)) return 1;
  // At most 256 outputs (split_gemm_small_kernel): four waves, each block over at least 64 rows.
  if (small_output(M, N)) {
    const int64_t s = std::min<int64_t>(4 * sm_count(), K / 64);
    return s < 2 ? 1 : static_cast<int>(s);
  }
  // Each block over at least 128 values of k; weight gradients on 64-tiles down to one 32-deep
  // slab, where a short k would leave most SMs idle (H200, graph us per step: mlp_8x256's
  // 10 x 256 x 1024 output layer 8 -> 32 splits, 232.7 -> 228.6; custom_heat's 32 x 32 x 4608
  // 36 -> 144, 87.8 -> 81.8).
  const int64_t waves = rows ? 2 : 1;
  const GemmTile tile = rows ? rows_tile(M, N, K) : GemmTile{64, 64};
  const int64_t t = tiles(M, N, tile), want = (waves * sm_count() + t - 1) / t, most = K / (rows && tile.rows == 64 ? 32 : 128);
  const int64_t s = want < most ? want : most;
  return s < 2 ? 1 : static_cast<int>(s);
}

int64_t own_gemm_counters(const DenseGemm& g) {
  return g.splits > 1 && g.sliced ? sliced_tiles(g.M, g.N, g.paired ? kSlicedPairRows : kSlicedRows) : 0;
}

bool sliced_pair(DenseGemm& w, DenseGemm& x) {
  if (!w.sliced || !x.sliced || w.tf32x3 || x.tf32x3 || !sliced_pair_layout(w, x)) return false;
  // Two products of 32 x 64 tiles each fill the GPU for a few microseconds of arithmetic and about
  // as much fixed cost (loads, the warps' sum, the epilogue, the launch); on 64 x 64 tiles side by
  // side they pay it once.
  const int64_t half = sm_count() / 2;
  auto splits = [half](const DenseGemm& g) {
    return std::max<int64_t>(1, std::min(half / sliced_tiles(g.M, g.N, kSlicedPairRows), g.K / kSlicedDepth));
  };
  const int64_t sw = splits(w), sx = splits(x);
  const int64_t blocks = sliced_tiles(w.M, w.N, kSlicedPairRows) * sw + sliced_tiles(x.M, x.N, kSlicedPairRows) * sx;
  if (blocks > sm_count() || 2 * blocks < sm_count() || sw > 16 || sx > 16) return false;
  w.splits = static_cast<int>(sw), x.splits = static_cast<int>(sx);
  w.paired = x.paired = true;
  w.fp64_tc = x.fp64_tc = false;
  return true;
}

int64_t own_gemm_partial_floats(int64_t M, int64_t N, int splits) {
  return splits > 1 ? splits * (M * N + M) : 0;
}


bool own_gemm_sliced(const DenseGemm& g) { return !tc_layout(g) && sliced_layout(g) && sliced_gemm(g.M, g.N, g.K); }

GemmTile own_gemm_tile(const DenseGemm& a, const DenseGemm* b) {
  if (tc_layout(a)) return {kTcTile, kTcTile};
  if (a.paired) return {kSlicedPairRows, kSlicedCols};
  if (a.sliced) return {kSlicedRows, kSlicedCols};
  if (a.splits > 1) return small_output(a.M, a.N) ? GemmTile{} : rows_layout(a) ? rows_tile(a.M, a.N, a.K) : GemmTile{64, 64};
  int64_t t64 = tiles(a.M, a.N, 64) + (b ? tiles(b->M, b->N, 64) : 0);
  int64_t t32 = tiles(a.M, a.N, 32) + (b ? tiles(b->M, b->N, 32) : 0);
  const int t = t64 >= 128 ? 64 : t32 >= 128 ? 32 : 16;
  return {t, t};
}

void dense_gemm(const DenseGemm& g, const DenseGemm* second, cudaStream_t s) {
  if (g.paired) {
    SG_REQUIRE(second && second->paired && (g.splits == 1 || g.partial) && (second->splits == 1 || second->partial),
               "dense kernel: a paired product needs its partner (sliced_pair) and its scratch");
    return launch_sliced_pair(g, *second, s);
  }
  // The tensor-core and k-sliced kernels take one product per launch.
  if (second && (tc_layout(g) || tc_layout(*second) || g.sliced || second->sliced)) {
    dense_gemm(g, nullptr, s);
    return dense_gemm(*second, nullptr, s);
  }
  if (tc_layout(g)) {
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
      const GemmTile t = rows_tile(g.M, g.N, g.K);
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
  const int t = own_gemm_tile(g, second).rows;
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
