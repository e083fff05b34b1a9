// The launchers of the kernels of the batch gather (gather_kernels.cu), the dense layers'
// elementwise and reduction helpers (elementwise_kernels.cu), the losses (loss_kernels.cu) and
// the optimizer (optim_kernels.cu): each launcher does the grid math, the preconditions, the
// explicit stream and the launch check. Layouts as in ir.h. The dense products, PINN, image
// and sequence kernels have headers of their own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stepgraph/ir.h"

namespace sg::cuda {

// One array of a device-resident data set and its batch slot: rows of row_bytes bytes.
struct GatherRows {
  const void* data;
  void* batch;
  size_t row_bytes;
};
// The GatherBatch rule on the device (see ir.h) for `count` arrays of an N-row data set: one
// block per batch row, a launch per eight arrays (their pointers are kernel arguments).
void gather_batch(const GatherRows* arrays, int count, const int32_t* step, int32_t* valid, int64_t N, int64_t B,
                  const GatherAttrs& a, cudaStream_t s);

// y = act(in + bias) per element of a [B, O] matrix; z (nullable) keeps in + bias. `in` may
// alias z or y. bias may be null.
void bias_act_forward(const float* in, const float* bias, float* z, float* y, int64_t B, int64_t O,
                      Activation act, cudaStream_t s);
// dy *= act'(y, z) in place (dy becomes dZ).
void act_backward_inplace(float* dy, const float* y, const float* z, int64_t n, Activation act,
                          cudaStream_t s);
// db[o] (+)= sum_b dz[b, o]; fixed summation order (deterministic). Many rows are split into
// chunks summed in parallel; the scratch then holds [chunks][O] partials and one counter per 32
// columns (zero at rest).
struct ColumnSumScratch {
  float* partials = nullptr;
  unsigned* counters = nullptr;
};
int column_sum_chunks(int64_t B, int64_t O);
void column_sum(const float* dz, float* db, int64_t B, int64_t O, bool accumulate, ColumnSumScratch scratch,
                cudaStream_t s);
void add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);
void add_backward(const float* dy, float* da, float* db, int64_t n, bool acc_a, bool acc_b,
                  cudaStream_t s);

// Loss scratch: per-block partial sums and a completion counter (zero at rest). The last
// block sums the partials in block order, so the loss is deterministic.
struct ReduceScratch {
  float* partials;        // [max_blocks]
  unsigned int* counter;  // [1], zero-initialised
  int max_blocks;
  int32_t* count = nullptr;  // [1]: the targets a token-level cross-entropy counts (ignore_negative)
  float* weight_sum = nullptr;  // [1]: a class-weighted cross-entropy's summed target weights
};
// How many partials (blocks) each loss launch needs; size ReduceScratch with these.
int softmax_ce_blocks(int64_t rows);
int mse_blocks(int64_t elements);
// Logits [B * per_row, C], labels [B * per_row]; `valid` counts batch rows (each per_row labels).
// ignore_negative (token labels, LossAttrs): a label < 0 has no loss and no gradient and the mean
// is over the labels >= 0: up to kCountInBlockRows label rows every block counts them itself (an
// integer sum, the same in every block); beyond, a one-block kernel counts them first into
// scratch.count (needed then). Size the scratch with softmax_ce_blocks(B * per_row).
constexpr int64_t kCountInBlockRows = 4096;
bool softmax_ce_counts_in_block(int64_t rows);
void softmax_cross_entropy(const float* logits, const int32_t* labels, const int32_t* valid,
                           float* loss, float* dlogits, int64_t B, int64_t C, Reduction r,
                           ReduceScratch scratch, cudaStream_t s, int64_t per_row = 1, bool ignore_negative = false);
// With label smoothing eps and class weights w [C] on the device (null: all 1; LossAttrs, torch's
// cross_entropy); weight_total is sum_c w[c] (C without weights). A weighted mean divides by the
// summed w[y] of the labelled rows: up to kCountInBlockRows label rows every block sums them
// itself (in a fixed order, the same float in every block); beyond, a one-block kernel sums them
// first into scratch.weight_sum (needed then). Unweighted, the count is as above.
void softmax_cross_entropy_smoothed(const float* logits, const int32_t* labels, const int32_t* valid, float* loss,
                                    float* dlogits, int64_t B, int64_t C, Reduction r, ReduceScratch scratch,
                                    cudaStream_t s, int64_t per_row, bool ignore_negative, double label_smoothing,
                                    const float* class_weights, double weight_total);
// A dense layer without activation (logits = X W^T + bias, X [B, I], W [C, I]) fused with the
// softmax cross-entropy that reads it, when fused_loss_fits(C, I) (at most 32 classes, W in the
// default 48 KB of shared memory, transposed with its classes padded to 8, 16 or 32, plus 4):
// writes logits, loss and dlogits like
// softmax_cross_entropy (per_row, ignore_negative as there: X then has B * per_row rows).
// Scratch sized by softmax_ce_blocks(B * per_row).
// With dx.dX set it also writes the layer's input gradient dX = dlogits W [B * per_row, I], times
// act'(y, z) of dx.dact (the previous layer's activation at its output y and pre-activation z,
// both [B * per_row, I], either may be null where the derivative does not read it).
struct FusedInputGrad {
  float* dX = nullptr;
  Activation dact = Activation::None;
  const float* y = nullptr;
  const float* z = nullptr;
};
constexpr int kMaxFusedClasses = 32;
// The class count the fused kernel is compiled for (its unrolled loops): C padded to 8, 16 or 32.
inline int fused_loss_classes(int64_t C) { return C <= 8 ? 8 : C <= 16 ? 16 : kMaxFusedClasses; }
inline bool fused_loss_fits(int64_t C, int64_t I) {
  return C >= 1 && C <= kMaxFusedClasses && (fused_loss_classes(C) + 4) * I <= 12288;
}
void dense_softmax_cross_entropy(const float* X, const float* W, const float* bias, float* logits,
                                 const int32_t* labels, const int32_t* valid, float* loss, float* dlogits, int64_t B,
                                 int64_t I, int64_t C, Reduction r, ReduceScratch scratch, cudaStream_t s,
                                 int64_t per_row = 1, bool ignore_negative = false, const FusedInputGrad& dx = {});
void mean_squared_error(const float* pred, const float* target, const int32_t* valid, float* loss,
                        float* dpred, int64_t B, int64_t T, Reduction r, ReduceScratch scratch,
                        cudaStream_t s);
// L1, Huber, BCE with logits (backend/loss_math.h); sized like MSE (mse_blocks).
void pointwise_loss(const float* pred, const float* target, const int32_t* valid, float* loss, float* dpred,
                    int64_t B, int64_t T, Reduction r, PointwiseForm form, double delta, ReduceScratch scratch,
                    cudaStream_t s);

// With `loss` (norm may be null), the watch of non-finite steps sets sched[kSkip] (optim/nan_watch.h).
void schedule(int32_t* step, const float* hyper, float* sched, const ScheduleAttrs& a, const float* loss,
              const float* norm, int32_t* watch, cudaStream_t s);

// Multi-tensor optimizer updates: one launch over every parameter.
struct ParamDesc {
  float* p;
  const float* g;
  float* m;  // momentum / first moment (may be null for plain SGD)
  float* v;  // second moment (Adam)
  int64_t n;
};
// One block's chunk: its tensor's pointers with it, so a block reads one record, not a chunk
// and then the descriptor it names (two dependent loads at the head of the launch).
struct ChunkRef {
  ParamDesc d;
  int64_t start;
};
constexpr int64_t kOptimChunk = 512;  // elements per block: many blocks, two iterations each
// The schedule op fused into the update launch: every block derives lr and bias corrections
// from step + 1; the last block to finish stores the new step and the schedule values.
struct FusedSchedule {
  int32_t* step = nullptr;
  float* sched = nullptr;
  unsigned* counter = nullptr;  // zero at rest
  ScheduleAttrs attrs;
  const float* loss = nullptr;  // the watch (optim/nan_watch.h); null: nothing watched
  const float* norm = nullptr;
  int32_t* watch = nullptr;
};
// `fs` null: lr and bias corrections are read from `sched` (written by the schedule op).
void sgd_update(const ChunkRef* chunks, int num_chunks, const float* hyper,
                const float* sched, const SgdAttrs& a, const FusedSchedule* fs, cudaStream_t s);
void adam_update(const ChunkRef* chunks, int num_chunks, const float* hyper,
                 const float* sched, const AdamAttrs& a, const FusedSchedule* fs, cudaStream_t s);
// ClipGradNorm over the chunks of every gradient (ChunkRef::d.p: the gradient, rescaled in
// place): norm = {global norm, min(1, max_norm / (norm + 1e-6))}; partials: num_chunks doubles,
// counter: zero at rest.
void clip_grad_norm(const ChunkRef* chunks, int num_chunks, double* partials, unsigned* counter, float* norm,
                    float max_norm, cudaStream_t s);

// *out = max |X[k]| over n elements (0 when n is 0); a NaN anywhere gives NaN, as on the CPU (a
// diverged layer shows as NaN, not as its finite part). Per-block maxima go to `partials`
// (abs_max_blocks(n) floats), then one block combines them: exact, so deterministic.
int abs_max_blocks(int64_t n);
void abs_max(const float* X, int64_t n, float* partials, float* out, cudaStream_t s);

}  // namespace sg::cuda
