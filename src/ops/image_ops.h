// Image ops: NHWC images (channels last), KRSC filters; convolution, pooling and reshapes.
// Their rows of the op table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_conv2d(const OpCheck& c);
void grad_conv2d(GradBuilder& g, const Op& op);
std::function<void()> cpu_conv2d(const CpuBind& b);
void check_conv2d_backward(const OpCheck& c);
std::function<void()> cpu_conv2d_backward(const CpuBind& b);
std::string conv_attrs_text(const Op& op);

void check_max_pool2d(const OpCheck& c);
void grad_max_pool2d(GradBuilder& g, const Op& op);
std::function<void()> cpu_max_pool2d(const CpuBind& b);
void check_max_pool2d_backward(const OpCheck& c);
std::function<void()> cpu_max_pool2d_backward(const CpuBind& b);
std::string pool_attrs_text(const Op& op);

void check_global_avg_pool(const OpCheck& c);
void grad_global_avg_pool(GradBuilder& g, const Op& op);
std::function<void()> cpu_global_avg_pool(const CpuBind& b);
void check_global_avg_pool_backward(const OpCheck& c);
std::function<void()> cpu_global_avg_pool_backward(const CpuBind& b);

void check_reshape(const OpCheck& c);
void grad_reshape(GradBuilder& g, const Op& op);
std::function<void()> cpu_reshape(const CpuBind& b);

// Y[n,p,q,k] = act(b[k] + sum_{r,s,c} X[n, p*sh - ph + r*dh, q*sw - pw + s*dw, c] W[k,r,s,c]),
// act none or relu; taps outside the image read zero.
inline constexpr OpDef kConv2d{OpKind::Conv2d, "conv2d", "X W b?", "Y", check_conv2d, grad_conv2d, cpu_conv2d,
                               nullptr, conv_attrs_text};
inline constexpr OpDef kConv2dBackward{OpKind::Conv2dBackward, "conv2d_backward", "dY X W Y", "dX? dW? db?",
                                       check_conv2d_backward, no_gradient, cpu_conv2d_backward, nullptr,
                                       conv_attrs_text};
// Max over each window (padding never wins); backward routes each dY to the first maximum of
// its window in scan order.
inline constexpr OpDef kMaxPool2d{OpKind::MaxPool2d, "max_pool2d", "X", "Y", check_max_pool2d, grad_max_pool2d,
                                  cpu_max_pool2d, nullptr, pool_attrs_text};
inline constexpr OpDef kMaxPool2dBackward{OpKind::MaxPool2dBackward, "max_pool2d_backward", "dY X Y", "dX",
                                          check_max_pool2d_backward, no_gradient, cpu_max_pool2d_backward, nullptr,
                                          pool_attrs_text};
// The mean over H and W: X [N,H,W,C] -> Y [N,C].
inline constexpr OpDef kGlobalAvgPool{OpKind::GlobalAvgPool, "global_avg_pool", "X", "Y", check_global_avg_pool,
                                      grad_global_avg_pool, cpu_global_avg_pool};
inline constexpr OpDef kGlobalAvgPoolBackward{OpKind::GlobalAvgPoolBackward, "global_avg_pool_backward", "dY", "dX",
                                              check_global_avg_pool_backward, no_gradient,
                                              cpu_global_avg_pool_backward};
// The same elements in another shape (a copy: every tensor has its own place in the plan);
// backward is a reshape back, accumulating.
inline constexpr OpDef kReshape{OpKind::Reshape, "reshape", "X", "Y", check_reshape, grad_reshape, cpu_reshape};

}  // namespace sg::ops
