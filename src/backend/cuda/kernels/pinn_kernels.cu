// The jets' kernels of the physics-informed ops: seed jets, jets through activations, Fourier
// features (pinn_kernels.cuh).
#include "backend/cuda/kernels/pinn_kernels.cuh"

#include <algorithm>
#include <initializer_list>

#include "backend/activation_math.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/dense_common.cuh"
#include "backend/cuda/kernels/grid.cuh"
#include "backend/cuda/kernels/reduce.cuh"
#include "backend/cuda/kernels/vec.cuh"
#include "backend/jet_math.h"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

// Point sets reach millions of elements: a larger cap than grid.cuh's default.
unsigned pinn_grid(int64_t n) { return grid_for(n, kBlock, 65535 * 16); }

// Up to kInKernelHeads value-only point sets are copied by the seed kernel itself (one launch).
constexpr int kInKernelHeads = 4;
struct HeadSets {
  const float* X[kInKernelHeads] = {};
  int64_t end[kInKernelHeads] = {};  // cumulative elements
  int n = 0;
};
__global__ void jet_input_kernel(const float* X, float* J, int64_t B, int64_t d, JetSpec js, HeadSets h) {
  const int64_t head = h.n ? h.end[h.n - 1] : 0, n = head + js.K() * B * d;
  SG_GRID_STRIDE(e, n) {
    if (e < head) {
      int q = 0;
      while (q + 1 < h.n && e >= h.end[q]) ++q;
      J[e] = h.X[q][e - (q ? h.end[q - 1] : 0)];
      continue;
    }
    const int64_t j = e - head, k = j % d, b = (j / d) % B, c = j / (d * B);
    J[e] = c == 0 ? X[b * d + k] : (c == 1 + k ? 1.0f : 0.0f);
  }
}

// One thread per (point, column): the K components sit B*H apart, so a warp reads K coalesced
// rows. D (the jet's input dimension) is a template parameter so the components stay in
// registers (see pick in jet_math.h). The arithmetic is fp32 (the reference runs the same code
// in fp64; the CUDA tests compare them): these kernels stream jets through L2, and in fp64 they
// needed 86 registers (25% occupancy): a tanh jet over 8192 points x 64 x 5 components took
// 19 us against 12.5 us in fp32 (H200).
using JetT = float;

// e / H and e % H, in 32 bits where the tensor allows (a 64-bit division costs as much as a
// jet's arithmetic).
__device__ __forceinline__ void row_col(int64_t e, int64_t H, bool small, int64_t* r, int64_t* col) {
  if (small) {
    const uint32_t q = static_cast<uint32_t>(e) / static_cast<uint32_t>(H);
    *r = q, *col = e - int64_t(q) * H;
  } else {
    *r = e / H, *col = e % H;
  }
}

// A jet tensor's head rows (value-only points, see JetSpec in ir.h): the plain activation.
template <int V>
__device__ __forceinline__ void head_forward(float* A, const float* bias, float* Y, int64_t n, int64_t H,
                                             Activation act) {
  SG_GRID_STRIDE(q, n / V) {
    const int64_t e = q * V;
    float a[V], y[V];
    load_vec<V>(A + e, a);
    if (bias) {
#pragma unroll
      for (int v = 0; v < V; ++v) a[v] += bias[e % H + v];
      store_vec<V>(A + e, a);
    }
#pragma unroll
    for (int v = 0; v < V; ++v) y[v] = act_forward<float>(act, a[v]);
    store_vec<V>(Y + e, y);
  }
}
// DW (with DZ): also this thread's sums for the one-output layer's weight gradient, dw over its
// V columns (the activation's value g0 times dZ) and db (dZ, where the thread holds column 0).
template <int V, bool DZ, bool DW = false>
__device__ __forceinline__ void head_backward(const float* dY, const JetDY& z, const float* A, float* dA, int64_t n,
                                              int64_t H, Activation act, bool acc, float (&dw)[V], float& db) {
  SG_GRID_STRIDE(q, n / V) {
    const int64_t e = q * V;
    float a[V], dy[V], o[V], dz = 0.0f;
    load_vec<V>(A + e, a);
    if constexpr (DZ) {
      int64_t r, col;
      row_col(e, H, n < (int64_t{1} << 31), &r, &col);
      float w[V];  // dY = dZ W (JetDY, one output) at row r
      load_vec<V>(z.W + col, w);
      dz = __ldg(z.dZ + r);
#pragma unroll
      for (int v = 0; v < V; ++v) dy[v] = dz * w[v];
      if (DW && col == 0) db += dz;
    } else {
      load_vec<V>(dY + e, dy);
    }
    if (acc) load_vec<V>(dA + e, o);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float g0, g1, g2, g3;
      act_derivs<float>(act, a[v], &g0, &g1, &g2, &g3);
      o[v] = acc ? o[v] + dy[v] * g1 : dy[v] * g1;
      if constexpr (DW) dw[v] = fmaf(dz, g0, dw[v]);
    }
    store_vec<V>(dA + e, o);
  }
}

// The head's `head` rows, then the K blocks of B rows from there.
// bias (nullable): the producing dense layer's bias, added here to the value row and stored back
// into A (backward reads A) instead of in a launch of its own.
// V consecutive columns per thread (float4 or float2 loads when H allows): more bytes in flight
// per thread, which these memory-bound kernels need (a scalar version moved ~1.8 TB/s on an
// H200). NP bounds the jet's second-derivative pairs: NP = D covers up to d of them (a
// Laplacian's pure second derivatives, or its single sum component) in 1 + D + NP registers
// per column; larger sets take NP = kMaxJetPairs.
// TANH1 (with V = 4, NP = 1): the PINN default, tanh over a jet with exactly one pair, compiled
// without the run-time activation switch and pair loops (their branches and index arithmetic were
// half of the instructions of the last layer's backward: Fourier 4x128 28.2 -> 24.0 us).
template <int D, int NP, int V, bool TANH1 = false>
__global__ void __launch_bounds__(kBlock) jet_activation_kernel(float* A, const float* bias, float* Y, int64_t head,
                                                                int64_t B, int64_t H, JetSpec js, Activation act_in) {
  constexpr int kK = 1 + D + NP;
  const int K = TANH1 ? kK : js.K();
  const Activation act = TANH1 ? Activation::Tanh : act_in;
  head_forward<V>(A, bias, Y, head * H, H, act);
  A += head * H, Y += head * H;
  const int64_t stride = B * H;
  SG_GRID_STRIDE(q, stride / V) {
    const int64_t e = q * V;
    float a[kK][V], y[V][kK];
#pragma unroll
    for (int c = 0; c < kK; ++c) {
      if (c < K) {
        load_vec<V>(A + c * stride + e, a[c]);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) a[c][v] = 0.0f;
      }
    }
    if (bias) {
      const int64_t col = e % H;
#pragma unroll
      for (int v = 0; v < V; ++v) a[0][v] += bias[col + v];
      store_vec<V>(A + e, a[0]);
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      JetT av[kK], g0, g1, g2, g3;
#pragma unroll
      for (int c = 0; c < kK; ++c) av[c] = a[c][v];
      act_derivs<JetT>(act, av[0], &g0, &g1, &g2, &g3);
      jet_apply<JetT, D, NP, TANH1>(js, g0, g1, g2, av, y[v]);
    }
#pragma unroll
    for (int c = 0; c < kK; ++c) {
      if (c >= K) continue;
      float o[V];
#pragma unroll
      for (int v = 0; v < V; ++v) o[v] = y[v][c];
      store_vec<V>(Y + c * stride + e, o);
    }
  }
}

// Blocks per SM of the kernel that also forms a weight gradient (its grid is one wave of them,
// one partial row each): three, at most 85 registers (it took 106 unbounded: two).
constexpr int kDyWeightBlocksPerSm = 3;

// DZ: dY = dZ W (JetDY), a kernel of its own so the plain one keeps its registers. DW (with DZ,
// V columns per thread and a grid whose threads cover whole rows, see jet_dy_weight_fits): also
// the weight gradient's partial sums of the block (JetDY::partial), from the activation's jet
// recomputed here. Every thread keeps the same V columns throughout, so it sums them in
// registers; the block's threads then add up in a fixed order (deterministic).
template <int D, int NP, int V, bool TANH1, bool DZ, bool DW = false>
__device__ __forceinline__ void jet_backward(const float* dY, JetDY z, const float* A, float* dA, int64_t head,
                                             int64_t B, int64_t H, const JetSpec& js, Activation act_in, bool acc) {
  constexpr int kK = 1 + D + NP;
  const int K = TANH1 ? kK : js.K();
  const Activation act = TANH1 ? Activation::Tanh : act_in;
  float dw[V] = {}, db = 0.0f;
  head_backward<V, DZ, DW>(dY, z, A, dA, head * H, H, act, acc, dw, db);
  dY += head * H, A += head * H, dA += head * H;
  if constexpr (DZ) z.dZ += head;
  const int64_t stride = B * H;
  SG_GRID_STRIDE(q, stride / V) {
    const int64_t e = q * V;
    float a[kK][V], dy[kK][V], da[V][kK], w[V], dz[kK];
    int64_t r = 0, col = 0;
    if constexpr (DZ) {  // the same columns of W for every component; component c's row is r + c B
      row_col(e, H, stride < (int64_t{1} << 31), &r, &col);
      load_vec<V>(z.W + col, w);
    }
#pragma unroll
    for (int c = 0; c < kK; ++c) {
      dz[c] = 0.0f;
      if (c < K) {
        load_vec<V>(A + c * stride + e, a[c]);
        if constexpr (DZ) {
          dz[c] = __ldg(z.dZ + r + c * B);
#pragma unroll
          for (int v = 0; v < V; ++v) dy[c][v] = dz[c] * w[v];
        } else {
          load_vec<V>(dY + c * stride + e, dy[c]);
        }
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) a[c][v] = 0.0f, dy[c][v] = 0.0f;
      }
    }
    if (DW && col == 0) db += dz[0];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      JetT av[kK], dyv[kK], g0, g1, g2, g3;
#pragma unroll
      for (int c = 0; c < kK; ++c) av[c] = a[c][v], dyv[c] = dy[c][v];
      act_derivs<JetT>(act, av[0], &g0, &g1, &g2, &g3);
      jet_apply_backward<JetT, D, NP, TANH1>(js, g1, g2, g3, av, dyv, da[v]);
      if constexpr (DW) {
        JetT y[kK];
        jet_apply<JetT, D, NP, TANH1>(js, g0, g1, g2, av, y);
#pragma unroll
        for (int c = 0; c < kK; ++c)
          if (c < K) dw[v] = fmaf(dz[c], y[c], dw[v]);
      }
    }
#pragma unroll
    for (int c = 0; c < kK; ++c) {
      if (c >= K) continue;
      float o[V];
      if (acc) load_vec<V>(dA + c * stride + e, o);
#pragma unroll
      for (int v = 0; v < V; ++v) o[v] = acc ? o[v] + da[v][c] : da[v][c];
      store_vec<V>(dA + c * stride + e, o);
    }
  }
  if constexpr (DW) {
    // Thread t holds columns (t % per) V .. + V - 1 (per = H / V threads cover a row); the
    // groups of `per` threads add up in order, and db over the threads that hold column 0.
    __shared__ float sw[kBlock * V], sb[kBlock];
#pragma unroll
    for (int v = 0; v < V; ++v) sw[threadIdx.x * V + v] = dw[v];
    sb[threadIdx.x] = db;
    __syncthreads();
    const int per = static_cast<int>(H / V), groups = kBlock / per;
    if (threadIdx.x < H) {
      float t = 0.0f;
      for (int g = 0; g < groups; ++g) t += sw[g * per * V + threadIdx.x];
      z.partial[blockIdx.x * H + threadIdx.x] = t;
    }
    if (z.db && threadIdx.x == 0) {
      float t = 0.0f;
      for (int g = 0; g < groups; ++g) t += sb[g * per];
      z.partial[gridDim.x * H + blockIdx.x] = t;
    }
  }
}

template <int D, int NP, int V, bool TANH1 = false>
__global__ void __launch_bounds__(kBlock) jet_activation_backward_kernel(const float* dY, JetDY z, const float* A,
                                                                         float* dA, int64_t head, int64_t B, int64_t H,
                                                                         JetSpec js, Activation act, bool acc) {
  jet_backward<D, NP, V, TANH1, false>(dY, z, A, dA, head, B, H, js, act, acc);
}
template <int D, int NP, int V, bool TANH1 = false>
__global__ void __launch_bounds__(kBlock) jet_activation_backward_dz_kernel(const float* dY, JetDY z, const float* A,
                                                                            float* dA, int64_t head, int64_t B,
                                                                            int64_t H, JetSpec js, Activation act,
                                                                            bool acc) {
  jet_backward<D, NP, V, TANH1, true>(dY, z, A, dA, head, B, H, js, act, acc);
}

template <int D, int NP, int V, bool TANH1 = false>
__global__ void __launch_bounds__(kBlock, kDyWeightBlocksPerSm) jet_activation_backward_dw_kernel(const float* dY, JetDY z, const float* A,
                                                                            float* dA, int64_t head, int64_t B,
                                                                            int64_t H, JetSpec js, Activation act,
                                                                            bool acc) {
  if constexpr (V == 4) jet_backward<D, NP, V, TANH1, true, true>(dY, z, A, dA, head, B, H, js, act, acc);
}

template <int D>
__global__ void __launch_bounds__(kBlock, 4) fourier_kernel(const float* P, float* F, int64_t B, int64_t m, JetSpec js) {
  constexpr int kK = 1 + D + kMaxJetPairs;
  const int K = js.K();
  SG_GRID_STRIDE(e, B * m) {
    const int64_t b = e / m, h = e % m;
    JetT p[kK], y[kK], g0, g1, g2, g3;
#pragma unroll
    for (int c = 0; c < kK; ++c) p[c] = c < K ? P[(c * B + b) * m + h] : JetT(0);
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      fourier_derivs<JetT>(part == 1, p[0], &g0, &g1, &g2, &g3);
      jet_apply<JetT, D>(js, g0, g1, g2, p, y);
#pragma unroll
      for (int c = 0; c < kK; ++c)
        if (c < K) F[(c * B + b) * 2 * m + part * m + h] = static_cast<float>(y[c]);
    }
  }
}

// Fourier features of X B^T with the projection folded in (fourier_features_seeded): one
// thread per (row of X's value rows, feature). The projected jet of a seed is known: its value
// is B x, its derivative along x_i is B[:, i], its second derivatives are 0. One sincospi gives
// both parts, and the index arithmetic is 32-bit where the tensors allow (SMALL): with the seed
// jet written too, 14.9 us for 18432 points x 32 features on an H200, where a first form (a
// 64-bit division by m, one lane per row for the seed jet) took 18.9.
template <int D, bool SMALL>
__device__ __forceinline__ void fourier_seeded(const float* X, const float* Xh, float* J, const float* Bm, float* P,
                                               float* F, int64_t head, int64_t B, int64_t m, int64_t d,
                                               const JetSpec& js) {
  constexpr int kK = 1 + D + kMaxJetPairs;
  const int K = js.K();
  SG_GRID_STRIDE(e, (head + B) * m) {
    int64_t r, h;  // X's row r: a head row below `head`, else point r - head
    if constexpr (SMALL) {
      const uint32_t q = static_cast<uint32_t>(e) / static_cast<uint32_t>(m);
      r = q, h = e - int64_t(q) * m;
    } else {
      r = e / m, h = e % m;
    }
    const float* x = !Xh ? X + r * d : r < head ? Xh + r * d : X + (r - head) * d;
    if (J) {  // the seed jet, as jet_input_kernel writes it: the row's threads one value each
      if (r < head) {
        if (h < d) J[r * d + h] = x[h];
      } else {
        const int kd = K * static_cast<int>(d);  // at most 15 x 4
        for (int t = static_cast<int>(h); t < kd; t += static_cast<int>(m)) {
          const int k = t / static_cast<int>(d), i = t - k * static_cast<int>(d);
          J[(head + k * B + (r - head)) * d + i] = k == 0 ? x[i] : k == 1 + i ? 1.0f : 0.0f;
        }
      }
    }
    float p0 = 0.0f;
    if constexpr (D > 0) {
#pragma unroll
      for (int i = 0; i < D; ++i) p0 = fmaf(x[i], Bm[h * D + i], p0);
    } else {
      for (int64_t i = 0; i < d; ++i) p0 = fmaf(x[i], Bm[h * d + i], p0);
    }
    JetT p[kK], y[kK], s, c, g0, g1, g2, g3;
#pragma unroll
    for (int k = 0; k < kK; ++k) p[k] = JetT(0);
    p[0] = p0;
#pragma unroll
    for (int i = 0; i < D; ++i) p[1 + i] = Bm[h * D + i];
    // P as the projection would have written it (a forward tensor like any other: the tests
    // and tools may read it).
    if (r < head) {
      P[r * m + h] = p0;
    } else {
#pragma unroll
      for (int k = 0; k < kK; ++k)
        if (k < K) P[(head + k * B + (r - head)) * m + h] = p[k];
    }
    fourier_sincos<JetT>(p0, &s, &c);
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      fourier_derivs<JetT>(part == 1, s, c, &g0, &g1, &g2, &g3);
      if (r < head) {
        F[r * 2 * m + part * m + h] = g0;
        continue;
      }
      jet_apply<JetT, D>(js, g0, g1, g2, p, y);
#pragma unroll
      for (int k = 0; k < kK; ++k)
        if (k < K) F[(head + k * B + (r - head)) * 2 * m + part * m + h] = y[k];
    }
  }
}
template <int D>
__global__ void __launch_bounds__(kBlock, 4) fourier_seeded_kernel(const float* X, const float* Xh, float* J,
                                                                   const float* Bm, float* P, float* F, int64_t head,
                                                                   int64_t B, int64_t m, int64_t d, JetSpec js) {
  if ((head + B) * m < (int64_t{1} << 31)) fourier_seeded<D, true>(X, Xh, J, Bm, P, F, head, B, m, d, js);
  else fourier_seeded<D, false>(X, Xh, J, Bm, P, F, head, B, m, d, js);
}

template <int D>
__global__ void __launch_bounds__(kBlock, 4) fourier_backward_kernel(const float* dF, const float* P, float* dP, int64_t B, int64_t m, JetSpec js,
                                        bool acc) {
  constexpr int kK = 1 + D + kMaxJetPairs;
  const int K = js.K();
  SG_GRID_STRIDE(e, B * m) {
    const int64_t b = e / m, h = e % m;
    JetT p[kK], dy[kK], da[kK], sum[kK], g0, g1, g2, g3;
#pragma unroll
    for (int c = 0; c < kK; ++c) p[c] = c < K ? P[(c * B + b) * m + h] : JetT(0), sum[c] = JetT(0);
#pragma unroll
    for (int part = 0; part < 2; ++part) {
#pragma unroll
      for (int c = 0; c < kK; ++c) dy[c] = c < K ? dF[(c * B + b) * 2 * m + part * m + h] : JetT(0);
      fourier_derivs<JetT>(part == 1, p[0], &g0, &g1, &g2, &g3);
      jet_apply_backward<JetT, D>(js, g1, g2, g3, p, dy, da);
#pragma unroll
      for (int c = 0; c < kK; ++c) sum[c] += da[c];
    }
#pragma unroll
    for (int c = 0; c < kK; ++c) {
      if (c >= K) continue;
      float* o = dP + (c * B + b) * m + h;
      *o = static_cast<float>(acc ? *o + sum[c] : sum[c]);
    }
  }
}

// Runs KERNEL<d> for the jet's d (0 .. kMaxJetDim; 0: plain values, no derivatives).
#define SG_JET_DISPATCH(js, KERNEL, GRID, ...)                                        \
  do {                                                                                \
    static_assert(kMaxJetDim == 4, "extend the dispatch");                            \
    SG_REQUIRE((js).d >= 0 && (js).d <= kMaxJetDim, "jet kernels: input dimension ", (js).d, \
               " outside 0..", kMaxJetDim);                                           \
    switch ((js).d) {                                                                 \
      case 0: KERNEL<0><<<GRID, kBlock, 0, s>>>(__VA_ARGS__); break;                  \
      case 1: KERNEL<1><<<GRID, kBlock, 0, s>>>(__VA_ARGS__); break;                  \
      case 2: KERNEL<2><<<GRID, kBlock, 0, s>>>(__VA_ARGS__); break;                  \
      case 3: KERNEL<3><<<GRID, kBlock, 0, s>>>(__VA_ARGS__); break;                  \
      default: KERNEL<4><<<GRID, kBlock, 0, s>>>(__VA_ARGS__); break;                 \
    }                                                                                 \
    KERNEL_LAUNCH_CHECK();                                                            \
  } while (0)

}  // namespace

void jet_input(const float* X, float* J, int64_t B, const JetSpec& js, const std::vector<JetHead>& heads, cudaStream_t s) {
  // The value-only points' coordinates, as they are: in the kernel (one launch) for up to
  // kInKernelHeads sets, else by copies first.
  HeadSets h;
  int64_t elems = 0;
  for (const JetHead& x : heads) {
    if (heads.size() <= kInKernelHeads) {
      h.X[h.n] = x.X;
      h.end[h.n++] = elems += x.points * js.d;
    } else {
      CUDA_CHECK(cudaMemcpyAsync(J, x.X, x.points * js.d * sizeof(float), cudaMemcpyDeviceToDevice, s));
      J += x.points * js.d;
    }
  }
  jet_input_kernel<<<pinn_grid(elems + js.K() * B * js.d), kBlock, 0, s>>>(X, J, B, js.d, js, h);
  KERNEL_LAUNCH_CHECK();
}

// The fast variant: a Laplacian-like jet (at most d second-derivative pairs) over columns that
// split into float4s (the planner's buffers are 256-byte aligned, so each row then is too):
// 4 columns per thread. Anything else runs one column per thread with room for every pair.
static bool jet_vectorized(const JetSpec& js, int64_t H, std::initializer_list<const void*> ptrs) {
  bool ok = js.npairs <= js.d && H % 4 == 0;
  for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return ok;
}

// Whether the vectorized kernels take their TANH1 form: tanh over a jet with one pair (Poisson's
// Laplacian, Burgers' and heat's u_xx), in 1 to kMaxJetDim inputs.
static bool jet_tanh1(const JetSpec& js, Activation act, bool fast) {
  return fast && act == Activation::Tanh && js.npairs == 1 && js.d >= 1;
}

#define SG_JET_DISPATCH_V(js, act, fast, KERNEL, N, ...)                                                \
  do {                                                                                                   \
    static_assert(kMaxJetDim == 4, "extend the dispatch");                                              \
    SG_REQUIRE((js).d >= 0 && (js).d <= kMaxJetDim, "jet kernels: input dimension ", (js).d, " outside 0..", \
               kMaxJetDim);                                                                              \
    const unsigned grid = pinn_grid((N) / ((fast) ? 4 : 1));                                              \
    const int form = jet_tanh1(js, act, fast) ? 2 : (fast) ? 1 : 0;                                      \
    switch ((js).d * 3 + form) {                                                                         \
      SG_JET_CASES(0, KERNEL, __VA_ARGS__)                                                               \
      SG_JET_CASES(1, KERNEL, __VA_ARGS__)                                                               \
      SG_JET_CASES(2, KERNEL, __VA_ARGS__)                                                               \
      SG_JET_CASES(3, KERNEL, __VA_ARGS__)                                                               \
      default: SG_JET_CASES(4, KERNEL, __VA_ARGS__)                                                      \
    }                                                                                                    \
    KERNEL_LAUNCH_CHECK();                                                                               \
  } while (0)
#define SG_JET_CASES(DD, KERNEL, ...)                                                                    \
  case DD * 3: KERNEL<DD, kMaxJetPairs, 1><<<grid, kBlock, 0, s>>>(__VA_ARGS__); break;                  \
  case DD * 3 + 1: KERNEL<DD, DD, 4><<<grid, kBlock, 0, s>>>(__VA_ARGS__); break;                        \
  case DD * 3 + 2: KERNEL<(DD > 0 ? DD : 1), 1, 4, true><<<grid, kBlock, 0, s>>>(__VA_ARGS__); break;

void jet_activation(float* A, const float* bias, float* Y, int64_t head, int64_t B, int64_t H, const JetSpec& js,
                    Activation act, cudaStream_t s) {
  const bool fast = jet_vectorized(js, H, {A, Y});
  SG_JET_DISPATCH_V(js, act, fast, jet_activation_kernel, (head + B) * H, A, bias, Y, head, B, H, js, act);
}

bool jet_dy_weight_fits(const JetSpec& js, int64_t H) {
  // The vectorized kernel (float4 columns), and rows that a block's threads cover whole, so
  // each thread keeps its columns through the grid-stride loop.
  return js.npairs <= js.d && js.d <= kMaxJetDim && H % 4 == 0 && H <= kBlock && (kBlock * 4) % H == 0;
}

namespace {
int jet_dy_weight_blocks(int64_t head, int64_t B, int64_t H) {
  // One partial row per block: enough blocks to keep the loads in flight, few enough that their
  // sum (split_reduce_kernel) stays short.
  const int64_t want = pinn_grid((head + B) * H / 4);
  return static_cast<int>(std::min<int64_t>(want, kDyWeightBlocksPerSm * detail::sm_count()));
}
}  // namespace

int64_t jet_dy_weight_partial_floats(int64_t head, int64_t B, int64_t H) {
  return int64_t(jet_dy_weight_blocks(head, B, H)) * (H + 1);
}

void jet_activation_backward(const float* dY, const JetDY& dy_from, const float* A, float* dA, int64_t head, int64_t B,
                             int64_t H, const JetSpec& js, Activation act, bool accumulate, cudaStream_t s) {
  SG_REQUIRE(!dy_from.dZ || dy_from.W, "jet activation backward: dY = dZ W without W");
  SG_REQUIRE(!dy_from.dW || (dy_from.dZ && dy_from.partial), "jet activation backward: a weight gradient needs dZ and scratch");
  const bool fast = jet_vectorized(js, H, {dy_from.dZ ? dy_from.W : dY, A, dA});
  if (dy_from.dW) {
    SG_REQUIRE(fast && jet_dy_weight_fits(js, H), "jet activation backward: a weight gradient on the side needs the "
               "vectorized kernel and a width dividing ", kBlock * 4, " (width ", H, ")");
    const unsigned grid = static_cast<unsigned>(jet_dy_weight_blocks(head, B, H));
    const bool tanh1 = jet_tanh1(js, act, fast);
    switch (js.d * 2 + (tanh1 ? 1 : 0)) {
#define SG_JET_DW_CASE(DD)                                                                                         \
  case DD * 2: jet_activation_backward_dw_kernel<DD, DD, 4><<<grid, kBlock, 0, s>>>(dY, dy_from, A, dA, head, B, H, js, \
                                                                                  act, accumulate); break;          \
  case DD * 2 + 1: jet_activation_backward_dw_kernel<(DD > 0 ? DD : 1), 1, 4, true><<<grid, kBlock, 0, s>>>(        \
      dY, dy_from, A, dA, head, B, H, js, act, accumulate); break;
      SG_JET_DW_CASE(0) SG_JET_DW_CASE(1) SG_JET_DW_CASE(2) SG_JET_DW_CASE(3) SG_JET_DW_CASE(4)
#undef SG_JET_DW_CASE
      default: SG_REQUIRE(false, "jet activation backward: input dimension ", js.d, " outside 0..", kMaxJetDim);
    }
    KERNEL_LAUNCH_CHECK();
    DenseGemm r;  // dW[0, c] and db: the blocks' partials summed in order, then the epilogue
    r.M = 1, r.N = H, r.K = head + js.K() * B;
    r.C = dy_from.dW, r.ldc = H, r.accumulate = dy_from.dW_accumulate;
    r.rowsum = dy_from.db, r.rowsum_accumulate = dy_from.db_accumulate;
    r.splits = static_cast<int>(grid), r.partial = dy_from.partial;
    detail::launch_reduce(r, s);
    return;
  }
  if (dy_from.dZ)
    SG_JET_DISPATCH_V(js, act, fast, jet_activation_backward_dz_kernel, (head + B) * H, dY, dy_from, A, dA, head, B, H, js,
                      act, accumulate);
  else
    SG_JET_DISPATCH_V(js, act, fast, jet_activation_backward_kernel, (head + B) * H, dY, dy_from, A, dA, head, B, H, js, act,
                      accumulate);
}

// The head rows are a jet with no derivatives (one component), in a launch of their own.
void fourier_features(const float* P, float* F, int64_t head, int64_t B, int64_t m, const JetSpec& js, cudaStream_t s) {
  if (head > 0) SG_JET_DISPATCH(JetSpec{}, fourier_kernel, pinn_grid(head * m), P, F, head, m, JetSpec{});
  P += head * m, F += head * 2 * m;
  SG_JET_DISPATCH(js, fourier_kernel, pinn_grid(B * m), P, F, B, m, js);
}

void fourier_features_seeded(const float* X, const float* Xhead, float* J, const float* Bm, float* P, float* F,
                             int64_t head, int64_t B, int64_t m, int64_t d, const JetSpec& js, cudaStream_t s) {
  SG_REQUIRE(js.K() == 1 || js.d == d, "Fourier features from a seed jet: jet dimension ", js.d, ", input width ", d);
  SG_REQUIRE(!J || js.d == d, "Fourier features writing the seed jet: jet dimension ", js.d, ", input width ", d);
  SG_JET_DISPATCH(js, fourier_seeded_kernel, pinn_grid((head + B) * m), X, Xhead, J, Bm, P, F, head, B, m, d, js);
}

void fourier_features_backward(const float* dF, const float* P, float* dP, int64_t head, int64_t B, int64_t m,
                               const JetSpec& js, bool accumulate, cudaStream_t s) {
  if (head > 0)
    SG_JET_DISPATCH(JetSpec{}, fourier_backward_kernel, pinn_grid(head * m), dF, P, dP, head, m, JetSpec{}, accumulate);
  dF += head * 2 * m, P += head * m, dP += head * m;
  SG_JET_DISPATCH(js, fourier_backward_kernel, pinn_grid(B * m), dF, P, dP, B, m, js, accumulate);
}

}  // namespace sg::cuda
