// The image ops: shape rules, gradient rules and the CPU reference bindings.
#include "ops/image_ops.h"

#include "autodiff/grad_builder.h"
#include "backend/cpu/cpu_kernels.h"

namespace sg::ops {

namespace {

// Geometry of a convolution (X [N,H,W,C], filters [K,R,S,C], Y [N,P,Q,K]) or a pooling
// (window R x S, K = C) as the kernels take it.
cpu::ConvShape conv_shape(const CpuBind& b, TensorId X, TensorId W, TensorId Y) {
  const ConvAttrs& a = b.attr<ConvAttrs>();
  const Shape &xs = b.tensor(X).shape, &ws = b.tensor(W).shape, &ys = b.tensor(Y).shape;
  cpu::ConvShape s;
  s.N = xs[0], s.H = xs[1], s.W = xs[2], s.C = xs[3];
  s.K = ws[0], s.R = ws[1], s.S = ws[2];
  s.P = ys[1], s.Q = ys[2];
  s.pad_h = a.pad_h, s.pad_w = a.pad_w, s.stride_h = a.stride_h, s.stride_w = a.stride_w;
  s.dil_h = a.dil_h, s.dil_w = a.dil_w;
  return s;
}
cpu::ConvShape pool_shape(const CpuBind& b, TensorId X, TensorId Y) {
  const PoolAttrs& a = b.attr<PoolAttrs>();
  const Shape &xs = b.tensor(X).shape, &ys = b.tensor(Y).shape;
  cpu::ConvShape s;
  s.N = xs[0], s.H = xs[1], s.W = xs[2], s.C = xs[3];
  s.K = xs[3], s.R = a.window_h, s.S = a.window_w;
  s.P = ys[1], s.Q = ys[2];
  s.pad_h = a.pad_h, s.pad_w = a.pad_w, s.stride_h = a.stride_h, s.stride_w = a.stride_w;
  return s;
}

}  // namespace

void check_conv2d(const OpCheck& c) {
  const ConvAttrs& a = c.attr<ConvAttrs>();
  const TensorId X = c.in(0), W = c.in(1), b = c.in(2), Y = c.out(0);
  c.rank(X, 4);
  c.rank(W, 4);
  c.rank(Y, 4);
  c.expect(a.act == Activation::None || a.act == Activation::ReLU,
           cat("activation ", activation_name(a.act), " is not fused: conv2d takes none or relu"));
  c.expect(a.stride_h >= 1 && a.stride_w >= 1 && a.dil_h >= 1 && a.dil_w >= 1 && a.pad_h >= 0 && a.pad_w >= 0,
           cat("strides (", a.stride_h, ", ", a.stride_w, ") and dilations (", a.dil_h, ", ", a.dil_w,
               ") must be >= 1 and paddings (", a.pad_h, ", ", a.pad_w, ") >= 0"));
  const Shape &xs = c.shape(X), &ws = c.shape(W);
  c.expect(xs[3] == ws[3],
           cat("input ", c.desc(X), " has ", xs[3], " channels but filter ", c.desc(W), " (KRSC) expects ", ws[3]));
  if (b != kNone) c.expect(c.shape(b) == Shape{ws[0]}, cat("bias ", c.desc(b), " must have shape [", ws[0], "]"));
  const int64_t P = conv_output_size(xs[1], ws[1], a.pad_h, a.stride_h, a.dil_h);
  const int64_t Q = conv_output_size(xs[2], ws[2], a.pad_w, a.stride_w, a.dil_w);
  c.expect(P > 0 && Q > 0, cat("a ", ws[1], "x", ws[2], " filter with dilation (", a.dil_h, ", ", a.dil_w,
                               ") and padding (", a.pad_h, ", ", a.pad_w, ") does not fit the ", xs[1], "x", xs[2],
                               " input ", c.desc(X)));
  const Shape ys{xs[0], P, Q, ws[0]};
  c.expect(c.shape(Y) == ys, cat("output ", c.desc(Y), " must be ", shape_str(ys)));
}

// d(act(conv(X, W) + b)): one coarse op computes dX (dgrad), dW (wgrad) and db; relu' from Y.
void grad_conv2d(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::Conv2dBackward, {g.grad(op.out[0]), op.in[0], op.in[1], op.out[0]},
         {op.in[0], op.in[1], op.in[2]}, /*always=*/true);
}

std::function<void()> cpu_conv2d(const CpuBind& b) {
  const float *X = b.f(b.in(0)), *Wt = b.f(b.in(1)), *bias = b.f(b.in(2));
  float* Y = b.f(b.out(0));
  const cpu::ConvShape s = conv_shape(b, b.in(0), b.in(1), b.out(0));
  const Activation act = b.attr<ConvAttrs>().act;
  return [=] { cpu::conv2d_forward(X, Wt, bias, Y, s, act); };
}

void check_conv2d_backward(const OpCheck& c) {
  c.rank(c.in(2), 4);
  c.same(c.in(0), c.in(3));
  c.same(c.out(0), c.in(1));
  c.same(c.out(1), c.in(2));
  if (c.out(2) != kNone)
    c.expect(c.shape(c.out(2)) == Shape{c.shape(c.in(2))[0]}, cat("bias gradient ", c.desc(c.out(2)), " must be [filters]"));
}

std::function<void()> cpu_conv2d_backward(const CpuBind& b) {
  const float *dY = b.f(b.in(0)), *X = b.f(b.in(1)), *Wt = b.f(b.in(2)), *Y = b.f(b.in(3));
  float *dX = b.f(b.out(0)), *dW = b.f(b.out(1)), *db = b.f(b.out(2));
  const cpu::ConvShape s = conv_shape(b, b.in(1), b.in(2), b.in(3));
  const Activation act = b.attr<ConvAttrs>().act;
  const bool ax = b.accumulate(0), aw = b.accumulate(1), ab = b.accumulate(2);
  return [=] { cpu::conv2d_backward(dY, X, Wt, Y, dX, dW, db, s, act, ax, aw, ab); };
}

std::string conv_attrs_text(const Op& op) {
  const ConvAttrs& a = op.attr<ConvAttrs>();
  return cat("(", activation_name(a.act), ", stride ", a.stride_h, "x", a.stride_w, ", pad ", a.pad_h, "x", a.pad_w,
             ", dilation ", a.dil_h, "x", a.dil_w, ")");
}

void check_max_pool2d(const OpCheck& c) {
  const PoolAttrs& a = c.attr<PoolAttrs>();
  const TensorId X = c.in(0), Y = c.out(0);
  c.rank(X, 4);
  c.rank(Y, 4);
  c.expect(a.window_h >= 1 && a.window_w >= 1 && a.stride_h >= 1 && a.stride_w >= 1,
           cat("window (", a.window_h, ", ", a.window_w, ") and stride (", a.stride_h, ", ", a.stride_w,
               ") must be >= 1"));
  c.expect(a.pad_h >= 0 && a.pad_w >= 0 && 2 * a.pad_h <= a.window_h && 2 * a.pad_w <= a.window_w,
           cat("padding (", a.pad_h, ", ", a.pad_w, ") must be in [0, window / 2]"));
  const Shape& xs = c.shape(X);
  const int64_t P = conv_output_size(xs[1], a.window_h, a.pad_h, a.stride_h);
  const int64_t Q = conv_output_size(xs[2], a.window_w, a.pad_w, a.stride_w);
  c.expect(P > 0 && Q > 0, cat("a ", a.window_h, "x", a.window_w, " window does not fit the input ", c.desc(X)));
  const Shape ys{xs[0], P, Q, xs[3]};
  c.expect(c.shape(Y) == ys, cat("output ", c.desc(Y), " must be ", shape_str(ys)));
}

void grad_max_pool2d(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::MaxPool2dBackward, {g.grad(op.out[0]), op.in[0], op.out[0]}, {op.in[0]});
}

std::function<void()> cpu_max_pool2d(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  const cpu::ConvShape s = pool_shape(b, b.in(0), b.out(0));
  return [=] { cpu::max_pool2d(X, Y, s); };
}

void check_max_pool2d_backward(const OpCheck& c) {
  c.same(c.in(0), c.in(2));
  c.same(c.out(0), c.in(1));
}

std::function<void()> cpu_max_pool2d_backward(const CpuBind& b) {
  const float *dY = b.f(b.in(0)), *X = b.f(b.in(1));
  float* dX = b.f(b.out(0));
  const cpu::ConvShape s = pool_shape(b, b.in(1), b.in(2));
  const bool acc = b.accumulate(0);
  return [=] { cpu::max_pool2d_backward(dY, X, dX, s, acc); };
}

std::string pool_attrs_text(const Op& op) {
  const PoolAttrs& a = op.attr<PoolAttrs>();
  return cat("(window ", a.window_h, "x", a.window_w, ", stride ", a.stride_h, "x", a.stride_w, ", pad ", a.pad_h, "x",
             a.pad_w, ")");
}

void check_global_avg_pool(const OpCheck& c) {
  c.rank(c.in(0), 4);
  c.expect(c.shape(c.out(0)) == Shape{c.shape(c.in(0))[0], c.shape(c.in(0))[3]},
           cat("output ", c.desc(c.out(0)), " must be [batch, channels] of the input ", c.desc(c.in(0))));
}

// Ops with one differentiable input: skipped when it needs no gradient (an image reshaped from
// the input batch).
void grad_global_avg_pool(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::GlobalAvgPoolBackward, {g.grad(op.out[0])}, {op.in[0]});
}

std::function<void()> cpu_global_avg_pool(const CpuBind& b) {
  const TensorId image = b.in(0);
  const int64_t N = b.dim(image, 0), HW = b.dim(image, 1) * b.dim(image, 2), C = b.dim(image, 3);
  const float* X = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  return [=] { cpu::global_avg_pool(X, Y, N, HW, C); };
}

void check_global_avg_pool_backward(const OpCheck& c) {
  c.rank(c.out(0), 4);
  c.expect(c.shape(c.in(0)) == Shape{c.shape(c.out(0))[0], c.shape(c.out(0))[3]},
           cat("gradient ", c.desc(c.in(0)), " must be [batch, channels] of ", c.desc(c.out(0))));
}

std::function<void()> cpu_global_avg_pool_backward(const CpuBind& b) {
  const TensorId image = b.out(0);
  const int64_t N = b.dim(image, 0), HW = b.dim(image, 1) * b.dim(image, 2), C = b.dim(image, 3);
  const float* dY = b.f(b.in(0));
  float* dX = b.f(b.out(0));
  const bool acc = b.accumulate(0);
  return [=] { cpu::global_avg_pool_backward(dY, dX, N, HW, C, acc); };
}

void check_reshape(const OpCheck& c) {
  c.expect(numel(c.shape(c.in(0))) == numel(c.shape(c.out(0))),
           cat(c.desc(c.in(0)), " and ", c.desc(c.out(0)), " must have the same number of elements"));
  c.expect(c.dtype(c.in(0)) == DType::F32 && c.dtype(c.out(0)) == DType::F32, "reshapes f32 tensors only");
}

void grad_reshape(GradBuilder& g, const Op& op) { g.emit(op, OpKind::Reshape, {g.grad(op.out[0])}, {op.in[0]}); }

std::function<void()> cpu_reshape(const CpuBind& b) {
  const float* X = b.f(b.in(0));
  float* Y = b.f(b.out(0));
  const int64_t n = b.count(b.out(0));
  const bool acc = b.accumulate(0);
  return [=] { cpu::copy(X, Y, n, acc); };
}

}  // namespace sg::ops
