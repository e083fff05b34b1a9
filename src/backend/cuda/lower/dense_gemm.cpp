// Our dense product kernels for one op: which kernel, its k splits and scratch, and the launch
// (one product, or two side by side).
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

void Lowering::plan_split(DenseGemm& d) {
  if (d.partial) return;  // planned already
  choose_kernel(d);
  own_scratch(d);
}

void Lowering::choose_kernel(DenseGemm& d) {
  const bool rows = d.sam == 1 && d.sbn == 1;
  d.tf32x3 = tc_;
  d.splits = own_gemm_splits(d.M, d.N, d.K, rows, d.tf32x3);
  if (d.tf32x3 && !own_gemm_tensor_cores(d)) {  // not on tensor cores: the SIMT kernel's splits
    d.tf32x3 = false;
    d.splits = own_gemm_splits(d.M, d.N, d.K, rows);
  }
  d.sliced = own_gemm_sliced(d);  // the kernel is chosen here, once, not at each launch
  d.fp64_tc = d.sliced && sliced_fp64_tensor_cores();
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
    choose_kernel(d), choose_kernel(*s2);
    const bool paired = sliced_pair(d, *s2);
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
  const GemmTile tile = own_gemm_tile(d, s2 ? &*s2 : nullptr);
  notes_ << (!tile.rows ? std::string(", one thread per output")
             : tile.rows == tile.cols ? cat(" tile ", tile.rows) : cat(" tile ", tile.rows, "x", tile.cols));
  if (own_gemm_tensor_cores(d)) notes_ << ", 3xTF32 tensor cores";
  if (d.sliced)
    notes_ << ", k-ranges of " << kSlicedDepth << " in shared memory, "
           << (d.fp64_tc ? cat("on the FP64 tensor cores, 32x32 halves, k in ", kSlicedTcSlices, " slices")
                         : cat("k over ", sliced_warps(d.sak == 1, d.sbk == 1), " warps"));
  if (d.splits > 1) notes_ << ", k split " << d.splits << " ways + ordered sum" << (d.counters ? " by each tile's last block" : "");
  notes_ << "; ";
  add_step(op, [d, s2](cudaStream_t s) { dense_gemm(d, s2 ? &*s2 : nullptr, s); });
}

}  // namespace sg::cuda
