#include "backend/cuda/libs/cublaslt_gemm.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/tf32x3_gemm.h"

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

// Every configuration cuBLASLt accepts for this product, beyond the heuristic's list: each
// algorithm id with each of its tile shapes and stage counts, unsplit or split along k (2 to 32
// parts) with the reduction schemes that sum the parts in a fixed order (in place with
// counters, or in the workspace). Small products such as 1024 x 256 x 256 fill only a few of
// the GPU's multiprocessors with the heuristic's large tiles; smaller tiles or a split k fill
// them all. Checked with cublasLtMatmulAlgoCheck (workspace within the limit), at most `cap`.
std::vector<cublasLtMatmulAlgo_t> enumerate_configs(cublasLtHandle_t h, cublasComputeType_t compute,
                                                    cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                                    cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                                                    size_t workspace_bytes, size_t cap) {
  std::vector<cublasLtMatmulAlgo_t> out;
  int ids[256], n_ids = 0;
  if (cublasLtMatmulAlgoGetIds(h, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 256, ids,
                               &n_ids) != CUBLAS_STATUS_SUCCESS)
    return out;
  auto list_attr = [](const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
    size_t bytes = 0;
    std::vector<uint32_t> v;
    if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
      return v;
    v.resize(bytes / sizeof(uint32_t));
    if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, v.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS) v.clear();
    return v;
  };
  for (int i = 0; i < n_ids && out.size() < cap; ++i) {
    cublasLtMatmulAlgo_t base{};
    if (cublasLtMatmulAlgoInit(h, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, ids[i],
                               &base) != CUBLAS_STATUS_SUCCESS)
      continue;
    std::vector<uint32_t> tiles = list_attr(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    std::vector<uint32_t> stages = list_attr(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
    if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
    int32_t splitk_ok = 0;
    uint32_t schemes = 0;
    size_t w = 0;
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_ok, sizeof(splitk_ok), &w);
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes), &w);
    std::vector<std::pair<uint32_t, uint32_t>> splits = {{1, CUBLASLT_REDUCTION_SCHEME_NONE}};
    if (splitk_ok)
      for (uint32_t k : {2u, 4u, 8u, 16u, 32u})
        for (uint32_t sch : {uint32_t{CUBLASLT_REDUCTION_SCHEME_INPLACE}, uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE}})
          if (schemes & sch) splits.emplace_back(k, sch);
    for (uint32_t tile : tiles)
      for (uint32_t stage : stages)
        for (auto [k, sch] : splits) {
          if (out.size() >= cap) return out;
          cublasLtMatmulAlgo_t a = base;
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile));
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof(stage));
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &k, sizeof(k));
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &sch, sizeof(sch));
          cublasLtMatmulHeuristicResult_t r{};
          if (cublasLtMatmulAlgoCheck(h, desc, la, lb, lc, lc, &a, &r) == CUBLAS_STATUS_SUCCESS &&
              r.workspaceSize <= workspace_bytes)
            out.push_back(a);
        }
  }
  return out;
}

// The algorithm autotuning chose for each product of this process, so every trainer of one
// process (eager next to graph, `--mode verify`) runs the same one and rounds alike.
struct TunedKey {
  GemmShape s;
  int epi, precision, mode;
  bool accumulate;
  auto tie() const {
    return std::make_tuple(s.trans_a, s.trans_b, s.m, s.n, s.k, s.lda, s.ldb, s.ldc, epi, precision, mode, accumulate);
  }
  bool operator<(const TunedKey& o) const { return tie() < o.tie(); }
};
struct Tuned {
  cublasLtMatmulAlgo_t algo;
  std::string tf32x3;  // the 3xTF32 kernel chosen (its name), or "": algo
  std::string note;
};
std::mutex g_tuned_mutex;
std::map<TunedKey, Tuned>& tuned_algos() {
  static std::map<TunedKey, Tuned> m;
  return m;
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
  if (s.batch > 1) {
    const int32_t count = static_cast<int32_t>(s.batch);
    const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {{g->la_, s.stride_a}, {g->lb_, s.stride_b},
                                                                  {g->lc_, s.stride_c}};
    for (const auto& l : layouts) {
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l.first, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l.first, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.second,
                                                    sizeof(l.second)));
    }
  }
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
  if (precision == Precision::TF32X3 && s.batch > 1) {
    g->tf32x3_why_ = "tf32x3: batched products run on cuBLASLt fp32";
  } else if (precision == Precision::TF32X3 && epi == CUBLASLT_EPILOGUE_DEFAULT) {
    for (int c = 0; c < tf32x3_configs(); ++c) {
      std::string no;
      if (auto k = make_tf32x3_gemm(s, args, c, &no)) g->tf32x3_.push_back(std::move(k));
      else if (g->tf32x3_why_.empty()) g->tf32x3_why_ = no;
    }
    if (tf32x3_configs() == 0) make_tf32x3_gemm(s, args, 0, &g->tf32x3_why_);
  } else if (precision == Precision::TF32X3) {
    g->tf32x3_why_ = cat("tf32x3: the ", epilogue_name(epi), " epilogue runs on cuBLASLt fp32");
  }
  if (!g->tf32x3_.empty()) g->tf32x3_choice_ = 0;  // autotune may prefer cuBLASLt
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
  if (tf32x3_choice_ >= 0) return tf32x3_[tf32x3_choice_]->run(s);
  const float alpha = 1.0f, beta = args_.accumulate ? 1.0f : 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, desc_, &alpha, args_.A, la_, args_.B, lb_, &beta, args_.D, lc_,
                              args_.D, lc_, &algo_, workspace_, workspace_bytes_, s));
}

void GemmPlan::autotune(Autotune mode, cudaStream_t s) {
  if (mode == Autotune::Off || shape_.batch > 1) {
    tuning_ = tf32x3_choice_ >= 0 ? cat(tf32x3_[tf32x3_choice_]->name(), " (autotune off: the first 3xTF32 kernel)")
                                  : std::string(shape_.batch > 1 && mode != Autotune::Off
                                                    ? "heuristic's first choice (batched products are not autotuned)"
                                                    : "heuristic's first choice");
    if (!tf32x3_why_.empty()) tuning_ += cat(" [", tf32x3_why_, "]");
    return;
  }
  const TunedKey key{shape_, static_cast<int>(epi_), static_cast<int>(precision_), static_cast<int>(mode),
                     args_.accumulate};
  {
    std::lock_guard<std::mutex> lock(g_tuned_mutex);
    auto it = tuned_algos().find(key);
    if (it != tuned_algos().end()) {
      algo_ = it->second.algo;
      tf32x3_choice_ = -1;
      for (size_t c = 0; c < tf32x3_.size(); ++c)
        if (tf32x3_[c]->name() == it->second.tf32x3) tf32x3_choice_ = static_cast<int>(c);
      tuning_ = it->second.note + " (timed earlier in this process)";
      return;
    }
  }
  // Candidates: the heuristic's list (top 4, or up to 32), and for exhaustive every
  // configuration cuBLASLt accepts (enumerate_configs).
  const int want = mode == Autotune::Exhaustive ? 32 : 4;
  std::vector<cublasLtMatmulHeuristicResult_t> heur(want);
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc_, la_, lb_, lc_, lc_, pref_, want, heur.data(), &found));
  std::vector<cublasLtMatmulAlgo_t> cands;
  for (int i = 0; i < found; ++i)
    if (heur[i].state == CUBLAS_STATUS_SUCCESS) cands.push_back(heur[i].algo);
  const size_t n_heuristic = cands.size();
  if (mode == Autotune::Exhaustive) {
    const cublasComputeType_t compute =
        precision_ == Precision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    for (const auto& a : enumerate_configs(handle_, compute, desc_, la_, lb_, lc_, workspace_bytes_, 4000))
      cands.push_back(a);
  }
  if (cands.size() <= 1 && tf32x3_.empty()) {
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
  auto launch = [&](const cublasLtMatmulAlgo_t& a) {
    return cublasLtMatmul(handle_, desc, &alpha, args_.A, la_, args_.B, lb_, &beta, d, lc_, d, lc_, &a,
                          workspace_, workspace_bytes_, s);
  };
  // Microseconds per run of `reps` runs between events, or a negative value when it refuses.
  auto time_one = [&](const cublasLtMatmulAlgo_t& a, int reps) -> float {
    if (launch(a) != CUBLAS_STATUS_SUCCESS) return -1.0f;  // warm-up; skip algorithms that refuse
    CUDA_CHECK(cudaEventRecord(e0, s));
    for (int r = 0; r < reps; ++r) CUBLAS_CHECK(launch(a));
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 1000.0f / reps;
  };
  // A first pass of 3 runs each over every candidate; the 8 fastest are timed again (median of
  // 5 samples of 5 runs) and the fastest of those is kept.
  std::vector<std::pair<float, size_t>> first;
  float worst = 0.0f;
  for (size_t i = 0; i < cands.size(); ++i) {
    const float us = time_one(cands[i], 3);
    if (us < 0) continue;
    first.emplace_back(us, i);
    worst = std::max(worst, us);
  }
  std::sort(first.begin(), first.end());
  float best = 1e30f;
  size_t best_i = cands.size();
  for (size_t j = 0; j < first.size() && j < 8; ++j) {
    float samples[5];
    for (float& x : samples) x = time_one(cands[first[j].second], 5);
    std::sort(samples, samples + 5);
    if (samples[2] < best) best = samples[2], best_i = first[j].second;
  }
  // The 3xTF32 kernels, timed the same way (median of 5 samples of 5 runs) into the scratch D.
  int tf32x3_best = -1;
  float tf32x3_us = 0.0f;
  for (size_t c = 0; c < tf32x3_.size(); ++c) {
    auto run_k = [&](int reps) {
      for (int r = 0; r < reps; ++r) tf32x3_[c]->run(s, static_cast<float*>(d));
    };
    run_k(1);
    float samples[5];
    for (float& x : samples) {
      CUDA_CHECK(cudaEventRecord(e0, s));
      run_k(5);
      CUDA_CHECK(cudaEventRecord(e1, s));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      x = ms * 1000.0f / 5;
    }
    std::sort(samples, samples + 5);
    worst = std::max(worst, samples[2]);
    if (samples[2] < best) best = samples[2], tf32x3_best = static_cast<int>(c), tf32x3_us = samples[2];
  }
  tf32x3_choice_ = tf32x3_best;
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
  if (tf32x3_choice_ >= 0) {
    if (best_i < cands.size()) algo_ = cands[best_i];
    tuning_ = cat(tf32x3_[tf32x3_choice_]->name(), ": ", tf32x3_us, " us, fastest of ", tf32x3_.size(),
                  " 3xTF32 kernels and ", first.size(), " cuBLASLt fp32 candidates (slowest ", worst, " us)");
  } else if (best_i < cands.size()) {
    algo_ = cands[best_i];
    int32_t id = 0;
    uint32_t tile = 0, splitk = 1;
    size_t w = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
    tuning_ = cat(best_i < n_heuristic ? cat("heuristic's choice ", best_i + 1) : std::string("enumerated config"),
                  " (algo id ", id, ", tile id ", tile, ", split k ", splitk, ") of ", first.size(), " timed (",
                  n_heuristic, " from the heuristic): fastest ", best, " us, slowest ", worst, " us (spread ",
                  worst / std::max(best, 1e-6f), "x)");
  } else {
    tuning_ = "no candidate ran; heuristic's first choice";
  }
  if (!tf32x3_.empty() && tf32x3_choice_ < 0) tuning_ += "; cuBLASLt fp32 beat the 3xTF32 kernels";
  if (!tf32x3_why_.empty()) tuning_ += cat(" [", tf32x3_why_, "]");
  std::lock_guard<std::mutex> lock(g_tuned_mutex);
  tuned_algos().emplace(key, Tuned{algo_, tf32x3_choice_ >= 0 ? tf32x3_[tf32x3_choice_]->name() : "", tuning_});
}

std::string GemmPlan::describe() const {
  return cat(shape_.batch > 1 ? cat(shape_.batch, " x ") : std::string(), shape_.m, "x", shape_.n, "x", shape_.k, " ", precision_name(precision_), " epilogue ",
             epilogue_name(epi_), args_.accumulate ? " (+=)" : "", "; ", tuning_);
}

}  // namespace sg::cuda
