// The loss ops: shape rules and the CPU reference bindings.
#include "ops/loss_ops.h"

#include <cmath>

#include "backend/cpu/cpu_kernels.h"

namespace sg::ops {

namespace {

void check_valid(const OpCheck& c) {
  const TensorId v = c.in(2);
  if (v != kNone)
    c.expect(c.shape(v) == Shape{1} && c.dtype(v) == DType::I32, cat("valid-row count ", c.desc(v), " must be i32 [1]"));
  c.expect(c.shape(c.out(0)) == Shape{1}, cat("loss ", c.desc(c.out(0)), " must be [1]"));
}

}  // namespace

void check_softmax_cross_entropy(const OpCheck& c) {
  const TensorId z = c.in(0), y = c.in(1);
  c.expect(c.shape(z).size() >= 2, cat("logits ", c.desc(z), " must be [batch, classes] or [batch, ..., classes]"));
  const Shape ls(c.shape(z).begin(), c.shape(z).end() - 1);
  c.expect(c.shape(y) == ls && c.dtype(y) == DType::I32,
           cat("labels must be i32 ", shape_str(ls), ", got ", dtype_name(c.dtype(y)), " ", shape_str(c.shape(y))));
  c.same(z, c.out(1));
  check_valid(c);
  const LossAttrs& a = c.op().attr<LossAttrs>();
  c.expect(std::isfinite(a.label_smoothing) && a.label_smoothing >= 0 && a.label_smoothing < 1,
           cat("label smoothing must be in [0, 1), got ", a.label_smoothing));
  const int64_t C = c.shape(z).back();
  c.expect(a.class_weights.empty() || static_cast<int64_t>(a.class_weights.size()) == C,
           cat(a.class_weights.size(), " class weights for the ", C, " classes of logits ", c.desc(z)));
  for (size_t k = 0; k < a.class_weights.size(); ++k)
    c.expect(std::isfinite(a.class_weights[k]) && a.class_weights[k] >= 0,
             cat("class weight ", k, " must be a finite number >= 0, got ", a.class_weights[k]));
}

std::function<void()> cpu_softmax_cross_entropy(const CpuBind& b) {
  const float* z = b.f(b.in(0));
  const int32_t* y = b.i32(b.in(1));
  const int32_t* valid = b.i32(b.in(2));
  float *loss = b.f(b.out(0)), *dz = b.f(b.out(1));
  // Logits [B, ..., C]: per_row labels per batch row.
  const int64_t B = b.dim(b.in(0), 0), C = b.tensor(b.in(0)).shape.back(), per_row = b.count(b.in(1)) / B;
  const Reduction r = b.attr<LossAttrs>().reduction;
  const bool ignore = b.attr<LossAttrs>().ignore_negative;
  const double eps = b.attr<LossAttrs>().label_smoothing;
  const std::vector<float> w = b.attr<LossAttrs>().class_weights;
  // The plain kernel unless smoothed or weighted, so the default loss is unchanged.
  if (eps == 0 && w.empty()) return [=] { cpu::softmax_cross_entropy(z, y, valid, loss, dz, B, C, r, per_row, ignore); };
  return [=] {
    cpu::softmax_cross_entropy_smoothed(z, y, valid, loss, dz, B, C, r, per_row, ignore, eps,
                                        w.empty() ? nullptr : w.data());
  };
}

void check_mean_squared_error(const OpCheck& c) {
  c.same(c.in(0), c.in(1));
  c.same(c.in(0), c.out(1));
  check_valid(c);
}

std::function<void()> cpu_mean_squared_error(const CpuBind& b) {
  const float *pred = b.f(b.in(0)), *tgt = b.f(b.in(1));
  const int32_t* valid = b.i32(b.in(2));
  float *loss = b.f(b.out(0)), *dp = b.f(b.out(1));
  const int64_t B = b.dim(b.in(0), 0), T = b.count(b.in(0)) / B;
  const Reduction r = b.attr<LossAttrs>().reduction;
  return [=] { cpu::mean_squared_error(pred, tgt, valid, loss, dp, B, T, r); };
}

void check_pointwise_loss(const OpCheck& c) {
  check_mean_squared_error(c);
  const LossAttrs& a = c.op().attr<LossAttrs>();
  c.expect(a.form != PointwiseForm::Huber || (std::isfinite(a.delta) && a.delta > 0),
           cat("huber delta must be a positive number, got ", a.delta));
}

std::function<void()> cpu_pointwise_loss(const CpuBind& b) {
  const float *pred = b.f(b.in(0)), *tgt = b.f(b.in(1));
  const int32_t* valid = b.i32(b.in(2));
  float *loss = b.f(b.out(0)), *dp = b.f(b.out(1));
  const int64_t B = b.dim(b.in(0), 0), T = b.count(b.in(0)) / B;
  const LossAttrs a = b.attr<LossAttrs>();
  return [=] { cpu::pointwise_loss(pred, tgt, valid, loss, dp, B, T, a.reduction, a.form, a.delta); };
}

std::string loss_attrs_text(const Op& op) {
  const LossAttrs& a = op.attr<LossAttrs>();
  if (op.kind == OpKind::SoftmaxCrossEntropy)
    return cat("(", a.label_smoothing > 0 ? cat("label smoothing ", a.label_smoothing, ", ") : "",
               a.class_weights.empty() ? "" : cat(a.class_weights.size(), " class weights, "),
               reduction_name(a.reduction), ")");
  if (op.kind != OpKind::PointwiseLoss) return cat("(", reduction_name(a.reduction), ")");
  return cat("(", pointwise_form_name(a.form), a.form == PointwiseForm::Huber ? cat(", delta ", a.delta) : "", ", ",
             reduction_name(a.reduction), ")");
}

}  // namespace sg::ops
