// The bf16 convolution graph of `stepgraph bench-op conv` (cudnn_conv.h, ConvIO::BF16):
// conv_fprop (+ bias) (+ relu) on bf16 tensors against the fp32 CPU reference (double sums) on the
// same bf16-exact values, per element within bf16 rounding; graph replay gives the eager bits; a
// plan-cache round trip loads the plan it stored. Without a GPU: the bf16 graphs validate (when
// libcudnn.so.9 loads) and bench-op conv's option checks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "op_bench.h"
#include "stepgraph/ir.h"
#include "test_bf16.h"
#include "test_util.h"

#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/plan_cache.h"
#endif

namespace sg::test {
namespace {

// Every bad option is named (no GPU needed: bench_conv checks them before asking for one).
TEST(ConvBench, OptionsAreCheckedBeforeTheGpu) {
  ConvBench b;
  EXPECT_EQ(conv_bench_output_size(b), std::make_pair(int64_t{56}, int64_t{56}));
  b.stride = 2;
  EXPECT_EQ(conv_bench_output_size(b), std::make_pair(int64_t{28}, int64_t{28}));
  b = ConvBench();
  b.height = 9, b.width = 7, b.kernel = 3, b.pad = 0;
  EXPECT_EQ(conv_bench_output_size(b), std::make_pair(int64_t{7}, int64_t{5}));
  b.kernel = 9, b.pad = 1;  // exactly the padded width
  EXPECT_EQ(conv_bench_output_size(b), std::make_pair(int64_t{3}, int64_t{1}));

  auto refused = [](ConvBench c, const std::string& want) {
    SCOPED_TRACE(want);
    EXPECT_THROW(
        {
          try {
            conv_bench_output_size(c);
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
            throw;
          }
        },
        Error);
    try {
      bench_conv(c);  // the same message, GPU or not
      ADD_FAILURE() << "bench_conv accepted it";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  ConvBench c;
  c.channels = 0;
  refused(c, "--channels must be a positive integer (got 0)");
  c = ConvBench(), c.batch = -1;
  refused(c, "--batch must be a positive integer (got -1)");
  c = ConvBench(), c.filters = 0;
  refused(c, "--filters must be a positive integer (got 0)");
  c = ConvBench(), c.stride = 0;
  refused(c, "--stride must be a positive integer (got 0)");
  c = ConvBench(), c.iters = 0;
  refused(c, "--iters must be a positive integer (got 0)");
  c = ConvBench(), c.pad = -1;
  refused(c, "--pad must be 0 or more (got -1)");
  c = ConvBench(), c.height = 3, c.width = 3, c.kernel = 7;
  refused(c, "the 7x7 kernel (--kernel 7) is larger than the padded 5x5 image (--height 3, --width 3, --pad 1): "
             "expected --kernel <= 5");
  c = ConvBench(), c.height = 20, c.width = 4, c.kernel = 5, c.pad = 0;
  refused(c, "is larger than the padded 20x4 image");
}

#ifdef STEPGRAPH_HAVE_CUDNN

struct Case {
  const char* what;
  int64_t N, C, H, W, K, R, pad, stride;
  bool bias, relu;
  Autotune autotune;
};

cuda::ConvGeometry bf16_geometry(const Case& c) {
  cuda::ConvGeometry g;
  g.N = c.N, g.C = c.C, g.H = c.H, g.W = c.W, g.K = c.K, g.R = g.S = c.R;
  g.pad_h = g.pad_w = c.pad, g.stride_h = g.stride_w = c.stride;
  g.P = conv_output_size(c.H, c.R, c.pad, c.stride);
  g.Q = conv_output_size(c.W, c.R, c.pad, c.stride);
  g.io = cuda::ConvIO::BF16;
  return g;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"N2 C8 9x9 -> K16 3x3 pad 1, bias, relu, heuristics' first", 2, 8, 9, 9, 16, 3, 1, 1, true, true, Autotune::Off},
      {"N2 C8 9x9 -> K16 3x3 pad 1 stride 2, bias, relu, tuned", 2, 8, 9, 9, 16, 3, 1, 2, true, true,
       Autotune::Heuristic},
      {"N2 C8 9x9 -> K16 3x3 pad 1, plain conv, tuned", 2, 8, 9, 9, 16, 3, 1, 1, false, false, Autotune::Heuristic},
      {"N3 C16 7x10 -> K8 1x1, bias, no relu, tuned", 3, 16, 7, 10, 8, 1, 0, 1, true, false, Autotune::Heuristic},
  };
  return c;
}

// No GPU needed: the frontend validates the bf16 graphs and infers their output shapes on the
// host (libcudnn.so.9 must load); the seed's shape too.
TEST(CudnnConvBf16, GraphsValidateWithoutGpu) {
  std::string why;
  if (!cuda::cudnn_loadable(&why)) GTEST_SKIP() << why;
  std::vector<Case> all = cases();
  all.push_back({"the seed's shape", 32, 128, 56, 56, 256, 3, 1, 1, true, true, Autotune::Off});
  for (const Case& c : all)
    for (bool bias : {true, false})
      for (Activation a : {Activation::None, Activation::ReLU})
        EXPECT_EQ(cuda::check_conv_graphs(bf16_geometry(c), bias, a), "") << c.what;
  // The check is real: an output shape cuDNN does not infer is caught.
  cuda::ConvGeometry wrong = bf16_geometry(cases()[1]);
  wrong.P += 1;
  EXPECT_NE(cuda::check_conv_graphs(wrong, true, Activation::ReLU), "");
}

// The dgrad and wgrad plans are fp32 only, and say so (before touching cuDNN).
TEST(CudnnConvBf16, BackwardPlansRefuseBf16) {
  std::string why;
  const cuda::ConvGeometry g = bf16_geometry(cases()[0]);
  try {
    cuda::conv_data_grad_plan(nullptr, g, nullptr, nullptr, nullptr, {}, &why);
    ADD_FAILURE() << "conv_data_grad_plan accepted bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 is forward only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::conv_weight_grad_plan(nullptr, g, nullptr, nullptr, nullptr, {}, &why), Error);
}

// One case on the GPU: the plan (from `cache` when given), one eager run on a poisoned output
// against the CPU reference, then the same plan captured in a CUDA graph and replayed on a
// poisoned output: the eager bits. Returns the output bits and the plan's stats.
std::vector<uint16_t> run_case(const Case& c, const plan_cache::PlanCache* cache, cuda::ConvPlanStats* stats) {
  SCOPED_TRACE(c.what);
  const cuda::ConvGeometry g = bf16_geometry(c);
  const int64_t nx = g.N * g.H * g.W * g.C, nw = g.K * g.R * g.S * g.C, ny = g.N * g.P * g.Q * g.K;
  Bf16 X(nx, 31), W(nw, 32), b(g.K, 33), Y(ny);
  CUDA_CHECK(cudaDeviceSynchronize());  // the uploads, before work on a non-blocking stream
  auto ctx = cuda::make_cudnn_context();
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda::ConvPlanOptions opt;
  opt.autotune = c.autotune;
  opt.stream = s;
  opt.cache = cache;
  std::string why;
  auto plan = cuda::conv_forward_plan(ctx, g, X.dev, W.dev, c.bias ? b.dev : nullptr, Y.dev,
                                      c.relu ? Activation::ReLU : Activation::None, true, opt, &why);
  EXPECT_TRUE(plan) << why;
  if (!plan) {
    CUDA_CHECK(cudaStreamDestroy(s));
    return {};
  }
  *stats = plan->stats();
  EXPECT_FALSE(stats->engine.empty()) << plan->describe();
  EXPECT_NE(plan->describe().find("(bf16)"), std::string::npos) << plan->describe();
  void* ws = nullptr;
  CUDA_CHECK(cudaMalloc(&ws, std::max<size_t>(plan->workspace_bytes(), 1)));
  plan->set_workspace(ws);
  plan->run(s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> got = Y.download();
  const std::vector<uint16_t> eager = Y.bits;

  // The fp32 reference (double sums) on the same values, and the sum of the terms' magnitudes.
  cpu::ConvShape cs;
  cs.N = g.N, cs.H = g.H, cs.W = g.W, cs.C = g.C, cs.K = g.K, cs.R = g.R, cs.S = g.S, cs.P = g.P, cs.Q = g.Q;
  cs.pad_h = cs.pad_w = c.pad, cs.stride_h = cs.stride_w = c.stride;
  std::vector<float> want(static_cast<size_t>(ny)), mag(want.size()), ax(X.values), aw(W.values);
  cpu::conv2d_forward(X.values.data(), W.values.data(), c.bias ? b.values.data() : nullptr, want.data(), cs,
                      c.relu ? Activation::ReLU : Activation::None);
  for (float& v : ax) v = std::fabs(v);
  for (float& v : aw) v = std::fabs(v);
  cpu::conv2d_forward(ax.data(), aw.data(), nullptr, mag.data(), cs, Activation::None);
  // bf16 rounding of the result (2^-9 relative, allowed 2^-8) plus fp32 summation order.
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double bias_mag = c.bias ? std::fabs(b.values[i % g.K]) : 0.0;
    const double tol = std::ldexp(std::fabs(want[i]), -8) + std::ldexp(mag[i] + bias_mag, -14);
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol) && ++bad <= 5)
      ADD_FAILURE() << "Y[" << i << "] = " << got[i] << ", reference " << want[i] << " (allowed " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << "of " << want.size();
  EXPECT_LT(rel_l2(got, want), 4e-3);
  if (c.relu) EXPECT_NE(std::count(want.begin(), want.end(), 0.0f), 0) << "the case never clamps";

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  plan->run(s);
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    Y.poison();
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    Y.download();
    EXPECT_EQ(Y.bits, eager) << "graph replay " << replay << " differs from the eager run";
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaFree(ws));
  return eager;
}

TEST(CudnnConvBf16, ForwardMatchesCpuReferenceAndGraphReplayIsBitwise) {
  REQUIRE_GPU_AND_CUDNN();
  for (const Case& c : cases()) {
    cuda::ConvPlanStats st;
    run_case(c, nullptr, &st);
    std::cout << "[ bf16 conv ] " << c.what << ": engine " << st.engine << "\n";
  }
}

TEST(CudnnConvBf16, PlanCacheStoresAndLoadsTheBf16Plan) {
  REQUIRE_GPU_AND_CUDNN();
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(SG_TEST_TMPDIR) / "cudnn_conv_bf16" / cat("cache_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const plan_cache::PlanCache cache(dir.string());
  const Case& c = cases()[1];
  cuda::ConvPlanStats built, loaded;
  const std::vector<uint16_t> a = run_case(c, &cache, &built);
  EXPECT_FALSE(built.loaded);
  EXPECT_TRUE(built.stored);
  const std::vector<uint16_t> b = run_case(c, &cache, &loaded);
  EXPECT_TRUE(loaded.loaded);
  EXPECT_EQ(loaded.engine, built.engine);
  EXPECT_EQ(a, b) << "the loaded plan's output differs from the built one's";
  fs::remove_all(dir);
}

#endif

}  // namespace
}  // namespace sg::test
