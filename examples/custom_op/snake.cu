// The snake activation's CUDA kernels, launched on the stream stepgraph passes: nothing else is
// needed for them to be recorded into the step's CUDA graph and replayed.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void snake_forward(const float* x, float* y, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const float s = sinf(x[i]);
    y[i] = x[i] + s * s;
  }
}

// dx = dy * (1 + sin(2x)).
__global__ void snake_backward(const float* dy, const float* x, float* dx, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = dy[i] * (1.0f + sinf(2.0f * x[i]));
}

unsigned blocks(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void snake_forward_cuda(const float* x, float* y, int64_t n, void* stream) {
  snake_forward<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, y, n);
}

void snake_backward_cuda(const float* dy, const float* x, float* dx, int64_t n, void* stream) {
  snake_backward<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dy, x, dx, n);
}
