// `stepgraph bench-op`: one cuDNN op timed alone on random data, eager and inside a CUDA graph,
// for the single-op comparisons of bench/bench_ops_vs_torch.py. Built with cuDNN only.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cudnn_sdpa.h"
#include "stepgraph/bench.h"

namespace sg {

namespace {

// Round to nearest even: the conversion PyTorch and cuDNN use.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// A device buffer freed on every path out of the bench.
struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceMem() { CUDA_CHECK_WARN(cudaFree(p)); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

void upload_random_bf16(void* dst, int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> h(static_cast<size_t>(n));
  for (auto& x : h) x = to_bf16(u(gen));
  CUDA_CHECK(cudaMemcpy(dst, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
}

// Median over 5 repeats of `iters` calls of fn, in microseconds per call.
template <typename Fn>
double time_us(cudaStream_t s, int iters, Fn fn) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn();  // warm-up
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    CUDA_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < iters; ++i) fn();
    CUDA_CHECK(cudaEventRecord(b, s));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    runs.push_back(1000.0 * ms / iters);
  }
  CUDA_CHECK_WARN(cudaEventDestroy(a));
  CUDA_CHECK_WARN(cudaEventDestroy(b));
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

}  // namespace

nlohmann::json bench_sdpa(const SdpaBench& o) {
  std::string why;
  SG_REQUIRE(cuda_available(&why), "bench-op sdpa needs a GPU: ", why);
  SG_REQUIRE(o.iters > 0, "bench-op: --iters must be positive (got ", o.iters, ")");
  cuda::SdpaGeometry g;
  g.B = o.batch, g.S = o.seq, g.H = o.heads, g.D = o.dim, g.causal = o.causal;
  g.scale = 1.0f / std::sqrt(static_cast<float>(o.dim));
  const int64_t n = g.B * g.S * g.H * g.D;
  SG_REQUIRE(n > 0, "bench-op sdpa: every size must be positive");
  const size_t bytes = static_cast<size_t>(n) * 2;
  DeviceMem q(bytes), k(bytes), v(bytes), out(bytes), d_out(bytes), dq(bytes), dk(bytes), dv(bytes);
  DeviceMem stats(static_cast<size_t>(g.B * g.H * g.S) * sizeof(float));
  upload_random_bf16(q.p, n, 1);
  upload_random_bf16(k.p, n, 2);
  upload_random_bf16(v.p, n, 3);
  upload_random_bf16(d_out.p, n, 4);
  auto ctx = cuda::make_cudnn_context();
  float* st = static_cast<float*>(stats.p);
  auto fwd = cuda::sdpa_forward_plan(ctx, g, q.p, k.p, v.p, out.p, st, &why);
  SG_REQUIRE(fwd, why);
  auto bwd = cuda::sdpa_backward_plan(ctx, g, q.p, k.p, v.p, out.p, d_out.p, st, dq.p, dk.p, dv.p, o.deterministic, &why);
  SG_REQUIRE(bwd, why);
  DeviceMem ws(std::max<size_t>({fwd->workspace_bytes(), bwd->workspace_bytes(), 1}));
  fwd->set_workspace(ws.p);
  bwd->set_workspace(ws.p);

  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  nlohmann::json r;
  try {
    const double f_us = time_us(s, o.iters, [&] { fwd->run(s); });
    const double b_us = time_us(s, o.iters, [&] { bwd->run(s); });
    // The same two plans captured once into a CUDA graph (as in a training step) and replayed.
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    fwd->run(s);
    bwd->run(s);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double g_us = time_us(s, o.iters, [&] { CUDA_CHECK(cudaGraphLaunch(exec, s)); });
    CUDA_CHECK_WARN(cudaGraphExecDestroy(exec));
    CUDA_CHECK_WARN(cudaGraphDestroy(graph));
    // Multiply-adds x 2: forward QK^T and PV; backward recomputes QK^T and adds dV, dP, dQ, dK.
    const double fwd_flop = 4.0 * g.B * g.H * double(g.S) * g.S * g.D * (g.causal ? 0.5 : 1.0);
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    r = {{"event", "bench_op"},
         {"op", "sdpa"},
         {"batch", g.B},
         {"heads", g.H},
         {"seq", g.S},
         {"dim", g.D},
         {"causal", g.causal},
         {"dtype", "bf16"},
         {"deterministic_backward", o.deterministic},
         {"iters", o.iters},
         {"forward_us", f_us},
         {"backward_us", b_us},
         {"forward_backward_graph_us", g_us},
         {"forward_tflops", fwd_flop / f_us * 1e-6},
         {"backward_tflops", 2.5 * fwd_flop / b_us * 1e-6},
         {"plans", {fwd->describe(), bwd->describe()}},
         {"gpu", prop.name}};
  } catch (...) {
    CUDA_CHECK_WARN(cudaStreamDestroy(s));
    throw;
  }
  CUDA_CHECK_WARN(cudaStreamDestroy(s));
  return r;
}

}  // namespace sg
