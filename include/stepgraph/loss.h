// Losses emit one fused op producing the loss value and the gradient of the prediction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stepgraph/data.h"
#include "stepgraph/nn.h"

namespace sg {

struct LossOutputs {
  TensorId loss = kNone;   // f32 [1]
  TensorId dpred = kNone;  // d loss / d prediction, the seed of backward
};

class Loss {
 public:
  virtual ~Loss() = default;
  // `valid` (optional, i32 [1]): rows at or beyond it are padding and ignored.
  virtual LossOutputs build(GraphBuilder& g, TensorId pred, TensorId target,
                            TensorId valid = kNone) const = 0;
  // The target slot for a prediction of shape `pred`.
  virtual Shape target_shape(const Shape& pred) const = 0;
  virtual DType target_dtype() const = 0;
  virtual Task task() const = 0;
  virtual std::string describe() const = 0;
  Reduction reduction() const { return reduction_; }
  // The seed's infer_grad_scale: the factor the loss puts on each element's gradient
  // (1/B for mean cross-entropy, 1/(B*T) for mean squared error, 1 for sum).
  virtual double grad_scale(const Shape& pred) const = 0;

 protected:
  explicit Loss(Reduction r) : reduction_(r) {}
  Reduction reduction_;
};
using LossPtr = std::shared_ptr<Loss>;

// Softmax + cross-entropy on logits [B, C] with integer labels [B]; mean over the batch or sum.
// Sequences: logits [B, S, C] with labels [B, S], one per token; a negative label marks a
// position without a target (no loss, no gradient; the mean is over the labelled tokens).
// As torch's cross_entropy(weight=class_weights, label_smoothing=eps, ignore_index=-1): a
// labelled row's loss is (1 - eps) w[y] (-log p_y) + eps / C sum_c w[c] (-log p_c); a mean
// divides by the summed w[y] of the labelled rows (their count without weights; a zero sum gives
// loss 0). eps in [0, 1); class_weights empty (all 1) or one finite weight >= 0 per class.
class SoftmaxCrossEntropy : public Loss {
 public:
  explicit SoftmaxCrossEntropy(Reduction r = Reduction::Mean) : Loss(r) {}
  SoftmaxCrossEntropy(Reduction r, double label_smoothing, std::vector<float> class_weights = {});
  LossOutputs build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const override;
  Shape target_shape(const Shape& pred) const override;
  DType target_dtype() const override { return DType::I32; }
  Task task() const override { return Task::Classification; }
  // "softmax_cross_entropy(mean)", "softmax_cross_entropy(label_smoothing=0.1, class_weights[5], sum)"
  std::string describe() const override;
  // Unweighted: with class weights a row's factor is w[y] / (the summed weights), known per batch.
  double grad_scale(const Shape& pred) const override;
  double label_smoothing() const { return label_smoothing_; }
  const std::vector<float>& class_weights() const { return class_weights_; }

 private:
  double label_smoothing_ = 0.0;
  std::vector<float> class_weights_;
};

// Squared error on [B, T] predictions; mean over all B*T elements (as PyTorch) or sum.
class MeanSquaredError : public Loss {
 public:
  explicit MeanSquaredError(Reduction r = Reduction::Mean) : Loss(r) {}
  LossOutputs build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const override;
  Shape target_shape(const Shape& pred) const override { return pred; }
  DType target_dtype() const override { return DType::F32; }
  Task task() const override { return Task::Regression; }
  std::string describe() const override;
  double grad_scale(const Shape& pred) const override;
};

// Elementwise losses of [B, T] predictions against f32 targets of the same shape, each one
// PointwiseLoss op (backend/loss_math.h has the formulas, PyTorch's); mean over all B*T elements
// or sum; padding rows as MSE. Task regression: f32 targets per row (binary cross-entropy's are
// probabilities in [0, 1], one per output, so it also serves multi-label classification).
class ElementwiseLoss : public Loss {
 public:
  LossOutputs build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const override;
  Shape target_shape(const Shape& pred) const override { return pred; }
  DType target_dtype() const override { return DType::F32; }
  Task task() const override { return Task::Regression; }
  std::string describe() const override;  // "l1(mean)", "huber(delta=1, mean)", "bce_with_logits(sum)"
  double grad_scale(const Shape& pred) const override;

 protected:
  ElementwiseLoss(PointwiseForm form, double delta, Reduction r);
  PointwiseForm form_;
  double delta_;
};
// |pred - target| (torch.nn.L1Loss).
class L1Loss : public ElementwiseLoss {
 public:
  explicit L1Loss(Reduction r = Reduction::Mean) : ElementwiseLoss(PointwiseForm::L1, 1.0, r) {}
};
// 0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta) (torch.nn.HuberLoss); delta > 0.
class HuberLoss : public ElementwiseLoss {
 public:
  explicit HuberLoss(double delta = 1.0, Reduction r = Reduction::Mean) : ElementwiseLoss(PointwiseForm::Huber, delta, r) {}
};
// Binary cross-entropy on logits, in its stable form (torch.nn.BCEWithLogitsLoss).
class BinaryCrossEntropyWithLogits : public ElementwiseLoss {
 public:
  explicit BinaryCrossEntropyWithLogits(Reduction r = Reduction::Mean)
      : ElementwiseLoss(PointwiseForm::BceWithLogits, 1.0, r) {}
};

}  // namespace sg
