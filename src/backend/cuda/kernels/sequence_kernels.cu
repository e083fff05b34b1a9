#include <type_traits>

#include "backend/cuda/kernels/grid.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/reduce.cuh"
#include "backend/cuda/kernels/sequence_kernels.cuh"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;  // rows per block for the warp-per-row kernels

__device__ inline void store(float* out, float v, bool acc) { *out = acc ? *out + v : v; }

// ---- Layer norm ----

__global__ void layer_norm_kernel(const float* X, const float* gamma, const float* beta, float* Y, float* mean,
                                  float* rstd, int64_t R, int64_t E, float eps) {
  const int lane = threadIdx.x & 31;
  const float inv_e = 1.0f / static_cast<float>(E);
  for (int64_t r = blockIdx.x * int64_t(kWarps) + (threadIdx.x >> 5); r < R; r += int64_t(gridDim.x) * kWarps) {
    const float* x = X + r * E;
    float s = 0.0f;
    for (int64_t e = lane; e < E; e += 32) s += x[e];
    const float mu = warp_sum(s) * inv_e;
    float v = 0.0f;
    for (int64_t e = lane; e < E; e += 32) {
      const float d = x[e] - mu;
      v = fmaf(d, d, v);
    }
    const float rs = 1.0f / sqrtf(warp_sum(v) * inv_e + eps);
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    float* y = Y + r * E;
    for (int64_t e = lane; e < E; e += 32) y[e] = (x[e] - mu) * rs * gamma[e] + beta[e];
  }
}

// dX = rstd (g - mean(g) - xhat mean(g xhat)) with g = dY gamma, one warp per row; rows
// first_row + k * row_stride.
__device__ void layer_norm_dx_rows(const float* dY, const float* X, const float* gamma, const float* mean,
                                   const float* rstd, float* dX, int64_t R, int64_t E, bool acc, int64_t first_row,
                                   int64_t row_stride) {
  const int lane = threadIdx.x & 31;
  const float inv_e = 1.0f / static_cast<float>(E);
  for (int64_t r = first_row; r < R; r += row_stride) {
    const float *x = X + r * E, *dy = dY + r * E;
    const float mu = mean[r], rs = rstd[r];
    float m1 = 0.0f, m2 = 0.0f;
    for (int64_t e = lane; e < E; e += 32) {
      const float g = dy[e] * gamma[e], xhat = (x[e] - mu) * rs;
      m1 += g;
      m2 = fmaf(g, xhat, m2);
    }
    m1 = warp_sum(m1) * inv_e;
    m2 = warp_sum(m2) * inv_e;
    float* dx = dX + r * E;
    for (int64_t e = lane; e < E; e += 32) {
      const float g = dy[e] * gamma[e], xhat = (x[e] - mu) * rs;
      store(dx + e, rs * (g - m1 - xhat * m2), acc);
    }
  }
}

// The gain and shift gradients of column group `group` (32 columns) over row chunk `chunk`:
// lane x of warp y sums column x over the chunk's rows y, y + 8, ...; the 8 row partials are
// added in a fixed order. One chunk: the result goes to dgamma / dbeta. Several: to
// partials[chunk][0 | 1][E]; the group's last block to finish adds the chunks' partials in chunk
// order and resets the group's counter (zero at rest, like column_sum).
__device__ void layer_norm_param_grad(const float* dY, const float* X, const float* mean, const float* rstd,
                                      float* dgamma, float* dbeta, int64_t R, int64_t E, bool acc_g, bool acc_b,
                                      LayerNormGradScratch sc, int64_t group, int64_t chunk, int64_t chunks) {
  __shared__ float pg[kWarps][33], pb[kWarps][33];
  __shared__ bool last;
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t e = group * 32 + tx;
  const int64_t rows = (R + chunks - 1) / chunks, r0 = chunk * rows, r1 = r0 + rows < R ? r0 + rows : R;
  float sg = 0.0f, sb = 0.0f;
  if (e < E)
    for (int64_t r = r0 + ty; r < r1; r += kWarps) {
      const float dy = dY[r * E + e];
      sg = fmaf(dy, (X[r * E + e] - mean[r]) * rstd[r], sg);
      sb += dy;
    }
  pg[ty][tx] = sg;
  pb[ty][tx] = sb;
  __syncthreads();
  float tg = 0.0f, tb = 0.0f;
  if (ty == 0)
    for (int k = 0; k < kWarps; ++k) {
      tg += pg[k][tx];
      tb += pb[k][tx];
    }
  if (chunks == 1) {
    if (ty == 0 && e < E) {
      if (dgamma) store(dgamma + e, tg, acc_g);
      if (dbeta) store(dbeta + e, tb, acc_b);
    }
    return;
  }
  if (ty == 0 && e < E) {
    sc.partials[(chunk * 2 + 0) * E + e] = tg;
    sc.partials[(chunk * 2 + 1) * E + e] = tb;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(sc.counters + group, 1u) == chunks - 1;
  __syncthreads();
  if (!last || ty != 0) return;
  __threadfence();
  if (e < E) {
    const volatile float* part = sc.partials;
    float ag = 0.0f, ab = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      ag += part[(c * 2 + 0) * E + e];
      ab += part[(c * 2 + 1) * E + e];
    }
    if (dgamma) store(dgamma + e, ag, acc_g);
    if (dbeta) store(dbeta + e, ab, acc_b);
  }
  if (tx == 0) sc.counters[group] = 0u;  // ready for the next launch
}

// One launch: blocks [0, param_blocks) compute the gain/shift gradients (groups x chunks),
// the others dX (a warp per row).
__global__ void layer_norm_backward_kernel(const float* dY, const float* X, const float* gamma, const float* mean,
                                           const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t R,
                                           int64_t E, bool acc_dx, bool acc_g, bool acc_b, LayerNormGradScratch sc,
                                           int64_t groups, int64_t chunks, int64_t param_blocks) {
  const int64_t b = blockIdx.x;
  if (b < param_blocks) {
    layer_norm_param_grad(dY, X, mean, rstd, dgamma, dbeta, R, E, acc_g, acc_b, sc, b % groups, b / groups, chunks);
    return;
  }
  const int64_t dx_blocks = gridDim.x - param_blocks;
  layer_norm_dx_rows(dY, X, gamma, mean, rstd, dX, R, E, acc_dx, (b - param_blocks) * kWarps + (threadIdx.x >> 5),
                     dx_blocks * kWarps);
}

// ---- Embedding ----

// Token k's id, or -1 when it is not an integer in [0, V) (NaN included).
__device__ inline int64_t token_id(const int32_t* ids_i32, const float* ids_f32, int64_t k, int64_t V) {
  if (ids_i32) {
    const int32_t id = ids_i32[k];
    return id >= 0 && id < V ? id : -1;
  }
  const float f = ids_f32[k];
  return f >= 0.0f && f < static_cast<float>(V) && f == floorf(f) ? static_cast<int64_t>(f) : -1;
}

__global__ void embedding_kernel(const int32_t* ids_i32, const float* ids_f32, const float* table, const float* pos,
                                 float* Y, int64_t T, int64_t S, int64_t V, int64_t E) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < T * E; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i / E, e = i % E;
    const int64_t id = token_id(ids_i32, ids_f32, k, V);
    if (id < 0) {
      Y[i] = NAN;
      continue;
    }
    const float t = table[id * E + e];
    Y[i] = pos ? t + pos[(k % S) * E + e] : t;
  }
}

constexpr int kEmbedBlock = 128;

// Vocabulary row v, columns [e0, e0 + kEmbedBlock): the block reads the ids kEmbedBlock tokens
// at a time, lists the tokens with id v in token order (ballots and per-warp counts), and each
// thread adds those tokens' dY in its column, in that order.
__device__ void embedding_table_grad(const float* dY, const int32_t* ids_i32, const float* ids_f32, float* dtable,
                                     int64_t T, int64_t V, int64_t E, bool acc, int64_t v, int64_t e0) {
  __shared__ int32_t list[kEmbedBlock];
  __shared__ int warp_count[kEmbedBlock / 32];
  const int64_t e = e0 + threadIdx.x;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  float sum = 0.0f;
  for (int64_t k0 = 0; k0 < T; k0 += kEmbedBlock) {
    const int64_t k = k0 + threadIdx.x;
    const bool match = k < T && token_id(ids_i32, ids_f32, k, V) == v;
    const unsigned ballot = __ballot_sync(0xffffffffu, match);
    if (lane == 0) warp_count[w] = __popc(ballot);
    __syncthreads();
    int base = 0, total = 0;
    for (int u = 0; u < kEmbedBlock / 32; ++u) {
      base += u < w ? warp_count[u] : 0;
      total += warp_count[u];
    }
    if (match) list[base + __popc(ballot & ((1u << lane) - 1u))] = static_cast<int32_t>(threadIdx.x);
    __syncthreads();
    if (e < E)
      for (int j = 0; j < total; ++j) sum += dY[(k0 + list[j]) * E + e];
    __syncthreads();  // list and warp_count are rewritten by the next chunk
  }
  if (e < E) store(dtable + v * E + e, sum, acc);
}

// dpos[s] (+)= sum over b of dY[b, s], elements first..P*E-1 with the given stride.
__device__ void embedding_pos_grad(const float* dY, float* dpos, int64_t B, int64_t S, int64_t P, int64_t E, bool acc,
                                   int64_t first, int64_t stride) {
  for (int64_t i = first; i < P * E; i += stride) {
    const int64_t s = i / E, e = i % E;
    if (s >= S) {
      if (!acc) dpos[i] = 0.0f;  // positions beyond the sequence get no gradient
      continue;
    }
    float sum = 0.0f;
    for (int64_t b = 0; b < B; ++b) sum += dY[(b * S + s) * E + e];
    store(dpos + i, sum, acc);
  }
}

// One launch: blocks [0, table_blocks) are (vocabulary row, column tile) pairs of the table
// gradient, the rest the position gradient.
__global__ void embedding_backward_kernel(const float* dY, const int32_t* ids_i32, const float* ids_f32, float* dtable,
                                          float* dpos, int64_t B, int64_t S, int64_t V, int64_t P, int64_t E,
                                          bool acc_table, bool acc_pos, int64_t col_tiles, int64_t table_blocks) {
  const int64_t blk = blockIdx.x;
  if (blk < table_blocks) {
    embedding_table_grad(dY, ids_i32, ids_f32, dtable, B * S, V, E, acc_table, blk / col_tiles,
                         (blk % col_tiles) * kEmbedBlock);
    return;
  }
  const int64_t pos_blocks = gridDim.x - table_blocks;
  embedding_pos_grad(dY, dpos, B, S, P, E, acc_pos, (blk - table_blocks) * kEmbedBlock + threadIdx.x,
                     pos_blocks * kEmbedBlock);
}

// ---- Attention ----

constexpr int kAttnTile = 64;  // queries (or keys) per block, and rows per shared-memory tile

// Offset of row i of head h in batch b of a [B, S, H*D] tensor.
__device__ inline int64_t head_row(const AttentionDims& a, int64_t b, int64_t h, int64_t i) {
  return ((b * a.S + i) * a.H + h) * a.D;
}

// Rows [j0, j0 + kAttnTile) of head (b, h) of X and Y into shared [kAttnTile][DM] tiles, zero
// beyond the sequence and in columns D..DM-1 (so the DM-wide loops need no column checks).
template <int DM>
__device__ void stage_rows(float* xs, float* ys, const float* X, const float* Y, const AttentionDims& a, int64_t b,
                           int64_t h, int64_t j0) {
  for (int t = threadIdx.x; t < kAttnTile * DM; t += blockDim.x) {
    const int r = t / DM, d = t % DM;
    const int64_t j = j0 + r;
    const bool in = j < a.S && d < a.D;
    xs[t] = in ? X[head_row(a, b, h, j) + d] : 0.0f;
    ys[t] = in ? Y[head_row(a, b, h, j) + d] : 0.0f;
  }
}

template <int DM>
__device__ void load_row(float (&x)[DM], const float* X, int64_t off, int64_t D, bool active) {
#pragma unroll
  for (int d = 0; d < DM; ++d) x[d] = active && d < D ? X[off + d] : 0.0f;
}

// A thread per query: an online softmax over the keys (rescaling its running sum and output
// when a larger score arrives), keys and values read from shared memory (the same row by every
// thread: broadcast).
template <int DM>
__global__ void __launch_bounds__(kAttnTile) attention_kernel(const float* Q, const float* K, const float* V, float* O,
                                                              float* L, AttentionDims a, int64_t tiles) {
  __shared__ float Ks[kAttnTile * DM], Vs[kAttnTile * DM];
  const int64_t tile = blockIdx.x % tiles, bh = blockIdx.x / tiles, b = bh / a.H, h = bh % a.H;
  const int64_t i = tile * kAttnTile + threadIdx.x;
  const bool active = i < a.S;
  float q[DM], o[DM];
  load_row<DM>(q, Q, head_row(a, b, h, active ? i : 0), a.D, active);
#pragma unroll
  for (int d = 0; d < DM; ++d) o[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int64_t keys = !active ? 0 : a.causal ? i + 1 : a.S;  // this query's keys: j < keys
  const int64_t tile_end = tile * kAttnTile + kAttnTile, block_keys = a.causal && tile_end < a.S ? tile_end : a.S;
  for (int64_t j0 = 0; j0 < block_keys; j0 += kAttnTile) {
    __syncthreads();
    stage_rows<DM>(Ks, Vs, K, V, a, b, h, j0);
    __syncthreads();
    const int64_t left = keys - j0;
    const int n = left < kAttnTile ? static_cast<int>(left) : kAttnTile;
    for (int r = 0; r < n; ++r) {
      float sc = 0.0f;
#pragma unroll
      for (int d = 0; d < DM; ++d) sc = fmaf(q[d], Ks[r * DM + d], sc);
      sc *= a.scale;
      if (sc > m) {
        const float alpha = expf(m - sc);  // 0 for the first key (m = -inf)
        l *= alpha;
#pragma unroll
        for (int d = 0; d < DM; ++d) o[d] *= alpha;
        m = sc;
      }
      const float p = expf(sc - m);
      l += p;
#pragma unroll
      for (int d = 0; d < DM; ++d) o[d] = fmaf(p, Vs[r * DM + d], o[d]);
    }
  }
  if (!active) return;
  const float inv = 1.0f / l;
  float* out = O + head_row(a, b, h, i);
#pragma unroll
  for (int d = 0; d < DM; ++d)
    if (d < a.D) out[d] = o[d] * inv;
  L[bh * a.S + i] = m + logf(l);
}

// D_i = dO_i . O_i, summed over d in order (the dQ and dK/dV parts get the same bits).
__device__ inline float row_dot(const float* x, const float* y, int64_t off, int64_t D) {
  float s = 0.0f;
  for (int64_t d = 0; d < D; ++d) s = fmaf(x[off + d], y[off + d], s);
  return s;
}

// Block `blk` (query tile, batch x head) of the dQ part, a thread per query:
// dQ_i = scale sum_j P_ij (dO_i . V_j - D_i) K_j with P_ij = exp(scale Q_i . K_j - L_i).
// smem: [2][kAttnTile][DM] floats.
template <int DM>
__device__ void attention_dq(const float* dO, const float* Q, const float* K, const float* V, const float* O,
                             const float* L, float* dQ, const AttentionDims& a, int64_t tiles, bool acc, int64_t blk,
                             float* smem) {
  float *Ks = smem, *Vs = smem + kAttnTile * DM;
  const int64_t tile = blk % tiles, bh = blk / tiles, b = bh / a.H, h = bh % a.H;
  const int64_t i = tile * kAttnTile + threadIdx.x;
  const bool active = i < a.S;
  const int64_t off = head_row(a, b, h, active ? i : 0);
  float q[DM], g[DM], dq[DM];
  load_row<DM>(q, Q, off, a.D, active);
  load_row<DM>(g, dO, off, a.D, active);
  const float Di = active ? row_dot(dO, O, off, a.D) : 0.0f;
#pragma unroll
  for (int d = 0; d < DM; ++d) dq[d] = 0.0f;
  const float lse = active ? L[bh * a.S + i] : 0.0f;
  const int64_t keys = !active ? 0 : a.causal ? i + 1 : a.S;
  const int64_t tile_end = tile * kAttnTile + kAttnTile, block_keys = a.causal && tile_end < a.S ? tile_end : a.S;
  for (int64_t j0 = 0; j0 < block_keys; j0 += kAttnTile) {
    __syncthreads();
    stage_rows<DM>(Ks, Vs, K, V, a, b, h, j0);
    __syncthreads();
    const int64_t left = keys - j0;
    const int n = left < kAttnTile ? static_cast<int>(left) : kAttnTile;
    for (int r = 0; r < n; ++r) {
      float sc = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < DM; ++d) {
        sc = fmaf(q[d], Ks[r * DM + d], sc);
        dp = fmaf(g[d], Vs[r * DM + d], dp);
      }
      const float ds = expf(sc * a.scale - lse) * (dp - Di);
#pragma unroll
      for (int d = 0; d < DM; ++d) dq[d] = fmaf(ds, Ks[r * DM + d], dq[d]);
    }
  }
  if (!active) return;
  float* out = dQ + off;
#pragma unroll
  for (int d = 0; d < DM; ++d)
    if (d < a.D) store(out + d, a.scale * dq[d], acc);
}

// Block `blk` (key tile, batch x head) of the dK/dV part, a thread per key:
// dV_j = sum_i P_ij dO_i and dK_j = scale sum_i P_ij (dO_i . V_j - D_i) Q_i over the queries
// that see key j (i >= j when causal). smem: [2][kAttnTile][DM] + [2][kAttnTile] floats.
template <int DM>
__device__ void attention_dkv(const float* dO, const float* Q, const float* K, const float* V, const float* O,
                              const float* L, float* dK, float* dV, const AttentionDims& a, int64_t tiles, bool acc_k,
                              bool acc_v, int64_t blk, float* smem) {
  float *Qs = smem, *Gs = smem + kAttnTile * DM, *Ls = smem + 2 * kAttnTile * DM, *Ds = Ls + kAttnTile;
  const int64_t tile = blk % tiles, bh = blk / tiles, b = bh / a.H, h = bh % a.H;
  const int64_t j = tile * kAttnTile + threadIdx.x;
  const bool active = j < a.S;
  const int64_t off = head_row(a, b, h, active ? j : 0);
  float k[DM], v[DM], dk[DM], dv[DM];
  load_row<DM>(k, K, off, a.D, active);
  load_row<DM>(v, V, off, a.D, active);
#pragma unroll
  for (int d = 0; d < DM; ++d) dk[d] = dv[d] = 0.0f;
  // Causal: queries before this block's first key see none of its keys.
  const int64_t first_query = a.causal ? tile * kAttnTile : 0;
  for (int64_t i0 = first_query; i0 < a.S; i0 += kAttnTile) {
    __syncthreads();
    stage_rows<DM>(Qs, Gs, Q, dO, a, b, h, i0);
    for (int t = threadIdx.x; t < kAttnTile; t += blockDim.x) {
      const int64_t i = i0 + t;
      Ls[t] = i < a.S ? L[bh * a.S + i] : 0.0f;
      Ds[t] = i < a.S ? row_dot(dO, O, head_row(a, b, h, i), a.D) : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    const int64_t from = a.causal && j > i0 ? j - i0 : 0, left = a.S - i0;
    const int n = left < kAttnTile ? static_cast<int>(left) : kAttnTile;
    for (int r = static_cast<int>(from < kAttnTile ? from : kAttnTile); r < n; ++r) {
      float sc = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < DM; ++d) {
        sc = fmaf(Qs[r * DM + d], k[d], sc);
        dp = fmaf(Gs[r * DM + d], v[d], dp);
      }
      const float p = expf(sc * a.scale - Ls[r]), ds = p * (dp - Ds[r]);
#pragma unroll
      for (int d = 0; d < DM; ++d) {
        dv[d] = fmaf(p, Gs[r * DM + d], dv[d]);
        dk[d] = fmaf(ds, Qs[r * DM + d], dk[d]);
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int d = 0; d < DM; ++d) {
    if (d >= a.D) continue;
    if (dK) store(dK + off + d, a.scale * dk[d], acc_k);
    if (dV) store(dV + off + d, dv[d], acc_v);
  }
}

// One launch: blocks [0, q_blocks) are the dQ part, the rest the dK/dV part (independent: each
// recomputes D_i itself). Shared memory is one buffer used by whichever part the block runs.
template <int DM>
__global__ void __launch_bounds__(kAttnTile) attention_backward_kernel(
    const float* dO, const float* Q, const float* K, const float* V, const float* O, const float* L, float* dQ,
    float* dK, float* dV, AttentionDims a, int64_t tiles, int64_t q_blocks, bool acc_q, bool acc_k, bool acc_v) {
  __shared__ float smem[2 * kAttnTile * DM + 2 * kAttnTile];
  const int64_t blk = blockIdx.x;
  if (blk < q_blocks) attention_dq<DM>(dO, Q, K, V, O, L, dQ, a, tiles, acc_q, blk, smem);
  else attention_dkv<DM>(dO, Q, K, V, O, L, dK, dV, a, tiles, acc_k, acc_v, blk - q_blocks, smem);
}

int64_t attention_tiles(const AttentionDims& a) { return (a.S + kAttnTile - 1) / kAttnTile; }

unsigned attention_grid(const AttentionDims& a) {
  const int64_t blocks = a.B * a.H * attention_tiles(a);
  SG_REQUIRE(blocks >= 1 && blocks <= 2147483647, "attention: ", a.B, " x ", a.H, " heads x ", a.S,
             " positions is too many blocks for one launch");
  return static_cast<unsigned>(blocks);
}

// Calls f(std::integral_constant<int, DM>) for the smallest supported DM >= D.
template <class F>
void with_head_dim(int64_t D, F&& f) {
  SG_REQUIRE(D >= 1 && D <= kAttentionMaxHeadDim, "attention: head dimension ", D, " is outside [1, ",
             kAttentionMaxHeadDim, "], the CUDA kernels' range");
  if (D <= 8) f(std::integral_constant<int, 8>{});
  else if (D <= 16) f(std::integral_constant<int, 16>{});
  else if (D <= 32) f(std::integral_constant<int, 32>{});
  else f(std::integral_constant<int, 64>{});
}

}  // namespace

void layer_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                int64_t R, int64_t E, float eps, cudaStream_t s) {
  if (R == 0) return;
  layer_norm_kernel<<<grid_for(R, kWarps), kBlock, 0, s>>>(X, gamma, beta, Y, mean, rstd, R, E, eps);
  KERNEL_LAUNCH_CHECK();
}

int layer_norm_grad_chunks(int64_t R, int64_t E) {
  // Enough blocks to fill the GPU, each over at least 64 rows.
  const int64_t groups = (E + 31) / 32, by_rows = (R + 63) / 64, want = (264 + groups - 1) / groups;
  const int64_t c = by_rows < want ? by_rows : want;
  return static_cast<int>(c < 1 ? 1 : c > 65535 ? 65535 : c);
}

int64_t layer_norm_grad_scratch_floats(int64_t R, int64_t E) {
  const int chunks = layer_norm_grad_chunks(R, E);
  return chunks > 1 ? int64_t(chunks) * 2 * E : 0;
}

void layer_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t E, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta, LayerNormGradScratch sc, cudaStream_t s) {
  if (R == 0) return;
  const int64_t groups = (E + 31) / 32, chunks = layer_norm_grad_chunks(R, E);
  const int64_t param_blocks = dgamma || dbeta ? groups * chunks : 0;
  SG_REQUIRE(param_blocks == 0 || chunks == 1 || (sc.partials && sc.counters), "layer norm backward over ", R,
             " rows: scratch needed");
  const int64_t dx_blocks = dX ? grid_for(R, kWarps) : 0;
  const int64_t blocks = param_blocks + dx_blocks;
  if (blocks == 0) return;
  SG_REQUIRE(blocks <= 2147483647, "layer norm backward: ", R, " rows of ", E, " is too many blocks for one launch");
  layer_norm_backward_kernel<<<static_cast<unsigned>(blocks), kBlock, 0, s>>>(
      dY, X, gamma, mean, rstd, dX, dgamma, dbeta, R, E, acc_dx, acc_dgamma, acc_dbeta, sc, groups, chunks, param_blocks);
  KERNEL_LAUNCH_CHECK();
}

void embedding(const int32_t* ids_i32, const float* ids_f32, const float* table, const float* pos, float* Y,
               int64_t B, int64_t S, int64_t V, int64_t E, cudaStream_t s) {
  if (B * S * E == 0) return;
  embedding_kernel<<<grid_for(B * S * E), kBlock, 0, s>>>(ids_i32, ids_f32, table, pos, Y, B * S, S, V, E);
  KERNEL_LAUNCH_CHECK();
}

bool embedding_backward_supported(int64_t V, int64_t tokens) {
  return V >= 1 && V <= 2147483647 && tokens <= 2147483647 && V * tokens <= kEmbeddingMaxIdReads;
}

void embedding_backward(const float* dY, const int32_t* ids_i32, const float* ids_f32, float* dtable, float* dpos,
                        int64_t B, int64_t S, int64_t V, int64_t P, int64_t E, bool acc_table, bool acc_pos,
                        cudaStream_t s) {
  const int64_t T = B * S, col_tiles = (E + kEmbedBlock - 1) / kEmbedBlock;
  if (dtable)
    SG_REQUIRE(embedding_backward_supported(V, T), "embedding backward: vocabulary ", V, " x ", T,
               " tokens is beyond the CUDA kernel's limit (vocabulary x tokens <= 2^32)");
  const int64_t table_blocks = dtable ? V * col_tiles : 0;
  const int64_t pos_blocks = dpos && P * E > 0 ? grid_for(P * E, kEmbedBlock) : 0;
  if (table_blocks + pos_blocks == 0) return;
  SG_REQUIRE(table_blocks + pos_blocks <= 2147483647, "embedding backward: vocabulary ", V, " x width ", E,
             " is too many blocks for one launch");
  embedding_backward_kernel<<<static_cast<unsigned>(table_blocks + pos_blocks), kEmbedBlock, 0, s>>>(
      dY, ids_i32, ids_f32, dtable, dpos, B, S, V, P, E, acc_table, acc_pos, col_tiles, table_blocks);
  KERNEL_LAUNCH_CHECK();
}

void attention(const float* Q, const float* K, const float* V, float* O, float* L, const AttentionDims& a,
               cudaStream_t s) {
  if (a.B * a.H * a.S == 0) return;
  const unsigned grid = attention_grid(a);
  const int64_t tiles = attention_tiles(a);
  with_head_dim(a.D, [&](auto dm) {
    attention_kernel<decltype(dm)::value><<<grid, kAttnTile, 0, s>>>(Q, K, V, O, L, a, tiles);
  });
  KERNEL_LAUNCH_CHECK();
}

void attention_backward(const float* dO, const float* Q, const float* K, const float* V, const float* O,
                        const float* L, float* dQ, float* dK, float* dV, const AttentionDims& a, bool acc_q,
                        bool acc_k, bool acc_v, cudaStream_t s) {
  if (a.B * a.H * a.S == 0) return;
  const int64_t per_part = attention_grid(a), tiles = attention_tiles(a);
  const int64_t q_blocks = dQ ? per_part : 0, kv_blocks = dK || dV ? per_part : 0;
  if (q_blocks + kv_blocks == 0) return;
  SG_REQUIRE(q_blocks + kv_blocks <= 2147483647, "attention backward: ", a.B, " x ", a.H, " heads x ", a.S,
             " positions is too many blocks for one launch");
  const unsigned grid = static_cast<unsigned>(q_blocks + kv_blocks);
  with_head_dim(a.D, [&](auto dm) {
    attention_backward_kernel<decltype(dm)::value><<<grid, kAttnTile, 0, s>>>(dO, Q, K, V, O, L, dQ, dK, dV, a, tiles,
                                                                              q_blocks, acc_q, acc_k, acc_v);
  });
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
