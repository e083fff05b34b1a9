#include "backend/cuda/pinn_kernels.cuh"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/jet_math.h"
#include "pinn/expr_tape.h"
#include "pinn/sample_math.h"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t g = (n + block - 1) / block;
  return static_cast<unsigned>(g < 1 ? 1 : g < 65535 * 16 ? g : 65535 * 16);
}

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void jet_input_kernel(const float* X, float* J, int64_t B, int64_t d, JetSpec js) {
  const int64_t n = js.K() * B * d;
  GRID_STRIDE(e, n) {
    const int64_t k = e % d, b = (e / d) % B, c = e / (d * B);
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
// bias (nullable): the producing dense layer's bias, added here to the value row and stored back
// into A (backward reads A) instead of in a launch of its own.
template <int D>
__global__ void __launch_bounds__(kBlock, 4) jet_activation_kernel(float* A, const float* bias, float* Y, int64_t B,
                                                                   int64_t H, JetSpec js, Activation act) {
  constexpr int kK = 1 + D + kMaxJetPairs;
  const int K = js.K();
  const int64_t stride = B * H;
  GRID_STRIDE(e, stride) {
    JetT a[kK], y[kK], g0, g1, g2, g3;
#pragma unroll
    for (int c = 0; c < kK; ++c) a[c] = c < K ? A[c * stride + e] : JetT(0);
    if (bias) {
      a[0] += bias[e % H];
      A[e] = a[0];
    }
    act_derivs<JetT>(act, a[0], &g0, &g1, &g2, &g3);
    jet_apply<JetT, D>(js, g0, g1, g2, a, y);
#pragma unroll
    for (int c = 0; c < kK; ++c)
      if (c < K) Y[c * stride + e] = static_cast<float>(y[c]);
  }
}

template <int D>
__global__ void __launch_bounds__(kBlock, 4) jet_activation_backward_kernel(const float* dY, const float* A, float* dA, int64_t B, int64_t H,
                                               JetSpec js, Activation act, bool acc) {
  constexpr int kK = 1 + D + kMaxJetPairs;
  const int K = js.K();
  const int64_t stride = B * H;
  GRID_STRIDE(e, stride) {
    JetT a[kK], dy[kK], da[kK], g0, g1, g2, g3;
#pragma unroll
    for (int c = 0; c < kK; ++c) a[c] = c < K ? A[c * stride + e] : JetT(0), dy[c] = c < K ? dY[c * stride + e] : JetT(0);
    act_derivs<JetT>(act, a[0], &g0, &g1, &g2, &g3);
    jet_apply_backward<JetT, D>(js, g1, g2, g3, a, dy, da);
#pragma unroll
    for (int c = 0; c < kK; ++c)
      if (c < K) dA[c * stride + e] = static_cast<float>(acc ? dA[c * stride + e] + da[c] : da[c]);
  }
}

template <int D>
__global__ void __launch_bounds__(kBlock, 4) fourier_kernel(const float* P, float* F, int64_t B, int64_t m, JetSpec js) {
  constexpr int kK = 1 + D + kMaxJetPairs;
  const int K = js.K();
  GRID_STRIDE(e, B * m) {
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

template <int D>
__global__ void __launch_bounds__(kBlock, 4) fourier_backward_kernel(const float* dF, const float* P, float* dP, int64_t B, int64_t m, JetSpec js,
                                        bool acc) {
  constexpr int kK = 1 + D + kMaxJetPairs;
  const int K = js.K();
  GRID_STRIDE(e, B * m) {
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

constexpr int kExprBlock = 128;

// One thread per point (grid-stride), the tape and variable table staged in shared memory; the
// per-instruction scratch (CAP values and adjoints) lives in each thread's local memory, so
// CAP follows the tape's length (see expression_loss).
template <int CAP>
__global__ void __launch_bounds__(kExprBlock) expression_loss_kernel(
    ExprLossDevice e, const float* U, const float* X, float* total, float* term, float* dU, int64_t M, int64_t d,
    int64_t O, int K, double scale, bool acc) {
  __shared__ alignas(8) unsigned char tape_bytes[kMaxTape * sizeof(pinn::TapeInstr)];
  __shared__ alignas(8) unsigned char var_bytes[64 * sizeof(ExprVar)];
  auto* tape = reinterpret_cast<pinn::TapeInstr*>(tape_bytes);
  auto* vars = reinterpret_cast<ExprVar*>(var_bytes);
  for (int i = threadIdx.x; i < e.n; i += blockDim.x) tape[i] = e.tape[i];
  for (int i = threadIdx.x; i < e.nvars; i += blockDim.x) vars[i] = e.vars[i];
  __syncthreads();
  double val[CAP], adj[CAP];
  double sum = 0.0;
  GRID_STRIDE(m, M) {
    const double r = pinn::expression_point(tape, e.n, vars, U, X, dU, m, M, d, O, K, 2.0 * scale, val, adj);
    sum += r * r;
  }
  double all = 0.0;
  if (sum_across_blocks(block_sum(sum), e.partials, e.counter, &all) && threadIdx.x == 0) {
    const double v = scale * all;
    *term = static_cast<float>(v);
    *total = acc ? static_cast<float>(*total + v) : static_cast<float>(v);
  }
}

__global__ void sample_points_kernel(const int32_t* step, float* X, int64_t M, int64_t d, SampleAttrs a) {
  const int64_t s = *step;
  GRID_STRIDE(e, M * d) X[e] = static_cast<float>(pinn::sample_coordinate(a, s, e / d, static_cast<int>(e % d), static_cast<int>(d)));
}

}  // namespace

void jet_input(const float* X, float* J, int64_t B, const JetSpec& js, cudaStream_t s) {
  jet_input_kernel<<<grid_for(js.K() * B * js.d), kBlock, 0, s>>>(X, J, B, js.d, js);
  KERNEL_LAUNCH_CHECK();
}

void jet_activation(float* A, const float* bias, float* Y, int64_t B, int64_t H, const JetSpec& js, Activation act,
                    cudaStream_t s) {
  SG_JET_DISPATCH(js, jet_activation_kernel, grid_for(B * H), A, bias, Y, B, H, js, act);
}

void jet_activation_backward(const float* dY, const float* A, float* dA, int64_t B, int64_t H, const JetSpec& js,
                             Activation act, bool accumulate, cudaStream_t s) {
  SG_JET_DISPATCH(js, jet_activation_backward_kernel, grid_for(B * H), dY, A, dA, B, H, js, act, accumulate);
}

void fourier_features(const float* P, float* F, int64_t B, int64_t m, const JetSpec& js, cudaStream_t s) {
  SG_JET_DISPATCH(js, fourier_kernel, grid_for(B * m), P, F, B, m, js);
}

void fourier_features_backward(const float* dF, const float* P, float* dP, int64_t B, int64_t m, const JetSpec& js,
                               bool accumulate, cudaStream_t s) {
  SG_JET_DISPATCH(js, fourier_backward_kernel, grid_for(B * m), dF, P, dP, B, m, js, accumulate);
}

int expression_loss_blocks(int64_t M) {
  const int64_t b = (M + kExprBlock - 1) / kExprBlock;
  return static_cast<int>(b < 1 ? 1 : b < 1024 ? b : 1024);
}

void expression_loss(const ExprLossDevice& e, const float* U, const float* X, float* total, float* term, float* dU,
                     int64_t M, int64_t d, int64_t O, int K, double weight, bool accumulate_total, cudaStream_t s) {
  SG_REQUIRE(e.n >= 1 && e.n <= kMaxTape && e.nvars <= 64, "expression loss: a tape of ", e.n,
             " instructions over ", e.nvars, " variables (at most ", kMaxTape, " and 64)");
  const int blocks = expression_loss_blocks(M);
  SG_REQUIRE(blocks <= e.blocks, "expression loss: scratch for ", e.blocks, " blocks, ", blocks, " needed");
  const double scale = weight / static_cast<double>(M > 0 ? M : 1);
  // The smallest scratch that holds the tape: local memory per thread grows with it.
#define SG_EXPR_LAUNCH(CAP) \
  expression_loss_kernel<CAP><<<blocks, kExprBlock, 0, s>>>(e, U, X, total, term, dU, M, d, O, K, scale, accumulate_total)
  if (e.n <= 16) SG_EXPR_LAUNCH(16);
  else if (e.n <= 32) SG_EXPR_LAUNCH(32);
  else if (e.n <= 64) SG_EXPR_LAUNCH(64);
  else SG_EXPR_LAUNCH(kMaxTape);
#undef SG_EXPR_LAUNCH
  KERNEL_LAUNCH_CHECK();
}

void sample_points(const int32_t* step, float* X, int64_t M, int64_t d, const SampleAttrs& a, cudaStream_t s) {
  sample_points_kernel<<<grid_for(M * d), kBlock, 0, s>>>(step, X, M, d, a);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
