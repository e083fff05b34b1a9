// Losses: one fused loss + gradient kernel each, softmax cross-entropy with the last dense layer
// in the same launch where it fits.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

// The dX of the dense backward right after loss op i, when the plan has the loss kernel write it
// (FusionPlan::loss_dx), with the previous layer's activation derivative where `into` has it.
FusedInputGrad Lowering::loss_input_gradient(int i, const Op& d) {
  const int j = i + 1;
  if (!fusions_.loss_dx.count(j)) return {};
  const Op& bw = p_.ops()[j];
  const int64_t B = rows(d.in[0]), I = width(d.in[0]), O = dim(d.in[1], 0);
  FusedInputGrad g;
  g.dX = f(bw.out[0]);
  std::string also;
  if (auto fuse = fusions_.into.find(j); fuse != fusions_.into.end()) {
    const Op& q = p_.ops()[fuse->second];
    g.dact = q.attr<DenseAttrs>().act, g.y = f(q.in[3]), g.z = f(q.in[4]);
    dz_ready_.insert(fuse->second);
    also = cat(", times the ", activation_name(g.dact), "' of '", q.name, "'");
  }
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
  const LossAttrs& la = op.attr<LossAttrs>();
  const bool ignore = ce && la.ignore_negative;
  // Label smoothing or class weights: their own kernel (never the fused dense one; the plain
  // loss keeps its kernels).
  const bool smoothed = ce && (la.label_smoothing != 0 || !la.class_weights.empty());
  const bool weighted = ce && !la.class_weights.empty();
  const int blocks = ce ? softmax_ce_blocks(B * per_row) : mse_blocks(B * T);
  ReduceScratch sc{reinterpret_cast<float*>(own(blocks * sizeof(float))),
                   reinterpret_cast<unsigned*>(own(sizeof(unsigned))), blocks};
  const bool count_first = ignore && !weighted && !softmax_ce_counts_in_block(B * per_row);
  if (count_first) sc.count = reinterpret_cast<int32_t*>(own(sizeof(int32_t)));
  const bool weigh_first = weighted && !softmax_ce_counts_in_block(B * per_row);
  if (weigh_first) sc.weight_sum = reinterpret_cast<float*>(own(sizeof(float)));
  const float* pred = f(in[0]);
  const int32_t* valid = i32(in[2]);
  float *loss = f(out[0]), *dpred = f(out[1]);
  const Reduction r = op.attr<LossAttrs>().reduction;
  if (smoothed)
    notes_ << (la.label_smoothing != 0 ? cat("label smoothing ", la.label_smoothing, ", ") : "")
           << (weighted ? cat(C, " class weights (the mean over the labelled rows' summed weights), ") : "");
  if (count_first) notes_ << "target-count kernel (labels < 0 have none) + ";
  else if (weigh_first) notes_ << "target-weight kernel + ";
  else if (ignore) notes_ << "labels < 0 have no target (counted in each block); ";
  notes_ << "fused loss + gradient kernel, " << blocks << " blocks, deterministic reduction";
  if (ce) {
    const int32_t* labels = i32(in[1]);
    if (smoothed) {
      SG_ASSERT(!fusions_.loss_dense.count(i));  // the fusion plan keeps these apart
      const float* w = nullptr;
      double total = static_cast<double>(C);
      if (weighted) {
        // The weights go to the device once, as an expression loss's tape does.
        float* dw = reinterpret_cast<float*>(own(la.class_weights.size() * sizeof(float)));
        be_.upload(dw, la.class_weights.data(), la.class_weights.size() * sizeof(float));
        w = dw, total = 0;
        for (float x : la.class_weights) total += x;
      }
      const double eps = la.label_smoothing;
      return add_step(op, [=](cudaStream_t s) {
        softmax_cross_entropy_smoothed(pred, labels, valid, loss, dpred, B, C, r, sc, s, per_row, ignore, eps, w, total);
      });
    }
    if (auto fd = fusions_.loss_dense.find(i); fd != fusions_.loss_dense.end()) {
      const Op& d = p_.ops()[fd->second];
      const float *X = f(d.in[0]), *W = f(d.in[1]), *bias = f(d.in[2]);
      float* logits = f(d.out[0]);
      const int64_t I = width(d.in[0]);
      notes_ << "; computes '" << d.name << "' (" << B * per_row << "x" << I << "x" << C
             << ") in the same launch, a warp per row";
      const FusedInputGrad dx = loss_input_gradient(i, d);
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
  if (op.kind == OpKind::PointwiseLoss) {
    const PointwiseForm form = op.attr<LossAttrs>().form;
    const double delta = op.attr<LossAttrs>().delta;
    return add_step(op, [=](cudaStream_t s) {
      pointwise_loss(pred, target, valid, loss, dpred, B, T, r, form, delta, sc, s);
    });
  }
  return add_step(op, [=](cudaStream_t s) { mean_squared_error(pred, target, valid, loss, dpred, B, T, r, sc, s); });
}

}  // namespace sg::cuda
