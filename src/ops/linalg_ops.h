// Batched matrix products between activations (MatMul) and swapping two feature axes
// (Transpose): the model-graph ops of attention-like and operator-learning models. Their rows of
// the op table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_matmul(const OpCheck& c);
void grad_matmul(GradBuilder& g, const Op& op);
std::function<void()> cpu_matmul(const CpuBind& b);
std::string matmul_attrs_text(const Op& op);

void check_transpose(const OpCheck& c);
void grad_transpose(GradBuilder& g, const Op& op);
std::function<void()> cpu_transpose(const CpuBind& b);
std::string transpose_attrs_text(const Op& op);

// The backward ops are MatMuls and Transposes too (accumulating where a gradient is shared).
inline constexpr OpDef kMatMul{OpKind::MatMul, "matmul", "A B", "Y", check_matmul, grad_matmul, cpu_matmul,
                               same_if_inputs_fixed, matmul_attrs_text};
inline constexpr OpDef kTranspose{OpKind::Transpose, "transpose", "X", "Y", check_transpose, grad_transpose,
                                  cpu_transpose, same_if_inputs_fixed, transpose_attrs_text};

}  // namespace sg::ops
