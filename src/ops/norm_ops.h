// Batch norm over the channels (the last dimension): the training form with its backward, and
// the inference form predict and evaluate build. Their rows of the op table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_batch_norm(const OpCheck& c);
void grad_batch_norm(GradBuilder& g, const Op& op);
std::function<void()> cpu_batch_norm(const CpuBind& b);
void check_batch_norm_backward(const OpCheck& c);
std::function<void()> cpu_batch_norm_backward(const CpuBind& b);
void check_batch_norm_inference(const OpCheck& c);
std::function<void()> cpu_batch_norm_inference(const CpuBind& b);
std::string batch_norm_attrs_text(const Op& op);

// Updates the running statistics (inputs 3 and 4, in place), so never the same every step.
inline constexpr OpDef kBatchNorm{OpKind::BatchNorm, "batch_norm", "X gamma beta running_mean running_var",
                                  "Y mean rstd running_mean running_var", check_batch_norm, grad_batch_norm,
                                  cpu_batch_norm, nullptr, batch_norm_attrs_text};
inline constexpr OpDef kBatchNormBackward{OpKind::BatchNormBackward, "batch_norm_backward", "dY X gamma mean rstd",
                                          "dX? dgamma? dbeta?", check_batch_norm_backward, no_gradient,
                                          cpu_batch_norm_backward};
// Not differentiated: only predict and evaluate build it. Not the same every step either: the
// running statistics it reads change with every training step between its runs.
inline constexpr OpDef kBatchNormInference{OpKind::BatchNormInference, "batch_norm_inference",
                                           "X gamma beta running_mean running_var", "Y", check_batch_norm_inference,
                                           no_gradient, cpu_batch_norm_inference, nullptr, batch_norm_attrs_text};

}  // namespace sg::ops
