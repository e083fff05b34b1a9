// Lowering of the sequence-model ops for the CUDA backend: LayerNorm(Backward),
// Embedding(Backward) and Attention(Backward), each to our own kernels (sequence_kernels.cuh).
// Called by the Lowering pass (lowering.cpp) for those op kinds.
#pragma once

#include "backend/cuda/image_lowering.h"  // LoweringHooks

namespace sg::cuda {

class SequenceLowering {
 public:
  explicit SequenceLowering(LoweringHooks h) : h_(std::move(h)) {}

  static bool handles(OpKind k);
  // Throws, naming the op, its shape and the limit, for shapes the kernels do not support
  // (attention head dimensions above kAttentionMaxHeadDim; embedding gradients over more than
  // kEmbeddingMaxIdReads vocabulary rows x tokens). Called before anything is planned.
  static void check_supported(const Program& p, const Op& op);

  void lower(const Op& op);

 private:
  float* f(TensorId t) const { return t == kNone ? nullptr : static_cast<float*>(h_.ptrs[t]); }
  int64_t dim(TensorId t, size_t k) const { return h_.p.tensor(t).shape[k]; }
  int64_t count(TensorId t) const { return numel(h_.p.tensor(t).shape); }

  LoweringHooks h_;
};

}  // namespace sg::cuda
