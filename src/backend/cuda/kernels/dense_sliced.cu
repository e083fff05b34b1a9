// Medium dense products at fp32: an MLP's 1024 x 256 x 256 layers and their 256 x 256 x 1024
// weight gradients. They have too few output tiles to fill an H200's 132 SMs with enough warps
// (cuBLASLt's best took 9.5-15 us each, about a quarter of the FMA rate), and a pipelined tile
// kernel that loads k in slabs pays one load latency per slab with few warps to hide it.
//
// Here each block owns a 32 x 64 output tile and copies a whole k-range of 256 (longer products
// are split over k across blocks, with the ordered split sum of dense_kernels.cu, or staged in
// rounds) into shared memory with cp.async in four chunks of 64, all in flight at once: the
// arithmetic on a chunk overlaps the loads of the next. Each operand stays as it lies in global
// memory ([r][k] when k is the unit stride, [k][r] otherwise). Sixteen warps (eight for a forward
// product) each multiply their own groups of four k of every chunk into the whole tile, a thread
// holding 8 x 8 outputs: 32 FMAs per float4 read from shared memory. (At 4 x 4 per thread the
// float4 reads, four wavefronts each, took twice the FMAs' issue time: ncu 17.5 us at 1.47 GHz on
// 1024 x 256 x 256.) The warps' tiles are added in warp order and the usual epilogue applied:
// deterministic, like every own kernel.
//
// On compute capability 9.0 a product alone (not a pair) runs on the FP64 tensor cores instead
// (sliced_fp64_tensor_cores): the same loads, the fp32 operands converted exactly to fp64 as the
// fragments are read, mma.sync m16n8k8 .f64 (1024 multiply-adds an instruction, against 32 for an
// FFMA), fp64 sums along each warp's slice of k (a forward product's up to the output). On an
// H200 mlp_8x256's forward products took 7.9 us against 8.4, the first layer's weight gradient
// 8.9 against 9.8.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/dense_common.cuh"
#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

using namespace detail;

namespace {

constexpr int kBM = kSlicedRows, kBN = kSlicedCols;
constexpr int kChunk = 64, kChunks = kSlicedDepth / kChunk;  // cp.async commit groups

// A thread's 8 rows of the tile (A's reads of one k are a broadcast per 8 lanes either way). An
// m-fast A ([k][r]) reads them as two float4 runs half the tile apart; a k-fast A takes rows
// ty + 4i' instead, so that the four lane groups' rows fall in distinct banks, for its reads and
// for the warps' tiles stored at the end.
template <bool AK>
__device__ __forceinline__ int row_of(int ty, int i) {
  return AK ? (i / 4) * (kBM / 2) + ty + 4 * (i % 4) : (i / 4) * (kBM / 2) + ty * 4 + i % 4;
}

// One operand's R x kSlicedDepth tile in shared memory: element (r, k) at at(r, k). KFAST: [r][k],
// a row padded to 260 floats so the 8 lanes of a float4 phase reading rows tx + 8j hit distinct
// banks; else [k][r], padded by 4, or by 8 for the tensor cores' fragments (TC: a lane reads
// (r0 + lane / 4, k0 + lane % 4), so k's stride must be 8 banks apart modulo 32).
template <int R, bool KFAST, int kThreads, bool TC = false>
struct Operand {
  static constexpr int LD = KFAST ? kSlicedDepth + 4 : R + (TC ? 8 : 4);
  static constexpr int kFloats = KFAST ? R * LD : kSlicedDepth * LD;
  __device__ static int at(int r, int k) { return KFAST ? r * LD + k : k * LD + r; }
  // Rows [r0, r0 + R) of an operand, element (r, k) at p[r*sr + k*sk]: each thread's 16-byte
  // copies along the unit stride, their sources worked out once per round; chunk c of the round
  // from k0 moves them k0 + c * kChunk values of k on. Zeros outside [0, rows) x [k0, k0 + left).
  static constexpr int kVec = R * kChunk / 4 / kThreads;
  const float* src[kVec];
  int dst[kVec], k_of[kVec];
  bool row_in[kVec];
  __device__ Operand(const float* p, int64_t sr, int64_t sk, int64_t r0, int64_t rows, int tid) {
#pragma unroll
    for (int q = 0; q < kVec; ++q) {
      const int e = tid + q * kThreads;
      const int r = KFAST ? e / (kChunk / 4) : (e % (R / 4)) * 4;
      const int k = KFAST ? (e % (kChunk / 4)) * 4 : e / (R / 4);
      row_in[q] = r0 + r < rows;
      src[q] = KFAST ? p + (r0 + r) * sr + k : p + k * sk + r0 + r;
      dst[q] = at(r, k);
      k_of[q] = k;
    }
  }
  __device__ void load_chunk(float* S, const float* p, int64_t sk, int64_t k0, int left, int c) const {
    const int64_t step = k0 + c * kChunk;
#pragma unroll
    for (int q = 0; q < kVec; ++q) {
      const bool in = row_in[q] && c * kChunk + k_of[q] < left;
      cp_async16(S + dst[q] + (KFAST ? c * kChunk : c * kChunk * LD), in ? src[q] + (KFAST ? step : step * sk) : p, in);
    }
  }
};

// Row stride of the warps' tiles stored for the final sum. BK's scalar stores: with AK's rows a
// lane group's rows 8 banks apart (conflict-free), else 4 (2-way); float4 stores need no pad.
template <bool AK, bool BK>
constexpr int tile_stride() {
  return BK ? (AK ? kBN + 8 : kBN + 4) : kBN;
}

// Column j of a thread's 8: for a [n][k] B, tx + 8j (distinct banks per row read); for a [k][n] B
// two float4 runs half the tile apart.
template <bool BK>
__device__ __forceinline__ int col_of(int tx, int j) {
  return BK ? tx + 8 * j : (j / 4) * (kBN / 2) + tx * 4 + j % 4;
}

// A thread's values of one operand for four consecutive k: x[r][kk] = (index(r), k + kk) for its 8
// rows of A (row_of) or columns of B (col_of); float4 reads along k where it is the unit stride,
// else along the rows.
template <bool KFAST, class O, class Index>
__device__ __forceinline__ void load_4k(const float* S, Index index, int k, float (&x)[8][4]) {
#pragma unroll
  for (int r = 0; r < 8; r += KFAST ? 1 : 4)
#pragma unroll
    for (int kk = 0; kk < 4; kk += KFAST ? 4 : 1) {
      const float4 v = *reinterpret_cast<const float4*>(S + O::at(index(r), k + kk));
      if (KFAST) x[r][0] = v.x, x[r][1] = v.y, x[r][2] = v.z, x[r][3] = v.w;
      else x[r][kk] = v.x, x[r + 1][kk] = v.y, x[r + 2][kk] = v.z, x[r + 3][kk] = v.w;
    }
}
template <bool BK, class OB>
__device__ __forceinline__ void load_b(const float* Bs, int tx, int k, float (&b)[8][4]) {
  load_4k<BK, OB>(Bs, [tx](int j) { return col_of<BK>(tx, j); }, k, b);
}
template <bool AK, bool BK, class OA, class OB>
__device__ __forceinline__ void load_frag(const float* As, const float* Bs, int ty, int tx, int k, float (&a)[8][4],
                                          float (&b)[8][4]) {
  load_b<BK, OB>(Bs, tx, k, b);
  load_4k<AK, OA>(As, [ty](int i) { return row_of<AK>(ty, i); }, k, a);
}

// Four values of k multiplied into a thread's 8 x 8 outputs, B's values held and A's read as used
// (fewest registers: the 16-warp kernel's 128).
template <bool AK, bool BK, class OA, class OB>
__device__ __forceinline__ void multiply_streaming(const float* As, const float* Bs, int r0, int ty, int tx, int k,
                                                   float (&acc)[8][8]) {
  float b[8][4];
  load_b<BK, OB>(Bs, tx, k, b);
  if (AK) {  // a row's four k at once
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 a = *reinterpret_cast<const float4*>(As + OA::at(r0 + row_of<AK>(ty, i), k));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        acc[i][j] = fmaf(a.x, b[j][0], acc[i][j]);
        acc[i][j] = fmaf(a.y, b[j][1], acc[i][j]);
        acc[i][j] = fmaf(a.z, b[j][2], acc[i][j]);
        acc[i][j] = fmaf(a.w, b[j][3], acc[i][j]);
      }
    }
  } else {  // a k's eight rows at once
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const float4 lo = *reinterpret_cast<const float4*>(As + OA::at(r0 + row_of<AK>(ty, 0), k + kk));
      const float4 hi = *reinterpret_cast<const float4*>(As + OA::at(r0 + row_of<AK>(ty, 4), k + kk));
      const float a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j][kk], acc[i][j]);
    }
  }
}

// The same from values already read (load_frag).
__device__ __forceinline__ void multiply_frag(const float (&a)[8][4], const float (&b)[8][4], float (&acc)[8][8]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i][kk], b[j][kk], acc[i][j]);
}

// A warp's 32 x 32 part of the tile (columns tc..tc + 31, all 32 rows) over k in [k0, k0 + K):
// 2 x 4 fragments, every operand value converted to fp64 (exactly) as it is read. Banks: A and B
// reads are conflict-free in each layout (Operand's TC padding).
template <class OA, class OB, int K>
__device__ __forceinline__ void multiply_fp64(const float* As, const float* Bs, int k0, int tc, int lane,
                                              double (&d)[2][4][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int k = k0; k < k0 + K; k += 8) {
    double a[2][4], b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = 16 * i + g;
      a[i][0] = As[OA::at(r, k + t)], a[i][1] = As[OA::at(r + 8, k + t)];
      a[i][2] = As[OA::at(r, k + t + 4)], a[i][3] = As[OA::at(r + 8, k + t + 4)];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = tc + 8 * j + g;
      b[0] = Bs[OB::at(n, k + t)], b[1] = Bs[OB::at(n, k + t + 4)];
#pragma unroll
      for (int i = 0; i < 2; ++i) mma_f64_16x8x8(d[i][j], a[i], b);
    }
  }
}

// Warps per block, by layout (sliced_warps in dense_kernels.cuh). With 8 warps each takes two
// groups of four k per chunk, the second group's values read while the first is multiplied, and
// the block adds 8 tiles instead of 16 at the end. Measured on an H200, mlp_8x256 (each
// 1024 x 256 x 256 product alone, eager): the forward (both operands k-fast) 9.7 -> 8.4 us, and
// the whole step 215.5 -> 205.6 us per step (graph). The input gradient (A k-fast, B n-fast) took
// 12.1 us against 9.2 with 8 warps, and 8 warps on the weight gradients too gave the step only
// 211.9: those keep 16. Fewer warps lose: 4, one per scheduler, spent half their cycles waiting
// for instructions (ncu) and took 14-18 us.
//
// A block's shape. RH = 1: a 32 x 64 output tile, W = sliced_warps warps each multiplying its own
// groups of four k of every 64-deep chunk into the whole tile, a thread holding 8 x 8 outputs.
// RH = 2 (a layer's two gradient products in one launch, sliced_pair): a 64 x 64 tile, its two
// row halves each taken by 8 warps that split k, 16 warps in all.
//
// On the FP64 tensor cores (TC, one product a launch) 8 warps take the two 32 x 32 halves of the
// tile instead, each half's k split over 4 of them (kSlicedTcSlices slices of every chunk), a
// warp holding 2 x 4 fragments of 16 x 8 in fp64: 8 multiply-adds of 1024 per 16 values read from
// shared memory and converted (exact: every fp32 is a double). The slices' tiles are added in
// slice order like the warps' above.
template <bool AK, bool BK, int RH, bool TC = false>
struct Shape {
  static_assert(!TC || RH == 1, "pairs run on fp32 FMAs (sliced_pair)");
  static constexpr int W = TC ? 8 : RH == 1 ? sliced_warps(AK, BK) : kSlicedPairWarps;  // warps per row half
  static constexpr int kThreads = W * 32 * RH, kRows = kBM * RH;
  static constexpr int S = kChunk / 4 / W;  // groups of four k per warp and chunk
  static constexpr int T = 2, kSlices = kThreads / 32 / T;  // TC: 32 x 32 parts, k slices of each
  static_assert(!TC || (kSlices == kSlicedTcSlices && kChunk % (8 * kSlices) == 0), "TC: whole k8 steps per slice");
};

// The epilogues the kernel is specialized for; Any is store_output4's, flags read at run time.
// With those flags' branches (accumulate, bias, Z, activation, derivative) a block's epilogue
// runs code fetched cold at every launch, and a global load (the bias, the activation's y) after
// the arithmetic: on an H200 a 1024 x 256 x 256 product's epilogue took ~2.4 us of its 8
// (bench/RESULTS.md, 2026-11-30 12:15-12:55 UTC). The specialized ones are straight-line code, and
// their bias or y tile is copied into shared memory with the operands' last chunk.
//   Plain     C = v                     (a weight gradient; its bias gradient is the row sums)
//   BiasRelu  C = relu(v + bias)        (a forward layer)
//   DactRelu  C = v * relu'(y)          (an input gradient through the previous layer's relu)
enum class Epi { Any, Plain, BiasRelu, DactRelu };
inline Epi epilogue_of(const DenseGemm& g) {
  if (g.accumulate || g.Z || (g.bias && g.bias_rows < g.M) || !output_vec4(g)) return Epi::Any;
  const bool bias = g.bias != nullptr, act = g.act != Activation::None, dact = g.dact != Activation::None;
  if (!bias && !act && !dact) return Epi::Plain;
  if (bias && g.act == Activation::ReLU && !dact) return Epi::BiasRelu;
  if (!bias && !act && g.dact == Activation::ReLU && g.dact_y) return Epi::DactRelu;  // relu' reads y only
  return Epi::Any;
}
// Floats of shared memory after the operands (or the warps' tiles) for E's bias or y tile.
constexpr int epilogue_floats(Epi E, int rows) {
  return E == Epi::BiasRelu ? kBN : E == Epi::DactRelu ? rows * kBN : 0;
}
// The operands, or the warps' tiles and row sums after them, whichever is larger (floats).
template <bool AK, bool BK, int RH, bool TC>
constexpr int main_floats() {
  using Sh = Shape<AK, BK, RH, TC>;
  const int operands = Operand<Sh::kRows, AK, Sh::kThreads, TC>::kFloats + Operand<kBN, BK, Sh::kThreads, TC>::kFloats;
  const int sums = TC ? (AK && BK ? 2 : 1) * (Sh::kSlices * Sh::kRows * (kBN + 8) + Sh::kSlices * Sh::kRows)
                      : RH * Sh::W * kBM * tile_stride<AK, BK>() + Sh::kThreads;
  return operands > sums ? operands : sums;
}

// E's bias (columns n0 .. n0 + kBN) or y tile (rows m0 .. m0 + kRows of those) into `ex`, zeros
// outside the output: asynchronous copies the caller commits with the operands' last chunk.
template <Epi E, int kRows, int kThreads>
__device__ __forceinline__ void load_epilogue(float* ex, const DenseGemm& g, int64_t m0, int64_t n0, int tid) {
  if constexpr (E == Epi::BiasRelu) {
    if (tid < kBN / 4) {
      const bool in = n0 + 4 * tid < g.N;
      cp_async16(ex + 4 * tid, in ? g.bias + n0 + 4 * tid : g.bias, in);
    }
  } else if constexpr (E == Epi::DactRelu) {
#pragma unroll
    for (int e = tid; e < kRows * kBN / 4; e += kThreads) {
      const int r = e / (kBN / 4), c = (e % (kBN / 4)) * 4;
      const bool in = m0 + r < g.M && n0 + c < g.N;
      cp_async16(ex + r * kBN + c, in ? g.dact_y + (m0 + r) * g.ldc + n0 + c : g.dact_y, in);
    }
  }
}

// One output tile of g (and one k-range, `split`, of a split product): the block's whole work.
// AK: A's k is the unit stride (A[m*sam + k]: activations, dZ); otherwise m is (a weight
// gradient's dZ^T). BK: B's k is the unit stride (W as [out][in] in the forward); otherwise n is.
template <bool AK, bool BK, int RH, bool TC, Epi E>
__device__ __forceinline__ void sliced_tile(const DenseGemm& g, bool vec_out, int tile, int split) {
  using Sh = Shape<AK, BK, RH, TC>;
  constexpr int W = Sh::W, kThreads = Sh::kThreads, kRows = Sh::kRows, S = Sh::S;
  using OA = Operand<kRows, AK, kThreads, TC>;
  using OB = Operand<kBN, BK, kThreads, TC>;
  extern __shared__ __align__(16) float smem[];
  float* As = smem;
  float* Bs = smem + OA::kFloats;
  float* ex = smem + main_floats<AK, BK, RH, TC>();  // E's bias (kBN) or y tile ([kRows][kBN])
  const int n_tiles = static_cast<int>((g.N + kBN - 1) / kBN);
  const int64_t m0 = int64_t{tile / n_tiles} * kRows, n0 = int64_t{tile % n_tiles} * kBN;
  int64_t k_begin = 0, k_end = g.K;
  if (g.splits > 1) split_range<kSlicedDepth>(g, split, &k_begin, &k_end);
  const int tid = threadIdx.x, group = tid / 32, lane = tid % 32;
  const int r0 = RH == 1 ? 0 : group / W * kBM, kg = RH == 1 ? group : group % W;  // the warp's row half, its k
  const int ty = lane / 8, tx = lane % 8;  // rows r0 + row_of(ty, i), columns col_of<BK>(tx, j)
  // TC: the warp's 32 x 32 half (columns tc) and its k slice.
  constexpr int kSlices = Sh::kSlices, kSliceK = kChunk / kSlices;
  const int slice = group / Sh::T, tc = group % Sh::T * 32, fg = lane / 4, ft = lane % 4;
  const bool do_rowsum = g.rowsum != nullptr && n0 == 0;
  float acc[8][8];       // unused on the tensor cores (the compiler drops it), as dacc on FMAs
  double dacc[2][4][4];  // [16-row fragment][8-column fragment][its 4 values a lane]
  if constexpr (TC) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) dacc[i][j][0] = dacc[i][j][1] = dacc[i][j][2] = dacc[i][j][3] = 0.0;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  }
  // Row m0 + r0 + lane over the warp's k (TC: m0 + lane over the slice's, by the warps of the
  // first 32 columns). A forward product's sums on the tensor cores stay fp64 up to the output,
  // its bias included (kExact; see the slices' sum below).
  constexpr bool kExact = TC && AK && BK;
  using Acc = std::conditional_t<kExact, double, float>;
  Acc rs = 0.0f;
  PDL_PROLOGUE();  // everything above reads only the arguments

  for (int64_t k0 = k_begin; k0 < k_end; k0 += kSlicedDepth) {
    if (k0 > k_begin) __syncthreads();  // the previous round's readers are done
    const int left = k_end - k0 < kSlicedDepth ? static_cast<int>(k_end - k0) : kSlicedDepth;
    {  // per round, not held across the arithmetic (registers: 8 x 8 accumulators per thread)
      const OA la(g.A, g.sam, g.sak, m0, g.M, tid);
      const OB lb(g.B, g.sbn, g.sbk, n0, g.N, tid);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        la.load_chunk(As, g.A, g.sak, k0, left, c);
        lb.load_chunk(Bs, g.B, g.sbk, k0, left, c);
        if (c + 1 < kChunks) cp_async_commit();
      }
    }
    if (k0 == k_begin) load_epilogue<E, kRows, kThreads>(ex, g, m0, n0, tid);
    cp_async_commit();  // the last chunk's group, with E's bias or y tile
    const int64_t rleft = g.rowsum_k - k0;
    auto row_sum = [&](int k) {
      if (do_rowsum)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          if (k + kk < rleft) rs += As[OA::at(r0 + lane, k + kk)];
    };
    // This warp's groups of four k of chunk c on fp32 FMAs.
    auto multiply_fma = [&](int c) {
      const int kw = c * kChunk + kg * 4 * S;  // this warp's 4S values of k (zeros past k_end)
      if constexpr (S == 1 || RH == 2) {  // 16 warps: 128 registers, B's values held, A's read as used
#pragma unroll
        for (int t = 0; t < S; ++t) {
          row_sum(kw + 4 * t);
          multiply_streaming<AK, BK, OA, OB>(As, Bs, r0, ty, tx, kw + 4 * t, acc);
        }
      } else {
        static_assert(S % 2 == 0, "groups of k in pairs");
        float a0[8][4], b0[8][4], a1[8][4], b1[8][4];
        load_frag<AK, BK, OA, OB>(As, Bs, ty, tx, kw, a0, b0);
        // Rolled: long unrolled code starves the warps of instructions (ncu, 4 warps per block:
        // half the cycles waiting to fetch).
#pragma unroll 1
        for (int t = 0; t < S; t += 2) {
          const int k = kw + 4 * t;
          load_frag<AK, BK, OA, OB>(As, Bs, ty, tx, k + 4, a1, b1);
          row_sum(k);
          multiply_frag(a0, b0, acc);
          if (t + 2 < S) load_frag<AK, BK, OA, OB>(As, Bs, ty, tx, k + 8, a0, b0);
          row_sum(k + 4);
          multiply_frag(a1, b1, acc);
        }
      }
    };
    auto chunk = [&](int c) {
      if (c == 0) cp_async_wait<kChunks - 1>();
      else if (c == 1) cp_async_wait<kChunks - 2>();
      else if (c == 2) cp_async_wait<kChunks - 3>();
      else cp_async_wait<0>();
      __syncthreads();  // chunk c is in shared memory for every thread
      if (c * kChunk >= left) return;          // past k_end: all zeros (the same for every warp)
      if constexpr (TC) {
        const int ks = c * kChunk + slice * kSliceK;  // the slice's k in this chunk
        if (do_rowsum && tc == 0)
#pragma unroll
          for (int k = ks; k < ks + kSliceK; ++k)
            if (k < rleft) rs += As[OA::at(lane, k)];
        multiply_fp64<OA, OB, kSliceK>(As, Bs, ks, tc, lane, dacc);
      } else {
        multiply_fma(c);
      }
    };
    // Rolled for the forward's layout at 16 warps (unrolled, ptxas spilled 208 bytes and the
    // 1024 x 256 x 256 product took 11.0 instead of 10.0 us) and at 8; the other 16-warp layout
    // is faster unrolled.
    if constexpr (W < 16 || (AK && BK) || TC) {
#pragma unroll 1
      for (int c = 0; c < kChunks; ++c) chunk(c);
    } else {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) chunk(c);
    }
  }

  // Every warp's tile goes to shared memory (over the operands) at once; then each thread adds
  // the W tiles of its row half for each of its outputs (kV runs of 4) in warp order and applies
  // the epilogue. Row sums likewise. TC: each slice's tile, [kSlices][kRows][LDR], added in slice
  // order; a forward product's in fp64 (kExact), so that an output is rounded to fp32 once, like
  // the CPU reference's double sums (bias included) and a relu sees the same sign there: with
  // fp32 sums of the slices --mode verify on mlp_8x256 failed at step 2 (2.05e-3 on
  // grad.0.weight: one first-layer relu mask the other way than on the CPU). The gradient
  // products keep fp32 sums (fp64 cost the first layer's weight gradient 1.1 us of its 8.9).
  constexpr int LDR = TC ? kBN + 8 : tile_stride<AK, BK>(), kV = kRows * kBN / 4 / kThreads;
  Acc* red = reinterpret_cast<Acc*>(smem);  // [RH * W][kBM][LDR]
  Acc* rsum = red + (TC ? kSlices * kRows : RH * W * kBM) * LDR;
  __syncthreads();
  if constexpr (TC) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        Acc* at = red + (slice * kRows + 16 * i + fg) * LDR + tc + 8 * j + 2 * ft;
        const double(&d)[4] = dacc[i][j];
        if constexpr (kExact) {
          *reinterpret_cast<double2*>(at) = make_double2(d[0], d[1]);
          *reinterpret_cast<double2*>(at + 8 * LDR) = make_double2(d[2], d[3]);
        } else {
          *reinterpret_cast<float2*>(at) = make_float2(static_cast<float>(d[0]), static_cast<float>(d[1]));
          *reinterpret_cast<float2*>(at + 8 * LDR) = make_float2(static_cast<float>(d[2]), static_cast<float>(d[3]));
        }
      }
    if (do_rowsum && tc == 0) rsum[slice * kRows + lane] = rs;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float* row = red + (group * kBM + row_of<AK>(ty, i)) * LDR;
#pragma unroll
      for (int j = 0; j < 8; j += BK ? 1 : 4) {
        if (BK) row[col_of<BK>(tx, j)] = acc[i][j];
        else *reinterpret_cast<float4*>(row + col_of<BK>(tx, j)) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
      }
    }
    if (do_rowsum) rsum[tid] = rs;
  }
  __syncthreads();
  // Four outputs' sums from 16 bytes (fp32) or 32 (fp64) at p.
  auto add4 = [](Acc(&v)[4], const Acc* p) {
    if constexpr (kExact) {
      const double2 a = reinterpret_cast<const double2*>(p)[0], b = reinterpret_cast<const double2*>(p)[1];
      v[0] += a.x, v[1] += a.y, v[2] += b.x, v[3] += b.y;
    } else {
      const float4 o = *reinterpret_cast<const float4*>(p);
      v[0] += o.x, v[1] += o.y, v[2] += o.z, v[3] += o.w;
    }
  };
  Acc v[kV][4];
  int64_t m[kV], n[kV];
  bool out_in[kV];
#pragma unroll
  for (int q = 0; q < kV; ++q) {
    const int e = tid + q * kThreads, r = e / (kBN / 4), c = (e % (kBN / 4)) * 4;
    // The partial tiles of output (r, c): W warps' of its row half, or TC the kSlices slices'.
    const Acc* first = TC ? red + r * LDR + c : red + (r / kBM * W * kBM + r % kBM) * LDR + c;
    constexpr int kParts = TC ? kSlices : W, kApart = (TC ? kRows : kBM) * LDR;
    v[q][0] = v[q][1] = v[q][2] = v[q][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < kParts; ++s) add4(v[q], first + s * kApart);
    m[q] = m0 + r, n[q] = n0 + c;
    out_in[q] = m[q] < g.M && n[q] < g.N;  // N % 4 == 0: the 4 outputs are in or out together
  }
  Acc rsv = 0.0f;
  if (do_rowsum && tid < kRows) {
    if (TC)
      for (int q = 0; q < kSlices; ++q) rsv += rsum[q * kRows + tid];
    else
      for (int q = 0; q < W; ++q) rsv += rsum[(tid / kBM * W + q) * kBM + tid % kBM];
  }
  const bool row_in = do_rowsum && tid < kRows && m0 + tid < g.M;
  if (g.splits > 1) {
    // Raw partial sums; with counters the tile's last block to finish adds them in split order
    // (deterministic) and applies the epilogue, otherwise split_reduce_kernel does.
    const int64_t rows_at = g.splits * g.M * g.N;
#pragma unroll
    for (int q = 0; q < kV; ++q)
      if (out_in[q])
        *reinterpret_cast<float4*>(g.partial + (split * g.M + m[q]) * g.N + n[q]) =
            make_float4(static_cast<float>(v[q][0]), static_cast<float>(v[q][1]), static_cast<float>(v[q][2]),
                        static_cast<float>(v[q][3]));
    if (row_in) g.partial[rows_at + split * g.M + m0 + tid] = static_cast<float>(rsv);
    if (!g.counters) return;
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(g.counters + tile, 1u) == static_cast<unsigned>(g.splits) - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
#pragma unroll
    for (int q = 0; q < kV; ++q) v[q][0] = v[q][1] = v[q][2] = v[q][3] = 0.0f;
    rsv = 0.0f;
    for (int sp = 0; sp < g.splits; ++sp) {  // L2 reads (__ldcg): other blocks wrote them
#pragma unroll
      for (int q = 0; q < kV; ++q)
        if (out_in[q]) {
          const float4 o = __ldcg(reinterpret_cast<const float4*>(g.partial + (sp * g.M + m[q]) * g.N + n[q]));
          v[q][0] += o.x, v[q][1] += o.y, v[q][2] += o.z, v[q][3] += o.w;
        }
      if (row_in) rsv += __ldcg(g.partial + rows_at + sp * g.M + m0 + tid);
    }
    if (tid == 0) g.counters[tile] = 0u;  // ready for the next launch
  }
  // kExact: the bias too is added in fp64, before the one rounding (as the CPU reference does).
  const bool bias_now = kExact && g.splits == 1 && !g.accumulate && g.bias;
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (out_in[q]) {
      const int e = tid + q * kThreads, r = e / (kBN / 4), c = (e % (kBN / 4)) * 4;  // as above
      if (bias_now && m[q] < g.bias_rows)
#pragma unroll
        for (int u = 0; u < 4; ++u) v[q][u] += E == Epi::BiasRelu ? ex[c + u] : g.bias[n[q] + u];
      float4 o = make_float4(static_cast<float>(v[q][0]), static_cast<float>(v[q][1]), static_cast<float>(v[q][2]),
                             static_cast<float>(v[q][3]));
      if constexpr (E == Epi::Any) {
        if (vec_out) store_output4(g, m[q], n[q], o, !bias_now);
        else
          for (int u = 0; u < 4; ++u) store_output(g, m[q], n[q] + u, (&o.x)[u], !bias_now);
        continue;
      }
      float* x = &o.x;
      if constexpr (E == Epi::BiasRelu)
        for (int u = 0; u < 4; ++u) x[u] = act_forward<float>(Activation::ReLU, bias_now ? x[u] : x[u] + ex[c + u]);
      if constexpr (E == Epi::DactRelu)
        for (int u = 0; u < 4; ++u) x[u] *= act_derivative<float>(Activation::ReLU, ex[r * kBN + c + u], 0.0f);
      *reinterpret_cast<float4*>(g.C + m[q] * g.ldc + n[q]) = o;
    }
  if (row_in) store_rowsum(g, m0 + tid, static_cast<float>(rsv));
}

template <bool AK, bool BK, bool TC, Epi E>
__global__ void __launch_bounds__(Shape<AK, BK, 1, TC>::kThreads, 1) sliced_gemm_kernel(DenseGemm g, bool vec_out) {
  sliced_tile<AK, BK, 1, TC, E>(g, vec_out, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y));
}

// A layer's weight gradient w (dZ^T X: A m-fast, B n-fast) and input gradient x (dZ W: A k-fast,
// B n-fast) in one launch: its first w_blocks blocks take w's 64 x 64 tiles (times its k splits),
// the others x's. EW, EX: their epilogues (Any, or an MLP layer's Plain and DactRelu).
template <Epi EW, Epi EX>
__global__ void __launch_bounds__(Shape<false, false, 2>::kThreads, 1)
    sliced_pair_kernel(DenseGemm w, DenseGemm x, int w_blocks, bool w_vec, bool x_vec) {
  const int b = static_cast<int>(blockIdx.x);
  if (b < w_blocks) {
    const int t = static_cast<int>(sliced_tiles(w.M, w.N, kSlicedPairRows));
    sliced_tile<false, false, 2, false, EW>(w, w_vec, b % t, b / t);
  } else {
    const int t = static_cast<int>(sliced_tiles(x.M, x.N, kSlicedPairRows));
    sliced_tile<true, false, 2, false, EX>(x, x_vec, (b - w_blocks) % t, (b - w_blocks) / t);
  }
}

template <bool AK, bool BK, int RH, bool TC, Epi E>
constexpr size_t smem_bytes() {
  return sizeof(float) * (main_floats<AK, BK, RH, TC>() + epilogue_floats(E, Shape<AK, BK, RH, TC>::kRows));
}
template <Epi EW, Epi EX>
constexpr size_t kPairSmem = std::max(smem_bytes<false, false, 2, false, EW>(), smem_bytes<true, false, 2, false, EX>());

// > 48 KB of dynamic shared memory needs the opt-in, once per kernel.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <bool AK, bool BK, bool TC, Epi E>
void launch(const DenseGemm& g, cudaStream_t s) {
  static const bool attr = (allow_smem(sliced_gemm_kernel<AK, BK, TC, E>, smem_bytes<AK, BK, 1, TC, E>()), true);
  (void)attr;
  const dim3 grid(static_cast<unsigned>(sliced_tiles(g.M, g.N)), static_cast<unsigned>(g.splits));
  launch_pdl(sliced_gemm_kernel<AK, BK, TC, E>, grid, Shape<AK, BK, 1, TC>::kThreads, smem_bytes<AK, BK, 1, TC, E>(), s,
             g, output_vec4(g));
  KERNEL_LAUNCH_CHECK();
}
// Each layout is specialized for the epilogue its products usually have: a forward layer's
// BiasRelu, an input gradient's DactRelu (on the tensor cores: the 16-warp FMA kernel spilled 68
// bytes with it, and its 1024 x 256 x 256 product took 9.5 us against 8.9), a weight gradient's
// Plain.
template <bool TC>
void launch_single(const DenseGemm& g, cudaStream_t s) {
  const bool ak = g.sak == 1, bk = g.sbk == 1;
  const Epi e = epilogue_of(g);
  if (ak && bk) {
    if (e == Epi::BiasRelu) return launch<true, true, TC, Epi::BiasRelu>(g, s);
    return launch<true, true, TC, Epi::Any>(g, s);
  }
  if (ak) {
    if constexpr (TC)
      if (e == Epi::DactRelu) return launch<true, false, TC, Epi::DactRelu>(g, s);
    return launch<true, false, TC, Epi::Any>(g, s);
  }
  if (bk) return launch<false, true, TC, Epi::Any>(g, s);
  if (e == Epi::Plain) return launch<false, false, TC, Epi::Plain>(g, s);
  launch<false, false, TC, Epi::Any>(g, s);
}

}  // namespace

int64_t detail::sliced_smem_bytes() {
  // The largest of each layout's (the specialized epilogues' tiles only add to the Any one's): the
  // 16 warps' tiles of an m-fast A and k-fast B layout, rows padded to 68 floats; a paired
  // launch's two 64-row operand tiles.
  const size_t most = std::max({smem_bytes<true, true, 1, false, Epi::BiasRelu>(),
                                smem_bytes<true, false, 1, false, Epi::Any>(),
                                smem_bytes<false, true, 1, false, Epi::Any>(), smem_bytes<false, false, 1, false, Epi::Plain>(),
                                kPairSmem<Epi::Plain, Epi::DactRelu>, smem_bytes<true, true, 1, true, Epi::BiasRelu>(),
                                smem_bytes<true, false, 1, true, Epi::DactRelu>(), smem_bytes<false, true, 1, true, Epi::Any>(),
                                smem_bytes<false, false, 1, true, Epi::Plain>()});
  constexpr size_t kStatic = 16;  // the kernel's own flag, as ptxas reports it
  return static_cast<int64_t>(most + kStatic);
}

bool detail::sliced_layout(const DenseGemm& g) {
  const bool a_ok = g.sak == 1 ? g.sam % 4 == 0 : g.sam == 1 && g.sak % 4 == 0;
  const bool b_ok = g.sbk == 1 ? g.sbn % 4 == 0 : g.sbn == 1 && g.sbk % 4 == 0;
  const bool k_ok = g.K % 4 == 0 || (g.sak != 1 && g.sbk != 1);  // k-fast operands load float4 along k
  return a_ok && b_ok && k_ok && g.M % 4 == 0 && g.N % 4 == 0 && aligned16(g.A) && aligned16(g.B);
}

bool detail::sliced_pair_layout(const DenseGemm& w, const DenseGemm& x) {
  return w.sam == 1 && w.sbn == 1 && x.sak == 1 && x.sbn == 1 && sliced_layout(w) && sliced_layout(x);
}

void detail::launch_sliced_pair(const DenseGemm& w, const DenseGemm& x, cudaStream_t s) {
  SG_REQUIRE(!w.fp64_tc && !x.fp64_tc, "dense kernel: a pair runs on fp32 FMAs (sliced_pair clears fp64_tc)");
  const int64_t w_blocks = sliced_tiles(w.M, w.N, kSlicedPairRows) * w.splits;
  const int64_t blocks = w_blocks + sliced_tiles(x.M, x.N, kSlicedPairRows) * x.splits;
  auto go = [&](auto kernel, size_t smem) {
    launch_pdl(kernel, static_cast<unsigned>(blocks), Shape<false, false, 2>::kThreads, smem, s, w, x,
               static_cast<int>(w_blocks), output_vec4(w), output_vec4(x));
  };
  if (epilogue_of(w) == Epi::Plain && epilogue_of(x) == Epi::DactRelu) {  // an MLP layer's
    static const bool attr = (allow_smem(sliced_pair_kernel<Epi::Plain, Epi::DactRelu>, kPairSmem<Epi::Plain, Epi::DactRelu>), true);
    (void)attr;
    go(sliced_pair_kernel<Epi::Plain, Epi::DactRelu>, kPairSmem<Epi::Plain, Epi::DactRelu>);
  } else {
    static const bool attr = (allow_smem(sliced_pair_kernel<Epi::Any, Epi::Any>, kPairSmem<Epi::Any, Epi::Any>), true);
    (void)attr;
    go(sliced_pair_kernel<Epi::Any, Epi::Any>, kPairSmem<Epi::Any, Epi::Any>);
  }
  KERNEL_LAUNCH_CHECK();
}

void detail::launch_sliced(const DenseGemm& g, cudaStream_t s) {
  if (g.fp64_tc) launch_single<true>(g, s);
  else launch_single<false>(g, s);
}

bool sliced_fp64_tensor_cores() {
  static const bool on = [] {
    int dev = 0, major = 0;
    cudaFuncAttributes fa{};
    const bool ok = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaFuncGetAttributes(&fa, sliced_gemm_kernel<true, true, true, Epi::Any>) == cudaSuccess;
    if (!ok) cudaGetLastError();  // no device, or no code for it: the FFMA kernels
    // m16n8k8 .f64 needs sm_90 code; measured on Hopper only (a Blackwell's FP64 tensor rate is
    // below its fp32 FMA rate), so other generations keep the FMA kernels.
    return ok && major == 9 && fa.ptxVersion >= 90;
  }();
  return on;
}

}  // namespace sg::cuda
