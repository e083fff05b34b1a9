// cuDNN's fused attention (cudnn_sdpa.h) against the CPU reference attention (cpu_kernels.h) on
// the same bf16-representable inputs: forward output and statistics, and the backward's dQ, dK,
// dV, causal and not; the deterministic backward twice gives the same bits, and the forward and
// backward captured in a CUDA graph give the eager bits. Skips without a GPU or cuDNN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "stepgraph/backend.h"
#include "test_bf16.h"
#include "test_util.h"

#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/libs/cudnn_sdpa.h"
#endif

namespace sg::test {
namespace {

#ifdef STEPGRAPH_HAVE_CUDNN

void check_against_cpu(int64_t B, int64_t S, int64_t H, int64_t D, bool causal) {
  SCOPED_TRACE(cat("B ", B, " S ", S, " H ", H, " D ", D, causal ? " causal" : ""));
  const int64_t n = B * S * H * D;
  cuda::SdpaGeometry g;
  g.B = B, g.S = S, g.H = H, g.D = D, g.causal = causal, g.scale = 1.0f / std::sqrt(static_cast<float>(D));
  Bf16 q(n, 11), k(n, 12), v(n, 13), d_o(n, 14), o(n), dq(n), dk(n), dv(n);
  float* stats = nullptr;
  CUDA_CHECK(cudaMalloc(&stats, B * H * S * sizeof(float)));
  auto ctx = cuda::make_cudnn_context();
  std::string why;
  auto fwd = cuda::sdpa_forward_plan(ctx, g, q.dev, k.dev, v.dev, o.dev, stats, &why);
  ASSERT_TRUE(fwd) << why;
  auto bwd = cuda::sdpa_backward_plan(ctx, g, q.dev, k.dev, v.dev, o.dev, d_o.dev, stats, dq.dev, dk.dev, dv.dev, true, &why);
  ASSERT_TRUE(bwd) << why;
  void* ws = nullptr;
  CUDA_CHECK(cudaMalloc(&ws, std::max<size_t>({fwd->workspace_bytes(), bwd->workspace_bytes(), 1})));
  fwd->set_workspace(ws);
  bwd->set_workspace(ws);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fwd->run(s);
  bwd->run(s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> got_o = o.download(), got_dq = dq.download(), got_dk = dk.download(), got_dv = dv.download();
  std::vector<float> got_l(static_cast<size_t>(B * H * S));
  CUDA_CHECK(cudaMemcpy(got_l.data(), stats, got_l.size() * sizeof(float), cudaMemcpyDeviceToHost));

  // The CPU reference on the same (bf16-exact) values, with cuDNN's bf16 output O as the O the
  // backward reads on both sides.
  cpu::AttentionShape a;
  a.B = B, a.S = S, a.H = H, a.D = D, a.causal = causal, a.scale = g.scale;
  std::vector<float> want_o(n), want_l(B * H * S), want_dq(n), want_dk(n), want_dv(n);
  cpu::attention(q.values.data(), k.values.data(), v.values.data(), want_o.data(), want_l.data(), a);
  cpu::attention_backward(d_o.values.data(), q.values.data(), k.values.data(), v.values.data(), got_o.data(),
                          want_l.data(), want_dq.data(), want_dk.data(), want_dv.data(), a, false, false, false);
  // bf16 outputs carry 8 significant bits: 2^-9 relative rounding per element.
  EXPECT_LT(rel_l2(got_o, want_o), 1e-2);
  EXPECT_LT(rel_l2(got_l, want_l), 1e-4);
  EXPECT_LT(rel_l2(got_dq, want_dq), 2e-2);
  EXPECT_LT(rel_l2(got_dk, want_dk), 2e-2);
  EXPECT_LT(rel_l2(got_dv, want_dv), 2e-2);

  // Deterministic backward: the same bits again. Then both plans captured in a CUDA graph and
  // replayed give the eager bits.
  std::vector<uint16_t> first_dq = dq.bits;
  bwd->run(s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  dq.download();
  EXPECT_EQ(first_dq, dq.bits) << "a second deterministic backward changed dQ";
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  fwd->run(s);
  bwd->run(s);
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  o.poison();
  dk.poison();
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<uint16_t> eager_o(o.bits), eager_dk(dk.bits);
  for (size_t i = 0; i < eager_o.size(); ++i) eager_o[i] = bf16_bits(got_o[i]), eager_dk[i] = bf16_bits(got_dk[i]);
  o.download();
  dk.download();
  EXPECT_EQ(o.bits, eager_o) << "graph replay of the forward differs from eager";
  EXPECT_EQ(dk.bits, eager_dk) << "graph replay of the backward differs from eager";
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaFree(ws));
  CUDA_CHECK(cudaFree(stats));
}

TEST(CudnnSdpa, ForwardAndBackwardMatchCpuReference) {
  REQUIRE_GPU_AND_CUDNN();
  check_against_cpu(2, 64, 2, 64, false);
  check_against_cpu(2, 64, 2, 64, true);
  check_against_cpu(1, 100, 3, 32, true);  // a sequence that is no multiple of the tiles
}

TEST(CudnnSdpa, UnsupportedHeadSizeIsRefusedWithAMessage) {
  REQUIRE_GPU_AND_CUDNN();
  cuda::SdpaGeometry g;
  g.B = 1, g.S = 8, g.H = 1, g.D = 12;
  try {
    cuda::sdpa_forward_plan(cuda::make_cudnn_context(), g, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    FAIL() << "head size 12 should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 8"), std::string::npos) << e.what();
  }
}

#else

TEST(CudnnSdpa, ForwardAndBackwardMatchCpuReference) { GTEST_SKIP() << "built without cuDNN"; }

#endif

}  // namespace
}  // namespace sg::test
