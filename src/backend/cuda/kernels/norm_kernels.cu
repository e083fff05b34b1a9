// Batch norm kernels (norm_kernels.cuh).
#include "backend/cuda/kernels/norm_kernels.cuh"

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

namespace {

constexpr int kTile = 32;  // channels per block (threadIdx.x) and row lanes per channel (threadIdx.y)

// The sum of every thread's v over threadIdx.y for this thread's channel, in lane order (the
// same order every run), seen by every thread of the block.
__device__ double column_sum(double v, double (*sh)[kTile + 1]) {
  sh[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0) {
    double s = 0;
    for (int k = 0; k < kTile; ++k) s += sh[k][threadIdx.x];
    sh[kTile][threadIdx.x] = s;
  }
  __syncthreads();
  const double s = sh[kTile][threadIdx.x];
  __syncthreads();  // sh is written again by the next call
  return s;
}

__global__ void batch_norm_kernel(const float* X, const float* gamma, const float* beta, float* Y, float* mean,
                                  float* rstd, float* run_mean, float* run_var, int64_t R, int64_t C, double eps,
                                  double momentum) {
  PDL_PROLOGUE();
  __shared__ double sh[kTile + 1][kTile + 1];
  const int64_t c = int64_t(blockIdx.x) * kTile + threadIdx.x;
  const bool on = c < C;  // threads past the last channel still take part in the reductions
  double s = 0;
  if (on)
    for (int64_t r = threadIdx.y; r < R; r += kTile) s += X[r * C + c];
  const double mu = column_sum(s, sh) / static_cast<double>(R);
  double v = 0;
  if (on)
    for (int64_t r = threadIdx.y; r < R; r += kTile) {
      const double d = X[r * C + c] - mu;
      v += d * d;
    }
  const double var = column_sum(v, sh) / static_cast<double>(R);
  if (!on) return;
  // As the CPU reference: float statistics, which backward reads.
  const float m = static_cast<float>(mu), rs = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  if (threadIdx.y == 0) {
    mean[c] = m;
    rstd[c] = rs;
    const double mo = momentum;
    run_mean[c] = static_cast<float>((1 - mo) * run_mean[c] + mo * mu);
    run_var[c] = static_cast<float>((1 - mo) * run_var[c] + mo * var * static_cast<double>(R) / static_cast<double>(R - 1));
  }
  const float g = gamma[c], b = beta[c];
  for (int64_t r = threadIdx.y; r < R; r += kTile) Y[r * C + c] = (X[r * C + c] - m) * rs * g + b;
}

__global__ void batch_norm_backward_kernel(const float* dY, const float* X, const float* gamma, const float* mean,
                                           const float* rstd, float* dX, float* dgamma, float* dbeta, int64_t R,
                                           int64_t C, bool acc_dx, bool acc_dgamma, bool acc_dbeta) {
  PDL_PROLOGUE();
  __shared__ double sh[kTile + 1][kTile + 1];
  const int64_t c = int64_t(blockIdx.x) * kTile + threadIdx.x;
  const bool on = c < C;
  const float m = on ? mean[c] : 0.0f, rs = on ? rstd[c] : 0.0f;
  double sdy = 0, sdyx = 0;
  if (on)
    for (int64_t r = threadIdx.y; r < R; r += kTile) {
      const double dy = dY[r * C + c];
      sdy += dy;
      sdyx += dy * ((static_cast<double>(X[r * C + c]) - m) * rs);
    }
  sdy = column_sum(sdy, sh);
  sdyx = column_sum(sdyx, sh);
  if (!on) return;
  if (threadIdx.y == 0) {
    if (dgamma) dgamma[c] = static_cast<float>(acc_dgamma ? dgamma[c] + sdyx : sdyx);
    if (dbeta) dbeta[c] = static_cast<float>(acc_dbeta ? dbeta[c] + sdy : sdy);
  }
  if (!dX) return;
  const double inv_n = 1.0 / static_cast<double>(R);
  const double g = static_cast<double>(gamma[c]) * rs, a = sdy * inv_n, bq = sdyx * inv_n;
  for (int64_t r = threadIdx.y; r < R; r += kTile) {
    const double xhat = (static_cast<double>(X[r * C + c]) - m) * rs;
    const double v = g * (dY[r * C + c] - a - xhat * bq);
    dX[r * C + c] = static_cast<float>(acc_dx ? dX[r * C + c] + v : v);
  }
}

__global__ void batch_norm_inference_kernel(const float* X, const float* gamma, const float* beta,
                                            const float* run_mean, const float* run_var, float* Y, int64_t n,
                                            int64_t C, double eps) {
  PDL_PROLOGUE();
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = k % C;
    const float rs = static_cast<float>(1.0 / sqrt(static_cast<double>(run_var[c]) + static_cast<double>(eps)));
    Y[k] = (X[k] - run_mean[c]) * rs * gamma[c] + beta[c];
  }
}

}  // namespace

int64_t batch_norm_blocks(int64_t C) { return (C + kTile - 1) / kTile; }

void batch_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                float* run_mean, float* run_var, int64_t R, int64_t C, double eps, double momentum, cudaStream_t s) {
  launch_pdl(batch_norm_kernel, dim3(static_cast<unsigned>(batch_norm_blocks(C))), dim3(kTile, kTile), 0, s, X, gamma,
             beta, Y, mean, rstd, run_mean, run_var, R, C, eps, momentum);
  KERNEL_LAUNCH_CHECK();
}

void batch_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t C, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta, cudaStream_t s) {
  launch_pdl(batch_norm_backward_kernel, dim3(static_cast<unsigned>(batch_norm_blocks(C))), dim3(kTile, kTile), 0, s,
             dY, X, gamma, mean, rstd, dX, dgamma, dbeta, R, C, acc_dx, acc_dgamma, acc_dbeta);
  KERNEL_LAUNCH_CHECK();
}

void batch_norm_inference(const float* X, const float* gamma, const float* beta, const float* run_mean,
                          const float* run_var, float* Y, int64_t R, int64_t C, double eps, cudaStream_t s) {
  const int64_t n = R * C;
  int64_t blocks = (n + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  launch_pdl(batch_norm_inference_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, s, X, gamma, beta,
             run_mean, run_var, Y, n, C, eps);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
