// Lowering of the tensor ops for the CUDA backend (ir.h: Sub ... MeanBackward, and Add and
// AddBackward when their shapes broadcast), each to our own kernels (tensor_kernels.cuh).
// Called through the CUDA kind table (lowerings.cpp) for those op kinds.
#pragma once

#include "backend/cuda/lower/image.h"  // LoweringHooks

namespace sg::cuda {

class TensorLowering {
 public:
  explicit TensorLowering(LoweringHooks h) : h_(std::move(h)) {}

  // Whether an Add or AddBackward op broadcasts (its operands' shapes differ from Y's): then it
  // runs here; same-shape ones keep their own kernels (and fusions: lower/dense.cpp).
  bool broadcasts(const Op& op) const;

  // One per op kind (or family of kinds).
  void binary(const Op& op);           // Add, Sub, Mul, Div
  void binary_backward(const Op& op);  // AddBackward, SubBackward, MulBackward, DivBackward
  void scale_shift(const Op& op);
  void activation(const Op& op);
  void dropout(const Op& op);
  void transpose(const Op& op);
  void activation_backward(const Op& op);
  void pieces(const Op& op);  // Concat, Split, SplitBackward, Slice, SliceBackward
  void reduce(const Op& op);  // Sum, Mean
  void reduce_backward(const Op& op);
  // Batch norm (lower/norm.cpp).
  void batch_norm(const Op& op);
  void batch_norm_backward(const Op& op);
  void batch_norm_inference(const Op& op);

 private:
  float* f(TensorId t) const { return t == kNone ? nullptr : static_cast<float*>(h_.ptrs[t]); }
  const Shape& shape(TensorId t) const { return h_.p.tensor(t).shape; }
  int64_t count(TensorId t) const { return numel(shape(t)); }

  LoweringHooks h_;
};

}  // namespace sg::cuda
