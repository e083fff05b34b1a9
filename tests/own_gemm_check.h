// Our dense-product kernels alone (CUDA builds only), against a double-precision product: one
// product (or a layer's two gradient products in one launch) in the layouts the dense layers use,
// every output poisoned (NaN) first, with the epilogue its role gives it. Shared by the k-sliced
// (test_cuda.cpp) and 3xTF32 (test_cuda_pinn.cpp) kernel tests.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "backend/cuda/kernels/dense_dispatch.h"
#include "backend/cuda/kernels/dense_kernels.cuh"

namespace sg::test {

struct ProductCase {
  const char* what;
  int64_t M, N, K;
  bool am, bn;  // A's m / B's n the unit stride (else k)
  int splits;
};

// One product of case c (tf32x3 or fp32) on the GPU, planned as the lowering plans it, with a
// double-precision reference. The roles, as the lowering builds them: a weight gradient (am: A =
// dZ^T) sums A's first K/5 values of k per row on the side (the bias gradient); a forward (one
// split, k-fast A) adds a bias on the first M/3 rows, keeps the pre-activation and applies tanh;
// an input gradient accumulates onto C and multiplies by relu' of a random y (the previous
// layer's activation, fused).
class OwnProduct {
 public:
  OwnProduct(const ProductCase& c, bool tf32x3) : c_(c) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    a_.resize(c.M * c.K), b_.resize(c.K * c.N), c0_.resize(c.M * c.N), bias_.resize(c.N), y_.resize(c.M * c.N);
    for (auto* v : {&a_, &b_, &c0_, &bias_, &y_})
      for (float& x : *v) x = nd(rng);
    sam_ = c.am ? 1 : c.K, sak_ = c.am ? c.M : 1, sbn_ = c.bn ? 1 : c.K, sbk_ = c.bn ? c.N : 1;
    wgrad_ = c.am, fwd_ = !wgrad_ && c.splits == 1 && !c.bn, acc_ = !fwd_ && !wgrad_;
    const int64_t part = cuda::own_gemm_partial_floats(c.M, c.N, c.splits);
    EXPECT_EQ(cudaMalloc(&dA_, a_.size() * 4), cudaSuccess);
    cudaMalloc(&dB_, b_.size() * 4), cudaMalloc(&dC_, c0_.size() * 4), cudaMalloc(&dZ_, c0_.size() * 4), cudaMalloc(&dY_, y_.size() * 4);
    cudaMalloc(&dBias_, bias_.size() * 4), cudaMalloc(&dRow_, c.M * 4), cudaMalloc(&dPart_, (part + 1) * 4);
    cudaMemcpy(dA_, a_.data(), a_.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dB_, b_.data(), b_.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dBias_, bias_.data(), bias_.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dY_, y_.data(), y_.size() * 4, cudaMemcpyHostToDevice);
    g.M = c.M, g.N = c.N, g.K = c.K;
    g.A = dA_, g.sam = sam_, g.sak = sak_, g.B = dB_, g.sbk = sbk_, g.sbn = sbn_, g.C = dC_, g.ldc = c.N;
    g.tf32x3 = tf32x3, g.splits = c.splits, g.partial = c.splits > 1 ? dPart_ : nullptr;
    g.accumulate = acc_;
    if (fwd_) g.bias = dBias_, g.bias_rows = c.M / 3, g.Z = dZ_, g.act = Activation::Tanh;
    if (acc_) g.dact = Activation::ReLU, g.dact_y = dY_;
    if (wgrad_) g.rowsum = dRow_, g.rowsum_k = c.K / 5;
    g.sliced = cuda::own_gemm_sliced(g, cuda::DenseDevice::current());  // as the lowering plans it
    g.fp64_tc = g.sliced && cuda::DenseDevice::current().fp64_mma;
  }
  OwnProduct(const OwnProduct&) = delete;
  OwnProduct& operator=(const OwnProduct&) = delete;
  ~OwnProduct() {
    for (float* p : {dA_, dB_, dC_, dZ_, dBias_, dRow_, dPart_, dY_}) cudaFree(p);
    cudaFree(dCount_);
  }
  // The k-sliced kernel's per-tile counters, zeroed, once the plan (splits, pairing) is final.
  void add_counters() {
    if (const int64_t n = cuda::own_gemm_counters(g); n > 0) {
      cudaMalloc(&dCount_, n * sizeof(unsigned)), cudaMemset(dCount_, 0, n * sizeof(unsigned));
      g.counters = dCount_;
    }
  }
  // Outputs back to their state before a launch: C poisoned (NaN), or c0 where it accumulates.
  void reset() {
    if (acc_) cudaMemcpy(dC_, c0_.data(), c0_.size() * 4, cudaMemcpyHostToDevice);
    else cudaMemset(dC_, 0xff, c0_.size() * 4);
    cudaMemset(dZ_, 0xff, c0_.size() * 4), cudaMemset(dRow_, 0xff, c_.M * 4);
  }
  // The worst |got - exact| / sum |a b| over all outputs (INFINITY, with a failure, where an
  // output was not written or the epilogue or a row sum is wrong).
  double error() const {
    std::vector<float> out(c0_.size()), z(c0_.size()), row(c_.M);
    cudaMemcpy(out.data(), dC_, out.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(z.data(), dZ_, z.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(row.data(), dRow_, row.size() * 4, cudaMemcpyDeviceToHost);
    double worst = 0.0;
    for (int64_t m = 0; m < c_.M; ++m) {
      for (int64_t n = 0; n < c_.N; ++n) {
        double v = 0.0, scale = 0.0;
        for (int64_t k = 0; k < c_.K; ++k) {
          const double x = double(a_[m * sam_ + k * sak_]) * b_[k * sbk_ + n * sbn_];
          v += x, scale += std::fabs(x);
        }
        if (acc_) v += c0_[m * c_.N + n], scale += std::fabs(c0_[m * c_.N + n]);
        if (acc_ && y_[m * c_.N + n] <= 0.0f) v = 0.0, scale = 1.0;  // relu' = 0: the output is exactly 0
        if (fwd_ && m < c_.M / 3) v += bias_[n], scale += std::fabs(bias_[n]);
        const float got = fwd_ ? z[m * c_.N + n] : out[m * c_.N + n];
        if (!std::isfinite(got)) {
          ADD_FAILURE() << c_.what << ": output (" << m << ", " << n << ") not written";
          return INFINITY;
        }
        worst = std::max(worst, std::fabs(got - v) / scale);
        if (fwd_ && std::fabs(out[m * c_.N + n] - std::tanh(double(got))) > 1e-6) {
          ADD_FAILURE() << c_.what << ": tanh epilogue at (" << m << ", " << n << ")";
          return INFINITY;
        }
      }
      if (wgrad_) {
        double r = 0.0, scale = 0.0;
        for (int64_t k = 0; k < c_.K / 5; ++k) r += a_[m * sam_ + k * sak_], scale += std::fabs(a_[m * sam_ + k * sak_]);
        if (!(std::fabs(row[m] - r) <= 1e-6 * scale)) {
          ADD_FAILURE() << c_.what << ": row sum " << m << " is " << row[m] << ", expected " << r;
          return INFINITY;
        }
      }
    }
    return worst;
  }
  cuda::DenseGemm g;

 private:
  ProductCase c_;
  std::vector<float> a_, b_, c0_, bias_, y_;
  int64_t sam_ = 0, sak_ = 0, sbn_ = 0, sbk_ = 0;
  bool wgrad_ = false, fwd_ = false, acc_ = false;
  float *dA_ = nullptr, *dB_ = nullptr, *dC_ = nullptr, *dZ_ = nullptr, *dBias_ = nullptr, *dRow_ = nullptr,
        *dPart_ = nullptr, *dY_ = nullptr;
  unsigned* dCount_ = nullptr;
};

// Which of our kernels takes a product on this GPU (the dense rules, dense_dispatch.h).
inline bool on_sliced(const cuda::DenseGemm& g) { return cuda::own_gemm_sliced(g, cuda::DenseDevice::current()); }
inline bool on_tensor_cores(const cuda::DenseGemm& g) {
  return cuda::own_gemm_tensor_cores(g, cuda::DenseDevice::current());
}

// Runs c after `taken` confirmed the kernel under test takes it, twice (the second launch on
// reset outputs must find the split counters reset), and returns OwnProduct::error(). fp64_tc
// false: the k-sliced kernel on fp32 FMAs even where the FP64 tensor cores would take it.
inline double own_product_error(const ProductCase& c, bool tf32x3, const std::function<bool(const cuda::DenseGemm&)>& taken,
                                bool fp64_tc = true) {
  OwnProduct p(c, tf32x3);
  p.g.fp64_tc = p.g.fp64_tc && fp64_tc;
  p.add_counters();
  const bool ok = taken(p.g);
  EXPECT_TRUE(ok) << c.what << ": not taken by the kernel under test";
  if (!ok) return INFINITY;
  for (int launch = 0; launch < 2; ++launch) {
    p.reset();
    cuda::dense_gemm(p.g, nullptr, nullptr);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return p.error();
}

}  // namespace sg::test
