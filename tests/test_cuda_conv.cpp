// Image models on the CUDA backend: convolutions through cuDNN graphs, pooling and reshape
// kernels, against the CPU reference and graph replay against eager execution. Every test skips
// (saying why) on a machine without a usable GPU, or a build without cuDNN.
#include <cstring>
#include <iostream>
#include <sstream>

#include "stepgraph/config.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_util.h"
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/libs/cudnn_conv.h"
#endif

namespace sg::test {
namespace {

#ifdef STEPGRAPH_HAVE_CUDNN
#define REQUIRE_CUDNN() REQUIRE_GPU()
#else
#define REQUIRE_CUDNN()                                                                    \
  do {                                                                                     \
    REQUIRE_GPU();                                                                         \
    GTEST_SKIP() << "built without cuDNN (CMake found no cuDNN frontend headers)";         \
  } while (0)
#endif

// A model over feature rows [batch, H*W*C] seen as NHWC images of `image` = {H, W, C}.
LayerPtr image_model(std::vector<LayerPtr> layers, Shape image) {
  auto m = sequential(std::move(layers));
  m->set_input_shape(image);
  return m;
}

#ifdef STEPGRAPH_HAVE_CUDNN
// No GPU needed: the frontend validates each graph and infers its output shape on the host
// (libcudnn.so.9 must load). Catches a wrong layout or attribute before a GPU run.
TEST(Cuda, CudnnConvGraphsValidateWithoutGpu) {
  std::string why;
  size_t version = 0;
  if (!cuda::cudnn_loadable(&why, &version)) GTEST_SKIP() << why;
  EXPECT_GE(version, 90000u);
  struct Case {
    int64_t N, H, W, C, K, R, S, pad, stride, dil;
  };
  for (const Case& c : {Case{2, 8, 8, 1, 16, 3, 3, 1, 1, 1}, Case{3, 9, 7, 2, 5, 3, 3, 1, 2, 1},
                        Case{2, 10, 10, 3, 4, 3, 3, 2, 1, 2}, Case{1, 6, 6, 4, 8, 1, 1, 0, 1, 1}}) {
    cuda::ConvGeometry g;
    g.N = c.N, g.H = c.H, g.W = c.W, g.C = c.C, g.K = c.K, g.R = c.R, g.S = c.S;
    g.pad_h = g.pad_w = c.pad, g.stride_h = g.stride_w = c.stride, g.dil_h = g.dil_w = c.dil;
    g.P = conv_output_size(c.H, c.R, c.pad, c.stride, c.dil);
    g.Q = conv_output_size(c.W, c.S, c.pad, c.stride, c.dil);
    for (bool bias : {true, false})
      for (Activation a : {Activation::None, Activation::ReLU})
        EXPECT_EQ(cuda::check_conv_graphs(g, bias, a), "")
            << "N" << c.N << " H" << c.H << " W" << c.W << " C" << c.C << " K" << c.K << " R" << c.R << " pad "
            << c.pad << " stride " << c.stride << " dilation " << c.dil;
  }
}
#endif

TEST(Cuda, ConvolutionsMatchCpu) {
  REQUIRE_CUDNN();
  // The convolution under test is the second layer, so its data gradient (dgrad) runs too.
  struct Case {
    const char* what;
    Conv2dOptions o;
    Shape image;
  };
  auto opts = [](int64_t k, int64_t stride, int64_t pad, int64_t dil, Activation a, bool bias) {
    Conv2dOptions o;
    o.kernel = k, o.stride = stride, o.padding = pad, o.dilation = dil, o.act = a, o.bias = bias;
    return o;
  };
  const std::vector<Case> cases = {
      {"3x3 padding 1, bias, relu", opts(3, 1, 1, 1, Activation::ReLU, true), {8, 8, 3}},
      {"3x3 padding 1, bias, no activation", opts(3, 1, 1, 1, Activation::None, true), {8, 8, 3}},
      {"3x3 padding 1, no bias, relu", opts(3, 1, 1, 1, Activation::ReLU, false), {8, 8, 3}},
      {"3x3 no padding, no bias, no activation", opts(3, 1, 0, 1, Activation::None, false), {8, 8, 3}},
      {"3x3 stride 2 padding 1, relu", opts(3, 2, 1, 1, Activation::ReLU, true), {9, 9, 2}},
      {"3x3 dilation 2 padding 2, relu", opts(3, 1, 2, 2, Activation::ReLU, true), {10, 7, 3}},
      {"5x5 stride 2 dilation 2 padding 3", opts(5, 2, 3, 2, Activation::ReLU, true), {12, 11, 2}},
      {"1x1", opts(1, 1, 0, 1, Activation::None, true), {6, 6, 4}},
  };
  int seed = 100;
  for (const Case& c : cases) {
    auto model = image_model({conv2d(5, {3, 1, 1, 1, Activation::ReLU}), conv2d(7, c.o), flatten(), dense(4)}, c.image);
    Built b = train_program(*model, SoftmaxCrossEntropy(), {6, numel(c.image)}, Adam(1e-3));
    compare_backends(b.p, b.specs, ++seed, c.what);
    // The other forward path: a plain convolution, then our bias+relu kernel (what runs when no
    // engine supports the fused graph, and with fusion off).
    LowerOptions unfused;
    unfused.fusion = false;
    const std::string ex = compare_backends(b.p, b.specs, seed, cat(c.what, ", fusion off"), 1, 1e-4, unfused);
    // The first layer (bias, relu) says why.
    EXPECT_NE(ex.find("relu kernel [not fused: fusion off]"), std::string::npos) << c.what << "\n" << ex;
  }
}

TEST(Cuda, SharedConvLayerAccumulatesItsGradients) {
  REQUIRE_CUDNN();
  // The shared layer's dW and db add up over its two uses (op.accumulate).
  auto shared = conv2d(4, {3, 1, 1, 1, Activation::ReLU});
  auto model = image_model({conv2d(4, {3, 1, 1, 1, Activation::ReLU}), shared, shared, flatten(), dense(3)}, {7, 7, 2});
  Built b = train_program(*model, SoftmaxCrossEntropy(), {5, 98}, SGD(0.01, 0.9));
  compare_backends(b.p, b.specs, 201, "shared conv layer, 2 steps", 2);
}

TEST(Cuda, PoolingAndFlattenMatchCpu) {
  REQUIRE_CUDNN();
  // Max pooling first sees the input itself (exact on both backends, so the window maxima and
  // their positions agree exactly); overlapping padded windows route gradients from several
  // outputs to one element; global average pooling ends in a dense layer.
  auto model = image_model({max_pool2d(2), conv2d(6, {3, 1, 1, 1, Activation::ReLU}), max_pool2d(3, 2, 1),
                            conv2d(8, {3, 1, 1, 1, Activation::ReLU}), global_avg_pool(), dense(4)},
                           {16, 12, 3});
  Built b = train_program(*model, SoftmaxCrossEntropy(), {7, 16 * 12 * 3}, AdamW(1e-3));
  compare_backends(b.p, b.specs, 301, "max pool, overlapping padded max pool, global average pool");
  auto flat = image_model({max_pool2d(3, 2, 1), flatten(), dense(5)}, {9, 9, 2});
  Built f = train_program(*flat, MeanSquaredError(), {4, 162}, Adam(1e-3));
  compare_backends(f.p, f.specs, 302, "max pool on the input, flatten");
  // Disjoint windows over 4-channel vectors after a convolution: 2x2 windows leaving the last
  // column of the 9-wide image uncovered (cleared in backward), then padded 2x2 windows with
  // stride 3 that skip rows and columns.
  auto disjoint = image_model({conv2d(4, {3, 1, 1, 1, Activation::ReLU}), max_pool2d(2), max_pool2d(2, 3, 1),
                               flatten(), dense(3)},
                              {10, 9, 4});
  Built d = train_program(*disjoint, SoftmaxCrossEntropy(), {6, 360}, Adam(1e-3));
  compare_backends(d.p, d.specs, 303, "disjoint max pools, vectorized channels, uncovered elements");
}

// The digits CNN (configs/digits_cnn.json) as a program: three Adam steps match the CPU.
LayerPtr digits_cnn() {
  return image_model({conv2d(16, {3, 1, 1, 1, Activation::ReLU}), conv2d(32, {3, 1, 1, 1, Activation::ReLU}),
                      max_pool2d(2), flatten(), dense(10)},
                     {8, 8, 1});
}

TEST(Cuda, CnnTrainStepsMatchCpu) {
  REQUIRE_CUDNN();
  auto model = digits_cnn();
  Built b = train_program(*model, SoftmaxCrossEntropy(), {32, 64}, AdamW(2e-3, 0.9, 0.999, 1e-8, 1e-4));
  compare_backends(b.p, b.specs, 401, "digits CNN, 3 AdamW steps", 3, 2e-4);
}

TEST(Cuda, NondeterministicConvEnginesStillMatchCpu) {
  REQUIRE_CUDNN();
  // deterministic = false lets cuDNN pick atomic wgrad/dgrad engines (PyTorch's default): the
  // sums may come in another order, not another value.
  LowerOptions nd;
  nd.deterministic = false;
  nd.autotune = Autotune::Heuristic;
  auto model = digits_cnn();
  Built b = train_program(*model, SoftmaxCrossEntropy(), {32, 64}, AdamW(2e-3, 0.9, 0.999, 1e-8, 1e-4));
  compare_backends(b.p, b.specs, 402, "digits CNN, nondeterministic engines allowed", 3, 2e-4, nd);
  TrainerOptions o;
  o.lower = nd;
  Trainer t(digits_cnn(), std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(1e-3), Device::CUDA, 5, o);
  t.compile({32, 64});
  const std::string ex = t.explain();
  EXPECT_NE(ex.find("nondeterministic engines allowed"), std::string::npos) << ex;
  EXPECT_NE(ex.find("(nondeterministic allowed"), std::string::npos) << ex;  // the plans' filters
}

std::unique_ptr<Trainer> cnn_trainer(ExecMode mode) {
  TrainerOptions o;
  o.mode = mode;
  auto t = std::make_unique<Trainer>(digits_cnn(), std::make_shared<SoftmaxCrossEntropy>(),
                                     std::make_shared<AdamW>(1e-3, 0.9, 0.999, 1e-8, 1e-4), Device::CUDA, 5, o);
  t->compile({32, 64});
  return t;
}

// cuDNN engines are chosen with NONDETERMINISTIC excluded (cudnn_conv.cpp), so replaying the
// captured step equals running it eagerly, bit for bit.
TEST(Cuda, CnnGraphReplayEqualsEagerBitwiseFor20Steps) {
  REQUIRE_CUDNN();
  auto graph = cnn_trainer(ExecMode::Graph), eager = cnn_trainer(ExecMode::Eager);
  for (int s = 0; s < 20; ++s) {
    HostArray X = random_f32({32, 64}, 5000 + s), y = random_labels(32, 10, 6000 + s);
    float lg = graph->one_step(X, y), le = eager->one_step(X, y);
    ASSERT_EQ(std::memcmp(&lg, &le, 4), 0) << "step " << s << ": " << lg << " vs " << le;
  }
  EXPECT_EQ(graph->capture_count(), 1);
  EXPECT_GT(graph->graph_nodes(), 0u);
  auto a = graph->state(), b = eager->state();
  for (auto& [name, v] : a)
    EXPECT_EQ(std::memcmp(v.raw(), b.at(name).raw(), v.nbytes()), 0) << name << " differs";
}

TEST(Cuda, CnnGraphMatchesCpuTrainerAndExplainsItsPlans) {
  REQUIRE_CUDNN();
  auto gpu = cnn_trainer(ExecMode::Graph);
  Trainer cpu(gpu->model(), gpu->loss_fn(), gpu->optimizer(), Device::CPU, 5);
  cpu.compile({32, 64});
  for (int s = 0; s < 10; ++s) {
    HostArray X = random_f32({32, 64}, 7000 + s), y = random_labels(32, 10, 8000 + s);
    float lg = gpu->one_step(X, y), lc = cpu.one_step(X, y);
    EXPECT_TRUE(near(lg, lc, 1e-5, 1e-4)) << "step " << s << ": " << lg << " vs " << lc;
  }
  // Adam's step m / sqrt(v) turns a tiny gradient difference on a weight whose gradient is
  // near zero into a difference of up to lr per step (measured 1.7e-5 on one filter weight after
  // 10 steps at lr 1e-3), so each tensor is compared as a whole (relative L2), and elementwise
  // only to within one step (lr).
  expect_params_close(gpu->params(), cpu.params(), 1e-3, 1e-3);
  const std::string s = gpu->explain();
  for (const char* want : {"cuDNN graph conv_fprop", "engine ", "conv_dgrad", "conv_wgrad", "max pool kernel",
                           "max pool backward kernel", "reshape", "deterministic", "graph captures: 1"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  std::cout << "[ explain  ] the CNN's lowering:\n" << s << "\n";
}

TEST(Cuda, DigitsCnnConfigTrainsOnTheGpu) {
  REQUIRE_CUDNN();
  RunConfig cfg = load_config(std::string(SG_SOURCE_DIR) + "/configs/digits_cnn.json");
  RunOptions opt;
  opt.device = "cuda";
  std::ostringstream out;
  opt.out = &out;
  RunSummary r = train_run(cfg, opt);
  EXPECT_EQ(r.steps, 600);
  EXPECT_NE(r.device.find("cuda"), std::string::npos) << r.device;
  EXPECT_GE(r.val_accuracy, 0.97) << out.str();  // the CPU run's bar (tests/cli_tests.cmake)
  std::cout << "[ digits   ] cuda: " << r.to_json().dump() << "\n";
}

// --mode verify compares the CPU with the graph step by step, each CPU step starting from the
// graph's state. mlp_8x256's free-running trajectories differed by 7.6e-3 after 10 AdamW steps
// (gradients near zero whose signs differ move their weights by 2 lr), whatever the kernels;
// from the same state each step agrees to ~1e-4.

}  // namespace
}  // namespace sg::test
