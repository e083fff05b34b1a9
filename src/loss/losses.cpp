#include "stepgraph/loss.h"

#include <cmath>
#include <utility>

namespace sg {

namespace {
LossOutputs build_loss(GraphBuilder& g, OpKind kind, const std::string& name, LossAttrs attrs, TensorId pred,
                       TensorId target, TensorId valid) {
  Program& p = g.program();
  TensorId loss = g.tensor("loss", {1}, Role::Activation);
  p.tensor(loss).live_out = true;
  TensorId dpred = g.tensor("d." + p.tensor(pred).name, p.tensor(pred).shape, Role::Temporary);
  Op op;
  op.kind = kind;
  op.name = name;
  op.in = {pred, target, valid};
  op.out = {loss, dpred};
  op.attrs = attrs;
  p.add_op(std::move(op));
  return {loss, dpred};
}
}  // namespace

SoftmaxCrossEntropy::SoftmaxCrossEntropy(Reduction r, double label_smoothing, std::vector<float> class_weights)
    : Loss(r), label_smoothing_(label_smoothing), class_weights_(std::move(class_weights)) {
  SG_REQUIRE(std::isfinite(label_smoothing) && label_smoothing >= 0 && label_smoothing < 1,
             "softmax_cross_entropy: label_smoothing must be in [0, 1), got ", label_smoothing);
  for (size_t c = 0; c < class_weights_.size(); ++c)
    SG_REQUIRE(std::isfinite(class_weights_[c]) && class_weights_[c] >= 0, "softmax_cross_entropy: class weight ", c,
               " must be a finite number >= 0, got ", class_weights_[c]);
}

LossOutputs SoftmaxCrossEntropy::build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const {
  const Shape& ps = g.program().tensor(pred).shape;
  SG_REQUIRE(ps.size() >= 2, "softmax_cross_entropy needs [batch, classes] (or [batch, positions, classes]) logits, got ",
             shape_str(ps));
  SG_REQUIRE(class_weights_.empty() || static_cast<int64_t>(class_weights_.size()) == ps.back(),
             "softmax_cross_entropy: ", class_weights_.size(), " class weights, but the logits ", shape_str(ps),
             " have ", ps.back(), " classes (one weight per class)");
  // Per-token targets mark positions without a target with a negative label.
  LossAttrs a{reduction_, ps.size() > 2};
  a.label_smoothing = label_smoothing_;
  a.class_weights = class_weights_;
  return build_loss(g, OpKind::SoftmaxCrossEntropy, "loss.softmax_cross_entropy", std::move(a), pred, target, valid);
}
Shape SoftmaxCrossEntropy::target_shape(const Shape& pred) const { return Shape(pred.begin(), pred.end() - 1); }
std::string SoftmaxCrossEntropy::describe() const {
  return cat("softmax_cross_entropy(", label_smoothing_ > 0 ? cat("label_smoothing=", label_smoothing_, ", ") : "",
             class_weights_.empty() ? "" : cat("class_weights[", class_weights_.size(), "], "),
             reduction_name(reduction_), ")");
}
double SoftmaxCrossEntropy::grad_scale(const Shape& pred) const {
  // Per token: at most (positions without a target are not counted).
  return reduction_ == Reduction::Mean ? static_cast<double>(pred.back()) / static_cast<double>(numel(pred)) : 1.0;
}

LossOutputs MeanSquaredError::build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const {
  return build_loss(g, OpKind::MeanSquaredError, "loss.mse", LossAttrs{reduction_}, pred, target, valid);
}
std::string MeanSquaredError::describe() const { return cat("mse(", reduction_name(reduction_), ")"); }
double MeanSquaredError::grad_scale(const Shape& pred) const {
  return reduction_ == Reduction::Mean ? 1.0 / static_cast<double>(numel(pred)) : 1.0;
}

ElementwiseLoss::ElementwiseLoss(PointwiseForm form, double delta, Reduction r) : Loss(r), form_(form), delta_(delta) {
  SG_REQUIRE(form != PointwiseForm::Huber || (std::isfinite(delta) && delta > 0),
             "huber: delta must be a positive number, got ", delta);
}
LossOutputs ElementwiseLoss::build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const {
  LossAttrs a{reduction_};
  a.form = form_, a.delta = delta_;
  return build_loss(g, OpKind::PointwiseLoss, cat("loss.", pointwise_form_name(form_)).c_str(), a, pred, target, valid);
}
std::string ElementwiseLoss::describe() const {
  return cat(pointwise_form_name(form_), "(", form_ == PointwiseForm::Huber ? cat("delta=", delta_, ", ") : "",
             reduction_name(reduction_), ")");
}
double ElementwiseLoss::grad_scale(const Shape& pred) const {
  return reduction_ == Reduction::Mean ? 1.0 / static_cast<double>(numel(pred)) : 1.0;
}

}  // namespace sg
