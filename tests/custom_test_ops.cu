// The CUDA kernels of the tests' user-defined op test_cube (custom_test_ops.h), written as a
// user would: plain kernels launched on the stream the engine passes.
#include <cuda_runtime.h>

#include <cstdint>

#include "custom_test_ops.h"

namespace sg::test {

namespace {

__global__ void cube_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i] * x[i];
}

__global__ void cube_backward_kernel(const float* dy, const float* x, float* dx, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = 3 * x[i] * x[i] * dy[i];
}

unsigned blocks(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

// One block: each thread its elements, then a tree sum in shared memory (as a user would).
__global__ void log_cosh_kernel(const float* p, const float* t, const int32_t* valid, float* loss, float* dp, int64_t B,
                                int64_t per) {
  __shared__ double part[256];
  const int64_t rows = valid ? *valid : B, n = rows * per;
  double s = 0;
  for (int64_t i = threadIdx.x; i < B * per; i += blockDim.x) {
    const double e = static_cast<double>(p[i]) - t[i];
    const bool pad = i / per >= rows;
    if (!pad) s += log(cosh(e));
    dp[i] = pad ? 0.0f : static_cast<float>(tanh(e) / static_cast<double>(n));
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = 128; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = static_cast<float>(part[0] / static_cast<double>(n));
}

}  // namespace

void cube_cuda(const float* x, float* y, int64_t n, void* stream) {
  cube_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, y, n);
}

void cube_backward_cuda(const float* dy, const float* x, float* dx, int64_t n, void* stream) {
  cube_backward_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dy, x, dx, n);
}

void log_cosh_cuda(const LossArgs& a) {
  const int64_t B = a.pred_shape[0], per = numel(a.pred_shape) / B;
  log_cosh_kernel<<<1, 256, 0, static_cast<cudaStream_t>(a.stream)>>>(a.pred, a.target, a.valid_rows, a.loss, a.dpred, B,
                                                                      per);
}

// Copies x to y, then synchronizes the stream: allowed op by op, refused inside a capture.
void copy_then_sync_cuda(const float* x, float* y, int64_t n, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaMemcpyAsync(y, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, s);
  cudaStreamSynchronize(s);
}

}  // namespace sg::test
