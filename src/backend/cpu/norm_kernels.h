// CPU reference kernels of batch norm over the channels C (the last dimension) of R = numel / C
// rows: double accumulation in row order, each channel's sums in one pass, so results do not
// depend on threads. Null outputs are skipped; acc adds into the output instead of overwriting it.
#pragma once

#include <cstdint>

namespace sg::cpu {

// Training: batch mean and rstd = 1 / sqrt(biased var + eps) per channel (rounded to float,
// the values backward reads), Y = (X - mean) rstd gamma + beta, and the running statistics
// updated in place with the unbiased variance (var R / (R - 1)).
void batch_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                float* run_mean, float* run_var, int64_t R, int64_t C, double eps, double momentum);
// dX = gamma rstd (dY - mean(dY) - xhat mean(dY xhat)), dgamma = sum dY xhat, dbeta = sum dY.
void batch_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t C, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta);
// Y = (X - run_mean) / sqrt(run_var + eps) gamma + beta.
void batch_norm_inference(const float* X, const float* gamma, const float* beta, const float* run_mean,
                          const float* run_var, float* Y, int64_t R, int64_t C, double eps);

}  // namespace sg::cpu
