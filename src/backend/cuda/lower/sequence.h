// Lowering of the sequence-model ops for the CUDA backend: LayerNorm(Backward),
// Embedding(Backward) and Attention(Backward), each to our own kernels (sequence_kernels.cuh);
// with train.attention "cudnn_bf16" (LowerOptions::attention) attention runs through cuDNN's
// fused SDPA in bf16 instead (cudnn_sdpa.h), between conversion kernels (bf16_kernels.cuh).
// Called through the CUDA kind table (lowerings.cpp) for those op kinds.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backend/cuda/lower/image.h"  // LoweringHooks

namespace sg::cuda {

class ConvPlan;  // cudnn_conv.h: any built cuDNN graph (the SDPA plans too)

class SequenceLowering {
 public:
  explicit SequenceLowering(LoweringHooks h);
  ~SequenceLowering();

  // Throws, naming the op, its shape and the limit, for shapes the kernels do not support
  // (attention head dimensions above kAttentionMaxHeadDim; embedding gradients over more than
  // kEmbeddingMaxIdReads vocabulary rows x tokens); with AttentionMode::CudnnBF16, for
  // attention that cuDNN's fused SDPA cannot take (a build without cuDNN, a head size that is
  // not a multiple of 8 or above 256). Called before anything is planned.
  static void check_supported(const Program& p, const Op& op, AttentionMode attention = AttentionMode::FP32);

  // One per op kind.
  void layer_norm(const Op& op);
  void layer_norm_backward(const Op& op);
  void embedding(const Op& op);
  void embedding_backward(const Op& op);
  void attention(const Op& op);
  void attention_backward(const Op& op);
  // After every op: the cuDNN SDPA plans' shared workspace.
  void finish();

 private:
  // cuDNN's fused SDPA in bf16 (AttentionMode::CudnnBF16).
  void attention_cudnn(const Op& op);
  void attention_backward_cudnn(const Op& op);
  // bf16 [B, S, H*D] buffers of n elements owned by the executable.
  void* bf16_buffer(int64_t n);

  float* f(TensorId t) const { return t == kNone ? nullptr : static_cast<float*>(h_.ptrs[t]); }
  int64_t dim(TensorId t, size_t k) const { return h_.p.tensor(t).shape[k]; }
  int64_t count(TensorId t) const { return numel(h_.p.tensor(t).shape); }

  LoweringHooks h_;
  // A forward's bf16 copies of Q, K, V and its bf16 output O, kept for its backward (which reads
  // them again), by the forward's fp32 output O.
  struct Bf16Attention {
    void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  };
  std::map<TensorId, Bf16Attention> saved_;
  // The backwards' bf16 dO, dQ, dK, dV: one set shared by every attention backward (they run one
  // after another), sized for the largest.
  void *d_o_ = nullptr, *dq_ = nullptr, *dk_ = nullptr, *dv_ = nullptr;
  std::vector<std::shared_ptr<ConvPlan>> plans_;
};

}  // namespace sg::cuda
