// Tensor ops: shape rules, gradient rules and the CPU reference bindings (tensor_ops.h).
#include "ops/tensor_ops.h"

#include <cmath>

#include "autodiff/grad_builder.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/tensor_kernels.h"
#include "backend/tensor_math.h"

namespace sg::ops {

namespace {

void f32_only(const OpCheck& c) {
  for (const std::vector<TensorId>* ids : {&c.op().in, &c.op().out})
    for (TensorId t : *ids)
      if (t != kNone) c.expect(c.dtype(t) == DType::F32, cat(c.desc(t), " is ", dtype_name(c.dtype(t)), ": expected f32"));
}

// a and b broadcast to y: one rank, per axis equal sizes or one of them 1, y the larger.
void expect_broadcast(const OpCheck& c, TensorId a, TensorId b, TensorId y) {
  const Shape &sa = c.shape(a), &sb = c.shape(b);
  c.expect(sa.size() == sb.size(), cat(c.desc(a), " and ", c.desc(b),
                                       " must have the same rank (broadcasting pairs the axes one to one)"));
  c.expect(sa.size() <= static_cast<size_t>(kMaxTensorRank), cat(c.desc(a), ": at most ", kMaxTensorRank, " axes"));
  for (size_t k = 0; k < sa.size(); ++k)
    c.expect(sa[k] == sb[k] || sa[k] == 1 || sb[k] == 1,
             cat(c.desc(a), " and ", c.desc(b), " do not broadcast: axis ", k, " has ", sa[k], " and ", sb[k],
                 " (per axis the sizes must be equal or one of them 1)"));
  const Shape want = broadcast_shape(sa, sb);
  c.expect(c.shape(y) == want, cat(c.desc(y), " must be ", shape_str(want), " (the broadcast shape of ", c.desc(a),
                                   " and ", c.desc(b), ")"));
}

// The feature axis `axis` of t (negative from the end); refuses the batch axis and axes out of range.
int feature_axis(const OpCheck& c, TensorId t, int32_t axis) {
  const size_t rank = c.shape(t).size();
  const int k = normalize_axis(axis, rank);
  c.expect(k >= 0, cat("axis ", axis, " is out of range for ", c.desc(t), " (rank ", rank, ")"));
  c.expect(k != 0, cat("axis ", axis, " of ", c.desc(t),
                       " is the batch axis: this op works along a feature axis (1 .. rank-1, or negative from the end)"));
  return k;
}

// `s` with its size along `axis` replaced by n.
Shape with_size(Shape s, int axis, int64_t n) {
  s[axis] = n;
  return s;
}

// t is `whole` with n elements along axis (the tensors' role in the message: "input 2").
void expect_piece(const OpCheck& c, TensorId t, TensorId whole, int axis, int64_t n, const std::string& role) {
  const Shape want = with_size(c.shape(whole), axis, n);
  c.expect(c.shape(t) == want, cat(role, " ", c.desc(t), " must be ", shape_str(want), " (", c.desc(whole),
                                   " with ", n, " along axis ", axis, ")"));
}

int64_t total(const std::vector<int64_t>& sizes) {
  int64_t s = 0;
  for (int64_t n : sizes) s += n;
  return s;
}

}  // namespace

// ---- Add, Sub, Mul, Div ----

void check_binary(const OpCheck& c) {
  expect_broadcast(c, c.in(0), c.in(1), c.out(0));
  f32_only(c);
}

// Add and Sub read only dY; Mul and Div also the operands.
void grad_binary(GradBuilder& g, const Op& op) {
  const TensorId dY = g.grad(op.out[0]), A = op.in[0], B = op.in[1];
  switch (op.kind) {
    case OpKind::Add: g.emit(op, OpKind::AddBackward, {dY}, {A, B}, /*always=*/true); return;
    case OpKind::Sub: g.emit(op, OpKind::SubBackward, {dY}, {A, B}); return;
    case OpKind::Mul: g.emit(op, OpKind::MulBackward, {dY, A, B}, {A, B}); return;
    default: g.emit(op, OpKind::DivBackward, {dY, A, B}, {A, B}); return;
  }
}

std::function<void()> cpu_binary(const CpuBind& b) {
  const float *A = b.f(b.in(0)), *B = b.f(b.in(1));
  float* Y = b.f(b.out(0));
  const Shape &sa = b.tensor(b.in(0)).shape, &sb = b.tensor(b.in(1)).shape, &sy = b.tensor(b.out(0)).shape;
  const BinaryOp op = binary_op_of(b.op().kind);
  if (op == BinaryOp::Add && sa == sy && sb == sy) {  // Add as it always was
    const int64_t n = b.count(b.out(0));
    return [=] { cpu::add(A, B, Y, n); };
  }
  const Broadcast g = make_broadcast(sa, sb, sy);
  return [=] { cpu::binary(op, A, B, Y, g); };
}

// Add and Sub: dY -> dA, dB, each summed over its broadcast axes. Mul and Div: dY, A, B -> dA, dB.
void check_binary_backward(const OpCheck& c) {
  const TensorId dY = c.in(0);
  if (c.op().in.size() == 3) {
    expect_broadcast(c, c.in(1), c.in(2), dY);
    c.same(c.out(0), c.in(1));
    c.same(c.out(1), c.in(2));
  } else {
    for (size_t k = 0; k < 2; ++k)
      if (const TensorId d = c.out(k); d != kNone)
        c.expect(broadcast_shape(c.shape(d), c.shape(dY)) == c.shape(dY),
                 cat("gradient ", c.desc(d), " must broadcast to ", c.desc(dY)));
  }
  f32_only(c);
}

std::function<void()> cpu_binary_backward(const CpuBind& b) {
  const BinaryOp op = binary_op_of(b.op().kind);
  const bool reads = b.op().in.size() == 3;
  const float *dY = b.f(b.in(0)), *A = reads ? b.f(b.in(1)) : nullptr, *B = reads ? b.f(b.in(2)) : nullptr;
  float *dA = b.f(b.out(0)), *dB = b.f(b.out(1));
  const Shape& sy = b.tensor(b.in(0)).shape;
  // Add and Sub's terms read neither operand: an absent gradient's shape may be dY's.
  auto shape_of = [&](size_t k) -> Shape {
    if (reads) return b.tensor(b.in(1 + k)).shape;
    return b.out(k) != kNone ? b.tensor(b.out(k)).shape : sy;
  };
  const Shape sa = shape_of(0), sb = shape_of(1);
  const bool aa = b.accumulate(0), ab = b.accumulate(1);
  if (op == BinaryOp::Add && sa == sy && sb == sy) {  // AddBackward as it always was
    const int64_t n = b.count(b.in(0));
    return [=] { cpu::add_backward(dY, dA, dB, n, aa, ab); };
  }
  const BroadcastReduce ga = make_broadcast_reduce(sa, sb, sy, true), gb = make_broadcast_reduce(sa, sb, sy, false);
  return [=] {
    if (dA) cpu::reduce_terms(op, true, dY, A, B, dA, ga, 1.0, aa);
    if (dB) cpu::reduce_terms(op, false, dY, A, B, dB, gb, 1.0, ab);
  };
}

// ---- ScaleShift ----

void check_scale_shift(const OpCheck& c) {
  c.same(c.in(0), c.out(0));
  const ScaleShiftAttrs& a = c.attr<ScaleShiftAttrs>();
  c.expect(std::isfinite(a.a) && std::isfinite(a.b), cat("a = ", a.a, " and b = ", a.b, " must be finite"));
  f32_only(c);
}

// dX = a dY: a ScaleShift with b = 0.
void grad_scale_shift(GradBuilder& g, const Op& op) {
  g.emit_with(op, OpKind::ScaleShift, ScaleShiftAttrs{op.attr<ScaleShiftAttrs>().a, 0.0}, {g.grad(op.out[0])},
              {op.in[0]});
}

std::function<void()> cpu_scale_shift(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  const int64_t n = b.count(b.out(0));
  const ScaleShiftAttrs a = b.attr<ScaleShiftAttrs>();
  const bool acc = b.accumulate(0);
  return [=] { cpu::scale_shift(X, Y, n, a.a, a.b, acc); };
}

std::string scale_shift_attrs_text(const Op& op) {
  const ScaleShiftAttrs& a = op.attr<ScaleShiftAttrs>();
  return cat("(a ", a.a, ", b ", a.b, ")");
}

// ---- Activation ----

void check_activation(const OpCheck& c) {
  c.same(c.in(0), c.out(0));
  const ActivationAttrs& a = c.attr<ActivationAttrs>();
  // The derivative reads the sign of z from y (activation_math.h), which needs p >= 0.
  if (a.act == Activation::LeakyReLU)
    c.expect(std::isfinite(a.negative_slope) && a.negative_slope >= 0,
             cat("leaky_relu's negative_slope ", a.negative_slope, " must be finite and >= 0"));
  if (a.act == Activation::ELU)
    c.expect(std::isfinite(a.alpha) && a.alpha >= 0, cat("elu's alpha ", a.alpha, " must be finite and >= 0"));
  f32_only(c);
}

void grad_activation(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::ActivationBackward, {g.grad(op.out[0]), op.in[0], op.out[0]}, {op.in[0]});
}

std::function<void()> cpu_activation(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  const int64_t n = b.count(b.out(0));
  const ActivationAttrs& a = b.attr<ActivationAttrs>();
  const Activation act = a.act;
  const double p = activation_param(a);
  return [=] { cpu::activation(X, Y, n, act, p); };
}

void check_activation_backward(const OpCheck& c) {
  c.same(c.in(0), c.in(1));
  c.same(c.in(0), c.in(2));
  c.same(c.in(0), c.out(0));
  f32_only(c);
}

std::function<void()> cpu_activation_backward(const CpuBind& b) {
  const float *dY = b.f(b.in(0)), *X = b.f(b.in(1)), *Y = b.f(b.in(2));
  float* dX = b.f(b.out(0));
  const int64_t n = b.count(b.out(0));
  const ActivationAttrs& a = b.attr<ActivationAttrs>();
  const Activation act = a.act;
  const double p = activation_param(a);
  const bool acc = b.accumulate(0);
  return [=] { cpu::activation_backward(dY, X, Y, dX, n, act, p, acc); };
}

std::string activation_attrs_text(const Op& op) {
  const ActivationAttrs& a = op.attr<ActivationAttrs>();
  if (a.act == Activation::LeakyReLU) return cat("(leaky_relu, negative_slope ", a.negative_slope, ")");
  if (a.act == Activation::ELU) return cat("(elu, alpha ", a.alpha, ")");
  return cat("(", activation_name(a.act), ")");
}

// ---- Dropout ----

void check_dropout(const OpCheck& c) {
  c.same(c.in(0), c.out(0));
  c.expect(c.shape(c.in(1)) == Shape{1} && c.dtype(c.in(1)) == DType::I32,
           cat("step ", c.desc(c.in(1)), " must be i32 [1]"));
  const double p = c.attr<DropoutAttrs>().p;
  c.expect(std::isfinite(p) && p >= 0 && p < 1, cat("p ", p, " must be in [0, 1)"));
  c.expect(c.dtype(c.in(0)) == DType::F32 && c.dtype(c.out(0)) == DType::F32, "takes f32 tensors");
}

// dX = dY * mask / (1 - p): the same op on dY (the same key and step give the same mask).
void grad_dropout(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::Dropout, {g.grad(op.out[0]), op.in[1]}, {op.in[0]});
}

std::function<void()> cpu_dropout(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  const int32_t* step = b.i32(b.in(1));
  float* Y = b.f(b.out(0));
  const int64_t n = b.count(b.out(0));
  const DropoutAttrs a = b.attr<DropoutAttrs>();
  const bool acc = b.accumulate(0);
  return [=] { cpu::dropout(X, Y, n, a.p, a.key, *step, acc); };
}

std::string dropout_attrs_text(const Op& op) { return cat("(p ", op.attr<DropoutAttrs>().p, ")"); }

// ---- Concat, Split, Slice ----

void check_concat(const OpCheck& c) {
  const TensorId Y = c.out(0);
  const auto& in = c.op().in;
  c.expect(!in.empty(), "needs at least one input");
  const int axis = feature_axis(c, Y, c.attr<ConcatAttrs>().axis);
  int64_t n = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const Shape &s = c.shape(in[k]), &ys = c.shape(Y);
    c.expect(s.size() == ys.size(), cat("input ", k, " ", c.desc(in[k]), " must have the rank of the output ", c.desc(Y)));
    expect_piece(c, in[k], Y, axis, s[axis], cat("input ", k));
    n += s[axis];
  }
  c.expect(n == c.shape(Y)[axis], cat("output ", c.desc(Y), " has ", c.shape(Y)[axis], " along axis ", axis,
                                      " but its inputs add up to ", n));
  f32_only(c);
}

// The gradient of each input is its piece of dY: one split (absent pieces where none is needed).
void grad_concat(GradBuilder& g, const Op& op) {
  SplitAttrs a;
  a.axis = op.attr<ConcatAttrs>().axis;
  const Program& p = g.program();
  const int axis = normalize_axis(a.axis, p.tensor(op.out[0]).shape.size());
  for (TensorId t : op.in) a.sizes.push_back(p.tensor(t).shape[axis]);
  g.emit_with(op, OpKind::Split, a, {g.grad(op.out[0])}, op.in);
}

namespace {

// The pieces of `whole` (sizes along the axis) against the tensors `pieces` (absent ones skipped).
void check_pieces(const OpCheck& c, TensorId whole, const std::vector<TensorId>& pieces, const char* role) {
  const SplitAttrs& a = c.attr<SplitAttrs>();
  const int axis = feature_axis(c, whole, a.axis);
  c.expect(a.sizes.size() == pieces.size(), cat("has ", a.sizes.size(), " sizes for ", pieces.size(), " ", role, "s"));
  for (int64_t n : a.sizes) c.expect(n > 0, cat("sizes must be positive, got ", n));
  c.expect(total(a.sizes) == c.shape(whole)[axis], cat("sizes add up to ", total(a.sizes), " but ", c.desc(whole),
                                                       " has ", c.shape(whole)[axis], " along axis ", axis));
  for (size_t k = 0; k < pieces.size(); ++k)
    if (pieces[k] != kNone) expect_piece(c, pieces[k], whole, axis, a.sizes[k], cat(role, " ", k));
  f32_only(c);
}

}  // namespace

void check_split(const OpCheck& c) { check_pieces(c, c.in(0), c.op().out, "output"); }

void grad_split(GradBuilder& g, const Op& op) {
  std::vector<TensorId> dY;
  for (TensorId t : op.out) dY.push_back(g.grad(t));
  g.emit(op, OpKind::SplitBackward, dY, {op.in[0]});
}

void check_split_backward(const OpCheck& c) { check_pieces(c, c.out(0), c.op().in, "input"); }

void check_slice(const OpCheck& c) {
  const TensorId X = c.in(0), Y = c.out(0);
  const SliceAttrs& a = c.attr<SliceAttrs>();
  const int axis = feature_axis(c, X, a.axis);
  const int64_t n = c.shape(X)[axis];
  c.expect(0 <= a.begin && a.begin < a.end && a.end <= n,
           cat("slice [", a.begin, ", ", a.end, ") of axis ", axis, " of ", c.desc(X), ": needs 0 <= begin < end <= ", n));
  expect_piece(c, Y, X, axis, a.end - a.begin, "output");
  f32_only(c);
}

void grad_slice(GradBuilder& g, const Op& op) { g.emit(op, OpKind::SliceBackward, {g.grad(op.out[0])}, {op.in[0]}); }

void check_slice_backward(const OpCheck& c) {
  const TensorId dY = c.in(0), dX = c.out(0);
  const SliceAttrs& a = c.attr<SliceAttrs>();
  const int axis = feature_axis(c, dX, a.axis);
  c.expect(0 <= a.begin && a.begin < a.end && a.end <= c.shape(dX)[axis],
           cat("slice [", a.begin, ", ", a.end, ") is out of range for ", c.desc(dX)));
  expect_piece(c, dY, dX, axis, a.end - a.begin, "gradient");
  f32_only(c);
}

std::function<void()> cpu_pieces(const CpuBind& b) {
  const Pieces pieces = axis_pieces(b.program(), b.op(), [&](TensorId t) { return b.f(t); });
  return [=] { cpu::copy_pieces(pieces); };
}

std::string axis_attrs_text(const Op& op) {
  switch (op.kind) {
    case OpKind::Concat: return cat("(axis ", op.attr<ConcatAttrs>().axis, ")");
    case OpKind::Split:
    case OpKind::SplitBackward: {
      const SplitAttrs& a = op.attr<SplitAttrs>();
      std::string s;
      for (int64_t n : a.sizes) s += cat(s.empty() ? "" : ", ", n);
      return cat("(axis ", a.axis, ", sizes [", s, "])");
    }
    default: {
      const SliceAttrs& a = op.attr<SliceAttrs>();
      return cat("(axis ", a.axis, ", [", a.begin, ", ", a.end, "))");
    }
  }
}

// ---- Sum, Mean ----

namespace {

// Y's shape for X reduced along axis.
Shape reduced_shape(const Shape& x, int axis, bool keepdims) {
  Shape y = x;
  if (keepdims) y[axis] = 1;
  else y.erase(y.begin() + axis);
  return y;
}

void expect_reduced(const OpCheck& c, TensorId X, TensorId Y, const char* role) {
  const ReduceAttrs& a = c.attr<ReduceAttrs>();
  const int axis = feature_axis(c, X, a.axis);
  c.expect(c.shape(X).size() <= static_cast<size_t>(kMaxTensorRank), cat(c.desc(X), ": at most ", kMaxTensorRank, " axes"));
  const Shape want = reduced_shape(c.shape(X), axis, a.keepdims);
  c.expect(c.shape(Y) == want, cat(role, " ", c.desc(Y), " must be ", shape_str(want), " (", c.desc(X), " reduced over axis ",
                                   axis, a.keepdims ? ", kept as size 1)" : ")"));
  f32_only(c);
}

bool is_mean(OpKind k) { return k == OpKind::Mean || k == OpKind::MeanBackward; }

}  // namespace

void check_reduce(const OpCheck& c) { expect_reduced(c, c.in(0), c.out(0), "output"); }

void grad_reduce(GradBuilder& g, const Op& op) {
  g.emit(op, op.kind == OpKind::Mean ? OpKind::MeanBackward : OpKind::SumBackward, {g.grad(op.out[0])}, {op.in[0]});
}

// X [.., n, ..] summed onto Y seen as X with the axis kept as 1: the broadcast reduction.
std::function<void()> cpu_reduce(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  const Shape& xs = b.tensor(b.in(0)).shape;
  const int axis = normalize_axis(b.attr<ReduceAttrs>().axis, xs.size());
  const BroadcastReduce g = make_broadcast_reduce(with_size(xs, axis, 1), xs, xs, true);
  const double scale = is_mean(b.op().kind) ? 1.0 / static_cast<double>(xs[axis]) : 1.0;
  const bool acc = b.accumulate(0);
  return [=] { cpu::reduce_terms(BinaryOp::Add, true, X, nullptr, nullptr, Y, g, scale, acc); };
}

void check_reduce_backward(const OpCheck& c) { expect_reduced(c, c.out(0), c.in(0), "gradient"); }

std::function<void()> cpu_reduce_backward(const CpuBind& b) {
  const float* dY = b.f(b.in(0));
  float* dX = b.f(b.out(0));
  const Shape& xs = b.tensor(b.out(0)).shape;
  const int axis = normalize_axis(b.attr<ReduceAttrs>().axis, xs.size());
  const Broadcast g = make_broadcast(with_size(xs, axis, 1), xs, xs);
  const double scale = is_mean(b.op().kind) ? 1.0 / static_cast<double>(xs[axis]) : 1.0;
  const bool acc = b.accumulate(0);
  return [=] { cpu::expand(dY, dX, g, scale, acc); };
}

std::string reduce_attrs_text(const Op& op) {
  const ReduceAttrs& a = op.attr<ReduceAttrs>();
  return cat("(axis ", a.axis, a.keepdims ? ", keepdims)" : ")");
}

}  // namespace sg::ops
