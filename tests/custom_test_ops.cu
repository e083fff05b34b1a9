// The CUDA kernels of the tests' user-defined op test_cube (custom_test_ops.h), written as a
// user would: plain kernels launched on the stream the engine passes.
#include <cuda_runtime.h>

#include <cstdint>

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

}  // namespace

void cube_cuda(const float* x, float* y, int64_t n, void* stream) {
  cube_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, y, n);
}

void cube_backward_cuda(const float* dy, const float* x, float* dx, int64_t n, void* stream) {
  cube_backward_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dy, x, dx, n);
}

// Copies x to y, then synchronizes the stream: allowed op by op, refused inside a capture.
void copy_then_sync_cuda(const float* x, float* y, int64_t n, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaMemcpyAsync(y, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, s);
  cudaStreamSynchronize(s);
}

}  // namespace sg::test
