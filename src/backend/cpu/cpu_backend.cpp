// The CPU reference backend: host memory, and per op a closure over its bound pointers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "backend/cpu/cpu_kernels.h"
#include "core/host_memory.h"
#include "pinn/pinn_kernels.h"
#include "stepgraph/backend.h"

namespace sg {

namespace {

// Geometry of a convolution (X [N,H,W,C], filters [K,R,S,C], Y [N,P,Q,K]) or a pooling
// (window R x S, K = C) as the kernels take it.
cpu::ConvShape conv_shape(const Program& p, TensorId X, TensorId W, TensorId Y, const ConvAttrs& a) {
  const Shape &xs = p.tensor(X).shape, &ws = p.tensor(W).shape, &ys = p.tensor(Y).shape;
  cpu::ConvShape s;
  s.N = xs[0], s.H = xs[1], s.W = xs[2], s.C = xs[3];
  s.K = ws[0], s.R = ws[1], s.S = ws[2];
  s.P = ys[1], s.Q = ys[2];
  s.pad_h = a.pad_h, s.pad_w = a.pad_w, s.stride_h = a.stride_h, s.stride_w = a.stride_w;
  s.dil_h = a.dil_h, s.dil_w = a.dil_w;
  return s;
}
cpu::ConvShape pool_shape(const Program& p, TensorId X, TensorId Y, const PoolAttrs& a) {
  const Shape &xs = p.tensor(X).shape, &ys = p.tensor(Y).shape;
  cpu::ConvShape s;
  s.N = xs[0], s.H = xs[1], s.W = xs[2], s.C = xs[3];
  s.K = xs[3], s.R = a.window_h, s.S = a.window_w;
  s.P = ys[1], s.Q = ys[2];
  s.pad_h = a.pad_h, s.pad_w = a.pad_w, s.stride_h = a.stride_h, s.stride_w = a.stride_w;
  return s;
}

// The first `once` steps are the step-invariant prefix (ir.h invariant_prefix): run before the
// first step and after recompute_invariants, not in every step (their outputs' memory is never
// reused, so the values stay).
class CpuExecutable : public Executable {
 public:
  CpuExecutable(std::vector<std::function<void()>> steps, size_t once) : steps_(std::move(steps)), once_(once) {}
  void run() override {
    for (size_t i = invariants_done_ ? once_ : 0; i < steps_.size(); ++i) steps_[i]();
    invariants_done_ = true;
  }
  void recompute_invariants() override { invariants_done_ = false; }
  size_t num_ops() const override { return steps_.size(); }

 private:
  std::vector<std::function<void()>> steps_;
  size_t once_;
  bool invariants_done_ = false;
};

class CpuBackend : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::string describe() const override { return "cpu (reference kernels, double accumulation)"; }

  void* allocate(size_t bytes) override {
    size_t rounded = (bytes + 255) / 256 * 256;
    require_host_memory(rounded, "cpu backend: the step plan");
    void* p = std::aligned_alloc(256, rounded ? rounded : 256);
    SG_REQUIRE(p, "cpu backend: out of memory allocating ", bytes, " bytes");
    std::memset(p, 0, rounded);
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }

  std::unique_ptr<Executable> lower(const Program& p, const std::vector<void*>& ptrs,
                                    const LowerOptions& opt) override {
    if (opt.comm)
      for (const TensorInfo& t : p.tensors())
        SG_REQUIRE(t.role != Role::Gradient, "data-parallel training (NCCL all-reduce) runs on the CUDA backend only");
    std::vector<std::function<void()>> steps;
    for (const Op& op : p.ops()) steps.push_back(lower_op(p, op, ptrs));
    return std::make_unique<CpuExecutable>(std::move(steps), invariant_prefix(p));
  }

 private:
  static std::function<void()> lower_op(const Program& p, const Op& op,
                                        const std::vector<void*>& ptrs) {
    auto f = [&](TensorId t) { return t == kNone ? nullptr : static_cast<float*>(ptrs[t]); };
    auto i32 = [&](TensorId t) { return static_cast<int32_t*>(ptrs[t]); };
    auto dim = [&](TensorId t, size_t k) { return p.tensor(t).shape[k]; };
    auto count = [&](TensorId t) { return numel(p.tensor(t).shape); };
    const auto& in = op.in;
    const auto& out = op.out;
    switch (op.kind) {
      case OpKind::GatherBatch: {
        const float* dX = f(in[0]);
        const void* dY = ptrs[in[1]];
        const int32_t* step = i32(in[2]);
        float* X = f(out[0]);
        void* y = ptrs[out[1]];
        int32_t* valid = i32(out[2]);
        const int64_t N = dim(in[0], 0), D = dim(in[0], 1), B = dim(out[0], 0);
        const size_t row = static_cast<size_t>(count(in[1]) / N) * dtype_size(p.tensor(in[1]).dtype);
        const GatherAttrs a = op.attr<GatherAttrs>();
        return [=] { cpu::gather_batch(dX, dY, step, X, y, valid, N, D, B, row, a); };
      }
      case OpKind::Dense: {
        const float *X = f(in[0]), *W = f(in[1]), *b = f(in[2]);
        float *Y = f(out[0]), *Z = f(out[1]);
        // Rows: every leading index of X [B, ..., I].
        int64_t I = dim(in[1], 1), B = count(in[0]) / I, O = dim(in[1], 0);
        Activation act = op.attr<DenseAttrs>().act;
        const int64_t br = op.attr<DenseAttrs>().bias_rows ? op.attr<DenseAttrs>().bias_rows : B;
        return [=] { cpu::dense_forward(X, W, b, Y, Z, B, I, O, act, br); };
      }
      case OpKind::DenseBackward: {
        const float *dY = f(in[0]), *X = f(in[1]), *W = f(in[2]), *Y = f(in[3]), *Z = f(in[4]);
        float *dX = f(out[0]), *dW = f(out[1]), *db = f(out[2]);
        int64_t I = dim(in[2], 1), B = count(in[1]) / I, O = dim(in[2], 0);
        Activation act = op.attr<DenseAttrs>().act;
        const int64_t br = op.attr<DenseAttrs>().bias_rows ? op.attr<DenseAttrs>().bias_rows : B;
        bool ax = op.accumulate[0], aw = op.accumulate[1], ab = op.accumulate[2];
        return [=] { cpu::dense_backward(dY, X, W, Y, Z, dX, dW, db, B, I, O, act, ax, aw, ab, br); };
      }
      case OpKind::Conv2d: {
        const float *X = f(in[0]), *Wt = f(in[1]), *b = f(in[2]);
        float* Y = f(out[0]);
        const cpu::ConvShape s = conv_shape(p, in[0], in[1], out[0], op.attr<ConvAttrs>());
        const Activation act = op.attr<ConvAttrs>().act;
        return [=] { cpu::conv2d_forward(X, Wt, b, Y, s, act); };
      }
      case OpKind::Conv2dBackward: {
        const float *dY = f(in[0]), *X = f(in[1]), *Wt = f(in[2]), *Y = f(in[3]);
        float *dX = f(out[0]), *dW = f(out[1]), *db = f(out[2]);
        const cpu::ConvShape s = conv_shape(p, in[1], in[2], in[3], op.attr<ConvAttrs>());
        const Activation act = op.attr<ConvAttrs>().act;
        const bool ax = op.accumulate[0], aw = op.accumulate[1], ab = op.accumulate[2];
        return [=] { cpu::conv2d_backward(dY, X, Wt, Y, dX, dW, db, s, act, ax, aw, ab); };
      }
      case OpKind::MaxPool2d: {
        const float* X = f(in[0]);
        float* Y = f(out[0]);
        const cpu::ConvShape s = pool_shape(p, in[0], out[0], op.attr<PoolAttrs>());
        return [=] { cpu::max_pool2d(X, Y, s); };
      }
      case OpKind::MaxPool2dBackward: {
        const float *dY = f(in[0]), *X = f(in[1]);
        float* dX = f(out[0]);
        const cpu::ConvShape s = pool_shape(p, in[1], in[2], op.attr<PoolAttrs>());
        const bool acc = op.accumulate[0];
        return [=] { cpu::max_pool2d_backward(dY, X, dX, s, acc); };
      }
      case OpKind::GlobalAvgPool:
      case OpKind::GlobalAvgPoolBackward: {
        const bool fwd = op.kind == OpKind::GlobalAvgPool;
        const TensorId image = fwd ? in[0] : out[0];
        const int64_t N = dim(image, 0), HW = dim(image, 1) * dim(image, 2), C = dim(image, 3);
        const float* X = f(in[0]);
        float* Y = f(out[0]);
        if (fwd) return [=] { cpu::global_avg_pool(X, Y, N, HW, C); };
        const bool acc = op.accumulate[0];
        return [=] { cpu::global_avg_pool_backward(X, Y, N, HW, C, acc); };
      }
      case OpKind::AbsMax: {
        const float* X = f(in[0]);
        float* m = f(out[0]);
        const int64_t n = count(in[0]);
        return [=] {
          float v = 0.0f;  // NaN propagates: a diverged layer shows as NaN, not as its finite part
          for (int64_t k = 0; k < n; ++k) v = std::isnan(X[k]) || std::isnan(v) ? NAN : std::max(v, std::fabs(X[k]));
          *m = v;
        };
      }
      case OpKind::Reshape: {
        const float* X = f(in[0]);
        float* Y = f(out[0]);
        const int64_t n = count(out[0]);
        const bool acc = op.accumulate[0];
        return [=] { cpu::copy(X, Y, n, acc); };
      }
      case OpKind::LayerNorm: {
        const float *X = f(in[0]), *g = f(in[1]), *b = f(in[2]);
        float *Y = f(out[0]), *mean = f(out[1]), *rstd = f(out[2]);
        const int64_t E = dim(in[1], 0), R = count(in[0]) / E;
        const double eps = op.attr<NormAttrs>().eps;
        return [=] { cpu::layer_norm(X, g, b, Y, mean, rstd, R, E, eps); };
      }
      case OpKind::LayerNormBackward: {
        const float *dY = f(in[0]), *X = f(in[1]), *g = f(in[2]), *mean = f(in[3]), *rstd = f(in[4]);
        float *dX = f(out[0]), *dg = f(out[1]), *db = f(out[2]);
        const int64_t E = dim(in[2], 0), R = count(in[1]) / E;
        const bool ax = op.accumulate[0], ag = op.accumulate[1], ab = op.accumulate[2];
        return [=] { cpu::layer_norm_backward(dY, X, g, mean, rstd, dX, dg, db, R, E, ax, ag, ab); };
      }
      case OpKind::Embedding: {
        const bool i32_ids = p.tensor(in[0]).dtype == DType::I32;
        const int32_t* ids_i = i32_ids ? i32(in[0]) : nullptr;
        const float* ids_f = i32_ids ? nullptr : f(in[0]);
        const float *table = f(in[1]), *pos = f(in[2]);
        float* Y = f(out[0]);
        const int64_t B = dim(in[0], 0), S = dim(in[0], 1), V = dim(in[1], 0), E = dim(in[1], 1);
        return [=] { cpu::embedding(ids_i, ids_f, table, pos, Y, B, S, V, E); };
      }
      case OpKind::EmbeddingBackward: {
        const bool i32_ids = p.tensor(in[1]).dtype == DType::I32;
        const int32_t* ids_i = i32_ids ? i32(in[1]) : nullptr;
        const float* ids_f = i32_ids ? nullptr : f(in[1]);
        const float* dY = f(in[0]);
        float *dtable = f(out[0]), *dpos = f(out[1]);
        const int64_t B = dim(in[0], 0), S = dim(in[0], 1), E = dim(in[0], 2);
        const int64_t V = out[0] == kNone ? 0 : dim(out[0], 0), P = out[1] == kNone ? 0 : dim(out[1], 0);
        const bool at = op.accumulate[0], ap = op.accumulate[1];
        return [=] { cpu::embedding_backward(dY, ids_i, ids_f, dtable, dpos, B, S, V, P, E, at, ap); };
      }
      case OpKind::Attention:
      case OpKind::AttentionBackward: {
        const AttentionAttrs& at = op.attr<AttentionAttrs>();
        const TensorId Qt = op.kind == OpKind::Attention ? in[0] : in[1];
        cpu::AttentionShape a;
        a.B = dim(Qt, 0), a.S = dim(Qt, 1), a.H = at.heads, a.D = dim(Qt, 2) / at.heads;
        a.causal = at.causal;
        a.scale = at.scale > 0 ? at.scale : 1.0 / std::sqrt(static_cast<double>(a.D));
        if (op.kind == OpKind::Attention) {
          const float *Q = f(in[0]), *K = f(in[1]), *V = f(in[2]);
          float *O = f(out[0]), *L = f(out[1]);
          return [=] { cpu::attention(Q, K, V, O, L, a); };
        }
        const float *dO = f(in[0]), *Q = f(in[1]), *K = f(in[2]), *V = f(in[3]), *O = f(in[4]), *L = f(in[5]);
        float *dQ = f(out[0]), *dK = f(out[1]), *dV = f(out[2]);
        const bool aq = op.accumulate[0], ak = op.accumulate[1], av = op.accumulate[2];
        return [=] { cpu::attention_backward(dO, Q, K, V, O, L, dQ, dK, dV, a, aq, ak, av); };
      }
      case OpKind::ExpressionLoss: {
        const ExprLossAttrs a = op.attr<ExprLossAttrs>();
        const int64_t M = dim(in[1], 0), d = dim(in[1], 1), O = dim(in[0], 1);
        const float *U = f(in[0]) + a.row0 * O, *X = f(in[1]);  // this term's rows of a shared pass
        float *total = f(out[0]), *term = f(out[1]), *dU = f(out[2]) + a.row0 * O;
        const bool acc = op.accumulate[0];
        return [=] { cpu::expression_loss(U, X, total, term, dU, M, d, O, a, acc); };
      }
      case OpKind::SamplePoints: {
        const int32_t* step = i32(in[0]);
        float* X = f(out[0]);
        const SampleAttrs a = op.attr<SampleAttrs>();
        const int64_t M = dim(out[0], 0), d = dim(out[0], 1);
        return [=] { cpu::sample_points(step, X, M, d, a); };
      }
      // A jet tensor's `head` value-only rows are a jet with no derivatives (JetSpec{}: one
      // component), then the K blocks follow from row head.
      case OpKind::JetInput: {
        const float* X = f(in[0]);
        float* J = f(out[0]);
        const JetAttrs a = op.attr<JetAttrs>();
        const int64_t B = dim(in[0], 0), d = dim(in[0], 1);
        std::vector<std::pair<const float*, int64_t>> heads;
        for (size_t k = 1; k < in.size(); ++k) heads.emplace_back(f(in[k]), dim(in[k], 0));
        return [=] {
          float* j = J;
          for (const auto& [H, n] : heads) j = std::copy(H, H + n * d, j);
          cpu::jet_input(X, j, B, a.jet);
        };
      }
      case OpKind::JetActivation:
      case OpKind::FourierFeatures: {
        const float* A = f(in[0]);
        float* Y = f(out[0]);
        const JetAttrs a = op.attr<JetAttrs>();
        const int64_t B = (dim(in[0], 0) - a.head) / a.jet.K(), H = dim(in[0], 1), W = dim(out[0], 1);
        if (op.kind == OpKind::FourierFeatures) return [=] {
          cpu::fourier_features(A, Y, a.head, H, JetSpec{});
          cpu::fourier_features(A + a.head * H, Y + a.head * W, B, H, a.jet);
        };
        return [=] {
          cpu::jet_activation(A, Y, a.head, H, JetSpec{}, a.act);
          cpu::jet_activation(A + a.head * H, Y + a.head * W, B, H, a.jet, a.act);
        };
      }
      case OpKind::JetActivationBackward:
      case OpKind::FourierFeaturesBackward: {
        const float *dY = f(in[0]), *A = f(in[1]);
        float* dA = f(out[0]);
        const JetAttrs a = op.attr<JetAttrs>();
        const int64_t B = (dim(in[1], 0) - a.head) / a.jet.K(), H = dim(in[1], 1), W = dim(in[0], 1);
        const bool acc = op.accumulate[0];
        if (op.kind == OpKind::FourierFeaturesBackward) return [=] {
          cpu::fourier_features_backward(dY, A, dA, a.head, H, JetSpec{}, acc);
          cpu::fourier_features_backward(dY + a.head * W, A + a.head * H, dA + a.head * H, B, H, a.jet, acc);
        };
        return [=] {
          cpu::jet_activation_backward(dY, A, dA, a.head, H, JetSpec{}, a.act, acc);
          cpu::jet_activation_backward(dY + a.head * W, A + a.head * H, dA + a.head * H, B, H, a.jet, a.act, acc);
        };
      }
      case OpKind::Add: {
        const float *A = f(in[0]), *B = f(in[1]);
        float* Y = f(out[0]);
        int64_t n = count(out[0]);
        return [=] { cpu::add(A, B, Y, n); };
      }
      case OpKind::AddBackward: {
        const float* dY = f(in[0]);
        float *dA = f(out[0]), *dB = f(out[1]);
        int64_t n = count(in[0]);
        bool aa = op.accumulate[0], ab = op.accumulate[1];
        return [=] { cpu::add_backward(dY, dA, dB, n, aa, ab); };
      }
      case OpKind::SoftmaxCrossEntropy: {
        const float* z = f(in[0]);
        const int32_t* y = i32(in[1]);
        const int32_t* valid = in[2] == kNone ? nullptr : i32(in[2]);
        float *loss = f(out[0]), *dz = f(out[1]);
        // Logits [B, ..., C]: per_row labels per batch row.
        const int64_t B = dim(in[0], 0), C = p.tensor(in[0]).shape.back(), per_row = count(in[1]) / B;
        const Reduction r = op.attr<LossAttrs>().reduction;
        const bool ignore = op.attr<LossAttrs>().ignore_negative;
        return [=] { cpu::softmax_cross_entropy(z, y, valid, loss, dz, B, C, r, per_row, ignore); };
      }
      case OpKind::MeanSquaredError: {
        const float *pred = f(in[0]), *tgt = f(in[1]);
        const int32_t* valid = in[2] == kNone ? nullptr : i32(in[2]);
        float *loss = f(out[0]), *dp = f(out[1]);
        int64_t B = dim(in[0], 0), T = count(in[0]) / B;
        Reduction r = op.attr<LossAttrs>().reduction;
        return [=] { cpu::mean_squared_error(pred, tgt, valid, loss, dp, B, T, r); };
      }
      case OpKind::Schedule: {
        int32_t* step = i32(out[0]);
        const float* hyper = f(in[1]);
        float* sched = f(out[1]);
        ScheduleAttrs a = op.attr<ScheduleAttrs>();
        return [=] { cpu::schedule(step, hyper, sched, a); };
      }
      case OpKind::SgdUpdate:
      case OpKind::AdamUpdate: {
        // in {hyper, sched, P..., G..., M..., [V...]}
        const bool adam = op.kind == OpKind::AdamUpdate;
        const int64_t n = adam ? op.attr<AdamAttrs>().num_params : op.attr<SgdAttrs>().num_params;
        const bool has_m = adam || op.attr<SgdAttrs>().momentum != 0.0;
        std::vector<cpu::ParamSlice> slices;
        for (int64_t k = 0; k < n; ++k) {
          cpu::ParamSlice s{};
          s.p = f(in[2 + k]);
          s.g = f(in[2 + n + k]);
          s.m = has_m ? f(in[2 + 2 * n + k]) : nullptr;
          s.v = adam ? f(in[2 + 3 * n + k]) : nullptr;
          s.n = count(in[2 + k]);
          slices.push_back(s);
        }
        const float *hyper = f(in[0]), *sched = f(in[1]);
        if (adam) {
          AdamAttrs a = op.attr<AdamAttrs>();
          return [=] { cpu::adam_update(slices, hyper, sched, a); };
        }
        SgdAttrs a = op.attr<SgdAttrs>();
        return [=] { cpu::sgd_update(slices, hyper, sched, a); };
      }
    }
    throw Error(cat("cpu backend: no kernel for op '", op.name, "'"));
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace sg
