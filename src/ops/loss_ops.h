// Losses: each op writes the loss and the gradient of its prediction in one pass. Rows >= the
// optional valid count (an i32 [1]) are padding: no loss, no gradient, not counted by a mean.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_softmax_cross_entropy(const OpCheck& c);
std::function<void()> cpu_softmax_cross_entropy(const CpuBind& b);
void check_mean_squared_error(const OpCheck& c);
std::function<void()> cpu_mean_squared_error(const CpuBind& b);
void check_pointwise_loss(const OpCheck& c);
std::function<void()> cpu_pointwise_loss(const CpuBind& b);
std::string loss_attrs_text(const Op& op);

// Logits [B, ..., C] with i32 labels [B, ...] (per token; ignore_negative: a label < 0 has no
// target).
inline constexpr OpDef kSoftmaxCrossEntropy{OpKind::SoftmaxCrossEntropy, "softmax_cross_entropy", "logits labels valid?",
                                            "loss dlogits", check_softmax_cross_entropy, no_gradient,
                                            cpu_softmax_cross_entropy, nullptr, loss_attrs_text};
inline constexpr OpDef kMeanSquaredError{OpKind::MeanSquaredError, "mse", "pred target valid?", "loss dpred",
                                         check_mean_squared_error, no_gradient, cpu_mean_squared_error, nullptr,
                                         loss_attrs_text};
// L1, Huber or binary cross-entropy with logits (LossAttrs::form), elementwise as MSE.
inline constexpr OpDef kPointwiseLoss{OpKind::PointwiseLoss, "pointwise_loss", "pred target valid?", "loss dpred",
                                      check_pointwise_loss, no_gradient, cpu_pointwise_loss, nullptr, loss_attrs_text};

}  // namespace sg::ops
