#include "backend/cuda/cuda_check.h"
#include "backend/cuda/image_kernels.cuh"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

inline unsigned grid_for(int64_t n, int64_t cap = 65535 * 8) {
  int64_t g = (n + kBlock - 1) / kBlock;
  if (g < 1) g = 1;
  return static_cast<unsigned>(g < cap ? g : cap);
}

// As the CPU: float(old + v) with v in double when accumulating.
__device__ __forceinline__ void store(float* out, double v, bool acc) {
  *out = acc ? static_cast<float>(*out + v) : static_cast<float>(v);
}

// The input offset of the first maximum of output (n, p, q)'s window for channel c: the CPU
// reference's rule (strictly greater wins; a NaN is taken at once and then kept).
__device__ int64_t window_argmax(const float* X, const PoolGeometry& g, int64_t n, int64_t p, int64_t q, int64_t c) {
  int64_t best = -1;
  float mx = -INFINITY;
  for (int64_t r = 0; r < g.R; ++r) {
    const int64_t h = p * g.stride_h - g.pad_h + r;
    if (h < 0 || h >= g.H) continue;
    for (int64_t t = 0; t < g.S; ++t) {
      const int64_t w = q * g.stride_w - g.pad_w + t;
      if (w < 0 || w >= g.W) continue;
      const int64_t at = ((n * g.H + h) * g.W + w) * g.C + c;
      const float x = X[at];
      if (best < 0 || x > mx || (x != x && mx == mx)) {
        best = at;
        mx = x;
      }
    }
  }
  return best;
}

__global__ void max_pool2d_kernel(const float* X, float* Y, PoolGeometry g) {
  const int64_t total = g.N * g.P * g.Q * g.C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % g.C, q = (i / g.C) % g.Q, p = (i / (g.C * g.Q)) % g.P, n = i / (g.C * g.Q * g.P);
    Y[i] = X[window_argmax(X, g, n, p, q, c)];
  }
}

// Output rows (or columns) whose window covers input row h: p*stride - pad <= h <= p*stride - pad + R - 1.
__device__ __forceinline__ void covering(int64_t h, int64_t pad, int64_t R, int64_t stride, int64_t P, int64_t* lo,
                                         int64_t* hi) {
  const int64_t a = h + pad - R + 1;  // p*stride >= a
  *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  const int64_t top = (h + pad) / stride;
  *hi = top < P - 1 ? top : P - 1;
}

__global__ void max_pool2d_backward_kernel(const float* dY, const float* X, float* dX, PoolGeometry g, bool acc) {
  const int64_t total = g.N * g.H * g.W * g.C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % g.C, w = (i / g.C) % g.W, h = (i / (g.C * g.W)) % g.H, n = i / (g.C * g.W * g.H);
    int64_t p0, p1, q0, q1;
    covering(h, g.pad_h, g.R, g.stride_h, g.P, &p0, &p1);
    covering(w, g.pad_w, g.S, g.stride_w, g.Q, &q0, &q1);
    double sum = 0;  // in (p, q) order, as the CPU adds them
    for (int64_t p = p0; p <= p1; ++p)
      for (int64_t q = q0; q <= q1; ++q)
        if (window_argmax(X, g, n, p, q, c) == i) sum += dY[((n * g.P + p) * g.Q + q) * g.C + c];
    store(dX + i, sum, acc);
  }
}

__global__ void global_avg_pool_kernel(const float* X, float* Y, int64_t N, int64_t HW, int64_t C) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < N * C; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    double sum = 0;
    for (int64_t k = 0; k < HW; ++k) sum += X[(n * HW + k) * C + c];
    Y[i] = static_cast<float>(sum / static_cast<double>(HW));
  }
}

__global__ void global_avg_pool_backward_kernel(const float* dY, float* dX, int64_t N, int64_t HW, int64_t C, bool acc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < N * HW * C; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % C, n = i / (HW * C);
    store(dX + i, dY[n * C + c] / static_cast<double>(HW), acc);
  }
}

__global__ void copy_or_add_kernel(const float* X, float* Y, int64_t n, bool acc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(Y + i, X[i], acc);
}

}  // namespace

void max_pool2d(const float* X, float* Y, const PoolGeometry& g, cudaStream_t s) {
  const int64_t n = g.N * g.P * g.Q * g.C;
  if (n == 0) return;
  max_pool2d_kernel<<<grid_for(n), kBlock, 0, s>>>(X, Y, g);
  KERNEL_LAUNCH_CHECK();
}

void max_pool2d_backward(const float* dY, const float* X, float* dX, const PoolGeometry& g, bool accumulate,
                         cudaStream_t s) {
  const int64_t n = g.N * g.H * g.W * g.C;
  if (n == 0) return;
  max_pool2d_backward_kernel<<<grid_for(n), kBlock, 0, s>>>(dY, X, dX, g, accumulate);
  KERNEL_LAUNCH_CHECK();
}

void global_avg_pool(const float* X, float* Y, int64_t N, int64_t HW, int64_t C, cudaStream_t s) {
  SG_REQUIRE(HW > 0, "global_avg_pool: empty image");
  if (N * C == 0) return;
  global_avg_pool_kernel<<<grid_for(N * C), kBlock, 0, s>>>(X, Y, N, HW, C);
  KERNEL_LAUNCH_CHECK();
}

void global_avg_pool_backward(const float* dY, float* dX, int64_t N, int64_t HW, int64_t C, bool accumulate,
                              cudaStream_t s) {
  if (N * HW * C == 0) return;
  global_avg_pool_backward_kernel<<<grid_for(N * HW * C), kBlock, 0, s>>>(dY, dX, N, HW, C, accumulate);
  KERNEL_LAUNCH_CHECK();
}

void copy_or_add(const float* X, float* Y, int64_t n, bool accumulate, cudaStream_t s) {
  if (n == 0) return;
  if (!accumulate) {
    CUDA_CHECK(cudaMemcpyAsync(Y, X, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, s));
    return;
  }
  copy_or_add_kernel<<<grid_for(n), kBlock, 0, s>>>(X, Y, n, true);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
