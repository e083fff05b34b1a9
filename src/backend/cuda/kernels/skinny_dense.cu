// Skinny dense layers (at most kSkinnyMax outputs over many rows: a network's last layer over a
// PINN's jet rows): memory-bound kernels, see SkinnyDense in dense_kernels.cuh.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/dense_common.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "backend/cuda/kernels/reduce.cuh"
#include "backend/cuda/kernels/vec.cuh"

namespace sg::cuda {

using namespace detail;

namespace {

// Bound by reading X (forward, weight gradient) and writing dX, not by arithmetic. A row is
// C chunks of V floats (float4 when the widths and pointers allow); P lanes share a row (P =
// C rounded up to a power of two, at most 32), so a warp covers G = 32 / P rows per pass and
// kPasses passes are in flight at once (coalesced loads, several per lane). W in shared memory.
namespace skinny {
constexpr int kThreads = 256, kWarps = kThreads / 32, kPasses = 4;

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
  using T = typename VecOf<V>::T;
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
          for (int u = 0; u < kPasses; ++u) acc[u][o] = fmaf(vec_at(x[u], j), wv, acc[u][o]);
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
  using T = typename VecOf<V>::T;
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
          for (int u = 0; u < kPasses; ++u) dw[sl][o][j] = fmaf(dz[u][o], vec_at(x[u], j), dw[sl][o][j]);
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
  for (int o = 0; o < N; ++o) db[o] = warp_sum(db[o]);
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

}  // namespace

namespace {
int skinny_backward_blocks(int64_t R) {
  const int64_t b = std::min<int64_t>(4 * sm_count(), (R + 63) / 64);
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
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(4 * sm_count(), (warps + 7) / 8)));
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
