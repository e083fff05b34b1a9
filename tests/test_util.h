// Shared test helpers: run a Program on the CPU backend by tensor name, a float64 forward
// evaluator independent of the kernels, and random data.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "stepgraph/autodiff.h"
#include "stepgraph/backend.h"
#include "stepgraph/loss.h"
#include "stepgraph/nn.h"
#include "stepgraph/plan.h"
#include "stepgraph/rng.h"
#include "stepgraph/trainer.h"

namespace sg::test {

// Launches every trainer `steps` times: each step's loss, and the state at the end, must equal
// the first trainer's bit for bit.
inline void expect_bitwise_same_steps(const std::vector<Trainer*>& ts, int steps) {
  for (int s = 0; s < steps; ++s) {
    for (Trainer* t : ts) t->launch();
    const float l0 = ts[0]->loss();
    for (size_t k = 1; k < ts.size(); ++k) {
      const float lk = ts[k]->loss();
      ASSERT_EQ(std::memcmp(&l0, &lk, 4), 0) << "step " << s << ", trainer " << k << ": " << l0 << " vs " << lk;
    }
  }
  const auto a = ts[0]->state();
  for (size_t k = 1; k < ts.size(); ++k) {
    const auto b = ts[k]->state();
    for (auto& [name, v] : a)
      EXPECT_EQ(std::memcmp(v.raw(), b.at(name).raw(), v.nbytes()), 0) << name << " differs (trainer " << k << ")";
  }
}

// `source` takes `warm` steps and is saved to `file` (under SG_TEST_TMPDIR); each trainer of
// `loaded` loads that checkpoint, and then all of them step `steps` times bit for bit alike.
inline void expect_same_steps_after_load(Trainer& source, const std::vector<Trainer*>& loaded, const std::string& file,
                                         int warm, int steps) {
  for (int s = 0; s < warm; ++s) source.launch();
  const std::string path = std::string(SG_TEST_TMPDIR) + "/" + file;
  source.save(path);
  std::vector<Trainer*> all = {&source};
  for (Trainer* t : loaded) {
    t->load(path);
    all.push_back(t);
  }
  expect_bitwise_same_steps(all, steps);
}

inline HostArray random_f32(Shape s, uint64_t seed, double scale = 1.0) {
  HostArray a(DType::F32, std::move(s));
  Rng r(seed);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(scale * r.normal());
  return a;
}

// Token ids [B, S] as the data's f32 feature columns, uniform in [0, vocab).
inline HostArray token_ids(int64_t B, int64_t S, int64_t vocab, uint64_t seed) {
  HostArray a(DType::F32, {B, S});
  Rng r(seed);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(r.below(vocab));
  return a;
}

// Labels [B, S] in [0, classes), with about `ignored` of them -1 (no target at that position).
inline HostArray token_labels(int64_t B, int64_t S, int64_t classes, double ignored, uint64_t seed) {
  HostArray a(DType::I32, {B, S});
  Rng r(seed);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const bool none = static_cast<double>(r.below(1000)) < 1000.0 * ignored;
    a.data<int32_t>()[i] = none ? -1 : static_cast<int32_t>(r.below(classes));
  }
  return a;
}

inline HostArray random_labels(int64_t n, int64_t classes, uint64_t seed) {
  HostArray a(DType::I32, {n});
  Rng r(seed);
  for (int64_t i = 0; i < n; ++i) a.data<int32_t>()[i] = static_cast<int32_t>(r.below(classes));
  return a;
}

// Plans, allocates and lowers a program on the CPU backend. Every buffer starts as NaN (or
// 0x7fffffff for integers), so an element an op forgot to write shows up.
class Runner {
 public:
  explicit Runner(Program p) : p_(std::move(p)), be_(make_cpu_backend()) {
    plan_ = plan_memory(p_);
    pers_ = DeviceBuffer(*be_, plan_.persistent_bytes);
    trans_ = DeviceBuffer(*be_, plan_.transient_bytes);
    poison(pers_);
    poison(trans_);
    for (size_t t = 0; t < p_.num_tensors(); ++t) {
      const Placement& pl = plan_.at[t];
      ptrs_.push_back((pl.region == Placement::Region::Persistent ? pers_ : trans_).data() + pl.offset);
    }
    exe_ = be_->lower(p_, ptrs_);
  }
  void set(const std::string& name, const HostArray& a) {
    TensorId t = id(name);
    EXPECT_EQ(a.shape(), p_.tensor(t).shape) << name;
    be_->upload(ptrs_[t], a.raw(), a.nbytes());
  }
  HostArray get(const std::string& name) const {
    TensorId t = id(name);
    HostArray a(p_.tensor(t).dtype, p_.tensor(t).shape);
    be_->download(a.raw(), ptrs_[t], a.nbytes());
    return a;
  }
  void run() { exe_->run(); }
  const Program& program() const { return p_; }
  const MemoryPlan& plan() const { return plan_; }
  TensorId id(const std::string& name) const {
    TensorId t = p_.find(name);
    if (t == kNone) throw Error("test: no tensor " + name);
    return t;
  }

 private:
  static void poison(DeviceBuffer& b) {
    float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i + 4 <= b.size(); i += 4) std::memcpy(b.data() + i, &nan, 4);
  }
  Program p_;
  std::unique_ptr<Backend> be_;
  MemoryPlan plan_;
  DeviceBuffer pers_, trans_;
  std::vector<void*> ptrs_;
  std::unique_ptr<Executable> exe_;
};

// A model + loss program on inputs "input" [B, D] and "target"; optionally with backward.
// Skips a GPU test on a machine without a usable GPU, saying why.
#define REQUIRE_GPU()                                               \
  do {                                                              \
    std::string why_;                                               \
    if (!cuda_available(&why_)) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)

// Runs one program on a backend with every buffer poisoned (NaN) first, so a tensor an op should
// write and does not shows up as NaN.
struct PoisonedRun {
  std::unique_ptr<Backend> be;
  MemoryPlan plan;
  DeviceBuffer pers, trans;
  std::vector<void*> ptrs;
  std::unique_ptr<Executable> exe;
  const Program& p;

  PoisonedRun(Device d, const Program& prog, LowerOptions opt = {}) : be(make_backend(d)), p(prog) {
    plan = plan_memory(p);
    pers = DeviceBuffer(*be, plan.persistent_bytes);
    trans = DeviceBuffer(*be, plan.transient_bytes);
    std::vector<float> nan(std::max(plan.persistent_bytes, plan.transient_bytes) / 4,
                           std::numeric_limits<float>::quiet_NaN());
    be->upload(pers.data(), nan.data(), plan.persistent_bytes);
    be->upload(trans.data(), nan.data(), plan.transient_bytes);
    for (size_t t = 0; t < p.num_tensors(); ++t) {
      const Placement& pl = plan.at[t];
      ptrs.push_back((pl.region == Placement::Region::Persistent ? pers : trans).data() + pl.offset);
    }
    exe = be->lower(p, ptrs, opt);
  }
  void set(const std::string& name, const HostArray& a) { be->upload(ptrs[p.find(name)], a.raw(), a.nbytes()); }
  HostArray get(TensorId t) {
    HostArray a(p.tensor(t).dtype, p.tensor(t).shape);
    be->download(a.raw(), ptrs[t], a.nbytes());
    return a;
  }
};

// How far `got` (a GPU result) is from `want` (the CPU reference): ||got - want|| / ||want|| and the
// largest element difference over the largest element; `unwritten` is the first non-finite
// element of `got` (-1: none), which on poisoned buffers means an op never wrote it.
struct ArrayDiff {
  double rel = 0, relmax = 0;
  int64_t unwritten = -1;
};
inline ArrayDiff array_diff(const HostArray& want, const HostArray& got) {
  ArrayDiff d;
  double diff2 = 0, ref2 = 0, maxdiff = 0, maxref = 0;
  for (int64_t k = 0; k < want.numel(); ++k) {
    const double x = want.dtype() == DType::F32 ? want.data<float>()[k] : want.data<int32_t>()[k];
    const double y = got.dtype() == DType::F32 ? got.data<float>()[k] : got.data<int32_t>()[k];
    if (!std::isfinite(y) && d.unwritten < 0) d.unwritten = k;
    diff2 += (x - y) * (x - y);
    ref2 += x * x;
    maxdiff = std::max(maxdiff, std::fabs(x - y));
    maxref = std::max(maxref, std::fabs(x));
  }
  d.rel = std::sqrt(diff2 / std::max(ref2, 1e-30));
  d.relmax = maxdiff / std::max(maxref, 1e-30);
  return d;
}

struct Built {
  Program p;
  std::vector<ParamSpec> specs;
  std::vector<ParamGrad> grads;
  TensorId pred = kNone, loss = kNone;
};
inline Built build(Layer& model, const Loss& loss, Shape in, bool backward) {
  Built b;
  GraphBuilder g(b.p);
  TensorId X = g.tensor("input", in, Role::Input);
  b.pred = model.build(g, X, "");
  TensorId y = g.tensor("target", loss.target_shape(b.p.tensor(b.pred).shape), Role::Input,
                        loss.target_dtype());
  LossOutputs lo = loss.build(g, b.pred, y);
  b.loss = lo.loss;
  if (backward) b.grads = append_backward(b.p, b.pred, lo.dpred);
  b.specs = g.param_specs();
  return b;
}

// Float64 evaluation of one forward or loss op, written independently of the kernels (plain
// formulas, exact GELU-tanh and log-sum-exp): writes the op's first output into `v` (by tensor
// name), or for a loss op sets *loss (valid rows and ignored labels as in ir.h) and returns true.
inline bool eval_op_double(const Program& p, const Op& op, std::map<std::string, std::vector<double>>& v,
                           double* loss) {
  auto val = [&](TensorId t) -> std::vector<double>& { return v[p.tensor(t).name]; };
  // A loss's valid-row count (all rows without one).
  auto valid_rows = [&](int64_t rows) { return op.in[2] == kNone ? rows : static_cast<int64_t>(val(op.in[2])[0]); };
  switch (op.kind) {
    case OpKind::Dense: {
      const Shape& xs = p.tensor(op.in[0]).shape;
      const Shape& ws = p.tensor(op.in[1]).shape;
      int64_t I = ws[1], B = numel(xs) / I, O = ws[0];  // rows: every leading index
      const auto X = val(op.in[0]);
      const auto W = val(op.in[1]);
      std::vector<double> b = op.in[2] == kNone ? std::vector<double>(O, 0.0) : val(op.in[2]);
      const int64_t bias_rows = op.attr<DenseAttrs>().bias_rows ? op.attr<DenseAttrs>().bias_rows : B;
      std::vector<double> Y(B * O);
      for (int64_t r = 0; r < B; ++r)
        for (int64_t o = 0; o < O; ++o) {
          double z = r < bias_rows ? b[o] : 0.0;
          for (int64_t i = 0; i < I; ++i) z += X[r * I + i] * W[o * I + i];
          double y = z;
          switch (op.attr<DenseAttrs>().act) {
            case Activation::None: break;
            case Activation::ReLU: y = std::max(z, 0.0); break;
            case Activation::GELU:
              y = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
              break;
            case Activation::Tanh: y = std::tanh(z); break;
            case Activation::Sigmoid: y = 1 / (1 + std::exp(-z)); break;
            case Activation::Sin: y = std::sin(z); break;
            case Activation::Softplus: y = std::log(1 + std::exp(z)); break;
            case Activation::SiLU: y = z / (1 + std::exp(-z)); break;
            case Activation::LeakyReLU: y = z > 0 ? z : 0.01 * z; break;
            case Activation::ELU: y = z > 0 ? z : std::exp(z) - 1; break;
            case Activation::Exp: y = std::exp(z); break;
            case Activation::Square: y = z * z; break;
            case Activation::GELUErf: y = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))); break;
          }
          Y[r * O + o] = y;
        }
      val(op.out[0]) = Y;
      break;
    }
    case OpKind::Conv2d: {
      const Shape& xs = p.tensor(op.in[0]).shape;
      const Shape& ws = p.tensor(op.in[1]).shape;
      const Shape& ys = p.tensor(op.out[0]).shape;
      const ConvAttrs& a = op.attr<ConvAttrs>();
      const auto& X = val(op.in[0]);
      const auto& W = val(op.in[1]);
      std::vector<double> Y(numel(ys));
      for (int64_t n = 0; n < ys[0]; ++n)
        for (int64_t i = 0; i < ys[1]; ++i)
          for (int64_t j = 0; j < ys[2]; ++j)
            for (int64_t k = 0; k < ys[3]; ++k) {
              double z = op.in[2] == kNone ? 0.0 : val(op.in[2])[k];
              for (int64_t r = 0; r < ws[1]; ++r)
                for (int64_t t = 0; t < ws[2]; ++t)
                  for (int64_t c = 0; c < ws[3]; ++c) {
                    const int64_t h = i * a.stride_h + r * a.dil_h - a.pad_h;
                    const int64_t w = j * a.stride_w + t * a.dil_w - a.pad_w;
                    if (h >= 0 && h < xs[1] && w >= 0 && w < xs[2])
                      z += X[((n * xs[1] + h) * xs[2] + w) * xs[3] + c] * W[((k * ws[1] + r) * ws[2] + t) * ws[3] + c];
                  }
              Y[((n * ys[1] + i) * ys[2] + j) * ys[3] + k] = a.act == Activation::ReLU ? std::max(z, 0.0) : z;
            }
      val(op.out[0]) = Y;
      break;
    }
    case OpKind::MaxPool2d: {
      const Shape& xs = p.tensor(op.in[0]).shape;
      const Shape& ys = p.tensor(op.out[0]).shape;
      const PoolAttrs& a = op.attr<PoolAttrs>();
      const auto& X = val(op.in[0]);
      std::vector<double> Y(numel(ys), -std::numeric_limits<double>::infinity());
      for (int64_t n = 0; n < ys[0]; ++n)
        for (int64_t i = 0; i < ys[1]; ++i)
          for (int64_t j = 0; j < ys[2]; ++j)
            for (int64_t c = 0; c < ys[3]; ++c)
              for (int64_t h = i * a.stride_h - a.pad_h; h < i * a.stride_h - a.pad_h + a.window_h; ++h)
                for (int64_t w = j * a.stride_w - a.pad_w; w < j * a.stride_w - a.pad_w + a.window_w; ++w)
                  if (h >= 0 && h < xs[1] && w >= 0 && w < xs[2]) {
                    double& y = Y[((n * ys[1] + i) * ys[2] + j) * ys[3] + c];
                    y = std::max(y, X[((n * xs[1] + h) * xs[2] + w) * xs[3] + c]);
                  }
      val(op.out[0]) = Y;
      break;
    }
    case OpKind::GlobalAvgPool: {
      const Shape& xs = p.tensor(op.in[0]).shape;
      const auto& X = val(op.in[0]);
      std::vector<double> Y(xs[0] * xs[3], 0.0);
      for (int64_t n = 0; n < xs[0]; ++n)
        for (int64_t h = 0; h < xs[1]; ++h)
          for (int64_t w = 0; w < xs[2]; ++w)
            for (int64_t c = 0; c < xs[3]; ++c)
              Y[n * xs[3] + c] += X[((n * xs[1] + h) * xs[2] + w) * xs[3] + c] / (xs[1] * xs[2]);
      val(op.out[0]) = Y;
      break;
    }
    case OpKind::Reshape: val(op.out[0]) = val(op.in[0]); break;
    case OpKind::Add: {
      auto A = val(op.in[0]);
      const auto& Bv = val(op.in[1]);
      for (size_t k = 0; k < A.size(); ++k) A[k] += Bv[k];
      val(op.out[0]) = A;
      break;
    }
    case OpKind::SoftmaxCrossEntropy: {
      // Logits [rows..., C]; labels < 0 count only when not ignored (then they are an error).
      const int64_t C = p.tensor(op.in[0]).shape.back(), B = p.tensor(op.in[0]).shape[0];
      const int64_t R = valid_rows(B) * (numel(p.tensor(op.in[0]).shape) / C / B);
      // Smoothing and class weights as torch's docs write them: the target distribution
      // q_c = (1 - eps) [c = y] + eps / C, each class's term weighted, loss sum_c w_c q_c (-log p_c);
      // a mean over the summed w_y.
      const LossAttrs& a = op.attr<LossAttrs>();
      const auto& z = val(op.in[0]);
      const auto& y = val(op.in[1]);
      auto w = [&](int64_t c) { return a.class_weights.empty() ? 1.0 : static_cast<double>(a.class_weights[c]); };
      double total = 0, denom = 0;
      for (int64_t r = 0; r < R; ++r) {
        if (y[r] < 0 && a.ignore_negative) continue;
        const int64_t yr = static_cast<int64_t>(y[r]);
        double mx = -1e300, se = 0;
        for (int64_t c = 0; c < C; ++c) mx = std::max(mx, z[r * C + c]);
        for (int64_t c = 0; c < C; ++c) se += std::exp(z[r * C + c] - mx);
        for (int64_t c = 0; c < C; ++c) {
          const double q = (1 - a.label_smoothing) * (c == yr ? 1.0 : 0.0) + a.label_smoothing / C;
          total += w(c) * q * (mx + std::log(se) - z[r * C + c]);
        }
        denom += w(yr);
      }
      *loss = a.reduction == Reduction::Mean ? (denom > 0 ? total / denom : 0.0) : total;
      return true;
    }
    case OpKind::LayerNorm: {
      const int64_t E = p.tensor(op.in[1]).shape[0];
      auto Y = val(op.in[0]);
      const auto& g = val(op.in[1]);
      const auto& b = val(op.in[2]);
      for (size_t r = 0; r < Y.size() / E; ++r) {
        double mean = 0, var = 0;
        for (int64_t e = 0; e < E; ++e) mean += Y[r * E + e] / E;
        for (int64_t e = 0; e < E; ++e) var += (Y[r * E + e] - mean) * (Y[r * E + e] - mean) / E;
        for (int64_t e = 0; e < E; ++e)
          Y[r * E + e] = (Y[r * E + e] - mean) / std::sqrt(var + op.attr<NormAttrs>().eps) * g[e] + b[e];
      }
      val(op.out[0]) = Y;
      break;
    }
    case OpKind::Embedding: {
      const Shape& is = p.tensor(op.in[0]).shape;
      const int64_t E = p.tensor(op.in[1]).shape[1];
      const auto& ids = val(op.in[0]);
      const auto& table = val(op.in[1]);
      std::vector<double> Y(numel(is) * E);
      for (int64_t k = 0; k < numel(is); ++k)
        for (int64_t e = 0; e < E; ++e)
          Y[k * E + e] = table[static_cast<int64_t>(ids[k]) * E + e] +
                         (op.in[2] == kNone ? 0.0 : val(op.in[2])[(k % is[1]) * E + e]);
      val(op.out[0]) = Y;
      break;
    }
    case OpKind::Attention: {
      // Per batch and head: softmax over the allowed keys of the scaled scores, times V.
      const Shape& qs = p.tensor(op.in[0]).shape;
      const AttentionAttrs& a = op.attr<AttentionAttrs>();
      const int64_t B = qs[0], S = qs[1], H = a.heads, D = qs[2] / H;
      const double scale = a.scale > 0 ? a.scale : 1 / std::sqrt(static_cast<double>(D));
      const auto& Q = val(op.in[0]);
      const auto& K = val(op.in[1]);
      const auto& V = val(op.in[2]);
      std::vector<double> O(Q.size(), 0.0);
      auto at = [&](int64_t b, int64_t s, int64_t h, int64_t d) { return (b * S + s) * H * D + h * D + d; };
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < S; ++i) {
            std::vector<double> w(S, 0.0);
            double total = 0;
            for (int64_t j = 0; j < S; ++j) {
              if (a.causal && j > i) continue;
              double sc = 0;
              for (int64_t d = 0; d < D; ++d) sc += Q[at(b, i, h, d)] * K[at(b, j, h, d)];
              w[j] = std::exp(scale * sc);
              total += w[j];
            }
            for (int64_t j = 0; j < S; ++j)
              for (int64_t d = 0; d < D; ++d) O[at(b, i, h, d)] += w[j] / total * V[at(b, j, h, d)];
          }
      val(op.out[0]) = O;
      break;
    }
    case OpKind::MeanSquaredError: {
      const auto& a = val(op.in[0]);
      const auto& b = val(op.in[1]);
      const int64_t B = p.tensor(op.in[0]).shape[0], n = valid_rows(B) * static_cast<int64_t>(a.size()) / B;
      double total = 0;
      for (int64_t k = 0; k < n; ++k) total += (a[k] - b[k]) * (a[k] - b[k]);
      *loss = op.attr<LossAttrs>().reduction == Reduction::Mean ? total / std::max<int64_t>(n, 1) : total;
      return true;
    }
    case OpKind::PointwiseLoss: {  // the formulas written out again (not backend/loss_math.h)
      const auto& pr = val(op.in[0]);
      const auto& tg = val(op.in[1]);
      const LossAttrs& a = op.attr<LossAttrs>();
      const int64_t B = p.tensor(op.in[0]).shape[0], n = valid_rows(B) * static_cast<int64_t>(pr.size()) / B;
      double total = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double d = pr[k] - tg[k], z = pr[k];
        switch (a.form) {
          case PointwiseForm::L1: total += std::fabs(d); break;
          case PointwiseForm::Huber:
            total += std::fabs(d) <= a.delta ? 0.5 * d * d : a.delta * (std::fabs(d) - 0.5 * a.delta);
            break;
          case PointwiseForm::BceWithLogits: {
            const double s = 1 / (1 + std::exp(-z));
            total += -(tg[k] * std::log(s) + (1 - tg[k]) * std::log(1 - s));
            break;
          }
        }
      }
      *loss = a.reduction == Reduction::Mean ? total / std::max<int64_t>(n, 1) : total;
      return true;
    }
    case OpKind::CustomLoss: {  // the tests' user loss, test_log_cosh (custom_test_ops.h)
      const auto& pr = val(op.in[0]);
      const auto& tg = val(op.in[1]);
      const int64_t B = p.tensor(op.in[0]).shape[0], n = valid_rows(B) * static_cast<int64_t>(pr.size()) / B;
      double total = 0;
      for (int64_t k = 0; k < n; ++k) total += std::log(std::cosh(pr[k] - tg[k]));
      *loss = total / static_cast<double>(std::max<int64_t>(n, 1));
      return true;
    }
    default: throw Error(cat("eval_double: unexpected op ", op_kind_name(op.kind)));
  }
  return false;
}

// Float64 forward evaluation of the forward + loss ops (eval_op_double in turn). Returns the loss.
inline double eval_double(const Program& p, std::map<std::string, std::vector<double>> v) {
  double loss = 0;
  for (const Op& op : p.ops())
    if (eval_op_double(p, op, v, &loss)) return loss;
  throw Error("eval_double: no loss op");
}

inline std::vector<double> to_double(const HostArray& a) {
  std::vector<double> v(a.numel());
  for (int64_t i = 0; i < a.numel(); ++i)
    v[i] = a.dtype() == DType::F32 ? a.data<float>()[i] : a.data<int32_t>()[i];
  return v;
}

// |a - b| <= abs + rel * |b|
// Two trainers' parameters (GPU against the CPU reference) after several Adam steps: Adam's
// m / sqrt(v) turns a tiny gradient difference on a near-zero gradient into a step of up to lr,
// so each tensor is compared as a whole (relative L2 <= rel) and elementwise only to within a
// few such steps (|x - y| <= worst).
inline void expect_params_close(const std::map<std::string, HostArray>& got,
                                const std::map<std::string, HostArray>& want, double rel, double worst) {
  for (const auto& [name, v] : got) {
    double d2 = 0, r2 = 0, most = 0;
    for (int64_t k = 0; k < v.numel(); ++k) {
      const double x = v.data<float>()[k], y = want.at(name).data<float>()[k];
      d2 += (x - y) * (x - y), r2 += y * y, most = std::max(most, std::fabs(x - y));
    }
    EXPECT_LE(std::sqrt(d2 / std::max(r2, 1e-30)), rel) << name;
    EXPECT_LE(most, worst) << name;
  }
}

inline ::testing::AssertionResult near(double a, double b, double abs, double rel) {
  if (std::fabs(a - b) <= abs + rel * std::fabs(b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " vs " << b << " (diff " << std::fabs(a - b) << ")";
}

}  // namespace sg::test
