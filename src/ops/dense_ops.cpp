// Dense and AbsMax: shape rules, gradient rules and the CPU reference bindings.
#include "ops/dense_ops.h"

#include <algorithm>
#include <cmath>

#include "autodiff/grad_builder.h"
#include "backend/cpu/cpu_kernels.h"

namespace sg::ops {

// X [..., I] (rank >= 2: [batch, I], or [batch, positions, I] for sequences), W [O, I].
void check_dense(const OpCheck& c) {
  const TensorId X = c.in(0), W = c.in(1), b = c.in(2), Y = c.out(0);
  c.expect(c.shape(X).size() >= 2, cat("input ", c.desc(X), " must be [batch, features] or [batch, ..., features]"));
  c.rank(W, 2);
  c.expect(c.shape(X).back() == c.shape(W)[1],
           cat("input ", c.desc(X), " has ", c.shape(X).back(), " features but weight ", c.desc(W), " expects ",
               c.shape(W)[1]));
  if (b != kNone)
    c.expect(c.shape(b) == Shape{c.shape(W)[0]}, cat("bias ", c.desc(b), " must be [", c.shape(W)[0], "] (one per output)"));
  Shape ys = c.shape(X);
  ys.back() = c.shape(W)[0];
  c.expect(c.shape(Y) == ys, cat("output ", c.desc(Y), " must be ", shape_str(ys), " ([batch, ..., out])"));
  c.same(Y, c.out(1));
}

// d(act(X W^T + b)): one coarse op computes dX, dW and db.
void grad_dense(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::DenseBackward, {g.grad(op.out[0]), op.in[0], op.in[1], op.out[0], op.out[1]},
         {op.in[0], op.in[1], op.in[2]}, /*always=*/true);
}

// Rows: every leading index of X [B, ..., I].
std::function<void()> cpu_dense(const CpuBind& b) {
  const float *X = b.f(b.in(0)), *W = b.f(b.in(1)), *bias = b.f(b.in(2));
  float *Y = b.f(b.out(0)), *Z = b.f(b.out(1));
  const int64_t I = b.dim(b.in(1), 1), B = b.count(b.in(0)) / I, O = b.dim(b.in(1), 0);
  const DenseAttrs& a = b.attr<DenseAttrs>();
  const Activation act = a.act;
  const int64_t br = a.bias_rows ? a.bias_rows : B;
  return [=] { cpu::dense_forward(X, W, bias, Y, Z, B, I, O, act, br); };
}

void check_dense_backward(const OpCheck& c) {
  c.same(c.in(0), c.in(3));
  c.same(c.out(0), c.in(1));
  c.same(c.out(1), c.in(2));
}

std::function<void()> cpu_dense_backward(const CpuBind& b) {
  const float *dY = b.f(b.in(0)), *X = b.f(b.in(1)), *W = b.f(b.in(2)), *Y = b.f(b.in(3)), *Z = b.f(b.in(4));
  float *dX = b.f(b.out(0)), *dW = b.f(b.out(1)), *db = b.f(b.out(2));
  const int64_t I = b.dim(b.in(2), 1), B = b.count(b.in(1)) / I, O = b.dim(b.in(2), 0);
  const DenseAttrs& a = b.attr<DenseAttrs>();
  const Activation act = a.act;
  const int64_t br = a.bias_rows ? a.bias_rows : B;
  const bool ax = b.accumulate(0), aw = b.accumulate(1), ab = b.accumulate(2);
  return [=] { cpu::dense_backward(dY, X, W, Y, Z, dX, dW, db, B, I, O, act, ax, aw, ab, br); };
}

std::string dense_attrs_text(const Op& op) { return cat("(", activation_name(op.attr<DenseAttrs>().act), ")"); }

void check_abs_max(const OpCheck& c) {
  c.expect(c.shape(c.out(0)) == Shape{1}, cat("output ", c.desc(c.out(0)), " must be [1]"));
  c.expect(c.dtype(c.in(0)) == DType::F32 && c.dtype(c.out(0)) == DType::F32, "reads and writes f32");
}

std::function<void()> cpu_abs_max(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  float* m = b.f(b.out(0));
  const int64_t n = b.count(b.in(0));
  return [=] {
    float v = 0.0f;  // NaN propagates: a diverged layer shows as NaN, not as its finite part
    for (int64_t k = 0; k < n; ++k) v = std::isnan(X[k]) || std::isnan(v) ? NAN : std::max(v, std::fabs(X[k]));
    *m = v;
  };
}

}  // namespace sg::ops
