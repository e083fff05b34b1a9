// Our dense product kernels for one op: which kernel, its k splits and scratch, and the launch
// (one product, or two side by side).
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

bool Lowering::prefer_own(const char* what, int64_t M, int64_t N, int64_t K, bool rows) {
  const DenseShape shape{M, N, K, rows};  // named: gcc 13 takes a braced temporary for a dangling one
  const DenseRule& r = dense_rule(shape, dev_);
  notes_ << "[" << what << ": " << r.name << "] ";
  dense_rules_used_ = true;
  return r.kernel != DenseKernel::CublasLt;
}

void Lowering::plan_split(DenseGemm& d) {
  if (d.partial) return;  // planned already
  plan_own_gemm(d, tc_, dev_);
  own_scratch(d);
}

void Lowering::own_scratch(DenseGemm& d) {
  if (d.splits > 1)
    d.partial = reinterpret_cast<float*>(own(own_gemm_partial_floats(d.M, d.N, d.splits) * sizeof(float)));
  if (const int64_t c = own_gemm_counters(d); c > 0)  // zeroed when owned
    d.counters = reinterpret_cast<unsigned*>(own(static_cast<size_t>(c) * sizeof(unsigned)));
}

void Lowering::own_gemm(const Op& op, DenseGemm d, const DenseGemm* second, const std::string& what) {
  std::optional<DenseGemm> s2;
  if (second) s2 = *second;
  if (s2) {  // both products fresh: each kernel chosen once, then maybe one launch (sliced_pair)
    plan_own_gemm(d, tc_, dev_), plan_own_gemm(*s2, tc_, dev_);
    const bool paired = sliced_pair(d, *s2, dev_);
    own_scratch(d), own_scratch(*s2);
    if (paired) {
      notes_ << what << " " << d.M << "x" << d.N << "x" << d.K << " + " << s2->M << "x" << s2->N << "x" << s2->K
             << " on " << kSlicedPairRows << "x" << kSlicedCols << " tiles side by side (k-ranges of " << kSlicedDepth
             << " in shared memory, each row half's k over " << kSlicedPairWarps << " warps";
      for (const DenseGemm* g : {&d, &*s2})
        if (g->splits > 1) notes_ << "; " << g->M << "x" << g->N << "x" << g->K << " k split " << g->splits << " ways + ordered sum by each tile's last block";
      notes_ << "); ";
      add_step(op, [d, s2](cudaStream_t s) { dense_gemm(d, &*s2, s); });
      return;
    }
  } else {
    plan_split(d);  // planned already when a split pair comes back here one product at a time
  }
  if (s2 && (d.splits > 1 || s2->splits > 1)) {  // a split product runs in its own launches
    own_gemm(op, d, nullptr, what + " (1/2)");
    return own_gemm(op, *s2, nullptr, what + " (2/2)");
  }
  notes_ << what << " " << d.M << "x" << d.N << "x" << d.K;
  if (s2) notes_ << " + " << s2->M << "x" << s2->N << "x" << s2->K;
  const GemmTile tile = own_gemm_tile(d, s2 ? &*s2 : nullptr, dev_);
  notes_ << (!tile.rows ? std::string(", one thread per output")
             : tile.rows == tile.cols ? cat(" tile ", tile.rows) : cat(" tile ", tile.rows, "x", tile.cols));
  if (own_gemm_tensor_cores(d, dev_)) notes_ << ", 3xTF32 tensor cores";
  if (d.sliced)
    notes_ << ", k-ranges of " << kSlicedDepth << " in shared memory, "
           << (d.fp64_tc ? cat("on the FP64 tensor cores, 32x32 halves, k in ", kSlicedTcSlices, " slices")
                         : cat("k over ", sliced_warps(d.sak == 1, d.sbk == 1), " warps"));
  if (d.splits > 1) notes_ << ", k split " << d.splits << " ways + ordered sum" << (d.counters ? " by each tile's last block" : "");
  notes_ << "; ";
  add_step(op, [d, s2](cudaStream_t s) { dense_gemm(d, s2 ? &*s2 : nullptr, s); });
}

}  // namespace sg::cuda
