// Sequence ops over token tensors [B, S, E] (batch, position, feature): layer norm, embeddings
// and scaled dot-product attention. Their rows of the op table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_layer_norm(const OpCheck& c);
void grad_layer_norm(GradBuilder& g, const Op& op);
std::function<void()> cpu_layer_norm(const CpuBind& b);
void check_layer_norm_backward(const OpCheck& c);
std::function<void()> cpu_layer_norm_backward(const CpuBind& b);

void check_embedding(const OpCheck& c);
void grad_embedding(GradBuilder& g, const Op& op);
std::function<void()> cpu_embedding(const CpuBind& b);
void check_embedding_backward(const OpCheck& c);
std::function<void()> cpu_embedding_backward(const CpuBind& b);

void check_attention(const OpCheck& c);
void grad_attention(GradBuilder& g, const Op& op);
std::function<void()> cpu_attention(const CpuBind& b);
void check_attention_backward(const OpCheck& c);
std::function<void()> cpu_attention_backward(const CpuBind& b);
std::string attention_attrs_text(const Op& op);

// Over the last dimension E of R = numel / E rows; mean and rstd = 1 / sqrt(var + eps) per row
// are kept for backward.
inline constexpr OpDef kLayerNorm{OpKind::LayerNorm, "layer_norm", "X gamma beta", "Y mean rstd", check_layer_norm,
                                  grad_layer_norm, cpu_layer_norm};
inline constexpr OpDef kLayerNormBackward{OpKind::LayerNormBackward, "layer_norm_backward", "dY X gamma mean rstd",
                                          "dX? dgamma? dbeta?", check_layer_norm_backward, no_gradient,
                                          cpu_layer_norm_backward};
// Y[b,s,:] = table[ids[b,s], :] + pos[s, :]; ids i32, or f32 holding integers in [0, V).
inline constexpr OpDef kEmbedding{OpKind::Embedding, "embedding", "ids table pos?", "Y", check_embedding,
                                  grad_embedding, cpu_embedding};
inline constexpr OpDef kEmbeddingBackward{OpKind::EmbeddingBackward, "embedding_backward", "dY ids", "dtable? dpos?",
                                          check_embedding_backward, no_gradient, cpu_embedding_backward};
// Q, K, V, O [B, S, H*D] (head h is columns [h*D, (h+1)*D)); O = softmax(scale Q K^T (+ causal
// mask)) V per batch and head; L [B, H, S] keeps each row's log-sum-exp for backward.
inline constexpr OpDef kAttention{OpKind::Attention, "attention", "Q K V", "O L", check_attention, grad_attention,
                                  cpu_attention, nullptr, attention_attrs_text};
inline constexpr OpDef kAttentionBackward{OpKind::AttentionBackward, "attention_backward", "dO Q K V O L",
                                          "dQ? dK? dV?", check_attention_backward, no_gradient,
                                          cpu_attention_backward, nullptr, attention_attrs_text};

}  // namespace sg::ops
