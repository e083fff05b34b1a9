// Lowering of the batch-norm ops (ir.h: BatchNorm, BatchNormBackward, BatchNormInference) to
// norm_kernels.cuh: members of TensorLowering, one launch each.
#include "backend/cuda/kernels/norm_kernels.cuh"
#include "backend/cuda/lower/tensor.h"

namespace sg::cuda {

void TensorLowering::batch_norm(const Op& op) {
  const float *X = f(op.in[0]), *g = f(op.in[1]), *b = f(op.in[2]);
  float *Y = f(op.out[0]), *mean = f(op.out[1]), *rstd = f(op.out[2]), *rm = f(op.out[3]), *rv = f(op.out[4]);
  const int64_t C = shape(op.in[1])[0], R = count(op.in[0]) / C;
  const BatchNormAttrs a = op.attr<BatchNormAttrs>();
  h_.notes << "batch norm kernel (" << batch_norm_blocks(C) << " blocks of 32 channels over " << R
           << " rows; running statistics in place)";
  h_.add_step(op, [=](cudaStream_t s) { cuda::batch_norm(X, g, b, Y, mean, rstd, rm, rv, R, C, a.eps, a.momentum, s); });
}

void TensorLowering::batch_norm_backward(const Op& op) {
  const float *dY = f(op.in[0]), *X = f(op.in[1]), *g = f(op.in[2]), *mean = f(op.in[3]), *rstd = f(op.in[4]);
  float *dX = f(op.out[0]), *dg = f(op.out[1]), *db = f(op.out[2]);
  const int64_t C = shape(op.in[2])[0], R = count(op.in[1]) / C;
  const bool ax = op.accumulate[0], ag = op.accumulate[1], ab = op.accumulate[2];
  h_.notes << "batch norm backward kernel (gain/shift gradients and dX in one launch; deterministic)";
  h_.add_step(op, [=](cudaStream_t s) {
    cuda::batch_norm_backward(dY, X, g, mean, rstd, dX, dg, db, R, C, ax, ag, ab, s);
  });
}

void TensorLowering::batch_norm_inference(const Op& op) {
  const float *X = f(op.in[0]), *g = f(op.in[1]), *b = f(op.in[2]), *rm = f(op.in[3]), *rv = f(op.in[4]);
  float* Y = f(op.out[0]);
  const int64_t C = shape(op.in[1])[0], R = count(op.in[0]) / C;
  const double eps = op.attr<BatchNormAttrs>().eps;
  h_.notes << "batch norm inference kernel (running statistics)";
  h_.add_step(op, [=](cudaStream_t s) { cuda::batch_norm_inference(X, g, b, rm, rv, Y, R, C, eps, s); });
}

}  // namespace sg::cuda
