// CUDA kernels of the physics-informed ops (jets, Fourier features, expression losses,
// collocation sampling; layouts in ir.h). The arithmetic is shared with the CPU reference
// (src/backend/jet_math.h, src/pinn/expr_tape.h, src/pinn/sample_math.h): jets in fp32,
// expressions and sampling in fp64 like the reference. Jets and Fourier features run in
// pinn_kernels.cu, expression losses and sampling in pinn_loss_kernels.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "pinn/expression.h"
#include "stepgraph/ir.h"

namespace sg::cuda {

// Jet tensors may start with `head` rows of value-only points (JetAttrs::head in ir.h); then
// the K blocks of B rows.
// J [head + K*B, d]: the heads' coordinates in order, then the seed jets of X [B, d].
struct JetHead {
  const float* X;  // [points, d]
  int64_t points;
};
void jet_input(const float* X, float* J, int64_t B, const JetSpec& js, const std::vector<JetHead>& heads, cudaStream_t s);
// Y = act(A) as jets, A and Y [head + K*B, H]. bias (nullable, [H]): first added to A's value
// rows (the head's and the value block's), in place (the producing dense layer's bias, fused).
void jet_activation(float* A, const float* bias, float* Y, int64_t head, int64_t B, int64_t H, const JetSpec& js,
                    Activation act, cudaStream_t s);
// dY as the input gradient of a one-output layer that reads Y, computed where it is read
// instead of stored and read back: dY[r, c] = dZ[r] W[c], dZ [rows, 1], W [1, H]. dZ null: dY
// is a tensor.
struct JetDY {
  const float* dZ = nullptr;
  const float* W = nullptr;
  // dW non-null: that layer's weight gradient too, dW [1, H] = sum_r dZ[r] Y[r, :] with Y the
  // activation's jet recomputed from A (so Y is not read), and with db non-null its bias
  // gradient, the sum of dZ over the value rows (bias_rows = head + B). Each block writes its
  // partial sums to `partial` (jet_dy_weight_partial_floats), then an ordered sum finishes.
  // Needs jet_dy_weight_fits.
  float* dW = nullptr;
  float* db = nullptr;
  bool dW_accumulate = false, db_accumulate = false;
  float* partial = nullptr;
};
// Whether jet_activation_backward can form the weight gradient as well (JetDY::dW) for this jet
// and width, and the scratch it then needs.
bool jet_dy_weight_fits(const JetSpec& js, int64_t H);
int64_t jet_dy_weight_partial_floats(int64_t head, int64_t B, int64_t H);
void jet_activation_backward(const float* dY, const JetDY& dy_from, const float* A, float* dA, int64_t head, int64_t B,
                             int64_t H, const JetSpec& js, Activation act, bool accumulate, cudaStream_t s);
// F [head + K*B, 2m] = [sin 2 pi P, cos 2 pi P] as jets, P [head + K*B, m].
void fourier_features(const float* P, float* F, int64_t head, int64_t B, int64_t m, const JetSpec& js, cudaStream_t s);
// The projection P = X B^T and F in one launch, from X [head + K*B, d] and B [m, d]: X is a
// seed jet (JetInput's output: derivative rows unit vectors, second-derivative rows 0) or plain
// rows (K == 1); only its value rows are read, P's jet follows from them and B. Xhead non-null:
// the seed's inputs instead, the head's points Xhead [head, d] and then X [B, d], and the seed
// jet is written to J (non-null) as jet_input would.
void fourier_features_seeded(const float* X, const float* Xhead, float* J, const float* Bm, float* P, float* F,
                             int64_t head, int64_t B, int64_t m, int64_t d, const JetSpec& js, cudaStream_t s);
void fourier_features_backward(const float* dF, const float* P, float* dP, int64_t head, int64_t B, int64_t m,
                               const JetSpec& js, bool accumulate, cudaStream_t s);

// An expression loss's device data: the tape and variable table (uploaded once at lowering)
// and its reduction scratch (per-block partials, a counter that is zero at rest).
struct ExprLossDevice {
  const pinn::TapeInstr* tape = nullptr;
  int n = 0;
  const ExprVar* vars = nullptr;
  int nvars = 0;
  double* partials = nullptr;
  unsigned* counter = nullptr;
  int blocks = 0;
  // The Add op after the loss that sums the terms (sum = sum_in + term, in fp32 like that op),
  // done by the kernel's last block instead of a launch of its own; sum null: none.
  const float* sum_in = nullptr;
  float* sum = nullptr;
};
// Blocks (and partials) an expression loss over M points uses.
int expression_loss_blocks(int64_t M);
// Largest tape the kernel takes (compile_expression's limit).
constexpr int kMaxTape = 256;
// One term of an expression loss (see ExpressionLoss in ir.h): its device data, its tensors
// (U and dU from the term's first row) and shape.
struct ExprTerm {
  ExprLossDevice e;
  const float* U = nullptr;
  const float* X = nullptr;
  float* total = nullptr;
  float* term = nullptr;
  float* dU = nullptr;
  int64_t M = 0, d = 0, O = 0;
  int K = 1;
  double weight = 1.0;
  bool accumulate_total = false;
};
// term = weight * mean_m r(m)^2, total (+)= term, dU = d term / dU: for `first`, and for
// `second` too if not null, side by side in one launch (their blocks split the grid). With two
// terms the fused sums (ExprLossDevice::sum) wait for both: the block that finishes the later
// term does them, in term order, told by `done` (a counter that is zero at rest).
void expression_loss(const ExprTerm& first, const ExprTerm* second, unsigned* done, cudaStream_t s);

void sample_points(const int32_t* step, float* X, int64_t M, int64_t d, const SampleAttrs& a, cudaStream_t s);

}  // namespace sg::cuda
