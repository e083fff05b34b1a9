// CPU reference kernels: one per op kind, double accumulation, plain loops. Layouts as ir.h.
#pragma once

#include <cstdint>
#include <vector>

#include "stepgraph/ir.h"

namespace sg::cpu {

// The GatherBatch rule: rows of the data set for the batch at *step (see ir.h). y rows are
// `y_row_bytes` long (labels or regression targets).
void gather_batch(const float* dataX, const void* dataY, const int32_t* step, float* X, void* y,
                  int32_t* valid, int64_t N, int64_t D, int64_t B, size_t y_row_bytes, const GatherAttrs& a);

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
void softmax_cross_entropy(const float* logits, const int32_t* labels, const int32_t* valid,
                           float* loss, float* dlogits, int64_t B, int64_t C, Reduction r);
void mean_squared_error(const float* pred, const float* target, const int32_t* valid, float* loss,
                        float* dpred, int64_t B, int64_t T, Reduction r);
void schedule(int32_t* step, const float* hyper, float* sched, const ScheduleAttrs& a);

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

}  // namespace sg::cpu
