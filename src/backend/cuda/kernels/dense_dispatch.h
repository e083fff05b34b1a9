// Which kernel takes a dense product: the rules as one table (shape ranges -> kernel, with the
// reason for each), the facts about the GPU they are sized by, and the k splits and tiles that
// follow. Decided once, when a step is planned; the launchers only carry the decision out.
//
// The kernels: dense_kernels.cu (tiles, split-k, the ordered sum of split partials),
// dense_sliced.cu (the k-sliced kernel and its pairs), dense_tc.cu (3xTF32), dense_wgrad.cu
// (batched weight gradients), skinny_dense.cu (layers of a few outputs); cuBLASLt
// (libs/cublaslt_gemm.cpp) takes what none of them does. The thresholds were measured on an H200
// (bench/RESULTS.md); grids are sized in waves of the device's own SM count.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/kernels/dense_kernels.cuh"

namespace sg::cuda {

// What the rules read about a GPU and the code built for it.
struct DenseDevice {
  int sms = 0;             // multiprocessors: grids are sized in waves of this many blocks
  int64_t smem_optin = 0;  // bytes of shared memory a block may opt into
  bool tf32_mma = false;   // TF32 mma.sync with code for it (tf32_tensor_cores: the 3xTF32 kernel)
  bool fp64_mma = false;   // FP64 mma.sync m16n8k8 with code for it (sliced_fp64_tensor_cores)
  // The current device's, read once per device. Throws sg::Error without a device.
  static const DenseDevice& current();
};

// A product C (M x N) = A (M x K) B (K x N). rows: the weight-gradient layout dZ^T X (A's m and
// B's n the unit strides), whose split products load whole row slabs as float4.
struct DenseShape {
  int64_t M = 0, N = 0, K = 0;
  bool rows = false;
};

// Ours (three families) or the library's.
enum class DenseKernel { Sliced, Tiles, SplitK, CublasLt };

struct DenseRule {
  DenseKernel kernel;
  const char* name;  // the product's class, named in explain
  const char* when;  // the shape range, in words
  const char* why;
  bool (*applies)(const DenseShape&, const DenseDevice&);
};

// The rules in order; the first that applies takes the product, and the last always applies.
const DenseRule* dense_rules(int* count);
const DenseRule& dense_rule(const DenseShape& s, const DenseDevice& d);
inline bool prefer_own_gemm(const DenseShape& s, const DenseDevice& d) {
  return dense_rule(s, d).kernel != DenseKernel::CublasLt;
}
// The device and the table, for explain.
std::string dense_rules_text(const DenseDevice& d);

// A layer of at most kSkinnyMax outputs over a few thousand rows or more (a network's last layer
// over a PINN's jet rows; W and the backward's per-warp sums in 48 KB of shared memory): the
// skinny kernels, forward and backward, instead of the products.
struct SkinnyRule {
  const char* when;
  const char* why;
};
inline constexpr SkinnyRule kSkinnyRule{"at most 4 outputs, 4096 rows or more, outputs x inputs <= 1024",
                                        "memory-bound: a warp per row beats a product plus a bias launch"};
bool skinny_dense(int64_t R, int64_t O, int64_t I);

// Medium products for the k-sliced kernel (the "medium" rule): 2^22 to 2^28 multiply-adds, k >=
// 256, one wave of 32 x 64 tiles (half the SMs to all, k split over at most 16 blocks where that
// gives more), and a device that gives a block the kernel's shared memory.
bool sliced_gemm(int64_t M, int64_t N, int64_t K, const DenseDevice& d);
// How many k-ranges our kernel splits the product into (1: none).
int own_gemm_splits(int64_t M, int64_t N, int64_t K, bool rows, bool tensor_cores, const DenseDevice& d);
// Whether this product runs on the 3xTF32 tensor-core kernel: tf32x3 set, operands that load as
// aligned 16-byte chunks (tc_operands), more than 256 outputs, and 64 x 64 tiles times k splits
// enough to give each SM a block.
bool own_gemm_tensor_cores(const DenseGemm& g, const DenseDevice& d);
// Whether this product runs on the k-sliced kernel (a medium shape whose operands load as float4).
bool own_gemm_sliced(const DenseGemm& g, const DenseDevice& d);
// Our kernel for a product the rules gave us, chosen once: its tf32x3 (where asked for and the
// tensor-core kernel takes it), splits, sliced and fp64_tc.
void plan_own_gemm(DenseGemm& g, bool tf32x3, const DenseDevice& d);
// Whether a layer's weight gradient w (dZ^T X) and input gradient x (dZ W), each planned for the
// k-sliced kernel, run as one launch instead of two: each on 64 x 64 tiles over about half the
// SMs, w's k split to fill its half. If so, sets their splits and `paired` and clears fp64_tc (a
// pair runs on fp32 FMAs); dense_gemm(w, &x) then launches both.
bool sliced_pair(DenseGemm& w, DenseGemm& x, const DenseDevice& d);
// Whether an M x N x K weight gradient may join a batched launch (wgrad_batch): a medium product
// whose rows load as 16-byte chunks, on a device with FP64 mma. Which runs of layers do is
// wgrad_groups' choice (none with LowerOptions::fusion off).
bool wgrad_batchable(int64_t M, int64_t N, int64_t K, const DenseDevice& d);
// The output tile the launcher uses, rows x columns (0 x 0: one thread per output, a split
// product onto at most 256 outputs).
GemmTile own_gemm_tile(const DenseGemm& a, const DenseGemm* b, const DenseDevice& d);

inline int64_t tiles(int64_t M, int64_t N, int t) { return ((M + t - 1) / t) * ((N + t - 1) / t); }
inline int64_t tiles(int64_t M, int64_t N, GemmTile t) { return ((M + t.rows - 1) / t.rows) * ((N + t.cols - 1) / t.cols); }
// Split products onto at most 256 outputs run on split_gemm_small_kernel.
inline bool small_output(int64_t M, int64_t N) { return M * N <= 256 && M <= 256; }
inline bool rows_layout(const DenseGemm& g) { return g.sam == 1 && g.sbn == 1; }
// The row-slab kernel's tile for a split weight gradient.
GemmTile rows_tile(int64_t M, int64_t N, int64_t K, const DenseDevice& d);

// What each kernel can load, defined beside it: the 3xTF32 kernel's operands (dense_tc.cu), the
// k-sliced kernel's operands and shared memory and a pair's layouts (dense_sliced.cu).
namespace detail {
constexpr int kTcTile = 64;
bool tc_operands(const DenseGemm& g);
bool sliced_layout(const DenseGemm& g);
bool sliced_pair_layout(const DenseGemm& w, const DenseGemm& x);
int64_t sliced_smem_bytes();
}  // namespace detail

}  // namespace sg::cuda
