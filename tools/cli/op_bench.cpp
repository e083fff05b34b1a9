// `stepgraph bench-op`: one cuDNN op timed alone on random data, eager and inside a CUDA graph,
// for the single-op comparisons of bench/bench_ops_vs_torch.py (sdpa: fused attention; conv:
// conv_fprop + bias + relu as one graph, its output checked first). Without cuDNN each says so.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "op_bench.h"

#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/libs/cudnn_conv.h"
#include "backend/cuda/libs/cudnn_sdpa.h"
#include "backend/cuda/runtime/cuda_check.h"
#endif

namespace sg {

#ifdef STEPGRAPH_HAVE_CUDNN

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

float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool bf16_finite(uint16_t b) { return (b & 0x7f80) != 0x7f80; }

// n bf16 values drawn uniformly from [-1, 1), as bits.
std::vector<uint16_t> random_bf16(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> h(static_cast<size_t>(n));
  for (auto& x : h) x = to_bf16(u(gen));
  return h;
}

void upload(void* dst, const std::vector<uint16_t>& h) {
  CUDA_CHECK(cudaMemcpy(dst, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
}

void upload_random_bf16(void* dst, int64_t n, uint64_t seed) { upload(dst, random_bf16(n, seed)); }

// A stream destroyed on every path out of the bench.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { CUDA_CHECK_WARN(cudaStreamDestroy(s)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

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

// What checking a convolution's output found.
struct ConvCheck {
  int64_t points = 0;       // sampled outputs compared with the reference
  double max_abs_err = 0;   // largest |cuDNN - reference| among them
};

// Compares a bf16 conv(+bias)(+relu) output Y [N,P,Q,K] with a double-precision reference on the
// same bf16 inputs at 4096 sampled points (a third on the top or bottom row, a third on the left
// or right column, where the padding is read; the rest anywhere), and every element for being
// finite (Y was poisoned with NaN before the run). Allowed per point: bf16 rounding of the result
// (2^-8 relative: round-to-nearest is 2^-9) plus fp32 summation order (2^-14 of the sum of the
// terms' magnitudes). Throws naming the first point outside it.
ConvCheck check_conv_output(const cuda::ConvGeometry& g, const std::vector<uint16_t>& X, const std::vector<uint16_t>& W,
                            const std::vector<uint16_t>* b, bool relu, const std::vector<uint16_t>& Y) {
  int64_t bad = 0;
  for (uint16_t v : Y) bad += !bf16_finite(v);
  SG_REQUIRE(bad == 0, "bench-op conv: ", bad, " of ", Y.size(),
             " output elements are not finite (unwritten or overflowed): cuDNN's result is wrong");
  ConvCheck c;
  std::mt19937_64 gen(7);
  auto pick = [&](int64_t n) { return static_cast<int64_t>(gen() % static_cast<uint64_t>(n)); };
  constexpr int kPoints = 4096;
  for (int i = 0; i < kPoints; ++i) {
    const int64_t n = pick(g.N), k = pick(g.K);
    int64_t p = pick(g.P), q = pick(g.Q);
    if (i % 3 == 0) p = pick(2) ? g.P - 1 : 0;
    if (i % 3 == 1) q = pick(2) ? g.Q - 1 : 0;
    double sum = b ? bf16_value((*b)[k]) : 0.0, mag = std::fabs(sum);
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t h = p * g.stride_h - g.pad_h + r * g.dil_h;
      if (h < 0 || h >= g.H) continue;
      for (int64_t t = 0; t < g.S; ++t) {
        const int64_t w = q * g.stride_w - g.pad_w + t * g.dil_w;
        if (w < 0 || w >= g.W) continue;
        const uint16_t* x = &X[static_cast<size_t>(((n * g.H + h) * g.W + w) * g.C)];
        const uint16_t* f = &W[static_cast<size_t>(((k * g.R + r) * g.S + t) * g.C)];
        for (int64_t ch = 0; ch < g.C; ++ch) {
          const double term = static_cast<double>(bf16_value(x[ch])) * bf16_value(f[ch]);
          sum += term, mag += std::fabs(term);
        }
      }
    }
    const double want = relu ? std::max(sum, 0.0) : sum;
    const double got = bf16_value(Y[static_cast<size_t>(((n * g.P + p) * g.Q + q) * g.K + k)]);
    const double err = std::fabs(got - want), tol = std::ldexp(std::fabs(want), -8) + std::ldexp(mag, -14);
    SG_REQUIRE(err <= tol, "bench-op conv: cuDNN's output is wrong at n ", n, ", p ", p, ", q ", q, ", k ", k, ": ",
               got, ", expected ", want, " (a double-precision sum of the same bf16 inputs; allowed difference ",
               tol, ")");
    c.max_abs_err = std::max(c.max_abs_err, err);
    ++c.points;
  }
  return c;
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

nlohmann::json bench_conv(const ConvBench& o) {
  const auto [P, Q] = conv_bench_output_size(o);  // bad options are named before the GPU is asked
  std::string why;
  SG_REQUIRE(cuda_available(&why), "bench-op conv needs a GPU: ", why);
  cuda::ConvGeometry g;
  g.N = o.batch, g.H = o.height, g.W = o.width, g.C = o.channels;
  g.K = o.filters, g.R = g.S = o.kernel, g.P = P, g.Q = Q;
  g.pad_h = g.pad_w = o.pad, g.stride_h = g.stride_w = o.stride;
  g.io = cuda::ConvIO::BF16;
  const int64_t nx = g.N * g.H * g.W * g.C, nw = g.K * g.R * g.S * g.C, ny = g.N * g.P * g.Q * g.K;
  // Device buffers: x [N,H,W,C], w [K,R,S,C], b [K], y [N,P,Q,K], bf16.
  const std::vector<uint16_t> hx = random_bf16(nx, 1), hw = random_bf16(nw, 2), hb = random_bf16(g.K, 3);
  DeviceMem x(static_cast<size_t>(nx) * 2), w(static_cast<size_t>(nw) * 2), b(static_cast<size_t>(g.K) * 2),
      y(static_cast<size_t>(ny) * 2);
  upload(x.p, hx);
  upload(w.p, hw);
  upload(b.p, hb);
  CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies may still be in flight; s does not wait for them

  Stream s;
  auto ctx = cuda::make_cudnn_context();
  cuda::ConvPlanOptions opt;
  opt.autotune = o.autotune;
  opt.stream = s.s;
  auto plan = cuda::conv_forward_plan(ctx, g, x.p, w.p, o.bias ? b.p : nullptr, y.p,
                                      o.relu ? Activation::ReLU : Activation::None, /*fuse=*/true, opt, &why);
  SG_REQUIRE(plan, "bench-op conv: ", why);
  DeviceMem ws(std::max<size_t>(plan->workspace_bytes(), 1));
  plan->set_workspace(ws.p);

  // Checked before it is timed: one eager call on a poisoned output, against the reference.
  std::vector<uint16_t> eager(static_cast<size_t>(ny)), replayed(eager.size());
  CUDA_CHECK(cudaMemsetAsync(y.p, 0xff, eager.size() * 2, s.s));
  plan->run(s.s);
  CUDA_CHECK(cudaMemcpyAsync(eager.data(), y.p, eager.size() * 2, cudaMemcpyDeviceToHost, s.s));
  CUDA_CHECK(cudaStreamSynchronize(s.s));
  const ConvCheck check = check_conv_output(g, hx, hw, o.bias ? &hb : nullptr, o.relu, eager);

  const double eager_us = time_us(s.s, o.iters, [&] { plan->run(s.s); });
  // One call captured into a CUDA graph (as a training step holds it), replayed.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal));
  try {
    plan->run(s.s);
  } catch (...) {
    cudaGraph_t partial = nullptr;
    if (cudaStreamEndCapture(s.s, &partial) == cudaSuccess && partial) CUDA_CHECK_WARN(cudaGraphDestroy(partial));
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(s.s, &graph));
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  CUDA_CHECK_WARN(cudaGraphDestroy(graph));
  CUDA_CHECK(inst);
  double graph_us = 0;
  try {
    CUDA_CHECK(cudaMemsetAsync(y.p, 0xff, replayed.size() * 2, s.s));
    CUDA_CHECK(cudaGraphLaunch(exec, s.s));
    CUDA_CHECK(cudaMemcpyAsync(replayed.data(), y.p, replayed.size() * 2, cudaMemcpyDeviceToHost, s.s));
    CUDA_CHECK(cudaStreamSynchronize(s.s));
    SG_REQUIRE(replayed == eager, "bench-op conv: the CUDA graph's output differs from the eager call's (",
               plan->stats().engine, "): graph replay must give the same bits");
    graph_us = time_us(s.s, o.iters, [&] { CUDA_CHECK(cudaGraphLaunch(exec, s.s)); });
  } catch (...) {
    CUDA_CHECK_WARN(cudaGraphExecDestroy(exec));
    throw;
  }
  CUDA_CHECK_WARN(cudaGraphExecDestroy(exec));

  // Multiply-adds x 2 (the bias and ReLU are not counted).
  const double flop = 2.0 * g.N * g.K * double(g.P) * g.Q * g.C * g.R * g.S;
  cudaDeviceProp prop{};
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return {{"event", "bench_op"},
          {"op", "conv"},
          {"batch", g.N},
          {"channels", g.C},
          {"height", g.H},
          {"width", g.W},
          {"filters", g.K},
          {"kernel", g.R},
          {"pad", o.pad},
          {"stride", o.stride},
          {"out_height", g.P},
          {"out_width", g.Q},
          {"bias", o.bias},
          {"relu", o.relu},
          {"dtype", "bf16"},
          {"layout", "NHWC"},
          {"autotune", autotune_name(o.autotune)},
          {"iters", o.iters},
          {"eager_us", eager_us},
          {"graph_us", graph_us},
          {"flop", flop},
          {"eager_tflops", flop / eager_us * 1e-6},
          {"graph_tflops", flop / graph_us * 1e-6},
          {"engine", plan->stats().engine},
          {"dynamic_shapes", plan->stats().dynamic},
          {"plan", plan->describe()},
          {"checked_points", check.points},
          {"max_abs_error", check.max_abs_err},
          {"gpu", prop.name}};
}


#else

nlohmann::json bench_sdpa(const SdpaBench&) {
  throw Error("bench-op sdpa: this build has no cuDNN (CMake found no cuDNN frontend headers; scripts/setup.sh installs them)");
}
nlohmann::json bench_conv(const ConvBench& b) {
  conv_bench_output_size(b);  // bad options are named first, as with cuDNN
  throw Error("bench-op conv: this build has no cuDNN (CMake found no cuDNN frontend headers; scripts/setup.sh installs them)");
}

#endif  // STEPGRAPH_HAVE_CUDNN

std::pair<int64_t, int64_t> conv_bench_output_size(const ConvBench& b) {
  const std::pair<const char*, int64_t> positive[] = {{"--batch", b.batch},     {"--channels", b.channels},
                                                      {"--height", b.height},   {"--width", b.width},
                                                      {"--filters", b.filters}, {"--kernel", b.kernel},
                                                      {"--stride", b.stride},   {"--iters", b.iters}};
  for (const auto& [name, v] : positive)
    SG_REQUIRE(v > 0, "bench-op conv: ", name, " must be a positive integer (got ", v, ")");
  SG_REQUIRE(b.pad >= 0, "bench-op conv: --pad must be 0 or more (got ", b.pad, ")");
  const int64_t ph = b.height + 2 * b.pad, pw = b.width + 2 * b.pad;
  SG_REQUIRE(b.kernel <= ph && b.kernel <= pw, "bench-op conv: the ", b.kernel, "x", b.kernel, " kernel (--kernel ",
             b.kernel, ") is larger than the padded ", ph, "x", pw, " image (--height ", b.height, ", --width ", b.width,
             ", --pad ", b.pad, "): expected --kernel <= ", std::min(ph, pw));
  return {conv_output_size(b.height, b.kernel, b.pad, b.stride), conv_output_size(b.width, b.kernel, b.pad, b.stride)};
}

}  // namespace sg
