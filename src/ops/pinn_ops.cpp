// The physics-informed ops: shape rules, gradient rules and the CPU reference bindings.
#include "ops/pinn_ops.h"

#include <algorithm>
#include <utility>

#include "autodiff/grad_builder.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/pinn_kernels.h"

namespace sg::ops {

namespace {

// "u, u_0, u_1, u_00+u_11": a jet's components in row-block order, inputs by index.
std::string jet_components(const JetSpec& js) {
  std::string s = "u";
  for (int i = 0; i < js.d; ++i) s += cat(", u_", i);
  for (int p = 0; p < js.npairs; ++p) {
    if (js.trace[p] == 0) {
      s += cat(", u_", int{js.pi[p]}, int{js.pj[p]});
      continue;
    }
    std::string sum;
    for (int i = 0; i < js.d; ++i)
      if ((js.trace[p] >> i) & 1) sum += cat(sum.empty() ? "" : "+", "u_", i, i);
    s += ", " + sum;
  }
  return s;
}

}  // namespace

void check_jet(const OpCheck& c) {
  const Op& op = c.op();
  const JetAttrs& a = c.attr<JetAttrs>();
  const JetSpec& js = a.jet;
  for (TensorId t : op.out)
    if (t != kNone) c.rank(t, 2);
  const int64_t rows = c.shape(c.out(0))[0];
  c.expect(a.head >= 0 && a.head <= rows && (rows - a.head) % js.K() == 0,
           cat("'", c.name(c.out(0)), "' has ", rows, " rows: ", a.head, " value rows, then not a multiple of the ",
               js.K(), " jet components"));
  if (op.kind == OpKind::JetInput) {
    int64_t head = 0;
    for (size_t k = 1; k < op.in.size(); ++k) head += c.shape(op.in[k])[0];
    c.expect(rows == a.head + js.K() * c.shape(c.in(0))[0] && head == a.head,
             cat("jet input: ", rows, " rows, expected the ", head, " rows of the value-only points (", a.head,
                 " in its attributes) + ", js.K(), " x ", c.shape(c.in(0))[0], " jet rows"));
  }
}

std::string jet_attrs_text(const Op& op) {
  const JetAttrs& a = op.attr<JetAttrs>();
  std::string s = op.kind == OpKind::JetInput ? cat("(", jet_components(a.jet), ")") : std::string();
  // A network pass shared by several terms: the value-only rows first, each loss on its rows.
  if (a.head > 0) s += cat("(", a.head, " value-only rows first)");
  return s;
}

// Jet activations and Fourier features: in {A} out {Y} -> backward in {dY, A} out {dA}.
void grad_jet_activation(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::JetActivationBackward, {g.grad(op.out[0]), op.in[0]}, {op.in[0]});
}
void grad_fourier_features(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::FourierFeaturesBackward, {g.grad(op.out[0]), op.in[0]}, {op.in[0]});
}

// A jet tensor's `head` value-only rows are a jet with no derivatives (JetSpec{}: one
// component), then the K blocks follow from row head.
std::function<void()> cpu_jet_input(const CpuBind& b) {
  const Op& op = b.op();
  const float* X = b.f(b.in(0));
  float* J = b.f(b.out(0));
  const JetAttrs a = b.attr<JetAttrs>();
  const int64_t B = b.dim(b.in(0), 0), d = b.dim(b.in(0), 1);
  std::vector<std::pair<const float*, int64_t>> heads;
  for (size_t k = 1; k < op.in.size(); ++k) heads.emplace_back(b.f(op.in[k]), b.dim(op.in[k], 0));
  return [=] {
    float* j = J;
    for (const auto& [H, n] : heads) j = std::copy(H, H + n * d, j);
    cpu::jet_input(X, j, B, a.jet);
  };
}

namespace {

// A jet op's rows: `head` value-only rows (a jet with no derivatives: JetSpec{}), then the K
// blocks of B points. Forward reads A [rows, H] and writes Y [rows, W]; backward reads dY
// [rows, W] and A, and writes dA.
template <class Forward>
std::function<void()> jet_forward(const CpuBind& b, Forward f) {
  const float* A = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  const JetAttrs a = b.attr<JetAttrs>();
  const int64_t B = (b.dim(b.in(0), 0) - a.head) / a.jet.K(), H = b.dim(b.in(0), 1), W = b.dim(b.out(0), 1);
  return [=] {
    f(A, Y, a.head, H, JetSpec{}, a);
    f(A + a.head * H, Y + a.head * W, B, H, a.jet, a);
  };
}
template <class Backward>
std::function<void()> jet_backward(const CpuBind& b, Backward f) {
  const float *dY = b.f(b.in(0)), *A = b.f(b.in(1));
  float* dA = b.f(b.out(0));
  const JetAttrs a = b.attr<JetAttrs>();
  const int64_t B = (b.dim(b.in(1), 0) - a.head) / a.jet.K(), H = b.dim(b.in(1), 1), W = b.dim(b.in(0), 1);
  const bool acc = b.accumulate(0);
  return [=] {
    f(dY, A, dA, a.head, H, JetSpec{}, a, acc);
    f(dY + a.head * W, A + a.head * H, dA + a.head * H, B, H, a.jet, a, acc);
  };
}

}  // namespace

std::function<void()> cpu_jet_activation(const CpuBind& b) {
  return jet_forward(b, [](const float* A, float* Y, int64_t B, int64_t H, const JetSpec& js, const JetAttrs& a) {
    cpu::jet_activation(A, Y, B, H, js, a.act);
  });
}

std::function<void()> cpu_fourier_features(const CpuBind& b) {
  return jet_forward(b, [](const float* A, float* Y, int64_t B, int64_t H, const JetSpec& js, const JetAttrs&) {
    cpu::fourier_features(A, Y, B, H, js);
  });
}

std::function<void()> cpu_jet_activation_backward(const CpuBind& b) {
  return jet_backward(b, [](const float* dY, const float* A, float* dA, int64_t B, int64_t H, const JetSpec& js,
                            const JetAttrs& a, bool acc) { cpu::jet_activation_backward(dY, A, dA, B, H, js, a.act, acc); });
}

std::function<void()> cpu_fourier_features_backward(const CpuBind& b) {
  return jet_backward(b, [](const float* dY, const float* A, float* dA, int64_t B, int64_t H, const JetSpec& js,
                            const JetAttrs&, bool acc) { cpu::fourier_features_backward(dY, A, dA, B, H, js, acc); });
}

void check_expression_loss(const OpCheck& c) {
  const ExprLossAttrs& a = c.attr<ExprLossAttrs>();
  c.expect(a.row0 >= 0 && a.row0 + a.K * c.shape(c.in(1))[0] <= c.shape(c.in(0))[0],
           cat("U has ", c.shape(c.in(0))[0], " rows, expected at least ", a.row0, " + ", a.K, " jet components x ",
               c.shape(c.in(1))[0], " points"));
  c.same(c.in(0), c.out(2));
}

std::function<void()> cpu_expression_loss(const CpuBind& b) {
  const ExprLossAttrs a = b.attr<ExprLossAttrs>();
  const int64_t M = b.dim(b.in(1), 0), d = b.dim(b.in(1), 1), O = b.dim(b.in(0), 1);
  const float *U = b.f(b.in(0)) + a.row0 * O, *X = b.f(b.in(1));  // this term's rows of a shared pass
  float *total = b.f(b.out(0)), *term = b.f(b.out(1)), *dU = b.f(b.out(2)) + a.row0 * O;
  const bool acc = b.accumulate(0);
  return [=] { cpu::expression_loss(U, X, total, term, dU, M, d, O, a, acc); };
}

std::string expression_loss_attrs_text(const Op& op) {
  const int64_t row0 = op.attr<ExprLossAttrs>().row0;
  return row0 > 0 ? cat("(from row ", row0, ")") : std::string();
}

void check_sample_points(const OpCheck& c) {
  c.expect(c.shape(c.in(0)) == Shape{1} && c.dtype(c.in(0)) == DType::I32, cat("step ", c.desc(c.in(0)), " must be i32 [1]"));
  c.rank(c.out(0), 2);
  c.expect(c.shape(c.out(0))[1] <= kMaxJetDim, cat("points ", c.desc(c.out(0)), " have more than ", kMaxJetDim, " coordinates"));
}

std::function<void()> cpu_sample_points(const CpuBind& b) {
  const int32_t* step = b.i32(b.in(0));
  float* X = b.f(b.out(0));
  const SampleAttrs a = b.attr<SampleAttrs>();
  const int64_t M = b.dim(b.out(0), 0), d = b.dim(b.out(0), 1);
  return [=] { cpu::sample_points(step, X, M, d, a); };
}

// Drawn once (every = 0): the same points every step, whatever the step input says.
bool sample_points_same_every_step(const Op& op, bool) { return op.attr<SampleAttrs>().every == 0; }

void check_observed_points(const OpCheck& c) {
  const ObservedAttrs& a = c.attr<ObservedAttrs>();
  c.rank(c.out(0), 2);
  c.rank(c.out(1), 2);
  const Shape &x = c.shape(c.out(0)), &xv = c.shape(c.out(1));
  c.expect(xv[0] == x[0] && xv[1] > x[1], cat("XV ", c.desc(c.out(1)), " must have the rows of X ", c.desc(c.out(0)),
                                             " and more columns (the observed values)"));
  c.expect(x[1] <= kMaxJetDim, cat("points ", c.desc(c.out(0)), " have more than ", kMaxJetDim, " coordinates"));
  c.expect(a.table && static_cast<int64_t>(a.table->size()) == numel(xv),
           cat("the table holds ", a.table ? a.table->size() : 0, " values, XV ", c.desc(c.out(1)), " takes ", numel(xv)));
}

std::function<void()> cpu_observed_points(const CpuBind& b) {
  const std::shared_ptr<const std::vector<float>> table = b.attr<ObservedAttrs>().table;
  float *X = b.f(b.out(0)), *XV = b.f(b.out(1));
  const int64_t N = b.dim(b.out(0), 0), d = b.dim(b.out(0), 1), w = b.dim(b.out(1), 1);
  return [=] {
    std::copy(table->begin(), table->end(), XV);
    for (int64_t n = 0; n < N; ++n) std::copy(XV + n * w, XV + n * w + d, X + n * d);
  };
}

std::string observed_points_attrs_text(const Op& op) {
  const ObservedAttrs& a = op.attr<ObservedAttrs>();
  return cat("(", a.table ? a.table->size() : 0, " values)");
}

}  // namespace sg::ops
