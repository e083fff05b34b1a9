// Dense layers and the activation statistic: their rows of the op table (Add, with broadcasting,
// is a tensor op: tensor_ops.h).
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_dense(const OpCheck& c);
void grad_dense(GradBuilder& g, const Op& op);
std::function<void()> cpu_dense(const CpuBind& b);
void check_dense_backward(const OpCheck& c);
std::function<void()> cpu_dense_backward(const CpuBind& b);
std::string dense_attrs_text(const Op& op);

void check_abs_max(const OpCheck& c);
std::function<void()> cpu_abs_max(const CpuBind& b);

// Y = act(X W^T + b) over the last dimension of X [batch, ..., I]; Z keeps the pre-activation
// when backward needs it (activation_needs_preact). bias_rows > 0 adds b to the first rows only.
inline constexpr OpDef kDense{OpKind::Dense, "dense", "X W b?", "Y Z?", check_dense, grad_dense, cpu_dense,
                              same_if_inputs_fixed, dense_attrs_text};
inline constexpr OpDef kDenseBackward{OpKind::DenseBackward, "dense_backward", "dY X W Y Z?", "dX? dW? db?",
                                      check_dense_backward, no_gradient, cpu_dense_backward, nullptr,
                                      dense_attrs_text};
// max |X| over all elements (NaN if any is NaN), written every step: the range FP8 scaling needs.
inline constexpr OpDef kAbsMax{OpKind::AbsMax, "abs_max", "X", "amax", check_abs_max, no_gradient, cpu_abs_max};

}  // namespace sg::ops
