// MatMul and Transpose: shape rules, gradient rules and the CPU reference bindings (linalg_ops.h).
#include "ops/linalg_ops.h"

#include <algorithm>

#include "autodiff/grad_builder.h"
#include "backend/cpu/tensor_kernels.h"
#include "backend/tensor_math.h"

namespace sg::ops {

namespace {

// The product's sizes: `batch` matrices of op(A) [M, K] times op(B) [K, N].
struct MatMulDims {
  int64_t batch = 1, M = 0, N = 0, K = 0;
};

MatMulDims matmul_dims(const Shape& a, const Shape& b, const MatMulAttrs& t) {
  MatMulDims d;
  const size_t r = a.size();
  d.M = t.trans_a ? a[r - 1] : a[r - 2];
  d.K = t.trans_a ? a[r - 2] : a[r - 1];
  d.N = t.trans_b ? b[r - 2] : b[r - 1];
  for (size_t k = 0; k + 2 < r; ++k) d.batch *= a[k];
  return d;
}

void expect_f32(const OpCheck& c) {
  for (const std::vector<TensorId>* ids : {&c.op().in, &c.op().out})
    for (TensorId t : *ids)
      if (t != kNone) c.expect(c.dtype(t) == DType::F32, cat(c.desc(t), " is ", dtype_name(c.dtype(t)), ": expected f32"));
}

}  // namespace

void check_matmul(const OpCheck& c) {
  const Shape &a = c.shape(c.in(0)), &b = c.shape(c.in(1)), &y = c.shape(c.out(0));
  const MatMulAttrs& t = c.attr<MatMulAttrs>();
  c.expect(a.size() >= 3 && a.size() == b.size(),
           cat(c.desc(c.in(0)), " and ", c.desc(c.in(1)), " must have one rank of at least 3 (the batch axis, then "
               "matrices per sample)"));
  const size_t r = a.size();
  c.expect(std::equal(a.begin(), a.end() - 2, b.begin()),
           cat(c.desc(c.in(0)), " and ", c.desc(c.in(1)), " must agree on every axis but the last two"));
  const MatMulDims d = matmul_dims(a, b, t);
  const int64_t kb = t.trans_b ? b[r - 1] : b[r - 2];
  c.expect(d.K == kb, cat(c.desc(c.in(0)), t.trans_a ? " (transposed)" : "", " and ", c.desc(c.in(1)),
                          t.trans_b ? " (transposed)" : "", " do not chain: ", d.K, " columns against ", kb, " rows"));
  Shape want(a.begin(), a.end() - 2);
  want.push_back(d.M);
  want.push_back(d.N);
  c.expect(y == want, cat(c.desc(c.out(0)), " must be ", shape_str(want)));
  expect_f32(c);
}

// Y = op(A) op(B): d op(A) = dY op(B)^T, d op(B) = op(A)^T dY, each transposed back when its
// operand is stored transposed (matmul of the right operands with the right flags).
void grad_matmul(GradBuilder& g, const Op& op) {
  const MatMulAttrs t = op.attr<MatMulAttrs>();
  const TensorId A = op.in[0], B = op.in[1], dY = g.grad(op.out[0]);
  if (g.needs(A)) {
    if (!t.trans_a) g.emit_with(op, OpKind::MatMul, MatMulAttrs{false, !t.trans_b}, {dY, B}, {A});
    else g.emit_with(op, OpKind::MatMul, MatMulAttrs{t.trans_b, true}, {B, dY}, {A});
  }
  if (g.needs(B)) {
    if (!t.trans_b) g.emit_with(op, OpKind::MatMul, MatMulAttrs{!t.trans_a, false}, {A, dY}, {B});
    else g.emit_with(op, OpKind::MatMul, MatMulAttrs{true, t.trans_a}, {dY, A}, {B});
  }
}

std::function<void()> cpu_matmul(const CpuBind& b) {
  const float *A = b.f(b.in(0)), *B = b.f(b.in(1));
  float* Y = b.f(b.out(0));
  const MatMulAttrs t = b.attr<MatMulAttrs>();
  const MatMulDims d = matmul_dims(b.tensor(b.in(0)).shape, b.tensor(b.in(1)).shape, t);
  const bool acc = b.accumulate(0);
  return [=] { cpu::matmul(A, B, Y, d.batch, d.M, d.N, d.K, t.trans_a, t.trans_b, acc); };
}

std::string matmul_attrs_text(const Op& op) {
  const MatMulAttrs& t = op.attr<MatMulAttrs>();
  if (!t.trans_a && !t.trans_b) return "";
  return cat("(", t.trans_a ? "A^T" : "A", " ", t.trans_b ? "B^T" : "B", ")");
}

void check_transpose(const OpCheck& c) {
  const Shape& x = c.shape(c.in(0));
  const TransposeAttrs& t = c.attr<TransposeAttrs>();
  const int a = normalize_axis(t.axis_a, x.size()), b = normalize_axis(t.axis_b, x.size());
  c.expect(a > 0 && b > 0, cat("axes ", t.axis_a, " and ", t.axis_b, " of ", c.desc(c.in(0)),
                               " must be feature axes (1 .. rank-1, or negative from the end)"));
  c.expect(x.size() <= static_cast<size_t>(kMaxTensorRank), cat(c.desc(c.in(0)), ": at most ", kMaxTensorRank, " axes"));
  Shape want = x;
  if (a > 0 && b > 0) std::swap(want[a], want[b]);
  c.expect(c.shape(c.out(0)) == want, cat(c.desc(c.out(0)), " must be ", shape_str(want)));
  expect_f32(c);
}

void grad_transpose(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::Transpose, {g.grad(op.out[0])}, {op.in[0]});
}

std::function<void()> cpu_transpose(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  const Shape xs = b.tensor(b.in(0)).shape;
  const TransposeAttrs t = b.attr<TransposeAttrs>();
  const int a = normalize_axis(t.axis_a, xs.size()), c = normalize_axis(t.axis_b, xs.size());
  const bool acc = b.accumulate(0);
  return [=] { cpu::transpose(X, Y, xs, a, c, acc); };
}

std::string transpose_attrs_text(const Op& op) {
  const TransposeAttrs& t = op.attr<TransposeAttrs>();
  return cat("(axes ", t.axis_a, ", ", t.axis_b, ")");
}

}  // namespace sg::ops
