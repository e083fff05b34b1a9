// Losses: one fused loss + gradient kernel each, softmax cross-entropy with the last dense layer
// in the same launch where it fits.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

FusedInputGrad Lowering::loss_input_gradient(int i, const Op& loss, const Op& d) {
  const auto& ops = p_.ops();
  const size_t j = static_cast<size_t>(i) + 1;
  if (!fuse_ || j >= ops.size()) return {};
  const Op& bw = ops[j];
  if (bw.kind != OpKind::DenseBackward || bw.in[0] != loss.out[1] || bw.in[1] != d.in[0] || bw.in[2] != d.in[1] ||
      bw.out[0] == kNone || bw.accumulate[0] != 0)
    return {};
  const int64_t B = rows(d.in[0]), I = width(d.in[0]), O = dim(d.in[1], 0);
  const bool one_launch =
      prefer_own_gemm(O, I, B, true) && own_gemm_splits(O, I, B, true) == 1 && prefer_own_gemm(B, I, O);
  if (one_launch || skinny_dense(B, O, I) || !early_write_refusal(i, static_cast<int>(j)).empty()) return {};
  FusedInputGrad g;
  g.dX = f(bw.out[0]);
  std::string also;
  if (auto fuse = fusions_.into.find(static_cast<int>(j)); fuse != fusions_.into.end()) {
    const Op& q = ops[fuse->second];
    g.dact = q.attr<DenseAttrs>().act, g.y = f(q.in[3]), g.z = f(q.in[4]);
    dz_ready_.insert(fuse->second);
    also = cat(", times the ", activation_name(g.dact), "' of '", q.name, "'");
  }
  loss_dx_.insert(static_cast<int>(j));
  notes_ << ", and '" << bw.name << "''s dX (" << B << "x" << I << "x" << O << also << ")";
  return g;
}

void Lowering::loss_op(int i, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  const bool ce = op.kind == OpKind::SoftmaxCrossEntropy;
  // Cross-entropy: logits [B, ..., C] with per_row labels per batch row (tokens of a
  // sequence); MSE: T values per batch row.
  const int64_t B = dim(in[0], 0), T = count(in[0]) / B;
  const int64_t C = p_.tensor(in[0]).shape.back(), per_row = ce ? count(in[1]) / B : 1;
  const bool ignore = ce && op.attr<LossAttrs>().ignore_negative;
  const int blocks = ce ? softmax_ce_blocks(B * per_row) : mse_blocks(B * T);
  ReduceScratch sc{reinterpret_cast<float*>(own(blocks * sizeof(float))),
                   reinterpret_cast<unsigned*>(own(sizeof(unsigned))), blocks};
  const bool count_first = ignore && !softmax_ce_counts_in_block(B * per_row);
  if (count_first) sc.count = reinterpret_cast<int32_t*>(own(sizeof(int32_t)));
  const float* pred = f(in[0]);
  const int32_t* valid = i32(in[2]);
  float *loss = f(out[0]), *dpred = f(out[1]);
  const Reduction r = op.attr<LossAttrs>().reduction;
  if (count_first) notes_ << "target-count kernel (labels < 0 have none) + ";
  else if (ignore) notes_ << "labels < 0 have no target (counted in each block); ";
  notes_ << "fused loss + gradient kernel, " << blocks << " blocks, deterministic reduction";
  if (ce) {
    const int32_t* labels = i32(in[1]);
    if (auto fd = fused_loss_.find(i); fd != fused_loss_.end()) {
      const Op& d = p_.ops()[fd->second];
      const float *X = f(d.in[0]), *W = f(d.in[1]), *bias = f(d.in[2]);
      float* logits = f(d.out[0]);
      const int64_t I = width(d.in[0]);
      notes_ << "; computes '" << d.name << "' (" << B * per_row << "x" << I << "x" << C
             << ") in the same launch, a warp per row";
      const FusedInputGrad dx = loss_input_gradient(i, op, d);
      return add_step(op, [=](cudaStream_t s) {
        dense_softmax_cross_entropy(X, W, bias, logits, labels, valid, loss, dpred, B, I, C, r, sc, s, per_row,
                                    ignore, dx);
      });
    }
    return add_step(op, [=](cudaStream_t s) {
      softmax_cross_entropy(pred, labels, valid, loss, dpred, B, C, r, sc, s, per_row, ignore);
    });
  }
  const float* target = f(in[1]);
  return add_step(op, [=](cudaStream_t s) { mean_squared_error(pred, target, valid, loss, dpred, B, T, r, sc, s); });
}

}  // namespace sg::cuda
