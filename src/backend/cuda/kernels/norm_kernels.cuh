// CUDA kernels of batch norm over the channels C (the last dimension) of R rows (cpu/norm_kernels.h
// has the math). The training kernels give each block 32 channels for all R rows: its 32 x 32
// threads read rows coalesced (a warp reads 32 neighbouring channels of one row), sum in double,
// and reduce the 32 partial sums of a channel in a fixed order, so results are deterministic and
// no scratch or second launch is needed. Nothing allocates or synchronizes: every launch is
// capturable.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sg::cuda {

// Blocks the training kernels launch: one per 32 channels.
int64_t batch_norm_blocks(int64_t C);

void batch_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                float* run_mean, float* run_var, int64_t R, int64_t C, double eps, double momentum, cudaStream_t s);
void batch_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t C, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta, cudaStream_t s);
void batch_norm_inference(const float* X, const float* gamma, const float* beta, const float* run_mean,
                          const float* run_var, float* Y, int64_t R, int64_t C, double eps, cudaStream_t s);

}  // namespace sg::cuda
