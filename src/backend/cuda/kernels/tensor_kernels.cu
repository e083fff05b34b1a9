// The tensor ops' kernels and launchers (tensor_kernels.cuh).
#include "backend/cuda/kernels/tensor_kernels.cuh"

#include "backend/activation_math.h"
#include "backend/dropout_math.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/grid.cuh"
#include "backend/cuda/kernels/reduce.cuh"
#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;
constexpr int kPiecesPerLaunch = 8;

__global__ void binary_kernel(BinaryOp op, const float* A, const float* B, float* Y, Broadcast g) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(p, g.count) {
    int64_t ia, ib;
    broadcast_offsets(g, p, &ia, &ib);
    Y[p] = binary_forward<float>(op, A[ia], B[ib]);
  }
}

// Thread t: element j = t % count of X, chunk c = t / count of its terms (neighbouring threads
// take neighbouring elements, so kept inner axes read coalesced).
__global__ void reduce_terms_kernel(BinaryOp op, bool x_is_a, const float* dY, const float* A, const float* B,
                                    float* X, BroadcastReduce g, float scale, bool acc, float* partials,
                                    int64_t per_chunk, int chunks) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(t, g.count * chunks) {
    const int64_t j = t % g.count, c = t / g.count;
    int64_t y0, a0, b0;
    reduce_base(g, j, &y0, &a0, &b0);
    const int64_t r1 = (c + 1) * per_chunk < g.reduced ? (c + 1) * per_chunk : g.reduced;
    float s = 0.0f;
    for (int64_t r = c * per_chunk; r < r1; ++r) {
      int64_t y, a, b;
      reduce_step(g, r, &y, &a, &b);
      const float dy = dY[y0 + y], av = A ? A[a0 + a] : 0.0f, bv = B ? B[b0 + b] : 0.0f;
      s += x_is_a ? binary_grad_a<float>(op, dy, av, bv) : binary_grad_b<float>(op, dy, av, bv);
    }
    if (chunks == 1) X[j] = acc ? X[j] + scale * s : scale * s;
    else partials[c * g.count + j] = s;
  }
}

// One warp per (element, chunk), for terms contiguous in Y (the innermost axis reduced: a row
// sum): lane l takes terms l, l + 32, ..., then a shuffle sum in a fixed order, so reads are
// coalesced and the result is the same on every run.
__global__ void reduce_terms_warp_kernel(BinaryOp op, bool x_is_a, const float* dY, const float* A, const float* B,
                                         float* X, BroadcastReduce g, float scale, bool acc, float* partials,
                                         int64_t per_chunk, int chunks) {
  PDL_PROLOGUE();
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  // w is the same in every lane of a warp, so the whole warp reaches the shuffles together.
  for (int64_t w = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5; w < g.count * chunks; w += warps) {
    const int64_t j = w % g.count, c = w / g.count;
    int64_t y0, a0, b0;
    reduce_base(g, j, &y0, &a0, &b0);
    const int64_t r1 = (c + 1) * per_chunk < g.reduced ? (c + 1) * per_chunk : g.reduced;
    float s = 0.0f;
    for (int64_t r = c * per_chunk + lane; r < r1; r += 32) {
      int64_t y, a, b;
      reduce_step(g, r, &y, &a, &b);
      const float dy = dY[y0 + y], av = A ? A[a0 + a] : 0.0f, bv = B ? B[b0 + b] : 0.0f;
      s += x_is_a ? binary_grad_a<float>(op, dy, av, bv) : binary_grad_b<float>(op, dy, av, bv);
    }
    s = warp_sum(s);
    if (lane != 0) continue;
    if (chunks == 1) X[j] = acc ? X[j] + scale * s : scale * s;
    else partials[c * g.count + j] = s;
  }
}

// The chunks' partial sums in chunk order.
__global__ void reduce_chunks_kernel(const float* partials, float* X, int64_t count, int chunks, float scale, bool acc) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(j, count) {
    float s = 0.0f;
    for (int c = 0; c < chunks; ++c) s += partials[c * count + j];
    X[j] = acc ? X[j] + scale * s : scale * s;
  }
}

__global__ void expand_kernel(const float* A, float* Y, Broadcast g, float scale, bool acc) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(p, g.count) {
    int64_t ia, ib;
    broadcast_offsets(g, p, &ia, &ib);
    const float v = scale * A[ia];
    Y[p] = acc ? Y[p] + v : v;
  }
}

__global__ void scale_shift_kernel(const float* X, float* Y, int64_t n, float a, float b, bool acc) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(k, n) {
    const float v = fmaf(a, X[k], b);
    Y[k] = acc ? Y[k] + v : v;
  }
}

__global__ void activation_kernel(const float* X, float* Y, int64_t n, Activation act, float p) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(k, n) Y[k] = act_forward<float>(act, X[k], p);
}

__global__ void dropout_kernel(const float* X, float* Y, int64_t n, uint32_t threshold, float scale, uint64_t key,
                               const int32_t* step, bool acc) {
  PDL_PROLOGUE();
  const int32_t s = *step;
  SG_GRID_STRIDE(k, n) {
    // Multiplied as the CPU reference does (X * scale, rounded once), so both agree bitwise.
    const float v = dropout_keep(key, s, k, threshold) ? X[k] * scale : 0.0f;
    Y[k] = acc ? Y[k] + v : v;
  }
}

__global__ void activation_backward_kernel(const float* dY, const float* X, const float* Y, float* dX, int64_t n,
                                           Activation act, float p, bool acc) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(k, n) {
    const float v = dY[k] * act_derivative<float>(act, Y[k], X[k], p);
    dX[k] = acc ? dX[k] + v : v;
  }
}

// Up to kPiecesPerLaunch pieces; element e of the launch is in the piece whose [start, end) holds it.
struct PieceGroup {
  Piece piece[kPiecesPerLaunch];
  int64_t start[kPiecesPerLaunch + 1];
  int n = 0;
  int64_t rows = 0;
};

__global__ void copy_pieces_kernel(PieceGroup g) {
  PDL_PROLOGUE();
  SG_GRID_STRIDE(e, g.start[g.n]) {
    int k = 0;
    while (e >= g.start[k + 1]) ++k;
    const Piece& c = g.piece[k];
    const int64_t local = e - g.start[k], r = local / c.w, col = local - r * c.w;
    const float v = c.src ? c.src[r * c.src_ld + col] : 0.0f;
    float* d = c.dst + r * c.dst_ld + col;
    *d = c.acc ? *d + v : v;
  }
}

}  // namespace

void binary(BinaryOp op, const float* A, const float* B, float* Y, const Broadcast& g, cudaStream_t s) {
  launch_pdl(binary_kernel, grid_for(g.count), kBlock, 0, s, op, A, B, Y, g);
  KERNEL_LAUNCH_CHECK();
}

int reduce_chunks(const BroadcastReduce& g) {
  // Enough threads to fill the GPU (~64K), each over at least 256 terms, at most 1024 chunks.
  if (g.reduced < 512) return 1;
  const int64_t want = (65536 + g.count - 1) / g.count, most = g.reduced / 256;
  const int64_t c = want < most ? want : most;
  return static_cast<int>(c < 1 ? 1 : c > 1024 ? 1024 : c);
}

void reduce_terms(BinaryOp op, bool x_is_a, const float* dY, const float* A, const float* B, float* X,
                  const BroadcastReduce& g, float scale, bool acc, float* scratch, cudaStream_t s) {
  const int chunks = reduce_chunks(g);
  SG_REQUIRE(chunks == 1 || scratch != nullptr, "reduction of ", g.reduced, " terms onto ", g.count,
             " elements in ", chunks, " chunks: scratch needed");
  const int64_t per_chunk = (g.reduced + chunks - 1) / chunks;
  // Terms along Y's innermost axis: a warp per element reads them coalesced.
  const bool warp = g.red > 0 && g.ry[g.red - 1] == 1 && per_chunk >= 32;
  if (warp)
    launch_pdl(reduce_terms_warp_kernel, grid_for(g.count * chunks * 32), kBlock, 0, s, op, x_is_a, dY, A, B, X, g,
               scale, acc, scratch, per_chunk, chunks);
  else
    launch_pdl(reduce_terms_kernel, grid_for(g.count * chunks), kBlock, 0, s, op, x_is_a, dY, A, B, X, g, scale, acc,
               scratch, per_chunk, chunks);
  KERNEL_LAUNCH_CHECK();
  if (chunks == 1) return;
  launch_pdl(reduce_chunks_kernel, grid_for(g.count), kBlock, 0, s, static_cast<const float*>(scratch), X, g.count,
             chunks, scale, acc);
  KERNEL_LAUNCH_CHECK();
}

void expand(const float* A, float* Y, const Broadcast& g, float scale, bool acc, cudaStream_t s) {
  launch_pdl(expand_kernel, grid_for(g.count), kBlock, 0, s, A, Y, g, scale, acc);
  KERNEL_LAUNCH_CHECK();
}

void scale_shift(const float* X, float* Y, int64_t n, float a, float b, bool acc, cudaStream_t s) {
  launch_pdl(scale_shift_kernel, grid_for(n), kBlock, 0, s, X, Y, n, a, b, acc);
  KERNEL_LAUNCH_CHECK();
}

void dropout(const float* X, float* Y, int64_t n, uint32_t threshold, float scale, uint64_t key, const int32_t* step,
             bool acc, cudaStream_t s) {
  launch_pdl(dropout_kernel, grid_for(n), kBlock, 0, s, X, Y, n, threshold, scale, key, step, acc);
  KERNEL_LAUNCH_CHECK();
}

void activation(const float* X, float* Y, int64_t n, Activation act, float p, cudaStream_t s) {
  launch_pdl(activation_kernel, grid_for(n), kBlock, 0, s, X, Y, n, act, p);
  KERNEL_LAUNCH_CHECK();
}

void activation_backward(const float* dY, const float* X, const float* Y, float* dX, int64_t n, Activation act,
                         float p, bool acc, cudaStream_t s) {
  launch_pdl(activation_backward_kernel, grid_for(n), kBlock, 0, s, dY, X, Y, dX, n, act, p, acc);
  KERNEL_LAUNCH_CHECK();
}

// A piece whose destination an earlier piece of the launch writes (a split into one tensor twice,
// the second adding) waits for the next launch, so the two never race.
void copy_pieces(const Pieces& pieces, cudaStream_t s) {
  for (size_t first = 0; first < pieces.list.size();) {
    PieceGroup g;
    g.rows = pieces.rows;
    g.start[0] = 0;
    for (; first < pieces.list.size() && g.n < kPiecesPerLaunch; ++first, ++g.n) {
      const Piece& c = pieces.list[first];
      bool clash = false;
      for (int k = 0; k < g.n; ++k) clash = clash || g.piece[k].dst == c.dst;
      if (clash) break;
      g.piece[g.n] = c;
      g.start[g.n + 1] = g.start[g.n] + pieces.rows * c.w;
    }
    launch_pdl(copy_pieces_kernel, grid_for(g.start[g.n]), kBlock, 0, s, g);
    KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace sg::cuda
