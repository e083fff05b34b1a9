// CUDA kernels for the sequence-model ops: layer norm, token embedding and scaled dot-product
// attention, forward and backward, each with its launcher. fp32, layouts as ir.h and the CPU
// reference (src/backend/cpu/sequence_kernels.cpp). Every output element is summed by one
// thread (or one warp) in a fixed order and no kernel uses floating-point atomics, so results are
// the same on every run and graph replay equals eager execution bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sg::cuda {

// ---- Layer norm over the last dimension: X, Y [R, E]; gamma, beta [E]; mean, rstd [R] ----

// One warp per row: mean, then the variance around it (two passes over the row, like the CPU),
// rstd = 1 / sqrt(var + eps).
void layer_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                int64_t R, int64_t E, float eps, cudaStream_t s);
// One launch: some blocks compute dX (a warp per row), others dgamma and dbeta, sums over rows:
// each chunk of rows is summed by one thread per column in row order; with several chunks
// (layer_norm_grad_chunks > 1) the last block of each 32-column group adds the chunks' partials
// in chunk order. Scratch then: partials [chunks][2][E] floats (layer_norm_grad_scratch_floats)
// and one counter per 32 columns, zero at rest.
struct LayerNormGradScratch {
  float* partials = nullptr;
  unsigned* counters = nullptr;
};
int layer_norm_grad_chunks(int64_t R, int64_t E);
int64_t layer_norm_grad_scratch_floats(int64_t R, int64_t E);
// Null outputs are skipped; acc_* adds into the output.
void layer_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t E, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta, LayerNormGradScratch scratch, cudaStream_t s);

// ---- Token embedding: ids [B, S] (i32, or f32 holding integers), table [V, E], pos [P, E] ----

// Y[b, s] = table[id] (+ pos[s]). An id that is not an integer in [0, V) gives a row of NaN
// (the trainer checks a batch's ids on the host before the step, with the CPU's message; this
// keeps a bad id from a device-side source visible instead of reading out of bounds).
void embedding(const int32_t* ids_i32, const float* ids_f32, const float* table, const float* pos, float* Y,
               int64_t B, int64_t S, int64_t V, int64_t E, cudaStream_t s);
// dtable[v] (+)= the sum of dY over the tokens with id v, in token order: one block per
// vocabulary row, reading every id (O(V * B * S) id reads: meant for vocabularies of up to a few
// thousand, see embedding_backward_supported). dpos[s] (+)= the sum over the batch of dY[b, s];
// positions beyond S get zero (or are left as they are with acc_pos). Invalid ids add nothing.
// Both in one launch.
bool embedding_backward_supported(int64_t V, int64_t tokens);
constexpr int64_t kEmbeddingMaxIdReads = int64_t(1) << 32;  // V * tokens
void embedding_backward(const float* dY, const int32_t* ids_i32, const float* ids_f32, float* dtable, float* dpos,
                        int64_t B, int64_t S, int64_t V, int64_t P, int64_t E, bool acc_table, bool acc_pos,
                        cudaStream_t s);

// ---- Attention: Q, K, V, O [B, S, H*D]; L (log-sum-exp of each query's scores) [B, H, S] ----

struct AttentionDims {
  int64_t B = 0, S = 0, H = 1, D = 0;
  bool causal = false;
  float scale = 1.0f;
};
// One thread per query (forward, dQ) or key (dK, dV) row holding its row's vectors in registers:
// head dimensions up to this.
constexpr int64_t kAttentionMaxHeadDim = 64;
// Forward: a block per (batch, head, 64 queries); keys and values staged in shared memory 64 rows
// at a time, an online (running max) softmax per query. Writes O and L.
void attention(const float* Q, const float* K, const float* V, float* O, float* L, const AttentionDims& a,
               cudaStream_t s);
// Backward from the saved L: probabilities recomputed, no atomics, one launch: blocks of a dQ
// part (a thread per query) and of a dK/dV part (a thread per key), each computing
// D_i = dO_i . O_i itself. Null outputs are skipped.
void attention_backward(const float* dO, const float* Q, const float* K, const float* V, const float* O,
                        const float* L, float* dQ, float* dK, float* dV, const AttentionDims& a, bool acc_q,
                        bool acc_k, bool acc_v, cudaStream_t s);

}  // namespace sg::cuda
