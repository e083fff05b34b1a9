#include "backend/cuda/kernels/jet_dense.cuh"

#include <cstdlib>
#include <string>

#include "backend/activation_math.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/dense_common.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "backend/cuda/kernels/vec.cuh"
#include "backend/jet_math.h"

namespace sg::cuda {

using namespace detail;

namespace {

// 256 threads as 16 x 16: tx picks columns (groups of 4, 64 apart), ty rows. A tile is 128 jet
// rows (P = 128 / KC points with their KC components) by all N = 16 TN columns; a thread holds 8
// rows (PPT = 8 / KC points, every component) by TN columns.
constexpr int kThreads = 256, kRows = 128, kRowsPerThread = 8;
constexpr int kRuntimeAct = -1;

// The block keeps W in shared memory as Ws[k][n] (staged once: the grid is persistent, each block
// walks its tiles) and streams X through S stages of BK values of k (cp.async), rows padded by 4
// floats so that the two rows a warp reads at once sit in different banks. The next chunks load
// while a tile's last chunk is multiplied and its epilogue runs.
template <int TN, int BK, int S>
struct Shape {
  static constexpr int BN = 16 * TN, LDX = BK + 4;
  static size_t smem_bytes(int64_t K) { return (static_cast<size_t>(K) * BN + size_t{S} * kRows * LDX) * sizeof(float); }
};
// Two blocks per SM (16 warps): 100 KB of shared memory each at K = N = 128; two stages of 32
// values of k (a chunk's arithmetic, 2048 multiply-adds per thread, covers the next one's copy).
// At 8 x 8 outputs per thread the shared-memory reads keep pace with the FMAs only just (~60% of
// the fp32 rate, as cuBLASLt's SIMT kernels); 8 x 16 at 255 registers, one block per SM, measured
// slower on an H200 (126 against 75 us per 67584 x 128 x 128 layer): the second block's overlap
// of one block's epilogue is worth more.
constexpr int kBK = 32, kStages = 2, kMinBlocks = 2;

// A tile's row r (0..127) of the jet tensor: head tiles hold value-only rows in order; point
// tiles component r / P of points p0 + r % P.
template <int P>
__device__ __forceinline__ int64_t tile_row(const JetDense& g, int64_t t, int64_t head_tiles, int r, bool* valid) {
  if (t < head_tiles) {
    const int64_t q = t * kRows + r;
    *valid = q < g.head;
    return q;
  }
  const int64_t p = (t - head_tiles) * P + r % P;
  *valid = p < g.B;
  return g.head + (r / P) * g.B + p;
}

__device__ __forceinline__ void store4(float* p, float a, float b, float c, float d) {
  *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
}

// Tile t's outputs from the accumulators, in place (arrays of outputs next to 64 accumulators
// made ptxas spill): forward, + bias on the value rows, Z stored, the activation's jet, Y
// stored; backward, the jet backward at A, dA stored.
// ACT: the activation when known at compile time (tanh, the PINN default: its jet then has no
// run-time switch, so a thread's 16 jets interleave), or kRuntimeAct for g.act.
template <bool BWD, int D, int NP, int TN, int ACT>
__device__ __forceinline__ void epilogue(const JetDense& g, float (&acc)[kRowsPerThread][TN], int64_t t,
                                         int64_t head_tiles, int tx, int ty) {
  constexpr int KC = 1 + D + NP, PPT = kRowsPerThread / KC, P = kRows / KC;
  const bool head_tile = t < head_tiles;
  const Activation act = ACT == kRuntimeAct ? g.act : static_cast<Activation>(ACT);
  float* out = BWD ? g.dA : g.Y;
#pragma unroll
  for (int h = 0; h < PPT; ++h) {
    const int64_t p = (t - head_tiles) * P + h * 16 + ty;  // point tiles
#pragma unroll
    for (int q = 0; q < TN / 4; ++q) {
      const int col = q * 64 + tx * 4;
      float bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (!BWD && g.bias) load_vec<4>(g.bias + col, bias);
      if (head_tile) {  // value-only rows: the plain activation (and its derivative)
#pragma unroll
        for (int c = 0; c < KC; ++c) {
          const int i = c * PPT + h;
          const int64_t row = t * kRows + c * P + h * 16 + ty;
          if (row >= g.head) continue;
          const int64_t at = row * g.N + col;
          if constexpr (BWD) {
            float a[4];
            load_vec<4>(g.A + at, a);
#pragma unroll
            for (int x = 0; x < 4; ++x) {
              float g0, g1, g2, g3;
              act_derivs<float>(act, a[x], &g0, &g1, &g2, &g3);
              acc[i][q * 4 + x] *= g1;
            }
          } else {
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[i][q * 4 + x] += bias[x];
            store4(g.Z + at, acc[i][q * 4], acc[i][q * 4 + 1], acc[i][q * 4 + 2], acc[i][q * 4 + 3]);
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[i][q * 4 + x] = act_forward<float>(act, acc[i][q * 4 + x]);
          }
          store4(out + at, acc[i][q * 4], acc[i][q * 4 + 1], acc[i][q * 4 + 2], acc[i][q * 4 + 3]);
        }
        continue;
      }
      if (p >= g.B) continue;
      float a[BWD ? KC : 1][4];
#pragma unroll
      for (int c = 0; c < KC; ++c) {
        const int i = c * PPT + h;
        const int64_t at = (g.head + c * g.B + p) * g.N + col;
        if constexpr (BWD) {
          load_vec<4>(g.A + at, a[c]);
        } else {
#pragma unroll
          for (int x = 0; x < 4; ++x) acc[i][q * 4 + x] += c == 0 ? bias[x] : 0.0f;
          store4(g.Z + at, acc[i][q * 4], acc[i][q * 4 + 1], acc[i][q * 4 + 2], acc[i][q * 4 + 3]);
        }
      }
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        float av[KC], in[KC], r[KC], g0, g1, g2, g3;
#pragma unroll
        for (int c = 0; c < KC; ++c) {
          in[c] = acc[c * PPT + h][q * 4 + x];
          if constexpr (BWD) av[c] = a[c][x];
          else av[c] = in[c];
        }
        act_derivs<float>(act, av[0], &g0, &g1, &g2, &g3);
        if constexpr (BWD) jet_apply_backward<float, D, NP>(g.js, g1, g2, g3, av, in, r);
        else jet_apply<float, D, NP>(g.js, g0, g1, g2, av, r);
#pragma unroll
        for (int c = 0; c < KC; ++c) acc[c * PPT + h][q * 4 + x] = r[c];
      }
#pragma unroll
      for (int c = 0; c < KC; ++c) {
        const int i = c * PPT + h;
        const int64_t at = (g.head + c * g.B + p) * g.N + col;
        store4(out + at, acc[i][q * 4], acc[i][q * 4 + 1], acc[i][q * 4 + 2], acc[i][q * 4 + 3]);
      }
    }
  }
}

// The one-output layer after the activation (JetDense::U), from Y in the accumulators after the
// forward epilogue: a row's 16 threads (tx) each sum their TN columns in order, then add across tx
// by shuffles (a fixed order: deterministic); tx = 0 stores.
template <int D, int NP, int TN>
__device__ __forceinline__ void output_layer(const JetDense& g, const float (&acc)[kRowsPerThread][TN], int64_t t,
                                             int64_t head_tiles, int tx, int ty) {
  constexpr int KC = 1 + D + NP, PPT = kRowsPerThread / KC, P = kRows / KC;
  float w[TN];
#pragma unroll
  for (int q = 0; q < TN / 4; ++q) {
    const float4 w4 = *reinterpret_cast<const float4*>(g.W2 + q * 64 + tx * 4);
    w[q * 4] = w4.x, w[q * 4 + 1] = w4.y, w[q * 4 + 2] = w4.z, w[q * 4 + 3] = w4.w;
  }
  const float b = g.bias2 ? *g.bias2 : 0.0f;
  const bool head_tile = t < head_tiles;
#pragma unroll
  for (int c = 0; c < KC; ++c) {
#pragma unroll
    for (int h = 0; h < PPT; ++h) {
      float u = 0.0f;
#pragma unroll
      for (int j = 0; j < TN; ++j) u = fmaf(acc[c * PPT + h][j], w[j], u);
#pragma unroll
      for (int m = 8; m >= 1; m /= 2) u += __shfl_xor_sync(0xffffffffu, u, m);  // within the row's 16 lanes
      if (tx != 0) continue;
      if (head_tile) {  // value-only rows
        const int64_t row = t * kRows + c * P + h * 16 + ty;
        if (row < g.head) g.U[row] = u + b;
        continue;
      }
      const int64_t p = (t - head_tiles) * P + h * 16 + ty;
      if (p < g.B) g.U[g.head + c * g.B + p] = c == 0 ? u + b : u;
    }
  }
}

// Thread (tx, ty)'s row i = c * PPT + h is the tile's row c * P + 16 h + ty: component c of its
// h-th point. Column j is (j / 4) * 64 + 4 tx + j % 4.
template <bool BWD, int D, int NP, int TN, int ACT, int BK, int S>
__global__ void __launch_bounds__(kThreads, kMinBlocks) jet_dense_kernel(JetDense g) {
  PDL_PROLOGUE();
  constexpr int KC = 1 + D + NP, PPT = kRowsPerThread / KC, P = kRows / KC;
  static_assert(kRowsPerThread % KC == 0, "a thread holds whole points");
  using Sh = Shape<TN, BK, S>;
  constexpr int BN = Sh::BN, LDX = Sh::LDX;
  extern __shared__ __align__(16) float smem[];
  float* Ws = smem;              // [K][BN]
  float* Xs = smem + g.K * BN;   // [S][kRows][LDX]
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t head_tiles = (g.head + kRows - 1) / kRows, tiles = head_tiles + (g.B + P - 1) / P;
  const int chunks = static_cast<int>(g.K / BK);
  const int total = static_cast<int>((tiles - blockIdx.x + gridDim.x - 1) / gridDim.x) * chunks;

  if constexpr (BWD) {  // W [K, N] as it lies
    for (int e = tid; e < g.K * BN / 4; e += kThreads) cp_async16(Ws + 4 * e, g.W + 4 * e, true);
    cp_async_commit();
  } else {  // W [N, K] transposed: a warp reads 32 rows' float4s and stores 32 consecutive columns
    const int n4 = static_cast<int>(g.K) * BN / 4;
    for (int e0 = tid; e0 < n4; e0 += 4 * kThreads) {
      float4 w[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {  // four loads in flight
        const int e = e0 + u * kThreads, n = e % BN, k4 = (e / BN) * 4;
        if (e < n4) w[u] = __ldg(reinterpret_cast<const float4*>(g.W + int64_t(n) * g.K + k4));
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = e0 + u * kThreads, n = e % BN, k4 = (e / BN) * 4;
        if (e >= n4) continue;
        Ws[(k4 + 0) * BN + n] = w[u].x, Ws[(k4 + 1) * BN + n] = w[u].y;
        Ws[(k4 + 2) * BN + n] = w[u].z, Ws[(k4 + 3) * BN + n] = w[u].w;
      }
    }
  }
  // This block's chunks in order: tiles blockIdx.x + j gridDim.x, each in K / BK chunks. The
  // copies run S - 1 chunks ahead of the arithmetic. (32-bit counters, no divisions: a 64-bit
  // division is a subroutine call.)
  int ld_chunk = 0, ld_stage = 0;
  int64_t ld_tile = blockIdx.x;
  auto issue = [&] {
    float* xs = Xs + ld_stage * kRows * LDX;
    const int k0 = ld_chunk * BK;
#pragma unroll
    for (int e = tid; e < kRows * BK / 4; e += kThreads) {
      const int r = e / (BK / 4), c = (e % (BK / 4)) * 4;
      bool valid;
      const int64_t row = tile_row<P>(g, ld_tile, head_tiles, r, &valid);
      cp_async16(xs + r * LDX + c, g.X + (valid ? row * g.K + k0 + c : 0), valid);
    }
    if (++ld_stage == S) ld_stage = 0;
    if (++ld_chunk == chunks) ld_chunk = 0, ld_tile += gridDim.x;
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < total) issue();
    cp_async_commit();
  }

  float acc[kRowsPerThread][TN];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  int chunk = 0, stage = 0;
  int64_t tile = blockIdx.x;
  for (int s = 0; s < total; ++s) {
    cp_async_wait<S - 2>();
    __syncthreads();  // chunk s is in; every thread is done with the stage the next copy fills
    if (s + S - 1 < total) issue();
    cp_async_commit();
    const float* xs = Xs + stage * kRows * LDX;
    const float* ws = Ws + chunk * BK * BN;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 4) {
      float4 a4[kRowsPerThread];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
        a4[i] = *reinterpret_cast<const float4*>(xs + ((i / PPT) * P + (i % PPT) * 16 + ty) * LDX + kk);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float b[TN];
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {
          const float4 b4 = *reinterpret_cast<const float4*>(ws + (kk + u) * BN + q * 64 + tx * 4);
          b[q * 4] = b4.x, b[q * 4 + 1] = b4.y, b[q * 4 + 2] = b4.z, b[q * 4 + 3] = b4.w;
        }
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
          const float a = vec_at(a4[i], u);
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a, b[j], acc[i][j]);
        }
      }
    }
    if (++stage == S) stage = 0;
    if (++chunk < chunks) continue;
    chunk = 0;
    // The tile's epilogue (registers and global memory only: the next chunks keep loading).
    epilogue<BWD, D, NP, TN, ACT>(g, acc, tile, head_tiles, tx, ty);
    if (!BWD && g.U) output_layer<D, NP, TN>(g, acc, tile, head_tiles, tx, ty);
    tile += gridDim.x;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  }
}

template <bool BWD, int D, int NP, int TN, int ACT>
void launch(const JetDense& g, cudaStream_t s) {
  using Sh = Shape<TN, kBK, kStages>;
  auto* kernel = jet_dense_kernel<BWD, D, NP, TN, ACT, kBK, kStages>;
  // Sized for the largest K once; the blocks per SM as the occupancy calculator says.
  static const int per_sm = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(Sh::smem_bytes(128))));
    int n = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, Sh::smem_bytes(128)));
    return n < 1 ? 1 : n;
  }();
  constexpr int KC = 1 + D + NP, P = kRows / KC;
  const int64_t tiles = (g.head + kRows - 1) / kRows + (g.B + P - 1) / P;
  const int64_t most = int64_t{per_sm} * sm_count();
  const unsigned grid = static_cast<unsigned>(tiles < most ? tiles : most);
  if (grid == 0) return;  // no rows
  launch_pdl(kernel, grid, kThreads, Sh::smem_bytes(g.K), s, g);
  KERNEL_LAUNCH_CHECK();
}

template <bool BWD>
void dispatch(const JetDense& g, cudaStream_t s) {
  const bool wide = g.N == 128;
  constexpr int tanh = static_cast<int>(Activation::Tanh);
  if (g.js.d == 2 && g.js.npairs == 1) {
    if (g.act == Activation::Tanh) return wide ? launch<BWD, 2, 1, 8, tanh>(g, s) : launch<BWD, 2, 1, 4, tanh>(g, s);
    return wide ? launch<BWD, 2, 1, 8, kRuntimeAct>(g, s) : launch<BWD, 2, 1, 4, kRuntimeAct>(g, s);
  }
  return wide ? launch<BWD, 3, 0, 8, kRuntimeAct>(g, s) : launch<BWD, 3, 0, 4, kRuntimeAct>(g, s);
}

// The shapes the kernel is compiled for (checked again at each launch: no environment or device
// query on the step's path).
bool shape_fits(const JetSpec& js, int64_t K, int64_t N) {
  const bool jet = (js.d == 2 && js.npairs == 1) || (js.d == 3 && js.npairs == 0);
  return jet && (N == 64 || N == 128) && K % 32 == 0 && K >= 32 && K <= 128;
}

}  // namespace

bool jet_dense_fits(const JetSpec& js, int64_t K, int64_t N) {
  const size_t most = Shape<8, kBK, kStages>::smem_bytes(128);
  return shape_fits(js, K, N) &&
         static_cast<size_t>(DenseDevice::current().smem_optin) >= most;
}

bool jet_dense_aligned(const JetDense& g) {
  return aligned16(g.X) && aligned16(g.W) && aligned16(g.bias) && aligned16(g.Z) && aligned16(g.Y) &&
         aligned16(g.A) && aligned16(g.dA) && aligned16(g.W2);
}

void jet_dense(const JetDense& g, cudaStream_t s) {
  SG_REQUIRE(shape_fits(g.js, g.K, g.N) && jet_dense_aligned(g), "jet dense kernel: a ", g.K, " x ", g.N,
             " layer over a ", g.js.K(), "-component jet it does not take");
  if (g.backward) return dispatch<true>(g, s);
  dispatch<false>(g, s);
}

}  // namespace sg::cuda
