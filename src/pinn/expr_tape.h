// Per-point evaluation of a compiled expression's tape (see TapeInstr in expression.h): the value
// and its gradient with respect to every variable, by one forward and one reverse sweep. Shared
// by the CPU reference and the CUDA expression-loss kernel, so both run the same arithmetic in
// float64. The caller owns the per-instruction scratch (val, adj: n entries each).
#pragma once

#include <cmath>
#include <limits>

#include "core/host_device.h"
#include "pinn/expression.h"
#include "stepgraph/ir.h"

namespace sg::pinn {

SG_HD double tape_unary(ExprOp op, double a) {
  switch (op) {
    case ExprOp::Neg: return -a;
    case ExprOp::Sin: return std::sin(a);
    case ExprOp::Cos: return std::cos(a);
    case ExprOp::Exp: return std::exp(a);
    case ExprOp::Log: return std::log(a);
    case ExprOp::Tanh: return std::tanh(a);
    case ExprOp::Sqrt: return std::sqrt(a);
    case ExprOp::Abs: return std::fabs(a);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

SG_HD double tape_binary(ExprOp op, double a, double b) {
  switch (op) {
    case ExprOp::Add: return a + b;
    case ExprOp::Sub: return a - b;
    case ExprOp::Mul: return a * b;
    case ExprOp::Div: return a / b;
    case ExprOp::Pow: return std::pow(a, b);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

// Returns the value. load(v) gives variable v; grad(v, g) receives g for each use of variable
// v (a variable used twice receives twice: the caller adds them up). Derivative conventions as
// documented at Expression::eval_grad.
template <class Load, class Grad>
SG_HD double tape_eval_grad(const TapeInstr* t, int n, Load load, Grad grad, double* val, double* adj) {
  for (int i = 0; i < n; ++i) {
    const TapeInstr& in = t[i];
    if (in.op == ExprOp::Const) val[i] = in.value;
    else if (in.op == ExprOp::Var) val[i] = load(in.index);
    else if (in.rhs < 0) val[i] = tape_unary(in.op, val[in.lhs]);
    else val[i] = tape_binary(in.op, val[in.lhs], val[in.rhs]);
    adj[i] = 0.0;
  }
  // Postfix order: every instruction follows its operands and has one consumer, so walking
  // backwards finishes each adjoint before it is passed on.
  adj[n - 1] = 1.0;
  for (int i = n - 1; i >= 0; --i) {
    const TapeInstr& in = t[i];
    const double g = adj[i], y = val[i];
    const int l = in.lhs, r = in.rhs;
    switch (in.op) {
      case ExprOp::Const: break;
      case ExprOp::Var: grad(in.index, g); break;
      case ExprOp::Add: adj[l] += g, adj[r] += g; break;
      case ExprOp::Sub: adj[l] += g, adj[r] -= g; break;
      case ExprOp::Mul: adj[l] += g * val[r], adj[r] += g * val[l]; break;
      case ExprOp::Div: adj[l] += g / val[r], adj[r] -= g * y / val[r]; break;
      case ExprOp::Pow: {
        const double a = val[l], b = val[r];
        // d/da = b a^(b-1); x^0 is constant in x (avoids 0 * 0^-1 = NaN at a = 0).
        if (b != 0.0) adj[l] += g * b * std::pow(a, b - 1.0);
        // d/db = a^b log(a), only where b depends on a variable: for a constant exponent over
        // a <= 0 (x^2 at x <= 0) it would be a NaN that no variable receives. At a = 0 < b,
        // a^b is 0 for every nearby b, so the term is 0. Elsewhere (a < 0, or 0^b with
        // b <= 0) the IEEE result, NaN or infinite, stands.
        if (t[r].varying && !(a == 0.0 && b > 0.0)) adj[r] += g * y * std::log(a);
        break;
      }
      case ExprOp::Neg: adj[l] -= g; break;
      case ExprOp::Sin: adj[l] += g * std::cos(val[l]); break;
      case ExprOp::Cos: adj[l] -= g * std::sin(val[l]); break;
      case ExprOp::Exp: adj[l] += g * y; break;
      // Undefined below 0 like the value itself (1/a would be a finite, meaningless number).
      case ExprOp::Log: adj[l] += val[l] < 0.0 ? std::numeric_limits<double>::quiet_NaN() : g / val[l]; break;
      case ExprOp::Tanh: adj[l] += g * (1.0 - y * y); break;
      case ExprOp::Sqrt: adj[l] += g * 0.5 / y; break;  // NaN below 0, infinite at 0
      case ExprOp::Abs: adj[l] += val[l] > 0.0 ? g : (val[l] < 0.0 ? -g : 0.0); break;
    }
  }
  return val[n - 1];
}

// One point m of an expression loss: r(m) from the point's coordinates X[m, :] and its jet
// components in U (component c of output o at U[(c*M + m)*O + o]), and that point's entries of
// dU (all K*O of them, zeroed first): dU += grad_scale * r * dr/dU. Returns r.
SG_HD double expression_point(const TapeInstr* t, int n, const ExprVar* vars, const float* U, const float* X,
                              float* dU, int64_t m, int64_t M, int64_t d, int64_t O, int K, double grad_scale,
                              double* val, double* adj) {
  for (int c = 0; c < K; ++c)
    for (int64_t o = 0; o < O; ++o) dU[(c * M + m) * O + o] = 0.0f;
  auto load = [&](int v) -> double {
    const ExprVar& s = vars[v];
    if (s.kind == ExprVar::Kind::Coordinate) return X[m * d + s.index];
    if (s.kind == ExprVar::Kind::Jet) return U[(s.index * M + m) * O + s.output];
    return s.value;
  };
  auto grad = [&](int v, double g) {
    const ExprVar& s = vars[v];
    if (s.kind != ExprVar::Kind::Jet) return;
    float& e = dU[(s.index * M + m) * O + s.output];
    e = static_cast<float>(e + grad_scale * val[n - 1] * g);
  };
  return tape_eval_grad(t, n, load, grad, val, adj);
}

}  // namespace sg::pinn
