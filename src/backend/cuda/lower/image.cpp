#include "backend/cuda/lower/image.h"

#include <cstdio>
#include <cstdlib>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/plan_cache.h"
#include "backend/cuda/kernels/image_kernels.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/libs/cudnn_conv.h"
#endif

namespace sg::cuda {

#ifndef STEPGRAPH_HAVE_CUDNN
class ConvPlan {};  // never made without cuDNN: conv ops are refused before lowering
#endif

ImageLowering::ImageLowering(LoweringHooks h) : h_(std::move(h)) {}
ImageLowering::~ImageLowering() = default;

bool ImageLowering::have_convolutions() {
#ifdef STEPGRAPH_HAVE_CUDNN
  return true;
#else
  return false;
#endif
}

void ImageLowering::max_pool(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  const bool fwd = op.kind == OpKind::MaxPool2d;
  const TensorId X = fwd ? in[0] : in[1], Y = fwd ? out[0] : in[2];
  const PoolAttrs a = op.attr<PoolAttrs>();
  PoolGeometry g;
  g.N = dim(X, 0), g.H = dim(X, 1), g.W = dim(X, 2), g.C = dim(X, 3);
  g.P = dim(Y, 1), g.Q = dim(Y, 2);
  g.R = a.window_h, g.S = a.window_w;
  g.stride_h = a.stride_h, g.stride_w = a.stride_w, g.pad_h = a.pad_h, g.pad_w = a.pad_w;
  const float* x = f(X);
  if (fwd) {
    float* y = f(Y);
    h_.notes << "max pool kernel (first maximum in scan order)";
    return h_.add_step(op, [=](cudaStream_t s) { max_pool2d(x, y, g, s); });
  }
  const float* dy = f(in[0]);
  float* dx = f(out[0]);
  const bool acc = op.accumulate[0];
  h_.notes << "max pool backward kernel (a gather per input element, no atomics)";
  h_.add_step(op, [=](cudaStream_t s) { max_pool2d_backward(dy, x, dx, g, acc, s); });
}

void ImageLowering::global_avg_pool(const Op& op) {
  const bool fwd = op.kind == OpKind::GlobalAvgPool;
  const TensorId img = fwd ? op.in[0] : op.out[0];
  const int64_t N = dim(img, 0), HW = dim(img, 1) * dim(img, 2), C = dim(img, 3);
  const float* x = f(op.in[0]);
  float* y = f(op.out[0]);
  if (fwd) {
    h_.notes << "global average pool kernel (double sums)";
    return h_.add_step(op, [=](cudaStream_t s) { sg::cuda::global_avg_pool(x, y, N, HW, C, s); });
  }
  const bool acc = op.accumulate[0];
  h_.notes << "global average pool backward kernel";
  h_.add_step(op, [=](cudaStream_t s) { global_avg_pool_backward(x, y, N, HW, C, acc, s); });
}

void ImageLowering::reshape(const Op& op) {
  const float* x = f(op.in[0]);
  float* y = f(op.out[0]);
  const int64_t n = numel(h_.p.tensor(op.out[0]).shape);
  const bool acc = op.accumulate[0];
  h_.notes << (acc ? "reshape: add kernel" : "reshape: device copy");
  h_.add_step(op, [=](cudaStream_t s) { copy_or_add(x, y, n, acc, s); });
}

#ifdef STEPGRAPH_HAVE_CUDNN

namespace {
ConvGeometry conv_geometry(const Program& p, TensorId X, TensorId W, TensorId Y, const ConvAttrs& a) {
  const Shape &x = p.tensor(X).shape, &w = p.tensor(W).shape, &y = p.tensor(Y).shape;
  ConvGeometry g;
  g.N = x[0], g.H = x[1], g.W = x[2], g.C = x[3];
  g.K = w[0], g.R = w[1], g.S = w[2];
  g.P = y[1], g.Q = y[2];
  g.pad_h = a.pad_h, g.pad_w = a.pad_w, g.stride_h = a.stride_h, g.stride_w = a.stride_w;
  g.dil_h = a.dil_h, g.dil_w = a.dil_w;
  return g;
}

std::shared_ptr<CudnnContext> cudnn(CudaBackend& be) {
  auto& slot = be.cudnn_context();
  if (!slot) slot = make_cudnn_context();
  return slot;
}
}  // namespace

void ImageLowering::add_plan(const Op& op, std::shared_ptr<ConvPlan> plan, const char* what) {
  h_.notes << what << ": " << plan->describe() << "; ";
  plans_.push_back(plan);
  h_.add_step(op, [plan](cudaStream_t s) { plan->run(s); });
}

ConvPlanOptions ImageLowering::conv_options() {
  if (!cache_) cache_ = std::make_unique<plan_cache::PlanCache>(plan_cache::resolve_dir(h_.opt.plan_cache));
  ConvPlanOptions o;
  o.precision = h_.opt.precision;
  o.autotune = h_.opt.autotune;
  o.deterministic = h_.opt.deterministic;
  o.stream = h_.be.stream();
  o.cache = cache_.get();
  return o;
}

void ImageLowering::conv_forward(const Op& op) {
  const ConvAttrs a = op.attr<ConvAttrs>();
  const ConvGeometry g = conv_geometry(h_.p, op.in[0], op.in[1], op.out[0], a);
  const float *X = f(op.in[0]), *W = f(op.in[1]), *b = f(op.in[2]);
  float* Y = f(op.out[0]);
  const Activation act = a.act;
  auto ctx = cudnn(h_.be);
  if (batch_ == 0) batch_ = g.N;
  const ConvPlanOptions opt = conv_options();
  std::string why_fused, why;
  std::shared_ptr<ConvPlan> plan;
  // Fusion off keeps bias and relu out of the cuDNN graph (our kernel after a plain convolution):
  // the path taken anyway when no engine supports the fused graph.
  if (!h_.opt.fusion) why_fused = "fusion off";
  else if (b || act != Activation::None) {
    plan = conv_forward_plan(ctx, g, X, W, b, Y, act, true, opt, &why_fused);
    if (plan) return add_plan(op, plan, "forward");
  }
  plan = conv_forward_plan(ctx, g, X, W, nullptr, Y, Activation::None, false, opt, &why);
  SG_REQUIRE(plan, why);
  add_plan(op, plan, "forward");
  if (b || act != Activation::None) {
    // The fused graph had no engine: the bias and activation in our kernel, in place.
    const int64_t rows = g.N * g.P * g.Q, K = g.K;
    h_.notes << "bias+" << activation_name(act) << " kernel [not fused: " << why_fused << "]";
    h_.add_step(op, [=](cudaStream_t s) { bias_act_forward(Y, b, nullptr, Y, rows, K, act, s); });
  }
}

void ImageLowering::conv_backward(const Op& op) {
  const ConvAttrs a = op.attr<ConvAttrs>();
  const TensorId dY = op.in[0], X = op.in[1], W = op.in[2], Y = op.in[3];
  const TensorId dX = op.out[0], dW = op.out[1], db = op.out[2];
  const ConvGeometry g = conv_geometry(h_.p, X, W, Y, a);
  const int64_t rows = g.N * g.P * g.Q, K = g.K;
  float* dz = f(dY);  // dY becomes dZ in place: nothing else reads it (as for dense layers)
  if (a.act == Activation::ReLU) {
    const float* y = f(Y);
    h_.notes << "relu' kernel (in place); ";
    h_.add_step(op, [=](cudaStream_t s) { act_backward_inplace(dz, y, nullptr, rows * K, Activation::ReLU, s); });
  }
  if (db != kNone) {
    float* dbp = f(db);
    const bool acc = op.accumulate[2];
    ColumnSumScratch sc;
    const int chunks = column_sum_chunks(rows, K);
    if (chunks > 1) {
      sc.partials = reinterpret_cast<float*>(h_.own(static_cast<size_t>(chunks * K) * sizeof(float)));
      sc.counters = reinterpret_cast<unsigned*>(h_.own(static_cast<size_t>((K + 31) / 32) * sizeof(unsigned)));
    }
    h_.notes << "db: column-sum kernel (deterministic); ";
    h_.add_step(op, [=](cudaStream_t s) { column_sum(dz, dbp, rows, K, acc, sc, s); });
  }
  auto ctx = cudnn(h_.be);
  // A shared layer accumulates: cuDNN writes scratch, then our kernel adds it in.
  auto gradient = [&](TensorId out, bool acc, const char* what, auto make) {
    float* target = f(out);
    const int64_t n = numel(h_.p.tensor(out).shape);
    float* dst = acc ? reinterpret_cast<float*>(h_.own(static_cast<size_t>(n) * sizeof(float))) : target;
    std::string why;
    std::shared_ptr<ConvPlan> plan = make(dst, &why);
    SG_REQUIRE(plan, why);
    add_plan(op, plan, what);
    if (acc) {
      h_.notes << "add kernel (accumulates); ";
      h_.add_step(op, [=](cudaStream_t s) { copy_or_add(dst, target, n, true, s); });
    }
  };
  const float *x = f(X), *w = f(W);
  if (batch_ == 0) batch_ = g.N;
  const ConvPlanOptions opt = conv_options();
  gradient(dW, op.accumulate[1] != 0, "dW", [&](float* dst, std::string* why) {
    return conv_weight_grad_plan(ctx, g, dz, x, dst, opt, why);
  });
  if (dX != kNone)
    gradient(dX, op.accumulate[0] != 0, "dX", [&](float* dst, std::string* why) {
      return conv_data_grad_plan(ctx, g, dz, w, dst, opt, why);
    });
}

void ImageLowering::finish() {
  if (plans_.empty()) return;
  if (const size_t most = share_workspace(plans_, h_.own); most > 0)
    h_.notes << "  cuDNN workspace: " << most << " bytes, shared by " << plans_.size() << " plans\n";
  std::vector<ConvPlanStats> st;
  int loaded = 0, timed = 0;
  double ms = 0, tune = 0, spread = 0;
  for (const auto& p : plans_) {
    const ConvPlanStats& s = p->stats();
    st.push_back(s);
    loaded += s.loaded, ms += s.compile_ms, tune += s.tune_ms, timed += s.timed > 0;
    if (s.timed > 0) spread = std::max(spread, s.slowest_us / std::max(s.fastest_us, 1e-3));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", ms);
  h_.notes << "  cuDNN plans: " << plans_.size() << " (" << loaded << " loaded from the plan cache, "
           << plans_.size() - loaded << " built), compile " << buf << " ms";
  if (timed > 0) {
    std::snprintf(buf, sizeof buf, "%.1f ms, largest spread %.2fx", tune, spread);
    h_.notes << "; autotune " << autotune_name(h_.opt.autotune) << ": " << timed << " graphs timed in " << buf;
  }
  h_.notes << "; plan cache " << (cache_ && cache_->enabled() ? cache_->dir() : std::string("off")) << "\n";
  h_.notes << "  cuDNN compiles of this backend (the first shape builds kernels, later shapes reuse them):\n"
           << record_compile(*cudnn(h_.be), batch_, st);
}

#else  // no cuDNN in this build: available() keeps convolutions from getting here

void ImageLowering::conv_forward(const Op& op) { throw Error(cat("op '", op.name, "': this build has no cuDNN")); }
void ImageLowering::conv_backward(const Op& op) { throw Error(cat("op '", op.name, "': this build has no cuDNN")); }
void ImageLowering::add_plan(const Op&, std::shared_ptr<ConvPlan>, const char*) {}
void ImageLowering::finish() {}

#endif

}  // namespace sg::cuda
