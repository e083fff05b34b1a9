// Batched weight gradients (dense_wgrad.cu, wgrad_groups in the lowering): the kernel against
// double precision, and an MLP's run of layers batched by the trainer (whose memory plan keeps
// dZ and X for it) but not by a lowering given a plan made without the backend's hints.
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_util.h"
#ifdef STEPGRAPH_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/kernels/dense_dispatch.h"
#include "backend/cuda/kernels/dense_kernels.cuh"
#endif

namespace sg::test {
namespace {

#ifdef STEPGRAPH_HAVE_CUDA
// One batch of `count` M x N x K products with random dZ and X, dW and db poisoned (NaN) first,
// launched twice (each launch writes, never accumulates), against fp64: the largest error of dW
// relative to sum_k |dz x| and of db relative to sum_k |dz|.
struct BatchCase {
  const char* what;
  int64_t M, N, K;
  int count;
};
std::pair<double, double> batch_errors(const BatchCase& c) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> dz(c.count), x(c.count);
  cuda::WgradBatch b;
  b.M = c.M, b.N = c.N, b.K = c.K, b.ldz = c.M, b.ldx = c.N, b.ldw = c.N, b.count = c.count;
  std::vector<void*> owned;
  auto upload = [&](const std::vector<float>& h) {
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, h.size() * 4), cudaSuccess);
    cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    owned.push_back(d);
    return static_cast<float*>(d);
  };
  const std::vector<float> poison_w(c.M * c.N, std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> poison_b(c.M, std::numeric_limits<float>::quiet_NaN());
  for (int i = 0; i < c.count; ++i) {
    dz[i].resize(c.K * c.M), x[i].resize(c.K * c.N);
    for (float& v : dz[i]) v = nd(rng);
    for (float& v : x[i]) v = nd(rng);
    b.item[i] = {upload(dz[i]), upload(x[i]), upload(poison_w), i % 2 == 0 ? upload(poison_b) : nullptr};
  }
  for (int launch = 0; launch < 2; ++launch) cuda::wgrad_batch(b, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  double werr = 0.0, berr = 0.0;
  std::vector<float> dw(c.M * c.N), db(c.M);
  for (int i = 0; i < c.count; ++i) {
    cudaMemcpy(dw.data(), b.item[i].dw, dw.size() * 4, cudaMemcpyDeviceToHost);
    if (b.item[i].db) cudaMemcpy(db.data(), b.item[i].db, db.size() * 4, cudaMemcpyDeviceToHost);
    for (int64_t m = 0; m < c.M; ++m) {
      double s = 0.0, sa = 0.0;
      for (int64_t k = 0; k < c.K; ++k) s += dz[i][k * c.M + m], sa += std::fabs(dz[i][k * c.M + m]);
      if (b.item[i].db) berr = std::max(berr, std::isfinite(db[m]) ? std::fabs(db[m] - s) / sa : INFINITY);
      for (int64_t n = 0; n < c.N; ++n) {
        double r = 0.0, ra = 0.0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double p = double(dz[i][k * c.M + m]) * x[i][k * c.N + n];
          r += p, ra += std::fabs(p);
        }
        const float v = dw[m * c.N + n];
        werr = std::max(werr, std::isfinite(v) ? std::fabs(v - r) / ra : INFINITY);
      }
    }
  }
  for (void* p : owned) cudaFree(p);
  return {werr, berr};
}
#endif

// The kernel alone: whole 64 x 64 tiles over k = 1024 (mlp_8x256's products), and tiles that
// end inside the output with k = 1000 (not a multiple of the 32-deep stages); bias gradients on
// every other product. Sums in fp64, one rounding: held to 3e-7.
TEST(CudaWgrad, BatchedWeightGradientsMatchFp64) {
  REQUIRE_GPU();
#ifdef STEPGRAPH_HAVE_CUDA
  if (!cuda::sliced_fp64_tensor_cores()) GTEST_SKIP() << "no FP64 tensor-core mma on this GPU or build (compute capability 9.0)";
  for (const BatchCase& c : {BatchCase{"3 x 256x256x1024", 256, 256, 1024, 3}, BatchCase{"2 x 260x252x1000", 260, 252, 1000, 2},
                             BatchCase{"8 x 68x132x96", 68, 132, 96, 8}}) {
    const auto [werr, berr] = batch_errors(c);
    EXPECT_LT(werr, 3e-7) << c.what << ": dW";
    EXPECT_LT(berr, 3e-7) << c.what << ": db";
  }
#endif
}

// A run of four 256-wide relu layers at batch 1024: the trainer batches their weight gradients
// at the run's last op (the input gradients alone, on the FP64 tensor cores) and matches the CPU
// trainer after three AdamW steps; lowered on a memory plan made without the backend's lifetime
// hints (which reuses a layer's dZ), the same program falls back to paired launches and says so.
TEST(CudaWgrad, MlpRunOfLayersBatchesItsWeightGradients) {
  REQUIRE_GPU();
#ifdef STEPGRAPH_HAVE_CUDA
  if (!cuda::wgrad_batchable(256, 256, 1024, cuda::DenseDevice::current())) GTEST_SKIP() << "weight gradients not batched on this GPU or build";
#endif
  auto layers = [] {
    return sequential({dense(256, Activation::ReLU), dense(256, Activation::ReLU), dense(256, Activation::ReLU),
                       dense(256, Activation::ReLU), dense(10)});
  };
  auto opt = std::make_shared<AdamW>(1e-3, 0.9, 0.999, 1e-8, 1e-4);
  auto loss = std::make_shared<SoftmaxCrossEntropy>();
  Trainer gpu(layers(), loss, opt, Device::CUDA, 21), cpu(layers(), loss, opt, Device::CPU, 21);
  gpu.compile({1024, 256});
  cpu.compile({1024, 256});
  const std::string ex = gpu.explain();
  EXPECT_NE(ex.find("in one launch (4 x 256x256x1024, 64x64 tiles over the whole k, on the FP64 tensor cores)"),
            std::string::npos)
      << ex;
  EXPECT_NE(ex.find("in the batched weight-gradient launch at op"), std::string::npos) << ex;
  EXPECT_EQ(ex.find("side by side"), std::string::npos) << ex;  // no paired launches left
  for (int s = 0; s < 3; ++s) {
    HostArray X = random_f32({1024, 256}, 900 + s), y = random_labels(1024, 10, 950 + s);
    gpu.one_step(X, y);
    cpu.one_step(X, y);
  }
  const auto a = gpu.state(), b = cpu.state();
  for (const auto& [name, v] : a) {
    const HostArray& w = b.at(name);
    ASSERT_EQ(v.nbytes(), w.nbytes()) << name;
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < v.nbytes() / 4; ++i) {
      float p, q;
      std::memcpy(&p, static_cast<const char*>(v.raw()) + 4 * i, 4);
      std::memcpy(&q, static_cast<const char*>(w.raw()) + 4 * i, 4);
      diff = std::max(diff, double(std::fabs(p - q))), norm = std::max(norm, double(std::fabs(q)));
    }
    EXPECT_LE(diff, 1e-3 * std::max(norm, 1e-3)) << name;
  }

  Built built = train_program(*layers(), SoftmaxCrossEntropy(), {1024, 256}, AdamW(1e-3));
  PoisonedRun unhinted(Device::CUDA, built.p);
  const std::string fallback = unhinted.exe->describe();
  EXPECT_NE(fallback.find("not batched: the memory plan reuses a layer's dZ or X"), std::string::npos) << fallback;
  EXPECT_NE(fallback.find("side by side"), std::string::npos) << fallback;
}

}  // namespace
}  // namespace sg::test
