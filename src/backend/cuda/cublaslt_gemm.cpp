#include "backend/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace sg::cuda {

const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "none";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_RELU_AUX: return "RELU_AUX";
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS: return "RELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DRELU: return "DRELU";
    case CUBLASLT_EPILOGUE_DRELU_BGRAD: return "DRELU_BGRAD";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: return "other";
  }
}

namespace {
bool uses_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DRELU || e == CUBLASLT_EPILOGUE_DRELU_BGRAD ||
         e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
bool uses_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
         e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DRELU_BGRAD || e == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
         e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
}  // namespace

std::unique_ptr<GemmPlan> GemmPlan::create(cublasLtHandle_t h, const GemmShape& s,
                                           cublasLtEpilogue_t epi, const GemmArgs& args,
                                           Precision precision, void* workspace,
                                           size_t workspace_bytes, std::string* why) {
  std::unique_ptr<GemmPlan> g(new GemmPlan());
  g->handle_ = h;
  g->shape_ = s;
  g->args_ = args;
  g->epi_ = epi;
  g->precision_ = precision;
  g->workspace_ = workspace;
  g->workspace_bytes_ = workspace_bytes;
  const cublasComputeType_t compute =
      precision == Precision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&g->desc_, compute, CUDA_R_32F));
  const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (uses_bias(epi)) {
    SG_ASSERT(args.bias != nullptr);
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &args.bias,
                                                sizeof(args.bias)));
  }
  if (uses_aux(epi)) {
    SG_ASSERT(args.aux != nullptr);
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                &args.aux, sizeof(args.aux)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                &args.aux_ld, sizeof(args.aux_ld)));
  }
  // Stored (not transposed) shapes of A and B.
  const uint64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const uint64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->la_, CUDA_R_32F, a_rows, a_cols, s.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->lb_, CUDA_R_32F, b_rows, b_cols, s.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->lc_, CUDA_R_32F, s.m, s.n, s.ldc));
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&g->pref_));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(g->pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, g->desc_, g->la_, g->lb_, g->lc_, g->lc_, g->pref_,
                                                     1, &r, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    if (why)
      *why = cat("cuBLASLt has no algorithm for epilogue ", epilogue_name(epi), " at m=", s.m, " n=", s.n,
                 " k=", s.k, " (", cublas_status_name(st), ")");
    return nullptr;
  }
  g->algo_ = r.algo;
  return g;
}

GemmPlan::~GemmPlan() {
  if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
  if (la_) cublasLtMatrixLayoutDestroy(la_);
  if (lb_) cublasLtMatrixLayoutDestroy(lb_);
  if (lc_) cublasLtMatrixLayoutDestroy(lc_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
}

void GemmPlan::run(cudaStream_t s) const {
  const float alpha = 1.0f, beta = args_.accumulate ? 1.0f : 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, desc_, &alpha, args_.A, la_, args_.B, lb_, &beta, args_.D, lc_,
                              args_.D, lc_, &algo_, workspace_, workspace_bytes_, s));
}

void GemmPlan::autotune(Autotune mode, cudaStream_t s) {
  if (mode == Autotune::Off) {
    tuning_ = "heuristic's first choice";
    return;
  }
  const int want = mode == Autotune::Exhaustive ? 32 : 4;
  std::vector<cublasLtMatmulHeuristicResult_t> cands(want);
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc_, la_, lb_, lc_, lc_, pref_, want, cands.data(), &found));
  if (found <= 1) {
    tuning_ = "one candidate";
    return;
  }
  // Scratch outputs: D, and the bias gradient / aux output where the epilogue writes them.
  const size_t d_bytes = static_cast<size_t>(shape_.ldc) * shape_.n * sizeof(float);
  const bool relu_mask = epi_ == CUBLASLT_EPILOGUE_RELU_AUX || epi_ == CUBLASLT_EPILOGUE_RELU_AUX_BIAS ||
                         epi_ == CUBLASLT_EPILOGUE_DRELU || epi_ == CUBLASLT_EPILOGUE_DRELU_BGRAD;
  // A relu mask holds one bit per element (aux_ld counts bits); a gelu aux one float.
  const size_t aux_bytes = !args_.aux ? 0
                           : relu_mask ? static_cast<size_t>(args_.aux_ld / 8) * shape_.n
                                       : static_cast<size_t>(args_.aux_ld) * shape_.n * sizeof(float);
  const size_t bias_bytes = static_cast<size_t>(std::max(shape_.m, shape_.n)) * sizeof(float);
  void *d = nullptr, *aux = nullptr, *bias = nullptr;
  CUDA_CHECK(cudaMalloc(&d, d_bytes));
  CUDA_CHECK(cudaMemset(d, 0, d_bytes));
  if (aux_bytes) {
    CUDA_CHECK(cudaMalloc(&aux, aux_bytes));
    // An input aux (backward epilogues) must hold what the forward wrote: copy the real one.
    CUDA_CHECK(cudaMemcpy(aux, args_.aux, aux_bytes, cudaMemcpyDeviceToDevice));
  }
  CUDA_CHECK(cudaMalloc(&bias, bias_bytes));
  if (args_.bias) CUDA_CHECK(cudaMemcpy(bias, args_.bias, std::min<size_t>(bias_bytes, static_cast<size_t>(shape_.m) * 4), cudaMemcpyDeviceToDevice));
  cublasLtMatmulDesc_t desc = desc_;
  if (uses_bias(epi_))
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (uses_aux(epi_))
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const float alpha = 1.0f, beta = args_.accumulate ? 1.0f : 0.0f;
  float best = 1e30f, worst = 0.0f;
  int best_i = -1;
  for (int i = 0; i < found; ++i) {
    if (cands[i].state != CUBLAS_STATUS_SUCCESS) continue;
    auto launch = [&] {
      return cublasLtMatmul(handle_, desc, &alpha, args_.A, la_, args_.B, lb_, &beta, d, lc_, d, lc_,
                            &cands[i].algo, workspace_, workspace_bytes_, s);
    };
    if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; skip algorithms that refuse
    constexpr int kReps = 5;
    CUDA_CHECK(cudaEventRecord(e0, s));
    for (int r = 0; r < kReps; ++r) CUBLAS_CHECK(launch());
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const float us = ms * 1000.0f / kReps;
    worst = std::max(worst, us);
    if (us < best) best = us, best_i = i;
  }
  // Restore the real pointers before anything runs for real.
  if (uses_bias(epi_))
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &args_.bias, sizeof(args_.bias)));
  if (uses_aux(epi_))
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &args_.aux, sizeof(args_.aux)));
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaFree(d));
  if (aux) CUDA_CHECK(cudaFree(aux));
  CUDA_CHECK(cudaFree(bias));
  if (best_i >= 0) {
    algo_ = cands[best_i].algo;
    tuning_ = cat("algo ", best_i + 1, " of ", found, " timed: fastest ", best, " us, slowest ", worst,
                  " us (spread ", worst / std::max(best, 1e-6f), "x)");
  } else {
    tuning_ = "no candidate ran; heuristic's first choice";
  }
}

std::string GemmPlan::describe() const {
  return cat(shape_.m, "x", shape_.n, "x", shape_.k, " ", precision_name(precision_), " epilogue ",
             epilogue_name(epi_), args_.accumulate ? " (+=)" : "", "; ", tuning_);
}

}  // namespace sg::cuda
