#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/image_kernels.cuh"
#include "backend/cuda/kernels/vec.cuh"

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

// The pooling geometry in the index type I: 32-bit when every offset fits (64-bit division is a
// long instruction sequence and dominated these kernels), 64-bit otherwise.
template <typename I>
struct Geo {
  I N, H, W, C, P, Q, R, S, sh, sw, ph, pw;
  explicit Geo(const PoolGeometry& g)
      : N(I(g.N)), H(I(g.H)), W(I(g.W)), C(I(g.C)), P(I(g.P)), Q(I(g.Q)), R(I(g.R)), S(I(g.S)),
        sh(I(g.stride_h)), sw(I(g.stride_w)), ph(I(g.pad_h)), pw(I(g.pad_w)) {}
};

// Calls fn(at) with the input offset (channel c) of every element of output (n, p, q)'s window
// that lies in the image, in scan order (r, then s).
template <typename I, typename Fn>
__device__ __forceinline__ void for_window(const Geo<I>& g, I n, I p, I q, I c, Fn fn) {
  for (I r = 0; r < g.R; ++r) {
    const I h = p * g.sh - g.ph + r;
    if (h < 0 || h >= g.H) continue;
    for (I t = 0; t < g.S; ++t) {
      const I w = q * g.sw - g.pw + t;
      if (w >= 0 && w < g.W) fn(((n * g.H + h) * g.W + w) * g.C + c);
    }
  }
}

// V consecutive channels per thread (4 when C allows float4 loads).
// The window maximum of output (n, p, q) for channels c..c+V-1 and the input offset of each
// lane's first maximum: the CPU reference's rule (scan order r then s; strictly greater wins; a
// NaN is taken at once and then kept). best is -1 for a window with no input in it.
template <typename I, int V>
__device__ void window_max(const float* X, const Geo<I>& g, I n, I p, I q, I c, float (&mx)[V], I (&best)[V]) {
  for (int l = 0; l < V; ++l) mx[l] = -INFINITY, best[l] = -1;
  for_window(g, n, p, q, c, [&](I at) {
    float x[V];
    load_vec<V>(X + at, x);
    for (int l = 0; l < V; ++l)
      if (best[l] < 0 || x[l] > mx[l] || (x[l] != x[l] && mx[l] == mx[l])) best[l] = at + l, mx[l] = x[l];
  });
}

// A thread per output (n, p, q) and V channels. Forward: Y = the window maximum. Backward, for
// windows that do not overlap (stride >= window, so each input element is in at most one
// window): the thread writes its whole window of dX, dY at the first maximum and 0 elsewhere
// (the CPU's float(old + sum) with a sum of one term or none); elements outside every window
// are cleared beforehand when not accumulating.
template <typename I, int V, bool kBackward>
__global__ void max_pool2d_window_kernel(const float* X, const float* dY, float* out, Geo<I> g, bool acc) {
  const I CV = g.C / V, total = g.N * g.P * g.Q * CV;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I c = (i % CV) * V, pix = i / CV, q = pix % g.Q, p = (pix / g.Q) % g.P, n = pix / (g.Q * g.P);
    float mx[V];
    I best[V];
    window_max<I, V>(X, g, n, p, q, c, mx, best);
    const I o = ((n * g.P + p) * g.Q + q) * g.C + c;
    if constexpr (!kBackward) {
      for (int l = 0; l < V; ++l) out[o + l] = mx[l];
    } else {
      float dy[V];
      load_vec<V>(dY + o, dy);
      for_window(g, n, p, q, c, [&](I at) {
        for (int l = 0; l < V; ++l) store(out + at + l, at + l == best[l] ? double(dy[l]) : 0.0, acc);
      });
    }
  }
}

// Output rows (or columns) whose window covers input row h: p*stride - pad <= h <= p*stride - pad + R - 1.
template <typename I>
__device__ __forceinline__ void covering(I h, I pad, I R, I stride, I P, I* lo, I* hi) {
  const I a = h + pad - R + 1;  // p*stride >= a
  *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  const I top = (h + pad) / stride;
  *hi = top < P - 1 ? top : P - 1;
}

// Overlapping windows: a gather per input element over the outputs whose window covers it.
template <typename I>
__global__ void max_pool2d_backward_kernel(const float* dY, const float* X, float* dX, Geo<I> g, bool acc) {
  const I total = g.N * g.H * g.W * g.C;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I c = i % g.C, w = (i / g.C) % g.W, h = (i / (g.C * g.W)) % g.H, n = i / (g.C * g.W * g.H);
    I p0, p1, q0, q1;
    covering<I>(h, g.ph, g.R, g.sh, g.P, &p0, &p1);
    covering<I>(w, g.pw, g.S, g.sw, g.Q, &q0, &q1);
    double sum = 0;  // in (p, q) order, as the CPU adds them
    for (I p = p0; p <= p1; ++p)
      for (I q = q0; q <= q1; ++q) {
        float mx[1];
        I best[1];
        window_max<I, 1>(X, g, n, p, q, c, mx, best);
        if (best[0] == i) sum += dY[((n * g.P + p) * g.Q + q) * g.C + c];
      }
    store(dX + i, sum, acc);
  }
}

template <typename I>
__global__ void global_avg_pool_kernel(const float* X, float* Y, I N, I HW, I C) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < N * C; i += I(gridDim.x) * blockDim.x) {
    const I n = i / C, c = i % C;
    double sum = 0;
    for (I k = 0; k < HW; ++k) sum += X[(n * HW + k) * C + c];
    Y[i] = static_cast<float>(sum / static_cast<double>(HW));
  }
}

template <typename I>
__global__ void global_avg_pool_backward_kernel(const float* dY, float* dX, I N, I HW, I C, bool acc) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < N * HW * C; i += I(gridDim.x) * blockDim.x) {
    const I c = i % C, n = i / (HW * C);
    store(dX + i, dY[n * C + c] / static_cast<double>(HW), acc);
  }
}

__global__ void copy_or_add_kernel(const float* X, float* Y, int64_t n, bool acc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(Y + i, X[i], acc);
}

}  // namespace

namespace {

// 32-bit offsets when the largest one fits (with room for a grid stride past the end).
bool fits32(int64_t elements) { return elements < (int64_t(1) << 30); }

template <typename I>
void max_pool2d_as(const float* X, float* Y, const PoolGeometry& g, cudaStream_t s) {
  const Geo<I> geo(g);
  const int64_t pixels = g.N * g.P * g.Q;
  if (g.C % 4 == 0) max_pool2d_window_kernel<I, 4, false><<<grid_for(pixels * g.C / 4), kBlock, 0, s>>>(X, nullptr, Y, geo, false);
  else max_pool2d_window_kernel<I, 1, false><<<grid_for(pixels * g.C), kBlock, 0, s>>>(X, nullptr, Y, geo, false);
  KERNEL_LAUNCH_CHECK();
}

template <typename I>
void max_pool2d_backward_as(const float* dY, const float* X, float* dX, const PoolGeometry& g, bool acc,
                            cudaStream_t s) {
  const Geo<I> geo(g);
  if (g.stride_h < g.R || g.stride_w < g.S) {
    max_pool2d_backward_kernel<I><<<grid_for(g.N * g.H * g.W * g.C), kBlock, 0, s>>>(dY, X, dX, geo, acc);
    KERNEL_LAUNCH_CHECK();
    return;
  }
  const bool tiled = g.pad_h == 0 && g.pad_w == 0 && g.P * g.R == g.H && g.Q * g.S == g.W &&
                     g.stride_h == g.R && g.stride_w == g.S;
  if (!tiled && !acc)
    CUDA_CHECK(cudaMemsetAsync(dX, 0, static_cast<size_t>(g.N * g.H * g.W * g.C) * sizeof(float), s));
  const int64_t pixels = g.N * g.P * g.Q;
  if (g.C % 4 == 0)
    max_pool2d_window_kernel<I, 4, true><<<grid_for(pixels * g.C / 4), kBlock, 0, s>>>(X, dY, dX, geo, acc);
  else
    max_pool2d_window_kernel<I, 1, true><<<grid_for(pixels * g.C), kBlock, 0, s>>>(X, dY, dX, geo, acc);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace

void max_pool2d(const float* X, float* Y, const PoolGeometry& g, cudaStream_t s) {
  if (g.N * g.P * g.Q * g.C == 0) return;
  if (fits32(g.N * g.H * g.W * g.C) && fits32(g.N * g.P * g.Q * g.C)) max_pool2d_as<int32_t>(X, Y, g, s);
  else max_pool2d_as<int64_t>(X, Y, g, s);
}

void max_pool2d_backward(const float* dY, const float* X, float* dX, const PoolGeometry& g, bool accumulate,
                         cudaStream_t s) {
  if (g.N * g.H * g.W * g.C == 0) return;
  if (fits32(g.N * g.H * g.W * g.C) && fits32(g.N * g.P * g.Q * g.C))
    max_pool2d_backward_as<int32_t>(dY, X, dX, g, accumulate, s);
  else
    max_pool2d_backward_as<int64_t>(dY, X, dX, g, accumulate, s);
}

void global_avg_pool(const float* X, float* Y, int64_t N, int64_t HW, int64_t C, cudaStream_t s) {
  SG_REQUIRE(HW > 0, "global_avg_pool: empty image");
  if (N * C == 0) return;
  if (fits32(N * HW * C)) global_avg_pool_kernel<int32_t><<<grid_for(N * C), kBlock, 0, s>>>(X, Y, N, HW, C);
  else global_avg_pool_kernel<int64_t><<<grid_for(N * C), kBlock, 0, s>>>(X, Y, N, HW, C);
  KERNEL_LAUNCH_CHECK();
}

void global_avg_pool_backward(const float* dY, float* dX, int64_t N, int64_t HW, int64_t C, bool accumulate,
                              cudaStream_t s) {
  if (N * HW * C == 0) return;
  if (fits32(N * HW * C))
    global_avg_pool_backward_kernel<int32_t><<<grid_for(N * HW * C), kBlock, 0, s>>>(dY, dX, N, HW, C, accumulate);
  else
    global_avg_pool_backward_kernel<int64_t><<<grid_for(N * HW * C), kBlock, 0, s>>>(dY, dX, N, HW, C, accumulate);
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
