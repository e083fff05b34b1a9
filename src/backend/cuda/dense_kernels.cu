#include <cstdlib>
#include <string>

#include "backend/activation_math.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dense_kernels.cuh"

namespace sg::cuda {

namespace {

constexpr int kThreads = 256;  // a 16 x 16 grid of threads, each TILE/16 x TILE/16 outputs

// The k-slab per iteration is as deep as 32 KB of shared memory allows (TILE * kBK = 4096), so
// small layers load their whole reduction in one or a few rounds: these products are bound by
// memory latency, not arithmetic, and every round costs a full load latency.
// One launch may carry two independent products (a layer's dW and dX): the first `tiles0`
// blocks work on g0, the rest on g1. Blocks are numbered row tile major.
template <int TILE>
__global__ void __launch_bounds__(kThreads) dense_gemm_kernel(DenseGemm g0, DenseGemm g1, int tiles0) {
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

  constexpr int kLoads = TILE * kBK / kThreads;  // 16 elements of A and 16 of B per thread
  const bool a_k_fast = g.sak == 1, b_n_fast = g.sbn == 1;
  for (int64_t k0 = 0; k0 < g.K; k0 += kBK) {
    // All loads are issued before the first shared-memory store, so their latencies overlap;
    // the order follows the unit stride so global reads coalesce.
    float ra[kLoads], rb[kLoads];
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      const int mm = a_k_fast ? e / kBK : e % TILE, kk = a_k_fast ? e % kBK : e / TILE;
      const int64_t m = m0 + mm, k = k0 + kk;
      ra[r] = (m < g.M && k < g.K) ? __ldg(g.A + m * g.sam + k * g.sak) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      const int nn = b_n_fast ? e % TILE : e / kBK, kk = b_n_fast ? e / TILE : e % kBK;
      const int64_t n = n0 + nn, k = k0 + kk;
      rb[r] = (n < g.N && k < g.K) ? __ldg(g.B + k * g.sbk + n * g.sbn) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int e = tid + r * kThreads;
      As[a_k_fast ? e % kBK : e / TILE][a_k_fast ? e / kBK : e % TILE] = ra[r];
      Bs[b_n_fast ? e / TILE : e % kBK][b_n_fast ? e % TILE : e / kBK] = rb[r];
    }
    __syncthreads();
    // Only the slab's real depth: a short reduction (K < kBK) does not multiply padding zeros.
    const int depth = g.K - k0 < kBK ? static_cast<int>(g.K - k0) : kBK;
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

#pragma unroll
  for (int i = 0; i < TPT; ++i) {
    const int64_t m = m0 + ty + 16 * i;
    if (m >= g.M) continue;
#pragma unroll
    for (int j = 0; j < TPT; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (n >= g.N) continue;
      const int64_t idx = m * g.ldc + n;
      float v = acc[i][j];
      if (g.accumulate) v += g.C[idx];
      if (g.bias && m < g.bias_rows) v += g.bias[n];
      if (g.Z) g.Z[idx] = v;
      if (g.act != Activation::None) v = act_forward<float>(g.act, v);
      if (g.dact != Activation::None)
        v *= act_derivative<float>(g.dact, g.dact_y ? g.dact_y[idx] : 0.0f, g.dact_z ? g.dact_z[idx] : 0.0f);
      g.C[idx] = v;
    }
  }
  if (do_rowsum && tid < TILE && m0 + tid < g.M) {
    float* r = g.rowsum + m0 + tid;
    *r = g.rowsum_accumulate ? *r + rs : rs;
  }
}

int64_t tiles(int64_t M, int64_t N, int t) { return ((M + t - 1) / t) * ((N + t - 1) / t); }

}  // namespace

bool prefer_own_gemm(int64_t M, int64_t N, int64_t K) {
  const char* v = std::getenv("SG_OWN_GEMM");
  if (v && std::string(v) == "0") return false;
  if (v && std::string(v) == "1") return true;
  // Up to ~4M multiply-adds (the seed MLP's products) the library's fixed costs dominate; above
  // that cuBLASLt's tuned kernels win (measured on an H200, see bench/RESULTS.md). A long
  // reduction over few output tiles (a weight gradient over many jet rows: 32 x 32 x 2560) runs
  // serially in our kernel's few blocks (55 us measured), where cuBLASLt splits it.
  return M * N * K <= (int64_t{1} << 22) && K <= 512;
}


int own_gemm_tile(const DenseGemm& a, const DenseGemm* b) {
  int64_t t64 = tiles(a.M, a.N, 64) + (b ? tiles(b->M, b->N, 64) : 0);
  int64_t t32 = tiles(a.M, a.N, 32) + (b ? tiles(b->M, b->N, 32) : 0);
  return t64 >= 128 ? 64 : t32 >= 128 ? 32 : 16;
}

void dense_gemm(const DenseGemm& g, const DenseGemm* second, cudaStream_t s) {
  const int t = own_gemm_tile(g, second);
  const int64_t t0 = tiles(g.M, g.N, t), total = t0 + (second ? tiles(second->M, second->N, t) : 0);
  SG_REQUIRE(total <= (int64_t{1} << 31) - 1, "dense kernel: too many tiles (", total, ")");
  const DenseGemm& g1 = second ? *second : g;
  const unsigned grid = static_cast<unsigned>(total);
  if (t == 64) dense_gemm_kernel<64><<<grid, kThreads, 0, s>>>(g, g1, static_cast<int>(t0));
  else if (t == 32) dense_gemm_kernel<32><<<grid, kThreads, 0, s>>>(g, g1, static_cast<int>(t0));
  else dense_gemm_kernel<16><<<grid, kThreads, 0, s>>>(g, g1, static_cast<int>(t0));
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
