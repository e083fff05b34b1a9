// Our dense-product kernels alone (CUDA builds only), against a double-precision product: one
// product in one of the layouts the dense layers use, every output poisoned (NaN) first, with the
// epilogue its role gives it. Shared by the k-sliced (test_cuda.cpp) and 3xTF32
// (test_cuda_pinn.cpp) kernel tests.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "backend/cuda/dense_kernels.cuh"

namespace sg::test {

struct ProductCase {
  const char* what;
  int64_t M, N, K;
  bool am, bn;  // A's m / B's n the unit stride (else k)
  int splits;
};

// Runs c (tf32x3 or fp32) after `taken` confirmed the kernel under test takes it, and returns the
// worst |got - exact| / sum |a b| over all outputs. The roles, as the lowering builds them:
// a weight gradient (am: A = dZ^T) sums A's first K/5 values of k per row on the side (the bias
// gradient); a forward (one split, k-fast A) adds a bias on the first M/3 rows, keeps the
// pre-activation and applies tanh; an input gradient accumulates onto C and multiplies by relu'
// of a random y (the previous layer's activation, fused).
inline double own_product_error(const ProductCase& c, bool tf32x3, const std::function<bool(const cuda::DenseGemm&)>& taken) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> a(c.M * c.K), b(c.K * c.N), c0(c.M * c.N), bias(c.N), y(c.M * c.N);
  for (auto* v : {&a, &b, &c0, &bias, &y})
    for (float& x : *v) x = nd(rng);
  const int64_t sam = c.am ? 1 : c.K, sak = c.am ? c.M : 1, sbn = c.bn ? 1 : c.K, sbk = c.bn ? c.N : 1;
  const int64_t bias_rows = c.M / 3, rowsum_k = c.K / 5;
  const bool wgrad = c.am, fwd = !wgrad && c.splits == 1 && !c.bn, acc = !fwd && !wgrad;
  float *dA, *dB, *dC, *dZ, *dBias, *dRow, *dPart, *dY;
  const int64_t part = cuda::own_gemm_partial_floats(c.M, c.N, c.splits);
  EXPECT_EQ(cudaMalloc(&dA, a.size() * 4), cudaSuccess);
  cudaMalloc(&dB, b.size() * 4), cudaMalloc(&dC, c0.size() * 4), cudaMalloc(&dZ, c0.size() * 4), cudaMalloc(&dY, y.size() * 4);
  cudaMalloc(&dBias, bias.size() * 4), cudaMalloc(&dRow, c.M * 4), cudaMalloc(&dPart, (part + 1) * 4);
  cudaMemcpy(dA, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dBias, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dY, y.data(), y.size() * 4, cudaMemcpyHostToDevice);
  if (acc) cudaMemcpy(dC, c0.data(), c0.size() * 4, cudaMemcpyHostToDevice);
  else cudaMemset(dC, 0xff, c0.size() * 4);  // NaN
  cudaMemset(dZ, 0xff, c0.size() * 4), cudaMemset(dRow, 0xff, c.M * 4);
  cuda::DenseGemm g;
  g.M = c.M, g.N = c.N, g.K = c.K;
  g.A = dA, g.sam = sam, g.sak = sak, g.B = dB, g.sbk = sbk, g.sbn = sbn, g.C = dC, g.ldc = c.N;
  g.tf32x3 = tf32x3, g.splits = c.splits, g.partial = c.splits > 1 ? dPart : nullptr;
  g.accumulate = acc;
  if (fwd) g.bias = dBias, g.bias_rows = bias_rows, g.Z = dZ, g.act = Activation::Tanh;
  if (acc) g.dact = Activation::ReLU, g.dact_y = dY;
  if (wgrad) g.rowsum = dRow, g.rowsum_k = rowsum_k;
  g.sliced = cuda::own_gemm_sliced(g);  // as the lowering plans it
  unsigned* dCount = nullptr;  // the k-sliced kernel's per-tile counters, zeroed
  if (const int64_t n = cuda::own_gemm_counters(g); n > 0) {
    cudaMalloc(&dCount, n * sizeof(unsigned)), cudaMemset(dCount, 0, n * sizeof(unsigned));
    g.counters = dCount;
  }
  std::vector<float> out(c0.size()), z(c0.size()), row(c.M);
  const bool ok = taken(g);
  EXPECT_TRUE(ok) << c.what << ": not taken by the kernel under test";
  if (ok) {
    cuda::dense_gemm(g, nullptr, nullptr);
    if (!acc) {  // again, on poisoned outputs: the second launch must find the counters reset
      cudaMemset(dC, 0xff, c0.size() * 4), cudaMemset(dZ, 0xff, c0.size() * 4), cudaMemset(dRow, 0xff, c.M * 4);
      cuda::dense_gemm(g, nullptr, nullptr);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  cudaFree(dCount);
  cudaMemcpy(out.data(), dC, out.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(z.data(), dZ, z.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(row.data(), dRow, row.size() * 4, cudaMemcpyDeviceToHost);
  for (float* p : {dA, dB, dC, dZ, dBias, dRow, dPart, dY}) cudaFree(p);
  if (!ok) return INFINITY;
  double worst = 0.0;
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; ++n) {
      double v = 0.0, scale = 0.0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double x = double(a[m * sam + k * sak]) * b[k * sbk + n * sbn];
        v += x, scale += std::fabs(x);
      }
      if (acc) v += c0[m * c.N + n], scale += std::fabs(c0[m * c.N + n]);
      if (acc && y[m * c.N + n] <= 0.0f) v = 0.0, scale = 1.0;  // relu' = 0: the output is exactly 0
      if (fwd && m < bias_rows) v += bias[n], scale += std::fabs(bias[n]);
      const float got = fwd ? z[m * c.N + n] : out[m * c.N + n];
      if (!std::isfinite(got)) {
        ADD_FAILURE() << c.what << ": output (" << m << ", " << n << ") not written";
        return INFINITY;
      }
      worst = std::max(worst, std::fabs(got - v) / scale);
      if (fwd && std::fabs(out[m * c.N + n] - std::tanh(double(got))) > 1e-6) {
        ADD_FAILURE() << c.what << ": tanh epilogue at (" << m << ", " << n << ")";
        return INFINITY;
      }
    }
    if (wgrad) {
      double r = 0.0, scale = 0.0;
      for (int64_t k = 0; k < rowsum_k; ++k) r += a[m * sam + k * sak], scale += std::fabs(a[m * sam + k * sak]);
      if (!(std::fabs(row[m] - r) <= 1e-6 * scale)) {
        ADD_FAILURE() << c.what << ": row sum " << m << " is " << row[m] << ", expected " << r;
        return INFINITY;
      }
    }
  }
  return worst;
}

}  // namespace sg::test
