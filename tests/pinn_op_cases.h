// The op-table cases of the physics-informed kinds: jet inputs, jet activations and Fourier
// features, expression losses and their float64 value, sampled and observed points. op_cases.h
// includes it at its end and lists the cases in all_op_cases().
#pragma once

#include <string>
#include <vector>

#include "jet_reference.h"
#include "op_cases.h"
#include "pinn/expression.h"

namespace sg::test {

// ---- Jets ----

inline JetSpec jet1d() {  // u, u_x, u_xx
  JetSpec js;
  js.d = 1, js.npairs = 1;
  js.pi[0] = js.pj[0] = 0;
  return js;
}
inline JetSpec jet2d() {  // u, u_x, u_y, u_xx, u_yy, u_xy
  JetSpec js;
  js.d = 2, js.npairs = 3;
  js.pi[0] = 0, js.pj[0] = 0, js.pi[1] = 1, js.pj[1] = 1, js.pi[2] = 0, js.pj[2] = 1;
  return js;
}
inline JetSpec jet3d_laplacian() {  // u, u_x, u_y, u_z, u_xx + u_yy + u_zz, u_xz
  JetSpec js;
  js.d = 3, js.npairs = 2;
  js.trace[0] = 0b111, js.pi[0] = js.pj[0] = -1;
  js.pi[1] = 0, js.pj[1] = 2;
  return js;
}

inline std::vector<OpCase> jet_input_cases() {
  std::vector<OpCase> v;
  struct C { JetSpec js; int64_t B, head; };
  int seed = 0;
  for (const C& c : {C{jet1d(), 7, 0}, C{jet2d(), 1, 0}, C{jet3d_laplacian(), 5, 3}}) {
    CaseBuilder b(OpKind::JetInput, cat("d=", c.js.d, " K=", c.js.K(), " B=", c.B, " head ", c.head), 100 + seed++);
    std::vector<TensorId> in = {b.random("X", {c.B, c.js.d}, Role::Input)};
    if (c.head) in.push_back(b.random("Xh", {c.head, c.js.d}, Role::Input));
    b.op(in, {b.output("J", {c.head + c.js.K() * c.B, c.js.d})}, JetAttrs{c.js, Activation::None, c.head});
    v.push_back(b.done());
  }
  return v;
}

// Jet activations and Fourier features: A [head + K*B, H].
inline std::vector<OpCase> jet_elementwise_cases(OpKind kind) {
  std::vector<OpCase> v;
  struct C { JetSpec js; int64_t B, H, head; Activation act; };
  const bool ff = kind == OpKind::FourierFeatures;
  std::vector<C> cs = {{jet1d(), 7, 5, 0, Activation::Tanh}, {jet2d(), 1, 1, 2, Activation::Sin},
                       {jet3d_laplacian(), 3, 4, 0, Activation::GELU}};
  if (!ff)
    cs.insert(cs.end(), {{jet1d(), 4, 3, 3, Activation::Softplus}, {jet2d(), 2, 2, 0, Activation::Sigmoid},
                         {jet1d(), 3, 4, 0, Activation::SiLU}, {jet2d(), 2, 3, 1, Activation::ELU},
                         {jet3d_laplacian(), 2, 2, 0, Activation::Square}, {jet1d(), 2, 3, 0, Activation::Exp},
                         {jet2d(), 3, 2, 0, Activation::LeakyReLU}, {jet3d_laplacian(), 3, 3, 1, Activation::GELUErf}});
  int seed = 0;
  for (const C& c : cs) {
    CaseBuilder b(kind, cat(ff ? "" : activation_name(c.act), " d=", c.js.d, " B=", c.B, " H=", c.H, " head ", c.head),
                  200 + 10 * ff + seed++);
    const int64_t rows = c.head + c.js.K() * c.B;
    // Fourier inputs are projections (2 pi p is the phase): keep them near one period.
    const TensorId A = b.random("A", {rows, c.H}, Role::Parameter, ff ? 0.4 : 1.0);
    const TensorId Y = b.output("Y", {rows, ff ? 2 * c.H : c.H});
    b.op({A}, {Y}, JetAttrs{c.js, ff ? Activation::None : c.act, c.head});
    v.push_back(b.gradient(Y));
  }
  return v;
}

// ---- Physics-informed losses and points ----

inline ExprVar jet_var(int comp, int out) { return {ExprVar::Kind::Jet, comp, out, 0.0}; }
inline ExprVar coord_var(int i) { return {ExprVar::Kind::Coordinate, i, 0, 0.0}; }
inline ExprVar const_var(double x) { return {ExprVar::Kind::Constant, 0, 0, x}; }

inline ExprLossAttrs expr_attrs(const std::string& text, const std::vector<std::string>& names, std::vector<ExprVar> vars,
                                int K, int64_t row0, double weight) {
  ExprLossAttrs a;
  a.expr = std::make_shared<pinn::Expression>(pinn::compile_expression(text, names, "test"));
  a.vars = std::move(vars);
  a.K = K, a.row0 = row0, a.weight = weight, a.label = text;
  return a;
}

inline std::vector<OpCase> expression_loss_cases() {
  std::vector<OpCase> v;
  {  // one term over a 1D jet (u, u_x, u_xx), total written
    CaseBuilder b(OpKind::ExpressionLoss, "u_xx + u u_x - sin(x) + c, K=3, 7 points", 300);
    const TensorId U = b.random("U", {3 * 7, 1}, Role::Input), X = b.random("X", {7, 1}, Role::Input);
    const TensorId total = b.output("total", {1}), term = b.output("term", {1}), dU = b.output("dU", {3 * 7, 1});
    b.op({U, X}, {total, term, dU},
         expr_attrs("u_xx + u*u_x - sin(x) + c", {"u", "u_x", "u_xx", "x", "c"},
                    {jet_var(0, 0), jet_var(1, 0), jet_var(2, 0), coord_var(0), const_var(0.5)}, 3, 0, 0.7));
    v.push_back(b.loss({term}, {{U, dU}}));
  }
  {  // two terms sharing one pass of two outputs: 3 value rows (a boundary), then a 2D jet of 4
     // points of which the residual reads only some components (the rest get zero gradients)
    CaseBuilder b(OpKind::ExpressionLoss, "boundary rows then a 2D residual, 2 outputs", 301);
    const int64_t K = jet2d().K();
    const TensorId U = b.random("U", {3 + K * 4, 2}, Role::Input);
    const TensorId Xb = b.random("Xb", {3, 2}, Role::Input), X = b.random("X", {4, 2}, Role::Input);
    const TensorId tb = b.output("term.b", {1}), tr = b.output("term.r", {1}), dU = b.output("dU", {3 + K * 4, 2});
    b.op({U, Xb}, {kNone, tb, dU},
         expr_attrs("u - v*y", {"u", "v", "y"}, {jet_var(0, 0), jet_var(0, 1), coord_var(1)}, 1, 0, 2.0));
    b.op({U, X}, {kNone, tr, dU},
         expr_attrs("u_xx + u_yy - exp(v)*x + u_x*v", {"u_xx", "u_yy", "v", "x", "u_x"},
                    {jet_var(3, 0), jet_var(4, 0), jet_var(0, 1), coord_var(0), jet_var(1, 0)}, static_cast<int>(K), 3,
                    1.0));
    v.push_back(b.loss({tb, tr}, {{U, dU}}));
  }
  {  // one point, one component
    CaseBuilder b(OpKind::ExpressionLoss, "u^2 - 1 at one point", 302);
    const TensorId U = b.random("U", {1, 1}, Role::Input), X = b.random("X", {1, 3}, Role::Input);
    const TensorId total = b.output("total", {1}), term = b.output("term", {1}), dU = b.output("dU", {1, 1});
    b.op({U, X}, {total, term, dU}, expr_attrs("u^2 - 1", {"u"}, {jet_var(0, 0)}, 1, 0, 1.0));
    v.push_back(b.loss({term}, {{U, dU}}));
  }
  return v;
}

// weight * mean over points of r^2 (ir.h ExpressionLoss), from the expression's own evaluator.
inline double expression_loss_double(const Program& p, const Op& op, const Values& v) {
  const ExprLossAttrs& a = op.attr<ExprLossAttrs>();
  const std::vector<double>& U = v.at(p.tensor(op.in[0]).name);
  const std::vector<double>& X = v.at(p.tensor(op.in[1]).name);
  const int64_t M = p.tensor(op.in[1]).shape[0], d = p.tensor(op.in[1]).shape[1], O = p.tensor(op.in[0]).shape[1];
  std::vector<double> vars(a.vars.size());
  double sum = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (size_t i = 0; i < a.vars.size(); ++i) {
      const ExprVar& s = a.vars[i];
      vars[i] = s.kind == ExprVar::Kind::Coordinate ? X[m * d + s.index]
                : s.kind == ExprVar::Kind::Jet      ? U[(a.row0 + s.index * M + m) * O + s.output]
                                                    : s.value;
    }
    const double r = a.expr->eval(vars.data());
    sum += r * r;
  }
  return a.weight * sum / static_cast<double>(M);
}

inline std::vector<OpCase> sample_points_cases() {
  std::vector<OpCase> v;
  struct C { const char* what; int64_t M, d, every; int32_t step, face; };
  int seed = 0;
  for (const C& c : {C{"interior, drawn once", 7, 2, 0, 0, -1}, C{"every face, redrawn every 3 steps", 33, 3, 3, 7, -2},
                     C{"face x=lo, one point", 1, 1, 1, 4, 0}}) {
    CaseBuilder b(OpKind::SamplePoints, c.what, 400 + seed);
    SampleAttrs a;
    a.seed = 11 + seed++, a.every = c.every, a.face_dim = c.face;
    for (int k = 0; k < c.d; ++k) a.lo[k] = -1.0 + 0.5 * k, a.hi[k] = 1.0 + k;
    a.face_value = a.lo[0];
    b.op({b.i32("step", {1}, {c.step}, Role::StepScalar)}, {b.output("X", {c.M, c.d})}, a);
    v.push_back(b.done());
  }
  return v;
}

inline std::vector<OpCase> observed_points_cases() {
  CaseBuilder b(OpKind::ObservedPoints, "3 points of 2 coordinates, 1 value", 410);
  auto table = std::make_shared<std::vector<float>>(std::vector<float>{0.1f, -2, 3, 4.5f, 5, -6, 7, 8.25f, 9});
  b.op({}, {b.output("X", {3, 2}), b.output("XV", {3, 3})}, ObservedAttrs{table});
  std::vector<OpCase> v;
  v.push_back(b.done());
  return v;
}

}  // namespace sg::test
