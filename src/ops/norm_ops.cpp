// The batch-norm ops: shape rules, the gradient rule and the CPU reference bindings.
#include "ops/norm_ops.h"

#include <cmath>

#include "autodiff/grad_builder.h"
#include "backend/cpu/norm_kernels.h"

namespace sg::ops {

namespace {

// X [..., C] (rank >= 2) with gamma, beta and the running statistics [C]; returns C.
int64_t check_channels(const OpCheck& c) {
  const TensorId X = c.in(0);
  c.expect(c.shape(X).size() >= 2, cat("input ", c.desc(X), " must be [batch, ..., channels] (rank 2 or more)"));
  const int64_t C = c.shape(X).back();
  for (size_t k = 1; k <= 4; ++k)
    c.expect(c.shape(c.in(k)) == Shape{C}, cat(c.desc(c.in(k)), " must be [", C, "] (one per channel of the input ",
                                               c.desc(X), ")"));
  for (size_t k = 0; k <= 4; ++k) c.expect(c.dtype(c.in(k)) == DType::F32, cat(c.desc(c.in(k)), " must be f32"));
  c.same(X, c.out(0));
  const BatchNormAttrs& a = c.attr<BatchNormAttrs>();
  c.expect(std::isfinite(a.eps) && a.eps > 0, cat("eps ", a.eps, " must be positive"));
  c.expect(std::isfinite(a.momentum) && a.momentum > 0 && a.momentum <= 1,
           cat("momentum ", a.momentum, " must be in (0, 1]"));
  return C;
}

}  // namespace

void check_batch_norm(const OpCheck& c) {
  const int64_t C = check_channels(c);
  const int64_t n = numel(c.shape(c.in(0))) / C;
  // As torch: the unbiased variance of one value is undefined.
  c.expect(n >= 2, cat("input ", c.desc(c.in(0)), " has ", n, " value per channel; training statistics need at least 2"));
  c.expect(c.shape(c.out(1)) == Shape{C} && c.shape(c.out(2)) == Shape{C},
           cat("batch statistics ", c.desc(c.out(1)), " and ", c.desc(c.out(2)), " must be [", C, "]"));
  c.expect(c.out(3) == c.in(3) && c.out(4) == c.in(4),
           cat("updates the running statistics ", c.desc(c.in(3)), " and ", c.desc(c.in(4)),
               " in place: outputs 3 and 4 must be inputs 3 and 4"));
}

// The running statistics take no gradient (they are not a function the loss sees).
void grad_batch_norm(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::BatchNormBackward, {g.grad(op.out[0]), op.in[0], op.in[1], op.out[1], op.out[2]},
         {op.in[0], op.in[1], op.in[2]});
}

std::function<void()> cpu_batch_norm(const CpuBind& b) {
  const float *X = b.f(b.in(0)), *g = b.f(b.in(1)), *beta = b.f(b.in(2));
  float *Y = b.f(b.out(0)), *mean = b.f(b.out(1)), *rstd = b.f(b.out(2));
  float *rm = b.f(b.out(3)), *rv = b.f(b.out(4));
  const int64_t C = b.dim(b.in(1), 0), R = b.count(b.in(0)) / C;
  const BatchNormAttrs a = b.attr<BatchNormAttrs>();
  return [=] { cpu::batch_norm(X, g, beta, Y, mean, rstd, rm, rv, R, C, a.eps, a.momentum); };
}

void check_batch_norm_backward(const OpCheck& c) {
  c.same(c.in(0), c.in(1));
  c.same(c.out(0), c.in(1));
  c.same(c.in(3), c.in(2));
  c.same(c.in(4), c.in(2));
  c.same(c.out(1), c.in(2));
  c.same(c.out(2), c.in(2));
}

std::function<void()> cpu_batch_norm_backward(const CpuBind& b) {
  const float *dY = b.f(b.in(0)), *X = b.f(b.in(1)), *g = b.f(b.in(2)), *mean = b.f(b.in(3)), *rstd = b.f(b.in(4));
  float *dX = b.f(b.out(0)), *dg = b.f(b.out(1)), *db = b.f(b.out(2));
  const int64_t C = b.dim(b.in(2), 0), R = b.count(b.in(1)) / C;
  const bool ax = b.accumulate(0), ag = b.accumulate(1), ab = b.accumulate(2);
  return [=] { cpu::batch_norm_backward(dY, X, g, mean, rstd, dX, dg, db, R, C, ax, ag, ab); };
}

void check_batch_norm_inference(const OpCheck& c) { check_channels(c); }

std::function<void()> cpu_batch_norm_inference(const CpuBind& b) {
  const float *X = b.f(b.in(0)), *g = b.f(b.in(1)), *beta = b.f(b.in(2)), *rm = b.f(b.in(3)), *rv = b.f(b.in(4));
  float* Y = b.f(b.out(0));
  const int64_t C = b.dim(b.in(1), 0), R = b.count(b.in(0)) / C;
  const double eps = b.attr<BatchNormAttrs>().eps;
  return [=] { cpu::batch_norm_inference(X, g, beta, rm, rv, Y, R, C, eps); };
}

std::string batch_norm_attrs_text(const Op& op) {
  const BatchNormAttrs& a = op.attr<BatchNormAttrs>();
  return op.kind == OpKind::BatchNorm ? cat("(eps ", a.eps, ", momentum ", a.momentum, ")") : cat("(eps ", a.eps, ")");
}

}  // namespace sg::ops
