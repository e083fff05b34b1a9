// The CUDA backend against the CPU reference, graph replay against eager execution, and the
// graph object's contract (image models: test_cuda_conv.cpp). Every test skips (saying why) on a
// machine without a usable GPU.
#include <cmath>
#include <limits>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <tuple>

#include "stepgraph/bench.h"
#include "stepgraph/config.h"
#include "stepgraph/graph.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_util.h"
#ifdef STEPGRAPH_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/kernels/dense_dispatch.h"
#include "backend/cuda/kernels/dense_kernels.cuh"
#include "own_gemm_check.h"
#endif

namespace sg::test {
namespace {

TEST(Cuda, NoGpuSaysSoClearly) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(why.empty());
  try {
    make_backend(Device::CUDA);
    FAIL() << "make_backend(cuda) should fail without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
  }
}

TEST(Cuda, DenseEveryActivationMatchesCpu) {
  REQUIRE_GPU();
  for (Activation a : {Activation::None, Activation::ReLU, Activation::GELU, Activation::Tanh,
                       Activation::Sigmoid, Activation::Sin, Activation::Softplus}) {
    for (bool bias : {true, false}) {
      // Widths that are and are not multiples of 8 / 128 exercise the epilogue and fallback paths.
      auto model = sequential({dense(40, a, std::nullopt, bias), dense(64, a, std::nullopt, bias), dense(7)});
      Built b = train_program(*model, SoftmaxCrossEntropy(), {33, 20}, AdamW(1e-3));
      compare_backends(b.p, b.specs, 7 + static_cast<int>(a), cat(activation_name(a), bias ? " bias" : " no bias"));
    }
  }
}

TEST(Cuda, LossesResidualSharedAndOptimizersMatchCpu) {
  REQUIRE_GPU();
  auto shared = dense(24, Activation::Tanh);
  auto model = sequential({dense(24, Activation::ReLU), residual(sequential({dense(24, Activation::GELU), dense(24)})),
                           shared, shared, dense(3)});
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    Built ce = train_program(*model, SoftmaxCrossEntropy(r), {50, 9}, SGD(0.01, 0.9, true, 1e-3));
    compare_backends(ce.p, ce.specs, 21, "ce sgd nesterov");
    Built mse = train_program(*model, MeanSquaredError(r), {50, 9}, Adam(1e-3, 0.9, 0.99, 1e-8, 1e-2));
    compare_backends(mse.p, mse.specs, 22, "mse adam");
  }
  Built sgd = train_program(*model, SoftmaxCrossEntropy(), {16, 9}, SGD(0.05, 0.0, false, 0.0, 0.0, Schedule::cosine(2, 10)));
  compare_backends(sgd.p, sgd.specs, 23, "plain sgd, cosine schedule, 5 steps", 5, 1e-4);
  // Label smoothing and class weights: their own kernel; the 3-output last layer, fused into
  // the plain loss, stays a launch of its own.
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    Built ls = train_program(*model, SoftmaxCrossEntropy(r, 0.1, {0.5f, 2.0f, 1.0f}), {50, 9}, AdamW(1e-3));
    const std::string ex = compare_backends(ls.p, ls.specs, 24, "ce smoothed and weighted, 3 steps", 3, 1e-4);
    EXPECT_NE(ex.find("without label smoothing or class weights"), std::string::npos) << ex;
    EXPECT_NE(ex.find("label smoothing 0.1, 3 class weights"), std::string::npos) << ex;
  }
}

TEST(Cuda, DenseAmaxMatchesCpu) {
  REQUIRE_GPU();
  // max |output| of each amax layer against the CPU's, over small and many-block outputs; the
  // layers train as without it. Where cuDNN builds the dense+amax graph these layers are that
  // graph (test_cudnn_dense.cpp); with fusion off they take the abs_max kernel path, whose maximum
  // is exact (bitwise the CPU's for the same outputs).
  for (int64_t batch : {16, 3000}) {
    auto model = sequential({dense(40, Activation::GELU, std::nullopt, true, /*amax=*/true),
                             dense(24, Activation::ReLU, std::nullopt, true, /*amax=*/true), dense(6)});
    Built b = train_program(*model, SoftmaxCrossEntropy(), {batch, 5}, AdamW(1e-3));
    compare_backends(b.p, b.specs, 41, cat("amax layers, batch ", batch), 2);
  }
  TrainerOptions o;
  o.mode = ExecMode::Graph;
  Trainer t(sequential({dense(32, Activation::Tanh, std::nullopt, true, true), dense(3)}),
            std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(1e-3), Device::CUDA, 3, o);
  t.compile({8, 4});
  HostArray X = random_f32({8, 4}, 5, 2.0);
  t.one_step(X, random_labels(8, 3, 6));
  t.one_step(X, random_labels(8, 3, 6));
  const auto amax = t.amax();
  ASSERT_EQ(amax.size(), 1u);
  EXPECT_GT(amax.begin()->second, 0.0f);
  EXPECT_LE(amax.begin()->second, 1.0f);  // |tanh| <= 1
}

TEST(Cuda, LastLayerFusedWithTheLossMatchesCpu) {
  REQUIRE_GPU();
  // Up to 32 classes the last dense layer runs inside the loss kernel (classes padded to 8, 16
  // or 32); 33 takes the plain path. 300 hidden units: more inputs per lane than one pass loads.
  for (int64_t classes : {1, 5, 11, 32, 33})
    for (int64_t hidden : {24, 300})
      for (bool bias : {true, false}) {
        auto model = sequential({dense(hidden, Activation::ReLU), dense(classes, Activation::None, std::nullopt, bias)});
        Built b = train_program(*model, SoftmaxCrossEntropy(bias ? Reduction::Mean : Reduction::Sum),
                                {classes == 11 ? 1000 : 7, 5}, AdamW(1e-3));
        compare_backends(b.p, b.specs, 37, cat(classes, " classes, ", hidden, " hidden", bias ? "" : ", no bias"));
      }
  // Where the layer's dW runs on its own (cuBLASLt at batch 1000), the loss kernel also writes
  // its dX, times the previous activation's derivative (read from that layer's output or its
  // pre-activation): one launch fewer.
  for (Activation act : {Activation::ReLU, Activation::Tanh, Activation::GELU, Activation::Sigmoid}) {
    auto model = sequential({dense(300, act), dense(11)});
    Built b = train_program(*model, SoftmaxCrossEntropy(), {1000, 5}, AdamW(1e-3));
    const std::string ex = compare_backends(b.p, b.specs, 44, cat("dX in the loss kernel, ", activation_name(act)), 2);
    EXPECT_NE(ex.find("dX from the loss kernel"), std::string::npos) << ex;
    EXPECT_NE(ex.find(cat("times the ", activation_name(act), "'")), std::string::npos) << ex;
  }
}

TEST(Cuda, LongReductionsSplitOverKMatchCpu) {
  REQUIRE_GPU();
  // Weight gradients over 6000 rows onto 16-wide layers: our kernel splits k; the shared layer
  // accumulates its weight and bias gradients across its two uses.
  auto shared = dense(16, Activation::Tanh);
  auto model = sequential({dense(16, Activation::ReLU), shared, shared, dense(3)});
  Built b = train_program(*model, MeanSquaredError(), {6000, 10}, Adam(1e-3));
  compare_backends(b.p, b.specs, 35, "batch 6000, split-k weight gradients", 2, 1e-4);
  // Widths that take the row-slab split kernel with float4 loads (64) and without (6, 1), over
  // a row count that ends inside a slab.
  auto odd = sequential({dense(64, Activation::Tanh), dense(6, Activation::ReLU), dense(1)});
  Built o = train_program(*odd, MeanSquaredError(), {5003, 4}, Adam(1e-3));
  compare_backends(o.p, o.specs, 38, "batch 5003, widths 64, 6, 1", 2, 1e-4);
  // Widths past 128: 132 x 128 with float4 loads, 130 x 132 without (64-tiles here: k = 5003 is
  // too short for two waves of 128-tiles; LongWeightGradientsOn128TilesMatchFp64 covers those).
  auto wide = sequential({dense(128, Activation::Tanh), dense(132, Activation::ReLU), dense(130), dense(2)});
  Built w = train_program(*wide, MeanSquaredError(), {5003, 4}, Adam(1e-3));
  compare_backends(w.p, w.specs, 39, "batch 5003, widths 128, 132, 130", 2, 1e-4);
  // Skinny layers (at most 4 outputs over >= 4096 rows): one shared (its dX, dW and db
  // accumulate over its two uses) with GELU (the pre-activation kept), the first with no dX.
  auto sk = dense(4, Activation::GELU);
  auto skm = sequential({dense(4, Activation::Tanh), sk, sk, dense(3)});
  Built sb = train_program(*skm, MeanSquaredError(), {4500, 7}, Adam(1e-3));
  const std::string ex = compare_backends(sb.p, sb.specs, 40, "batch 4500, skinny layers", 2, 1e-4);
  EXPECT_NE(ex.find("skinny dense kernel"), std::string::npos) << ex;
  EXPECT_NE(ex.find("skinny backward kernel (dW + db"), std::string::npos) << ex;
  EXPECT_NE(ex.find("skinny backward kernel (dX, dW + db"), std::string::npos) << ex;
  // Rows wider than a warp's float4s (300 inputs: three chunks per lane).
  auto skw = sequential({dense(300, Activation::ReLU), dense(2)});
  Built sw = train_program(*skw, MeanSquaredError(), {4100, 5}, Adam(1e-3));
  compare_backends(sw.p, sw.specs, 41, "batch 4100, 300 inputs into a skinny layer", 2, 1e-4);
  // Fixed Fourier features on plain rows (no jets): the features kernel projects them itself.
  auto ff = sequential({std::make_shared<FourierFeatures>(24, 1.5), dense(16, Activation::Tanh), dense(2)});
  Built fb = train_program(*ff, MeanSquaredError(), {700, 3}, Adam(1e-3));
  const std::string fex = compare_backends(fb.p, fb.specs, 42, "Fourier features on plain rows", 2, 1e-4);
  EXPECT_NE(fex.find("projects the inputs itself"), std::string::npos) << fex;
  // 2048 inputs into 16 units: the forward product splits its k = 2048.
  auto wide_in = sequential({dense(16, Activation::GELU), dense(5)});
  Built wi = train_program(*wide_in, SoftmaxCrossEntropy(), {8, 2048}, AdamW(1e-3));
  compare_backends(wi.p, wi.specs, 36, "2048 inputs, split-k forward", 2, 1e-4);
}

#ifdef STEPGRAPH_HAVE_CUDA
// Weight gradients over tens of thousands of rows onto 128-wide layers (Fourier 4x128's over its
// jet rows) on the row-slab kernel's 128 x 128 tiles, and from 64 inputs (its first layer's) on
// 128 x 64 tiles, alone against fp64: float4 rows and not, a k that ends inside a slab, bias
// gradients (row sums) over the first fifth of k.
TEST(Cuda, LongWeightGradientsOn128TilesMatchFp64) {
  REQUIRE_GPU();
  const cuda::DenseDevice& dev = cuda::DenseDevice::current();
  auto on_128_tiles = [&dev](const cuda::DenseGemm& g) {
    return !g.sliced && !on_tensor_cores(g) && g.splits > 1 && cuda::own_gemm_tile(g, nullptr, dev).rows == 128;
  };
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{128, 128, 34000}, {130, 132, 34003}, {128, 64, 34000}, {130, 60, 34003}}) {
    const int splits = cuda::own_gemm_splits(M, N, K, true, false, dev);
    const ProductCase c{"weight gradient on 128-tiles", M, N, K, true, true, splits};
    EXPECT_LT(own_product_error(c, false, on_128_tiles), 3e-6) << M << " x " << N << " x " << K << ", " << splits << " splits";
  }
}
#endif

// Medium layers (an MLP's 1024 x 256 x 256 products and their weight gradients) on the k-sliced
// kernel, on fp32 FMAs and (compute capability 9.0) on the FP64 tensor cores: alone against fp64
// in each layout and role (a long k staged in rounds, split over blocks with the ordered sum, rows
// and columns that end inside a tile), then a whole step of a 256-wide relu MLP against the CPU.
// The tensor cores' sums stay fp64 up to the output (one rounding per split): held to 3e-7 of sum |ab|, not
// 3e-6.
TEST(Cuda, MediumProductsOnTheKSlicedKernelMatchCpu) {
  REQUIRE_GPU();
#ifdef STEPGRAPH_HAVE_CUDA
  const bool tc = cuda::DenseDevice::current().fp64_mma;
  for (const ProductCase& c : {ProductCase{"forward, k = 300 in two rounds", 1000, 252, 300, false, false, 1},
                               ProductCase{"forward, k = 520 in three rounds", 1000, 252, 520, false, false, 1},
                               ProductCase{"input gradient, k = 260 in two rounds", 1000, 252, 260, false, true, 1},
                               ProductCase{"input gradient, k split 2 ways", 1000, 252, 260, false, true, 2},
                               ProductCase{"both k-fast (8 warps), k split 3 ways", 1000, 252, 780, false, false, 3},
                               ProductCase{"weight gradient, k split 5 ways", 256, 252, 1030, true, true, 5},
                               ProductCase{"m-fast A, k-fast B", 300, 260, 600, true, false, 3}}) {
    EXPECT_LT(own_product_error(c, false, on_sliced, false), 3e-6) << c.what << " (fp32 FMAs)";
    if (tc) EXPECT_LT(own_product_error(c, false, on_sliced), 3e-7) << c.what << " (FP64 tensor cores)";
  }
  if (!tc) std::cout << "[ note ] this GPU or build has no FP64 tensor-core mma (compute capability 9.0): fp32 FMAs only\n";
#else
  const bool tc = false;
#endif
  auto model = sequential({dense(256, Activation::ReLU), dense(256, Activation::ReLU), dense(256, Activation::ReLU), dense(10)});
  Built b = train_program(*model, SoftmaxCrossEntropy(), {1000, 252}, AdamW(1e-3));
  // The first layer (k = 252) stays on cuBLASLt; the others and every weight gradient are sliced.
  const std::string ex = compare_backends(b.p, b.specs, 43, "batch 1000, 252 -> 3 x 256 relu -> 10", 2, 1e-4);
  if (tc) {  // the forward products and the first layer's dW
    EXPECT_NE(ex.find("on the FP64 tensor cores, 32x32 halves, k in 4 slices"), std::string::npos) << ex;
  } else {
    EXPECT_NE(ex.find("k over 8 warps"), std::string::npos) << ex;   // the forward products
    EXPECT_NE(ex.find("k over 16 warps"), std::string::npos) << ex;  // the first layer's dW
  }
  EXPECT_NE(ex.find("on 64x64 tiles side by side"), std::string::npos) << ex;  // the other gradients
  EXPECT_NE(ex.find("ordered sum by each tile's last block"), std::string::npos) << ex;
}

#ifdef STEPGRAPH_HAVE_CUDA
// A layer's two gradient products in one launch on 64 x 64 tiles (sliced_pair), against fp64: the
// weight gradient's k split with each tile's last block adding the partials (twice, so the
// counters must reset), the bias gradient on the side, rows and columns that end inside a tile,
// an input gradient over k = 260 in two rounds. A pair runs on fp32 FMAs, whatever the GPU.
TEST(Cuda, PairedGradientProductsMatchFp64) {
  REQUIRE_GPU();
  struct Pair {
    ProductCase w, x;
  };
  for (const Pair& c : {Pair{{"weight gradient 256x256x1024", 256, 256, 1024, true, true, 4},
                             {"input gradient 1024x256x256", 1024, 256, 256, false, true, 1}},
                        Pair{{"weight gradient 260x252x1000", 260, 252, 1000, true, true, 3},
                             {"input gradient 1000x252x260", 1000, 252, 260, false, true, 1}}}) {
    OwnProduct w(c.w, false), x(c.x, false);
    ASSERT_TRUE(w.g.sliced && x.g.sliced && cuda::sliced_pair(w.g, x.g, cuda::DenseDevice::current())) << c.w.what;
    EXPECT_FALSE(w.g.fp64_tc || x.g.fp64_tc) << c.w.what;
    EXPECT_EQ(w.g.splits, c.w.splits) << c.w.what;
    EXPECT_EQ(x.g.splits, c.x.splits) << c.x.what;
    EXPECT_EQ(cuda::own_gemm_tile(w.g, nullptr, cuda::DenseDevice::current()).rows, 64);
    w.add_counters(), x.add_counters();
    for (int launch = 0; launch < 2; ++launch) {
      w.reset(), x.reset();
      cuda::dense_gemm(w.g, &x.g, nullptr);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_LT(w.error(), 3e-6) << c.w.what;
    EXPECT_LT(x.error(), 3e-6) << c.x.what;
  }
}
#endif

#ifdef STEPGRAPH_HAVE_CUDA
// The GPU the dense rules' thresholds were measured on, described (the rules read these facts
// from the device they plan for; these tests run without one).
const cuda::DenseDevice kH200{132, 232448, /*tf32_mma=*/true, /*fp64_mma=*/true};

// Which products the k-sliced kernel takes: an MLP's medium layers and their weight gradients;
// not a transformer's short-k products (two waves, k = 128: slower than cuBLASLt), not a PINN's
// weight gradient over tens of thousands of jet rows (66 splits added by one block each), not the
// large products.
TEST(DenseRules, WhichProductsTakeTheKSlicedKernel) {
  const cuda::DenseDevice& d = kH200;
  EXPECT_TRUE(cuda::sliced_gemm(1024, 256, 256, d));  // mlp_8x256: forward and input gradient
  EXPECT_TRUE(cuda::sliced_gemm(256, 256, 1024, d));  // its weight gradients, k split 4 ways
  EXPECT_EQ(cuda::own_gemm_splits(256, 256, 1024, true, false, d), 4);
  EXPECT_EQ(cuda::own_gemm_splits(1024, 256, 256, false, false, d), 1);
  EXPECT_FALSE(cuda::sliced_gemm(4096, 128, 128, d));   // tiny_gpt: k = 128, 256 blocks
  EXPECT_FALSE(cuda::sliced_gemm(4096, 128, 512, d));   // two waves
  EXPECT_FALSE(cuda::sliced_gemm(64, 64, 41984, d));    // Poisson 4x64's weight gradient: 66 splits
  EXPECT_FALSE(cuda::sliced_gemm(128, 128, 67584, d));  // Fourier 4x128's: above 2^28 multiply-adds
  EXPECT_FALSE(cuda::sliced_gemm(64, 128, 256, d));     // the seed MLP: small (the small-layer kernel)
}

// The table names the rule that takes each product, first that applies; explain lists it.
TEST(DenseRules, TheTableNamesWhichRuleTakesAProduct) {
  auto rule = [](int64_t M, int64_t N, int64_t K, bool rows = false) { return std::string(cuda::dense_rule({M, N, K, rows}, kH200).name); };
  EXPECT_EQ(rule(1024, 256, 256), "medium");               // mlp_8x256's hidden layers
  EXPECT_EQ(rule(64, 256, 128), "small");                  // the seed MLP's first layer
  EXPECT_EQ(rule(64, 64, 41984, true), "long-k");          // Poisson 4x64's weight gradients
  EXPECT_EQ(rule(4096, 128, 128), "large");                // tiny_gpt's projections
  EXPECT_EQ(rule(1 << 16, 512, 512), "large");
  EXPECT_EQ(cuda::dense_rule({4096, 128, 128}, kH200).kernel, cuda::DenseKernel::CublasLt);
  int n = 0;
  const cuda::DenseRule* rules = cuda::dense_rules(&n);
  ASSERT_GE(n, 2);
  EXPECT_EQ(rules[n - 1].kernel, cuda::DenseKernel::CublasLt);  // the last always applies
  const std::string text = cuda::dense_rules_text(kH200);
  EXPECT_NE(text.find("132 SMs, 227 KB"), std::string::npos) << text;
  for (int i = 0; i < n; ++i) {
    EXPECT_NE(text.find(cat(rules[i].name, " -> ")), std::string::npos) << text;
    EXPECT_TRUE(rules[i].when[0] && rules[i].why[0]) << rules[i].name << ": a rule says when and why";
  }
  EXPECT_NE(text.find("skinny layer -> "), std::string::npos) << text;
}

// The facts the rules read come from the device: fewer SMs give fewer splits (waves of that
// GPU's blocks), and a GPU that cannot give a block the k-sliced kernel's shared memory (99 KB:
// sm_86/89) or has no FP64 mma keeps medium products off that kernel and its batches.
TEST(DenseRules, TheDeviceSizesTheRules) {
  const cuda::DenseDevice a100{108, 166912, true, false}, small_smem{84, 101376, true, false};
  EXPECT_EQ(cuda::own_gemm_splits(64, 64, 41984, true, false, kH200), 264);  // two waves of 132
  EXPECT_EQ(cuda::own_gemm_splits(64, 64, 41984, true, false, a100), 216);   // two waves of 108
  EXPECT_TRUE(cuda::sliced_gemm(1024, 256, 256, kH200));  // 128 tiles: one wave of 132
  EXPECT_FALSE(cuda::sliced_gemm(1024, 256, 256, a100));  // a second wave on 108 SMs
  EXPECT_TRUE(cuda::sliced_gemm(256, 256, 1024, a100));   // 32 tiles x 3 splits
  EXPECT_FALSE(cuda::sliced_gemm(256, 256, 1024, small_smem));
  EXPECT_STRNE(cuda::dense_rule({256, 256, 1024, true}, small_smem).name, "medium");
  EXPECT_TRUE(cuda::wgrad_batchable(256, 256, 1024, kH200));
  EXPECT_FALSE(cuda::wgrad_batchable(256, 256, 1024, a100));  // no FP64 mma
  cuda::DenseGemm g;  // a weight gradient dZ^T X
  g.M = 256, g.N = 256, g.K = 1024, g.sam = 1, g.sak = 256, g.sbk = 256, g.sbn = 1;
  cuda::plan_own_gemm(g, /*tf32x3=*/false, kH200);
  EXPECT_TRUE(g.sliced && g.fp64_tc);
  EXPECT_EQ(g.splits, 4);
  cuda::plan_own_gemm(g, false, a100);
  EXPECT_TRUE(g.sliced && !g.fp64_tc);
  EXPECT_EQ(g.splits, 3);
  cuda::plan_own_gemm(g, /*tf32x3=*/true, cuda::DenseDevice{132, 232448, /*tf32_mma=*/false, true});
  EXPECT_FALSE(g.tf32x3);  // asked for, but no TF32 mma: the SIMT kernels
}

// Which layers' gradient products run as one launch (an H200): an MLP's 256-wide layers at batch
// 1024 (dW on 16 tiles x 4 splits, dX on 16 x 4 tiles: 128 blocks); not the products in the
// other order, not at tf32x3 on tensor cores, not where one is not sliced.
TEST(DenseRules, WhichGradientProductsShareALaunch) {
  auto planned = [](int64_t M, int64_t N, int64_t K, bool weight_gradient) {
    cuda::DenseGemm g;
    g.M = M, g.N = N, g.K = K;
    if (weight_gradient) g.sam = 1, g.sak = M, g.sbn = 1, g.sbk = N;  // dZ^T X
    else g.sam = K, g.sak = 1, g.sbn = 1, g.sbk = N;                   // dZ W
    g.sliced = cuda::own_gemm_sliced(g, kH200);
    return g;
  };
  cuda::DenseGemm w = planned(256, 256, 1024, true), x = planned(1024, 256, 256, false);
  cuda::DenseGemm w2 = w, x2 = x;
  EXPECT_FALSE(cuda::sliced_pair(x2, w2, kH200));  // the first is the weight gradient
  EXPECT_FALSE(x2.paired || w2.paired);
  w2.tf32x3 = true;
  EXPECT_FALSE(cuda::sliced_pair(w2, x2, kH200));
  w.fp64_tc = x.fp64_tc = true;  // as planned on an H200
  ASSERT_TRUE(cuda::sliced_pair(w, x, kH200));
  EXPECT_TRUE(w.paired && x.paired);
  EXPECT_FALSE(w.fp64_tc || x.fp64_tc);  // a pair runs on fp32 FMAs
  EXPECT_EQ(w.splits, 4);
  EXPECT_EQ(x.splits, 1);
  cuda::DenseGemm tw = planned(128, 128, 4096, true), tx = planned(4096, 128, 128, false);  // tiny_gpt: k = 128
  EXPECT_FALSE(tx.sliced);
  EXPECT_FALSE(cuda::sliced_pair(tw, tx, kH200));
}

// How far the row-slab kernel splits a weight gradient's k (an H200): two waves of blocks, each
// over at least 128 values of k, or one 32-deep slab on 64-tiles where k is short.
TEST(DenseRules, HowFarWeightGradientsSplitOverK) {
  const cuda::DenseDevice& d = kH200;
  EXPECT_EQ(cuda::own_gemm_splits(10, 256, 1024, true, false, d), 32);     // mlp_8x256's output layer, 4 tiles
  EXPECT_EQ(cuda::own_gemm_splits(32, 32, 4608, true, false, d), 144);     // custom_heat's hidden layers
  EXPECT_EQ(cuda::own_gemm_splits(64, 64, 41984, true, false, d), 264);    // Poisson 4x64: two waves
  EXPECT_EQ(cuda::own_gemm_splits(128, 128, 67584, true, false, d), 264);  // Fourier 4x128 (128-tiles)
  EXPECT_EQ(cuda::own_gemm_splits(10, 256, 1000, false, false, d), 1);     // k < 1024: not split
}
#endif

TEST(Cuda, LargeBatchLossReductionAndTf32) {
  REQUIRE_GPU();
  auto model = sequential({dense(256, Activation::ReLU), dense(1000)});
  Built b = train_program(*model, SoftmaxCrossEntropy(), {4100, 64}, AdamW(1e-3));
  compare_backends(b.p, b.specs, 31, "B=4100 C=1000 (multi-block loss)", 1, 1e-4);
  LowerOptions tf32;
  tf32.precision = Precision::TF32;
  tf32.autotune = Autotune::Exhaustive;
  compare_backends(b.p, b.specs, 32, "tf32, exhaustive autotune", 1, 3e-2, tf32);
}

std::unique_ptr<Trainer> gpu_trainer(ExecMode mode, ShapePolicy policy = ShapePolicy::Recapture) {
  TrainerOptions o;
  o.mode = mode;
  o.shape_policy = policy;
  auto t = std::make_unique<Trainer>(sequential({dense(256, Activation::ReLU), dense(11)}),
                                     std::make_shared<SoftmaxCrossEntropy>(),
                                     std::make_shared<AdamW>(1e-3, 0.9, 0.999, 1e-8, 1e-4), Device::CUDA, 5, o);
  t->compile({64, 128});
  return t;
}

TEST(Cuda, GraphReplayEqualsEagerBitwiseFor100Steps) {
  REQUIRE_GPU();
  auto graph = gpu_trainer(ExecMode::Graph), eager = gpu_trainer(ExecMode::Eager);
  for (int s = 0; s < 100; ++s) {
    HostArray X = random_f32({64, 128}, 1000 + s), y = random_labels(64, 11, 2000 + s);
    float lg = graph->one_step(X, y), le = eager->one_step(X, y);
    ASSERT_EQ(std::memcmp(&lg, &le, 4), 0) << "step " << s << ": " << lg << " vs " << le;
  }
  EXPECT_EQ(graph->capture_count(), 1);
  EXPECT_EQ(eager->capture_count(), 0);
  EXPECT_GT(graph->graph_nodes(), 0u);
  auto a = graph->state(), b = eager->state();
  for (auto& [name, v] : a)
    EXPECT_EQ(std::memcmp(v.raw(), b.at(name).raw(), v.nbytes()), 0) << name << " differs";
}

TEST(Cuda, GraphMatchesCpuWithinFp32Tolerance) {
  REQUIRE_GPU();
  auto gpu = gpu_trainer(ExecMode::Graph);
  Trainer cpu(gpu->model(), gpu->loss_fn(), gpu->optimizer(), Device::CPU, 5);
  cpu.compile({64, 128});
  for (int s = 0; s < 20; ++s) {
    HostArray X = random_f32({64, 128}, 3000 + s), y = random_labels(64, 11, 4000 + s);
    float lg = gpu->one_step(X, y), lc = cpu.one_step(X, y);
    EXPECT_TRUE(near(lg, lc, 1e-5, 1e-4)) << "step " << s;
  }
  auto a = gpu->params(), b = cpu.params();
  for (auto& [name, v] : a)
    for (int64_t k = 0; k < v.numel(); ++k)
      ASSERT_TRUE(near(v.data<float>()[k], b.at(name).data<float>()[k], 1e-5, 1e-3)) << name << "[" << k << "]";
}

TEST(Cuda, LearningRateChangeNeedsNoRecapture) {
  REQUIRE_GPU();
  auto t = gpu_trainer(ExecMode::Graph);
  HostArray X = random_f32({64, 128}, 1), y = random_labels(64, 11, 2);
  t->one_step(X, y);
  t->one_step(X, y);
  auto before = t->params();
  t->set_lr(0.1);
  t->one_step(X, y);
  EXPECT_EQ(t->capture_count(), 1);
  auto after = t->params();
  double moved = 0;
  for (int64_t k = 0; k < after["0.weight"].numel(); ++k)
    moved = std::max<double>(moved, std::fabs(after["0.weight"].data<float>()[k] - before["0.weight"].data<float>()[k]));
  EXPECT_GT(moved, 0.05);  // an Adam step of lr 0.1 moves weights by about 0.1
}

TEST(Cuda, BatchSizeChangeRecapturesOnceThenReuses) {
  REQUIRE_GPU();
  auto t = gpu_trainer(ExecMode::Graph);
  HostArray X = random_f32({64, 128}, 1), y = random_labels(64, 11, 2);
  HostArray Xs = random_f32({20, 128}, 3), ys = random_labels(20, 11, 4);
  for (int i = 0; i < 3; ++i) {
    t->one_step(X, y);
    t->one_step(Xs, ys);
  }
  EXPECT_EQ(t->capture_count(), 2);
  EXPECT_EQ(t->compile_count(), 2);
  t->invalidate();
  t->compile({64, 128});
  t->one_step(X, y);
  EXPECT_EQ(t->capture_count(), 3);
  EXPECT_EQ(t->step(), 7);
}

TEST(Cuda, PadPolicyEqualsTheSmallerShape) {
  REQUIRE_GPU();
  auto pad = gpu_trainer(ExecMode::Graph, ShapePolicy::Pad), re = gpu_trainer(ExecMode::Graph);
  HostArray Xs = random_f32({20, 128}, 3), ys = random_labels(20, 11, 4);
  float lp = pad->one_step(Xs, ys), lr = re->one_step(Xs, ys);
  EXPECT_TRUE(near(lp, lr, 1e-6, 1e-5));
  EXPECT_EQ(pad->capture_count(), 1);
  auto a = pad->params(), b = re->params();
  for (auto& [name, v] : a)
    for (int64_t k = 0; k < v.numel(); ++k)
      ASSERT_TRUE(near(v.data<float>()[k], b.at(name).data<float>()[k], 1e-6, 1e-4)) << name;
  auto err = gpu_trainer(ExecMode::Graph, ShapePolicy::Error);
  EXPECT_THROW(err->one_step(Xs, ys), Error);
}

TEST(Cuda, AsyncStepsReadTheLossLater) {
  REQUIRE_GPU();
  auto a = gpu_trainer(ExecMode::Graph), b = gpu_trainer(ExecMode::Graph);
  float last = 0;
  for (int s = 0; s < 10; ++s) {
    HostArray X = random_f32({64, 128}, 50 + s), y = random_labels(64, 11, 60 + s);
    a->one_step_async(X, y);  // no synchronization; the staging ring keeps the batches apart
    last = b->one_step(X, y);
  }
  float la = a->loss();
  EXPECT_EQ(std::memcmp(&la, &last, 4), 0);
}

TEST(Cuda, DeviceResidentDataTrainsInGraphLikeTheCpu) {
  REQUIRE_GPU();
  const int64_t N = 1000;
  HostArray X = random_f32({N, 128}, 11), y = random_labels(N, 11, 12);
  auto graph = gpu_trainer(ExecMode::Graph), eager = gpu_trainer(ExecMode::Eager);
  Trainer cpu(graph->model(), graph->loss_fn(), graph->optimizer(), Device::CPU, 5);
  cpu.compile({64, 128});
  for (Trainer* t : {graph.get(), eager.get(), &cpu}) t->set_dataset(X, y, 64, true, LastBatch::Partial, 3);
  for (int s = 0; s < 40; ++s) {  // 16 batches per epoch (the last padded): crosses two epochs
    graph->launch();
    eager->launch();
    cpu.launch();
  }
  float lg = graph->loss(), le = eager->loss(), lc = cpu.loss();
  EXPECT_EQ(std::memcmp(&lg, &le, 4), 0);
  EXPECT_TRUE(near(lg, lc, 1e-5, 1e-3));
  EXPECT_EQ(graph->capture_count(), 1);
  EXPECT_EQ(graph->step(), 40);
  auto a = graph->params(), b = cpu.params();
  for (auto& [name, v] : a)
    for (int64_t k = 0; k < v.numel(); ++k)
      ASSERT_TRUE(near(v.data<float>()[k], b.at(name).data<float>()[k], 1e-5, 1e-3)) << name;
}

TEST(Cuda, StepGraphContract) {
  REQUIRE_GPU();
  StepGraph g;
  EXPECT_FALSE(g.is_captured());
  EXPECT_THROW(g.launch(), Error);                                   // launch before capture
  EXPECT_THROW(g.capture({1}, [](void*) {}), Error);                 // empty capture
  try {
    g.capture({1}, [](void*) { throw Error("op 'broken': planted failure"); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op 'broken'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(g.is_captured());
  // Any other exception passes through as itself, the stream out of capture mode.
  EXPECT_THROW(g.capture({1}, [](void*) { throw std::runtime_error("not an sg::Error"); }), std::runtime_error);
#ifdef STEPGRAPH_HAVE_CUDA
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(static_cast<cudaStream_t>(g.stream()), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
#endif
  EXPECT_FALSE(g.is_captured());
  auto t = gpu_trainer(ExecMode::Graph);  // the stream still works after a failed capture
  EXPECT_TRUE(std::isfinite(t->one_step(random_f32({64, 128}, 1), random_labels(64, 11, 2))));
}

TEST(Cuda, ExplainShowsLoweringAndGraph) {
  REQUIRE_GPU();
  auto t = gpu_trainer(ExecMode::Graph);
  t->one_step(random_f32({64, 128}, 1), random_labels(64, 11, 2));
  t->one_step(random_f32({64, 128}, 1), random_labels(64, 11, 2));
  std::string s = t->explain();
  for (const char* want : {"lowering (cuda)", "kernel", "graph captures: 1", "multi-tensor"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
}

// Every op has a CUDA lowering now; what stays CPU-only is convolutions in a build without cuDNN,
// which the CUDA backend must refuse at compile time with a message naming the op, never run
// something else. Sequence models compile (test_cuda_sequence.cpp tests them).
TEST(Cuda, CpuOnlyOpsAreRefusedWithAMessage) {
  REQUIRE_GPU();
  auto cnn = sequential({conv2d(4, {3, 1, 1, 1, Activation::ReLU}), max_pool2d(2), flatten(), dense(10)});
  cnn->set_input_shape({8, 8, 1});
  {
    Trainer t(sequential({embedding(6, 8, 4), transformer_block(2, true, 16), dense(6)}),
              std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(), Device::CUDA);
    EXPECT_NO_THROW(t.compile({16, 4}));
  }
  std::vector<std::pair<LayerPtr, Shape>> refused;
#ifdef STEPGRAPH_HAVE_CUDNN
  {
    Trainer t(cnn, std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(), Device::CUDA);
    EXPECT_NO_THROW(t.compile({16, 64}));
  }
#else
  refused.emplace_back(LayerPtr(cnn), Shape{16, 64});
#endif
  for (auto [model, input] : refused) {
    Trainer t(model, std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(), Device::CUDA);
    try {
      t.compile(input);
      FAIL() << "compiled on CUDA: " << model->describe();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("run on the CPU backend in this version"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("use --device cpu"), std::string::npos) << e.what();
    }
  }
}

TEST(Cuda, VerifyComparesEachStepFromTheSameState) {
  REQUIRE_GPU();
  RunConfig cfg = load_config(std::string(SG_SOURCE_DIR) + "/bench/configs/mlp_8x256.json");
  const VerifyResult r = verify_run(cfg, RunOptions{}, 10, 1e-3);
  std::cout << "[ verify   ] mlp_8x256: " << r.to_json().dump() << "\n";
  EXPECT_EQ(r.graph_vs_eager, 0.0);
  EXPECT_TRUE(r.ok) << r.to_json().dump();
  EXPECT_NE(r.gpu_vs_cpu_at.find(" at step "), std::string::npos) << r.gpu_vs_cpu_at;
}

}  // namespace
}  // namespace sg::test
