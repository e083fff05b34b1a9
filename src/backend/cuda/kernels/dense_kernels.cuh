// Our own fused matrix-product kernel for small and medium dense layers, where a library call's
// fixed cost (several microseconds per product, extra kernels for epilogues) dominates the
// arithmetic. One kernel covers the forward product and both backward products:
//   C[m, n] = sum_k A(m, k) B(k, n)   with A(m, k) = A[m*sam + k*sak], B(k, n) = B[k*sbk + n*sbn]
// and an epilogue per element: (+= old C) (+ bias[n]) (Z = v) (v = act(v)) (v *= dact'(y, z)),
// plus optional row sums of A over k (a bias gradient: dZ summed over the batch) computed by
// the CTAs of the first column tile, in a fixed order (deterministic, no atomics).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stepgraph/ir.h"

namespace sg::cuda {

struct DenseGemm {
  int64_t M = 0, N = 0, K = 0;
  const float* A = nullptr;
  int64_t sam = 0, sak = 0;
  const float* B = nullptr;
  int64_t sbk = 0, sbn = 0;
  float* C = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  const float* bias = nullptr;  // + bias[n], on rows m < bias_rows (a jet's value rows)
  int64_t bias_rows = INT64_MAX;
  float* Z = nullptr;           // pre-activation out, C's layout
  Activation act = Activation::None;
  // Multiply by the derivative of an activation evaluated at (dact_y, dact_z) (C's layout): the
  // previous layer's activation backward, fused into this layer's input-gradient product.
  Activation dact = Activation::None;
  const float* dact_y = nullptr;
  const float* dact_z = nullptr;
  float* rowsum = nullptr;  // rowsum[m] (+)= sum_{k < rowsum_k} A(m, k)
  int64_t rowsum_k = INT64_MAX;
  bool rowsum_accumulate = false;
  // Split-K (own_gemm_splits, dense_dispatch.h): `splits` blocks share each output tile, each over one range
  // of k, writing raw partial sums to `partial` ([splits][M][N], then [splits][M] row sums);
  // a second kernel adds them in split order (deterministic) and applies the epilogue.
  int splits = 1;
  float* partial = nullptr;
  // The k-sliced kernel (own_gemm_sliced) with splits: one zeroed counter per output tile
  // (own_gemm_counters), and its last block per tile adds the partials: no second kernel.
  unsigned* counters = nullptr;
  // Runs on the k-sliced kernel: own_gemm_sliced(), decided when the product is planned.
  bool sliced = false;
  // ... in one launch with the layer's other gradient product, on 64 x 64 tiles (sliced_pair).
  bool paired = false;
  // precision tf32x3: 3xTF32 on tensor cores where the layout allows (own_gemm_tensor_cores).
  bool tf32x3 = false;
  // The k-sliced kernel on the FP64 tensor cores (sliced_fp64_tensor_cores): every product of two
  // fp32 inputs exact in fp64 and summed in fp64 within a warp's k slice, decided when planned.
  bool fp64_tc = false;
};

// Which kernel takes a product, its k splits and its tile: dense_dispatch.h, decided once when a
// step is planned.
//
// The k-sliced kernel's shape (dense_sliced.cu): output tiles of kSlicedRows x kSlicedCols, each
// block staging up to kSlicedDepth values of k at once, its sliced_warps warps splitting them: 8
// where both operands have k as the unit stride (a forward product), else 16.
constexpr int kSlicedRows = 32, kSlicedCols = 64, kSlicedDepth = 256;
constexpr int sliced_warps(bool a_kfast, bool b_kfast) { return a_kfast && b_kfast ? 8 : 16; }
__host__ __device__ inline int64_t sliced_tiles(int64_t M, int64_t N, int rows = kSlicedRows) {
  return ((M + rows - 1) / rows) * ((N + kSlicedCols - 1) / kSlicedCols);
}
// A layer's two gradient products in one launch (sliced_pair): 64 x 64 tiles, each row half's k
// split over 8 warps.
constexpr int kSlicedPairRows = 64, kSlicedPairWarps = 8;
// On the FP64 tensor cores (sliced_fp64_tensor_cores) a block's 8 warps take the two 32 x 32
// halves of its tile, each half's k split into this many slices.
constexpr int kSlicedTcSlices = 4;
// Whether the k-sliced kernel's single products (not pairs) run on this device's FP64 tensor cores
// (mma.sync m16n8k8 .f64: compute capability 9.0 and code built for it)
// instead of fp32 FMAs: the fp32 inputs converted exactly, their products summed in fp64 along
// each warp's slice of k (a forward product's slices too, so that its outputs round like the CPU
// reference's double sums), so at least fp32's accuracy. On an H200 the FP64 tensor cores run
// 67 TFLOPS (the FMA units' peak) with a 32nd of the instructions. A pair runs on fp32 FMAs: on
// the FP64 tensor cores, 8 warps a block, it was slower (bench/RESULTS.md).
bool sliced_fp64_tensor_cores();
// A run of layers' weight gradients of one shape in one launch (dense_wgrad.cu): dw = dz^T x
// (dz [K][M] and x [K][N], row strides ldz and ldx; dw [M][N], row stride ldw) and, where db is
// set, db = dz's column sums, each written (not accumulated). 64 x 64 output tiles, each over the
// whole k, on the FP64 tensor cores (which products may: wgrad_batchable).
constexpr int kWgradTile = 64, kWgradMaxBatch = 8;
struct WgradItem {
  const float* dz = nullptr;
  const float* x = nullptr;
  float* dw = nullptr;
  float* db = nullptr;
};
struct WgradBatch {
  int64_t M = 0, N = 0, K = 0, ldz = 0, ldx = 0, ldw = 0;
  int count = 0;
  WgradItem item[kWgradMaxBatch];
};
void wgrad_batch(const WgradBatch& b, cudaStream_t s);
// Whether this device and build run TF32 mma (compute capability 8.0+, code built for it).
bool tf32_tensor_cores();
// Counters a split product on the k-sliced kernel takes (0: none; the ordered sum kernel then).
int64_t own_gemm_counters(const DenseGemm& g);
// Floats of scratch a split product needs (0 without splits).
int64_t own_gemm_partial_floats(int64_t M, int64_t N, int splits);
// An output tile, rows x columns (own_gemm_tile).
struct GemmTile {
  int rows = 0, cols = 0;
};
// One launch of a product planned by plan_own_gemm; with `second`, two independent products in
// the same launch.
void dense_gemm(const DenseGemm& g, const DenseGemm* second, cudaStream_t s);

// A skinny layer: at most kSkinnyMax outputs over R rows of I inputs (a network's last layer
// over a PINN's jet rows): memory-bound kernels instead of a library product + bias launch
// (forward) and product + split reduction (backward).
constexpr int kSkinnyMax = 4;
struct SkinnyDense {
  int64_t R = 0, I = 0, O = 0;
  const float* X = nullptr;  // [R, I]
  const float* W = nullptr;  // [O, I]
  // Forward: Y = act(X W^T + b on rows < bias_rows), Z (nullable) the pre-activation.
  const float* bias = nullptr;
  int64_t bias_rows = INT64_MAX;
  float* Y = nullptr;
  float* Z = nullptr;
  Activation act = Activation::None;
  // Backward from dZ [R, O]: dX = dZ W (nullable), dW = dZ^T X, db = dZ summed over rows <
  // bias_rows (nullable); each (+)= as its flag says.
  const float* dZ = nullptr;
  float *dX = nullptr, *dW = nullptr, *db = nullptr;
  bool dX_accumulate = false, dW_accumulate = false, db_accumulate = false;
};
void skinny_forward(const SkinnyDense& g, cudaStream_t s);
// Scratch floats skinny_backward needs (its blocks' partial sums).
int64_t skinny_backward_partial_floats(const SkinnyDense& g);
void skinny_backward(const SkinnyDense& g, float* partial, cudaStream_t s);

}  // namespace sg::cuda
