// CPU reference kernels: one per op kind, double accumulation, plain loops. Layouts as ir.h.
#pragma once

#include <cstdint>
#include <vector>

#include "stepgraph/ir.h"

namespace sg::cpu {

// One array of a device-resident data set and its batch slot: rows of row_bytes bytes.
struct GatherArray {
  const void* data;
  void* batch;
  size_t row_bytes;
};
// The GatherBatch rule: the rows of every array of an N-row data set for the batch at *step (see
// ir.h).
void gather_batch(const std::vector<GatherArray>& arrays, const int32_t* step, int32_t* valid, int64_t N,
                  int64_t B, const GatherAttrs& a);

// Y[B,O] = act(X[B,I] W[O,I]^T + b[O]); Z (optional) keeps the pre-activation. The bias goes to
// the first bias_rows rows only (bias_rows = B: every row).
void dense_forward(const float* X, const float* W, const float* b, float* Y, float* Z, int64_t B,
                   int64_t I, int64_t O, Activation act, int64_t bias_rows);
// dZ = dY * act'(Y, Z); dX = dZ W; dW = dZ^T X; db = sum over the first bias_rows rows of dZ.
// Null outputs are skipped; acc_* adds into the output instead of overwriting it.
void dense_backward(const float* dY, const float* X, const float* W, const float* Y,
                    const float* Z, float* dX, float* dW, float* db, int64_t B, int64_t I,
                    int64_t O, Activation act, bool acc_dx, bool acc_dw, bool acc_db, int64_t bias_rows);

// Jets (layouts in ir.h): A, Y, dA, dY are [K*B, H]; X [B, d].
void jet_input(const float* X, float* J, int64_t B, const JetSpec& js);
void jet_activation(const float* A, float* Y, int64_t B, int64_t H, const JetSpec& js, Activation act);
void jet_activation_backward(const float* dY, const float* A, float* dA, int64_t B, int64_t H,
                             const JetSpec& js, Activation act, bool acc);
// P [K*B, m] -> F [K*B, 2m]: columns [0, m) sin(2 pi P), [m, 2m) cos(2 pi P).
void fourier_features(const float* P, float* F, int64_t B, int64_t m, const JetSpec& js);
void fourier_features_backward(const float* dF, const float* P, float* dP, int64_t B, int64_t m,
                               const JetSpec& js, bool acc);
void add(const float* A, const float* B, float* Y, int64_t n);
void add_backward(const float* dY, float* dA, float* dB, int64_t n, bool acc_a, bool acc_b);
// Labels must be in [0, C) (checked; the trainer validates batches before they reach a kernel).
// `valid` (may be null: all rows): rows >= *valid get zero gradient and no loss; a mean divides
// by the valid rows (cross-entropy) or valid rows * T (MSE).
// Per token: logits [B * per_row, C] and labels [B * per_row], `valid` counting the B batch
// rows; with ignore_negative a label < 0 has no loss and no gradient and is not counted.
void softmax_cross_entropy(const float* logits, const int32_t* labels, const int32_t* valid,
                           float* loss, float* dlogits, int64_t B, int64_t C, Reduction r, int64_t per_row = 1,
                           bool ignore_negative = false);
// The same with label smoothing and class weights (LossAttrs; torch's cross_entropy): a row's
// loss is (1 - eps) w[y] (-log p_y) + eps / C sum_c w[c] (-log p_c), w null meaning all 1; a
// mean divides by the summed w[y] of the counted rows (a zero sum: loss 0, no gradient).
void softmax_cross_entropy_smoothed(const float* logits, const int32_t* labels, const int32_t* valid, float* loss,
                                    float* dlogits, int64_t B, int64_t C, Reduction r, int64_t per_row,
                                    bool ignore_negative, double label_smoothing, const float* class_weights);
void mean_squared_error(const float* pred, const float* target, const int32_t* valid, float* loss,
                        float* dpred, int64_t B, int64_t T, Reduction r);
void pointwise_loss(const float* pred, const float* target, const int32_t* valid, float* loss, float* dpred,
                    int64_t B, int64_t T, Reduction r, PointwiseForm form, double delta);
// step += 1, sched at the new step; with `loss`, the watch (optim/nan_watch.h) sets sched[kSkip].
void schedule(int32_t* step, const float* hyper, float* sched, const ScheduleAttrs& a, const float* loss = nullptr,
              const float* norm = nullptr, int32_t* watch = nullptr);

// Convolution and pooling (conv_kernels.cpp), NHWC images and KRSC filters as ir.h.
struct ConvShape {
  int64_t N = 0, H = 0, W = 0, C = 0;  // input
  int64_t K = 0, R = 0, S = 0;         // filters (pooling: K = C, R x S the window)
  int64_t P = 0, Q = 0;                // output height and width
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
};
// Y[N,P,Q,K] = act(conv(X, Wt) + b); b may be null.
void conv2d_forward(const float* X, const float* Wt, const float* b, float* Y, const ConvShape& s, Activation act);
// dZ = dY * act'(Y); dX = dgrad(dZ), dW = wgrad(dZ, X), db = sum of dZ over N, P, Q. Null
// outputs are skipped; acc_* adds into the output.
void conv2d_backward(const float* dY, const float* X, const float* Wt, const float* Y, float* dX, float* dW,
                     float* db, const ConvShape& s, Activation act, bool acc_dx, bool acc_dw, bool acc_db);
void max_pool2d(const float* X, float* Y, const ConvShape& s);
// dX = the sum of the dY whose window's first maximum (scan order) is that element.
void max_pool2d_backward(const float* dY, const float* X, float* dX, const ConvShape& s, bool acc);
// X [N, HW, C] -> Y [N, C]: the mean over the HW positions; backward spreads dY / HW.
void global_avg_pool(const float* X, float* Y, int64_t N, int64_t HW, int64_t C);
void global_avg_pool_backward(const float* dY, float* dX, int64_t N, int64_t HW, int64_t C, bool acc);
// Y = X (acc: Y += X) over n elements.
void copy(const float* X, float* Y, int64_t n, bool acc);

// Sequence ops (sequence_kernels.cpp), layouts as ir.h.
// Layer norm of R rows of width E; mean and rstd [R] are written for backward.
void layer_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                int64_t R, int64_t E, double eps);
void layer_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t E, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta);
// ids: i32 (ids_i32) or f32 (ids_f32) [B, S]; each must be an integer in [0, V) (checked).
void embedding(const int32_t* ids_i32, const float* ids_f32, const float* table, const float* pos, float* Y,
               int64_t B, int64_t S, int64_t V, int64_t E);
// Scatter-add in token order (deterministic): dtable[id] += dY[b, s]; dpos[s] += dY[b, s].
void embedding_backward(const float* dY, const int32_t* ids_i32, const float* ids_f32, float* dtable, float* dpos,
                        int64_t B, int64_t S, int64_t V, int64_t P, int64_t E, bool acc_table, bool acc_pos);
struct AttentionShape {
  int64_t B = 0, S = 0, H = 1, D = 0;  // Q, K, V, O [B, S, H*D]; L [B, H, S]
  bool causal = false;
  double scale = 1.0;
};
void attention(const float* Q, const float* K, const float* V, float* O, float* L, const AttentionShape& a);
void attention_backward(const float* dO, const float* Q, const float* K, const float* V, const float* O,
                        const float* L, float* dQ, float* dK, float* dV, const AttentionShape& a, bool acc_q,
                        bool acc_k, bool acc_v);

struct ParamSlice {
  float* p;
  const float* g;
  float* m;  // SGD momentum buffer or Adam first moment
  float* v;  // Adam second moment
  int64_t n;
};
void sgd_update(const std::vector<ParamSlice>& ps, const float* hyper, const float* sched,
                const SgdAttrs& a);
void adam_update(const std::vector<ParamSlice>& ps, const float* hyper, const float* sched,
                 const AdamAttrs& a);
// The ClipGradNorm op: the global norm of every gradient (summed in double, in order), then each
// scaled by min(1, max_norm / (norm + 1e-6)); norm = {norm, the factor}.
void clip_grad_norm(const std::vector<std::pair<float*, int64_t>>& grads, float* norm, double max_norm);

}  // namespace sg::cpu
