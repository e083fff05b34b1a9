// One cuBLASLt matrix product with a fixed shape, epilogue and fixed pointers: descriptors,
// layouts and the algorithm are built once (at lowering, before capture), never per step.
//
// All shapes here are cuBLASLt's column-major view: D[m, n] = op(A)[m, k] * op(B)[k, n] (+ C).
// A row-major [r, c] buffer is a column-major [c, r] matrix with leading dimension c.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "stepgraph/backend.h"

namespace sg::cuda {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  // Strided batches (a batched matmul): `batch` products, each operand `stride_*` floats after
  // the previous one. Batched plans run the heuristic's algorithm (no autotune, no 3xTF32).
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

struct GemmArgs {
  const float* A = nullptr;
  const float* B = nullptr;
  float* D = nullptr;
  void* bias = nullptr;   // bias (forward) or bias gradient (BGRAD epilogues)
  void* aux = nullptr;    // relu bit-mask or gelu pre-activation
  int64_t aux_ld = 0;
  bool accumulate = false;  // D += product (beta = 1)
};

class Tf32x3Gemm;  // tf32x3_gemm.h

class GemmPlan {
 public:
  // Returns nullptr and sets *why when cuBLASLt has no algorithm for this epilogue and shape
  // (the caller then falls back to plain products and its own kernels).
  static std::unique_ptr<GemmPlan> create(cublasLtHandle_t h, const GemmShape& s,
                                          cublasLtEpilogue_t epi, const GemmArgs& args,
                                          Precision precision, void* workspace,
                                          size_t workspace_bytes, std::string* why);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  // Times the heuristic's candidates (top 4, or all for exhaustive) on scratch outputs and keeps
  // the fastest. Inputs are read from the real buffers; nothing the step uses is written. At
  // Precision::TF32X3 a plain product's candidates include the 3xTF32 kernels (tf32x3_gemm.h),
  // and without autotuning the first of those runs.
  void autotune(Autotune mode, cudaStream_t s);
  void run(cudaStream_t s) const;
  std::string describe() const;  // "m x n x k, epilogue, algo i of N (fastest x us, slowest y us)"

 private:
  GemmPlan() = default;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  // 3xTF32 kernels for this product (TF32X3, plain epilogue), and the one that runs (or none:
  // cuBLASLt's algo_).
  std::vector<std::unique_ptr<Tf32x3Gemm>> tf32x3_;
  int tf32x3_choice_ = -1;
  std::string tf32x3_why_;
  GemmShape shape_;
  GemmArgs args_;
  cublasLtEpilogue_t epi_ = CUBLASLT_EPILOGUE_DEFAULT;
  Precision precision_ = Precision::FP32;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::string tuning_;  // what autotune saw
};

const char* epilogue_name(cublasLtEpilogue_t e);

}  // namespace sg::cuda
