// Tensor ops, the pieces of model graphs: elementwise binary ops with broadcasting (Add, Sub,
// Mul, Div), scale and shift, standalone activations, dropout, concat / split / slice along a
// feature axis, and sums and means over one. Their rows of the op table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

// Add, Sub, Mul, Div and their backward kinds share one rule each (the kind picks the formula).
void check_binary(const OpCheck& c);
void grad_binary(GradBuilder& g, const Op& op);
std::function<void()> cpu_binary(const CpuBind& b);
void check_binary_backward(const OpCheck& c);
std::function<void()> cpu_binary_backward(const CpuBind& b);

void check_scale_shift(const OpCheck& c);
void grad_scale_shift(GradBuilder& g, const Op& op);
std::function<void()> cpu_scale_shift(const CpuBind& b);
std::string scale_shift_attrs_text(const Op& op);

void check_activation(const OpCheck& c);
void grad_activation(GradBuilder& g, const Op& op);
std::function<void()> cpu_activation(const CpuBind& b);
void check_activation_backward(const OpCheck& c);
std::function<void()> cpu_activation_backward(const CpuBind& b);
std::string activation_attrs_text(const Op& op);

void check_dropout(const OpCheck& c);
void grad_dropout(GradBuilder& g, const Op& op);
std::function<void()> cpu_dropout(const CpuBind& b);
std::string dropout_attrs_text(const Op& op);

void check_concat(const OpCheck& c);
void grad_concat(GradBuilder& g, const Op& op);
void check_split(const OpCheck& c);
void grad_split(GradBuilder& g, const Op& op);
void check_split_backward(const OpCheck& c);
void check_slice(const OpCheck& c);
void grad_slice(GradBuilder& g, const Op& op);
void check_slice_backward(const OpCheck& c);
// Concat, Split, SplitBackward, Slice and SliceBackward: copies of pieces (tensor_math.h).
std::function<void()> cpu_pieces(const CpuBind& b);
std::string axis_attrs_text(const Op& op);

void check_reduce(const OpCheck& c);
void grad_reduce(GradBuilder& g, const Op& op);
std::function<void()> cpu_reduce(const CpuBind& b);
void check_reduce_backward(const OpCheck& c);
std::function<void()> cpu_reduce_backward(const CpuBind& b);
std::string reduce_attrs_text(const Op& op);

// Y = A + B: same shapes, or broadcast (ir.h).
inline constexpr OpDef kAdd{OpKind::Add, "add", "A B", "Y", check_binary, grad_binary, cpu_binary};
inline constexpr OpDef kAddBackward{OpKind::AddBackward, "add_backward", "dY", "dA? dB?", check_binary_backward,
                                    no_gradient, cpu_binary_backward};
inline constexpr OpDef kSub{OpKind::Sub, "sub", "A B", "Y", check_binary, grad_binary, cpu_binary, same_if_inputs_fixed};
inline constexpr OpDef kSubBackward{OpKind::SubBackward, "sub_backward", "dY", "dA? dB?", check_binary_backward,
                                    no_gradient, cpu_binary_backward};
inline constexpr OpDef kMul{OpKind::Mul, "mul", "A B", "Y", check_binary, grad_binary, cpu_binary, same_if_inputs_fixed};
inline constexpr OpDef kMulBackward{OpKind::MulBackward, "mul_backward", "dY A B", "dA? dB?", check_binary_backward,
                                    no_gradient, cpu_binary_backward};
inline constexpr OpDef kDiv{OpKind::Div, "div", "A B", "Y", check_binary, grad_binary, cpu_binary, same_if_inputs_fixed};
inline constexpr OpDef kDivBackward{OpKind::DivBackward, "div_backward", "dY A B", "dA? dB?", check_binary_backward,
                                    no_gradient, cpu_binary_backward};
// Y = a X + b; the backward op is a ScaleShift with b = 0 (accumulating where the gradient is shared).
inline constexpr OpDef kScaleShift{OpKind::ScaleShift, "scale_shift", "X", "Y", check_scale_shift, grad_scale_shift,
                                   cpu_scale_shift, same_if_inputs_fixed, scale_shift_attrs_text};
inline constexpr OpDef kActivation{OpKind::Activation, "activation", "X", "Y", check_activation, grad_activation,
                                   cpu_activation, same_if_inputs_fixed, activation_attrs_text};
inline constexpr OpDef kActivationBackward{OpKind::ActivationBackward, "activation_backward", "dY X Y", "dX",
                                           check_activation_backward, no_gradient, cpu_activation_backward,
                                           nullptr, activation_attrs_text};
inline constexpr OpDef kConcat{OpKind::Concat, "concat", "X...", "Y", check_concat, grad_concat, cpu_pieces,
                               same_if_inputs_fixed, axis_attrs_text};
// Outputs may be absent (as the backward of a concat whose inputs do not all need gradients).
inline constexpr OpDef kSplit{OpKind::Split, "split", "X", "Y?...", check_split, grad_split, cpu_pieces,
                              same_if_inputs_fixed, axis_attrs_text};
// A concat of the pieces' gradients; an absent one (an output nothing read) reads as zeros.
inline constexpr OpDef kSplitBackward{OpKind::SplitBackward, "split_backward", "dY?...", "dX", check_split_backward,
                                      no_gradient, cpu_pieces, nullptr, axis_attrs_text};
inline constexpr OpDef kSlice{OpKind::Slice, "slice", "X", "Y", check_slice, grad_slice, cpu_pieces,
                              same_if_inputs_fixed, axis_attrs_text};
inline constexpr OpDef kSliceBackward{OpKind::SliceBackward, "slice_backward", "dY", "dX", check_slice_backward,
                                      no_gradient, cpu_pieces, nullptr, axis_attrs_text};
inline constexpr OpDef kSum{OpKind::Sum, "sum", "X", "Y", check_reduce, grad_reduce, cpu_reduce, same_if_inputs_fixed,
                            reduce_attrs_text};
inline constexpr OpDef kSumBackward{OpKind::SumBackward, "sum_backward", "dY", "dX", check_reduce_backward, no_gradient,
                                    cpu_reduce_backward, nullptr, reduce_attrs_text};
inline constexpr OpDef kMean{OpKind::Mean, "mean", "X", "Y", check_reduce, grad_reduce, cpu_reduce,
                             same_if_inputs_fixed, reduce_attrs_text};
inline constexpr OpDef kMeanBackward{OpKind::MeanBackward, "mean_backward", "dY", "dX", check_reduce_backward,
                                     no_gradient, cpu_reduce_backward, nullptr, reduce_attrs_text};
// Reads the step counter, so never the same every step.
inline constexpr OpDef kDropout{OpKind::Dropout, "dropout", "X step", "Y", check_dropout, grad_dropout, cpu_dropout,
                                nullptr, dropout_attrs_text};

}  // namespace sg::ops
