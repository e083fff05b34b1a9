// The op-table cases of the tensor ops (ir.h: Sub ... MeanBackward, and Add with broadcasting),
// and their float64 forward, written from the definitions with multi-indices (independent of
// backend/tensor_math.h's merged geometries). op_cases.h includes it at its end, and lists
// tensor_op_cases() in all_op_cases().
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "backend/dropout_math.h"
#include "op_cases.h"

namespace sg::test {

// ---- The float64 forward ----

inline std::vector<int64_t> unravel(int64_t p, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t k = s.size(); k-- > 0;) idx[k] = p % s[k], p /= s[k];
  return idx;
}
// The element of a tensor of shape s at a multi-index of the broadcast shape (size-1 axes read 0).
inline int64_t ravel_broadcast(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t p = 0;
  for (size_t k = 0; k < s.size(); ++k) p = p * s[k] + (s[k] == 1 ? 0 : idx[k]);
  return p;
}

inline bool is_tensor_op_kind(OpKind k) {
  return k == OpKind::Sub || k == OpKind::Mul || k == OpKind::Div || k == OpKind::ScaleShift ||
         k == OpKind::Activation || k == OpKind::Concat || k == OpKind::Split || k == OpKind::Slice ||
         k == OpKind::Sum || k == OpKind::Mean || k == OpKind::Dropout || k == OpKind::MatMul ||
         k == OpKind::Transpose || k == OpKind::BatchNorm || k == OpKind::BatchNormInference;
}

inline double activation_double(const ActivationAttrs& a, double z) {
  switch (a.act) {
    case Activation::None: return z;
    case Activation::ReLU: return z > 0 ? z : 0;
    case Activation::GELU: return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
    case Activation::Tanh: return std::tanh(z);
    case Activation::Sigmoid: return 1 / (1 + std::exp(-z));
    case Activation::Sin: return std::sin(z);
    case Activation::Softplus: return std::log(1 + std::exp(z));
    case Activation::SiLU: return z / (1 + std::exp(-z));
    case Activation::LeakyReLU: return z > 0 ? z : a.negative_slope * z;
    case Activation::ELU: return z > 0 ? z : a.alpha * (std::exp(z) - 1);
    case Activation::Exp: return std::exp(z);
    case Activation::Square: return z * z;
    case Activation::GELUErf: return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
  }
  return z;
}

// Writes every output of a tensor op (or a broadcasting Add) into v.
inline void eval_tensor_op_double(const Program& p, const Op& op, Values& v) {
  auto val = [&](TensorId t) -> std::vector<double>& { return v[p.tensor(t).name]; };
  auto shape = [&](TensorId t) -> const Shape& { return p.tensor(t).shape; };
  // The axis of a rank-r tensor, negative from the end.
  auto axis_of = [](int32_t axis, size_t r) { return static_cast<size_t>(axis < 0 ? axis + static_cast<int32_t>(r) : axis); };
  switch (op.kind) {
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div: {
      const Shape &ys = shape(op.out[0]), &as = shape(op.in[0]), &bs = shape(op.in[1]);
      const std::vector<double> A = val(op.in[0]), B = val(op.in[1]);
      std::vector<double> Y(numel(ys));
      for (int64_t q = 0; q < numel(ys); ++q) {
        const std::vector<int64_t> idx = unravel(q, ys);
        const double a = A[ravel_broadcast(idx, as)], b = B[ravel_broadcast(idx, bs)];
        Y[q] = op.kind == OpKind::Add ? a + b : op.kind == OpKind::Sub ? a - b : op.kind == OpKind::Mul ? a * b : a / b;
      }
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::ScaleShift: {
      std::vector<double> Y = val(op.in[0]);
      for (double& y : Y) y = op.attr<ScaleShiftAttrs>().a * y + op.attr<ScaleShiftAttrs>().b;
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::Activation: {
      std::vector<double> Y = val(op.in[0]);
      for (double& y : Y) y = activation_double(op.attr<ActivationAttrs>(), y);
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::MatMul: {  // per matrix, entries by their definition sum_k op(A)[i, k] op(B)[k, j]
      const MatMulAttrs& t = op.attr<MatMulAttrs>();
      const Shape &as = shape(op.in[0]), &ys = shape(op.out[0]);
      const size_t r = as.size();
      const int64_t M = ys[r - 2], N = ys[r - 1], K = t.trans_a ? as[r - 2] : as[r - 1];
      const std::vector<double> &A = val(op.in[0]), &B = val(op.in[1]);
      std::vector<double> Y(numel(ys));
      for (int64_t q = 0; q < numel(ys) / (M * N); ++q)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double sum = 0;
            for (int64_t k = 0; k < K; ++k)
              sum += A[q * M * K + (t.trans_a ? k * M + i : i * K + k)] * B[q * K * N + (t.trans_b ? j * K + k : k * N + j)];
            Y[q * M * N + i * N + j] = sum;
          }
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::Transpose: {
      const Shape& xs = shape(op.in[0]);
      const size_t a = axis_of(op.attr<TransposeAttrs>().axis_a, xs.size()),
                   b = axis_of(op.attr<TransposeAttrs>().axis_b, xs.size());
      Shape ys = xs;
      std::swap(ys[a], ys[b]);
      const std::vector<double> X = val(op.in[0]);
      std::vector<double> Y(X.size());
      for (int64_t q = 0; q < numel(ys); ++q) {
        std::vector<int64_t> idx = unravel(q, ys);
        std::swap(idx[a], idx[b]);
        Y[q] = X[ravel_broadcast(idx, xs)];
      }
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::Dropout: {  // the mask is the op's definition (dropout_math.h); the rest in float64
      const DropoutAttrs& a = op.attr<DropoutAttrs>();
      const int32_t step = static_cast<int32_t>(val(op.in[1])[0]);
      std::vector<double> Y = val(op.in[0]);
      for (size_t k = 0; k < Y.size(); ++k)
        Y[k] = dropout_keep(a.key, step, static_cast<int64_t>(k), dropout_threshold(a.p)) ? Y[k] / (1 - a.p) : 0.0;
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::BatchNorm:
    case OpKind::BatchNormInference: {
      // Per channel (the last axis) over the rows: the batch's mean and biased variance, or the
      // running statistics.
      const BatchNormAttrs& a = op.attr<BatchNormAttrs>();
      const std::vector<double>& X = val(op.in[0]);
      const std::vector<double>&g = val(op.in[1]), &b = val(op.in[2]), &rm = val(op.in[3]), &rv = val(op.in[4]);
      const size_t C = g.size(), R = X.size() / C;
      std::vector<double> mean = rm, var = rv;
      if (op.kind == OpKind::BatchNorm) {
        for (size_t c = 0; c < C; ++c) {
          double s = 0, q = 0;
          for (size_t r = 0; r < R; ++r) s += X[r * C + c];
          mean[c] = s / static_cast<double>(R);
          for (size_t r = 0; r < R; ++r) q += (X[r * C + c] - mean[c]) * (X[r * C + c] - mean[c]);
          var[c] = q / static_cast<double>(R);
        }
      }
      std::vector<double> Y(X.size());
      for (size_t k = 0; k < X.size(); ++k)
        Y[k] = (X[k] - mean[k % C]) / std::sqrt(var[k % C] + a.eps) * g[k % C] + b[k % C];
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::Concat: {
      const Shape& ys = shape(op.out[0]);
      const size_t ax = axis_of(op.attr<ConcatAttrs>().axis, ys.size());
      std::vector<double> Y(numel(ys));
      int64_t offset = 0;
      for (TensorId t : op.in) {
        const std::vector<double>& X = val(t);
        for (int64_t q = 0; q < numel(shape(t)); ++q) {
          std::vector<int64_t> idx = unravel(q, shape(t));
          idx[ax] += offset;
          Y[ravel_broadcast(idx, ys)] = X[q];
        }
        offset += shape(t)[ax];
      }
      val(op.out[0]) = Y;
      return;
    }
    case OpKind::Split:
    case OpKind::Slice: {
      const Shape& xs = shape(op.in[0]);
      const std::vector<double> X = val(op.in[0]);
      const bool split = op.kind == OpKind::Split;
      const size_t ax = axis_of(split ? op.attr<SplitAttrs>().axis : op.attr<SliceAttrs>().axis, xs.size());
      int64_t offset = split ? 0 : op.attr<SliceAttrs>().begin;
      for (size_t k = 0; k < op.out.size(); ++k) {
        const Shape& ys = shape(op.out[k]);
        std::vector<double> Y(numel(ys));
        for (int64_t q = 0; q < numel(ys); ++q) {
          std::vector<int64_t> idx = unravel(q, ys);
          idx[ax] += offset;
          Y[q] = X[ravel_broadcast(idx, xs)];
        }
        val(op.out[k]) = Y;
        offset += ys[ax];
      }
      return;
    }
    case OpKind::Sum:
    case OpKind::Mean: {
      const Shape& xs = shape(op.in[0]);
      const ReduceAttrs& a = op.attr<ReduceAttrs>();
      const size_t ax = axis_of(a.axis, xs.size());
      Shape keep = xs;
      keep[ax] = 1;
      const std::vector<double>& X = val(op.in[0]);
      std::vector<double> Y(numel(keep), 0.0);
      for (int64_t q = 0; q < numel(xs); ++q) Y[ravel_broadcast(unravel(q, xs), keep)] += X[q];
      if (op.kind == OpKind::Mean)
        for (double& y : Y) y /= static_cast<double>(xs[ax]);
      val(op.out[0]) = Y;
      return;
    }
    default: ADD_FAILURE() << "eval_tensor_op_double: not a tensor op: " << op_kind_name(op.kind);
  }
}

// ---- The cases ----

// N(0, 1) values moved away from zero (|x| >= 0.5, sign kept): divisors.
inline HostArray away_from_zero(HostArray a) {
  for (int64_t k = 0; k < a.numel(); ++k) {
    float& x = a.data<float>()[k];
    x = x < 0 ? x - 0.5f : x + 0.5f;
  }
  return a;
}

// Same shapes, a batch-broadcast operand, a feature-broadcast one, both broadcast on different
// axes (an outer product), a [1, 1] scalar, a long reduction (chunked on the GPU), one operand
// not differentiated, A op A (its gradient accumulates), and a row sum onto [40, 1].
inline std::vector<OpCase> binary_cases(OpKind kind, uint64_t seed0) {
  std::vector<OpCase> v;
  struct C { Shape a, b; bool b_input, same; };
  std::vector<C> cs = {{{7, 5}, {7, 5}, false, false},    {{1, 5}, {7, 5}, false, false},
                       {{6, 4}, {6, 1}, false, false},    {{3, 1, 5}, {3, 4, 1}, false, false},
                       {{1, 1}, {5, 3}, false, false},    {{600, 3}, {1, 3}, false, false},
                       {{2, 3, 4}, {1, 3, 1}, true, false}, {{4, 3}, {4, 3}, false, true},
                       {{40, 64}, {40, 1}, false, false}};  // the last: dB a row sum (a warp per row on the GPU)
  if (kind == OpKind::Add) cs.erase(cs.begin());  // same shapes: add_cases
  int seed = 0;
  for (const C& c : cs) {
    CaseBuilder b(kind,
                  c.same ? cat("A op A ", shape_str(c.a)) : cat(shape_str(c.a), " and ", shape_str(c.b), c.b_input ? " (B an input)" : ""),
                  seed0 + seed++);
    HostArray av = random_f32(c.a, mix_seed(b.seed(), "A"));
    if (kind == OpKind::Div) av = away_from_zero(std::move(av));
    const TensorId A = b.input("A", std::move(av), Role::Parameter);
    TensorId B = A;
    if (!c.same) {
      HostArray bv = random_f32(c.b, mix_seed(b.seed(), "B"));
      if (kind == OpKind::Div) bv = away_from_zero(std::move(bv));
      B = b.input("B", std::move(bv), c.b_input ? Role::Input : Role::Parameter);
    }
    Shape ys = c.a;
    for (size_t k = 0; k < ys.size(); ++k) ys[k] = std::max(c.a[k], c.b[k]);
    const TensorId Y = b.output("Y", ys);
    b.op({A, B}, {Y});
    v.push_back(b.gradient(Y));
  }
  return v;
}
inline std::vector<OpCase> add_broadcast_cases() { return binary_cases(OpKind::Add, 2100); }
inline std::vector<OpCase> sub_cases() { return binary_cases(OpKind::Sub, 2120); }
inline std::vector<OpCase> mul_cases() { return binary_cases(OpKind::Mul, 2140); }
inline std::vector<OpCase> div_cases() { return binary_cases(OpKind::Div, 2160); }

inline std::vector<OpCase> scale_shift_cases() {
  std::vector<OpCase> v;
  struct C { Shape s; double a, b; };
  int seed = 0;
  for (const C& c : {C{{7, 5}, 2.5, -0.75}, C{{1, 1}, -1.0, 3.0}, C{{3, 4, 5}, 0.5, 0.0}, C{{33, 17}, 0.0, 1.0}}) {
    CaseBuilder b(OpKind::ScaleShift, cat(shape_str(c.s), " a ", c.a, " b ", c.b), 2200 + seed++);
    const TensorId X = b.random("X", c.s), Y = b.output("Y", c.s);
    b.op({X}, {Y}, ScaleShiftAttrs{c.a, c.b});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> activation_cases() {
  std::vector<OpCase> v;
  struct C { Activation act; Shape s; double slope, alpha; };
  int seed = 0;
  for (const C& c : {C{Activation::None, {3, 4}, 0.01, 1.0}, C{Activation::ReLU, {7, 5}, 0.01, 1.0},
                     C{Activation::GELU, {2, 3, 5}, 0.01, 1.0}, C{Activation::Tanh, {1, 1}, 0.01, 1.0},
                     C{Activation::Sigmoid, {5, 3}, 0.01, 1.0}, C{Activation::Sin, {4, 1}, 0.01, 1.0},
                     C{Activation::Softplus, {6, 2}, 0.01, 1.0}, C{Activation::SiLU, {7, 5}, 0.01, 1.0},
                     C{Activation::SiLU, {33, 17}, 0.01, 1.0}, C{Activation::LeakyReLU, {7, 5}, 0.01, 1.0},
                     C{Activation::LeakyReLU, {2, 9, 1}, 0.2, 1.0}, C{Activation::ELU, {7, 5}, 0.01, 1.0},
                     C{Activation::ELU, {1, 6}, 0.01, 0.5}, C{Activation::Exp, {5, 4}, 0.01, 1.0},
                     C{Activation::Square, {3, 7}, 0.01, 1.0}, C{Activation::Square, {1, 1, 1}, 0.01, 1.0},
                     C{Activation::GELUErf, {6, 5}, 0.01, 1.0}}) {
    ActivationAttrs a;
    a.act = c.act, a.negative_slope = c.slope, a.alpha = c.alpha;
    CaseBuilder b(OpKind::Activation,
                  cat(activation_name(c.act), " ", shape_str(c.s),
                      c.act == Activation::LeakyReLU ? cat(" slope ", c.slope) : "",
                      c.act == Activation::ELU ? cat(" alpha ", c.alpha) : ""),
                  2300 + seed++);
    const TensorId X = b.random("X", c.s), Y = b.output("Y", c.s);
    b.op({X}, {Y}, a);
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> dropout_cases() {
  std::vector<OpCase> v;
  struct C { Shape s; double p; int32_t step; uint64_t key; };
  int seed = 0;
  for (const C& c : {C{{7, 5}, 0.3, 3, 11}, C{{4, 2, 6}, 0.5, 0, 12}, C{{33, 17}, 0.1, 1000000, 13},
                     C{{3, 4}, 0.0, 2, 14}, C{{1, 1}, 0.9, 5, 15}}) {
    CaseBuilder b(OpKind::Dropout, cat(shape_str(c.s), " p ", c.p, " step ", c.step), 2750 + seed++);
    const TensorId X = b.random("X", c.s), Y = b.output("Y", c.s);
    const TensorId step = b.i32("step", {1}, {c.step});
    b.op({X, step}, {Y}, DropoutAttrs{c.p, c.key});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> matmul_cases() {
  std::vector<OpCase> v;
  struct C { Shape lead; int64_t M, K, N; bool ta, tb; };
  int seed = 0;
  for (const C& c : {C{{3}, 4, 5, 2, false, false}, C{{2}, 3, 4, 5, true, false}, C{{2}, 1, 6, 3, false, true},
                     C{{4}, 5, 3, 4, true, true}, C{{2, 3}, 2, 7, 3, false, false}, C{{1}, 17, 9, 33, false, true}}) {
    CaseBuilder b(OpKind::MatMul,
                  cat(shape_str(c.lead), " ", c.M, "x", c.K, " @ ", c.K, "x", c.N, c.ta ? " A^T" : "", c.tb ? " B^T" : ""),
                  2780 + seed++);
    auto with = [&](int64_t r, int64_t q) {
      Shape s = c.lead;
      s.push_back(r);
      s.push_back(q);
      return s;
    };
    const TensorId A = b.random("A", c.ta ? with(c.K, c.M) : with(c.M, c.K));
    const TensorId B = b.random("B", c.tb ? with(c.N, c.K) : with(c.K, c.N));
    const TensorId Y = b.output("Y", with(c.M, c.N));
    b.op({A, B}, {Y}, MatMulAttrs{c.ta, c.tb});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> transpose_cases() {
  std::vector<OpCase> v;
  struct C { Shape s; int32_t a, b; };
  int seed = 0;
  for (const C& c : {C{{3, 4, 5}, -2, -1}, C{{2, 3, 4, 5}, 1, 3}, C{{2, 6, 1}, 1, 2}, C{{4, 3, 2, 5}, -3, -2}}) {
    CaseBuilder b(OpKind::Transpose, cat(shape_str(c.s), " axes ", c.a, ", ", c.b), 2800 + seed++);
    Shape ys = c.s;
    const int r = static_cast<int>(c.s.size());
    std::swap(ys[c.a < 0 ? c.a + r : c.a], ys[c.b < 0 ? c.b + r : c.b]);
    const TensorId X = b.random("X", c.s), Y = b.output("Y", ys);
    b.op({X}, {Y}, TransposeAttrs{c.a, c.b});
    v.push_back(b.gradient(Y));
  }
  return v;
}

// Positive values in [0.5, 2): running variances.
inline HostArray positive_f32(Shape s, uint64_t seed) {
  HostArray a(DType::F32, std::move(s));
  Rng r(seed);
  for (int64_t k = 0; k < a.numel(); ++k) a.data<float>()[k] = static_cast<float>(r.uniform(0.5, 2.0));
  return a;
}

// Training (batch statistics; the running ones updated in place, compared with CUDA as outputs)
// and inference (running statistics). More than 32 channels spans CUDA blocks; [2, C] is the
// fewest rows training takes; NHWC images reduce over three axes.
inline std::vector<OpCase> batch_norm_cases() {
  std::vector<OpCase> v;
  struct C { Shape X; double eps, momentum; bool training; };
  int seed = 0;
  for (const C& c : {C{{2, 3}, 1e-5, 0.1, true}, C{{7, 5}, 1e-5, 0.1, true}, C{{4, 3, 3, 6}, 1e-5, 0.5, true},
                     C{{33, 2}, 1e-3, 1.0, true}, C{{5, 1}, 1e-5, 0.1, true}, C{{9, 40}, 1e-5, 0.1, true},
                     C{{3, 5, 7, 3}, 1e-5, 0.1, true}, C{{7, 5}, 1e-5, 0.1, false}, C{{1, 3}, 1e-5, 0.1, false},
                     C{{2, 4, 4, 37}, 1e-3, 0.1, false}}) {
    const OpKind kind = c.training ? OpKind::BatchNorm : OpKind::BatchNormInference;
    CaseBuilder b(kind, cat(shape_str(c.X), " eps ", c.eps, c.training ? cat(" momentum ", c.momentum) : ""),
                  2800 + seed++);
    const int64_t C = c.X.back();
    // Inputs away from zero mean and unit variance, so the statistics matter.
    const TensorId X = b.input("X", random_f32(c.X, mix_seed(b.seed(), "X"), 1.5), Role::Parameter);
    const TensorId g = b.random("gamma", {C}), beta = b.random("beta", {C});
    const TensorId rm = b.input("running_mean", random_f32({C}, mix_seed(b.seed(), "rm")), Role::Constant);
    const TensorId rv = b.input("running_var", positive_f32({C}, mix_seed(b.seed(), "rv")), Role::Constant);
    const TensorId Y = b.output("Y", c.X);
    if (c.training) {
      b.op({X, g, beta, rm, rv}, {Y, b.output("mean", {C}), b.output("rstd", {C}), rm, rv},
           BatchNormAttrs{c.eps, c.momentum});
      v.push_back(b.gradient(Y));
    } else {
      b.op({X, g, beta, rm, rv}, {Y}, BatchNormAttrs{c.eps, c.momentum});
      v.push_back(b.done());
    }
  }
  return v;
}

inline std::vector<OpCase> concat_cases() {
  std::vector<OpCase> v;
  struct C { std::vector<Shape> in; int32_t axis; int input_role; bool twice; };  // input_role: that input is an Input
  int seed = 0;
  const std::vector<Shape> nine(9, Shape{2, 1});
  for (const C& c : {C{{{3, 2}, {3, 5}}, 1, -1, false}, C{{{2, 1, 4}, {2, 3, 4}, {2, 2, 4}}, -2, -1, false},
                     C{{{2, 3, 1}, {2, 3, 2}}, -1, 0, false}, C{{{1, 4}}, 1, -1, false},
                     C{{{4, 3}}, 1, -1, true}, C{nine, 1, 4, false}}) {
    std::vector<Shape> in = c.in;
    if (c.twice) in.push_back(in[0]);
    const size_t rank = in[0].size(), ax = static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int32_t>(rank) : c.axis);
    Shape ys = in[0];
    ys[ax] = 0;
    for (const Shape& s : in) ys[ax] += s[ax];
    std::string what;
    for (const Shape& s : in) what += cat(what.empty() ? "" : " ", shape_str(s));
    CaseBuilder b(OpKind::Concat, cat(what, " axis ", c.axis, c.input_role >= 0 ? cat(" (input ", c.input_role, " an input)") : "",
                                      c.twice ? " (X twice)" : ""),
                  2400 + seed++);
    std::vector<TensorId> X;
    for (size_t k = 0; k < c.in.size(); ++k)
      X.push_back(b.random(cat("X", k), c.in[k], static_cast<int>(k) == c.input_role ? Role::Input : Role::Parameter));
    if (c.twice) X.push_back(X[0]);
    const TensorId Y = b.output("Y", ys);
    b.op(X, {Y}, ConcatAttrs{c.axis});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> split_cases() {
  std::vector<OpCase> v;
  struct C { Shape x; int32_t axis; std::vector<int64_t> sizes; size_t seeded; };
  int seed = 0;
  for (const C& c : {C{{4, 7}, 1, {2, 5}, 0}, C{{3, 6, 2}, -2, {1, 2, 3}, 1}, C{{2, 9}, -1, std::vector<int64_t>(9, 1), 4},
                     C{{5, 3}, 1, {3}, 0}}) {
    std::string sizes;
    for (int64_t n : c.sizes) sizes += cat(sizes.empty() ? "" : ",", n);
    CaseBuilder b(OpKind::Split, cat(shape_str(c.x), " axis ", c.axis, " sizes [", sizes, "], gradient of piece ", c.seeded),
                  2500 + seed++);
    const size_t ax = static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int32_t>(c.x.size()) : c.axis);
    const TensorId X = b.random("X", c.x);
    std::vector<TensorId> Y;
    for (size_t k = 0; k < c.sizes.size(); ++k) {
      Shape s = c.x;
      s[ax] = c.sizes[k];
      Y.push_back(b.output(cat("Y", k), s));
    }
    SplitAttrs a;
    a.axis = c.axis, a.sizes = c.sizes;
    b.op({X}, Y, a);
    v.push_back(b.gradient(Y[c.seeded]));
  }
  return v;
}

inline std::vector<OpCase> slice_cases() {
  std::vector<OpCase> v;
  struct C { Shape x; int32_t axis; int64_t begin, end; };
  int seed = 0;
  for (const C& c : {C{{5, 7}, 1, 2, 5}, C{{3, 4, 6}, -1, 0, 1}, C{{2, 8, 3}, 1, 7, 8}, C{{1, 4}, 1, 0, 4},
                     C{{3, 5, 2}, -2, 1, 4}}) {
    CaseBuilder b(OpKind::Slice, cat(shape_str(c.x), " axis ", c.axis, " [", c.begin, ", ", c.end, ")"), 2600 + seed++);
    const size_t ax = static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int32_t>(c.x.size()) : c.axis);
    Shape ys = c.x;
    ys[ax] = c.end - c.begin;
    const TensorId X = b.random("X", c.x), Y = b.output("Y", ys);
    SliceAttrs a;
    a.axis = c.axis, a.begin = c.begin, a.end = c.end;
    b.op({X}, {Y}, a);
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> reduce_cases(OpKind kind, uint64_t seed0) {
  std::vector<OpCase> v;
  struct C { Shape x; int32_t axis; bool keepdims; };
  int seed = 0;
  for (const C& c : {C{{7, 5}, 1, false}, C{{7, 5}, -1, true}, C{{2, 3, 4}, 1, true}, C{{3, 1, 2}, 1, false},
                     C{{3, 700}, 1, false}, C{{2, 520, 2}, -2, true}, C{{1, 3}, 1, true}, C{{5, 100}, -1, false},
                     C{{2, 3, 40}, 2, true}}) {
    CaseBuilder b(kind, cat(shape_str(c.x), " axis ", c.axis, c.keepdims ? " keepdims" : ""), seed0 + seed++);
    const size_t ax = static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int32_t>(c.x.size()) : c.axis);
    Shape ys = c.x;
    if (c.keepdims) ys[ax] = 1;
    else ys.erase(ys.begin() + static_cast<std::ptrdiff_t>(ax));
    const TensorId X = b.random("X", c.x), Y = b.output("Y", ys);
    ReduceAttrs a;
    a.axis = c.axis, a.keepdims = c.keepdims;
    b.op({X}, {Y}, a);
    v.push_back(b.gradient(Y));
  }
  return v;
}
inline std::vector<OpCase> sum_cases() { return reduce_cases(OpKind::Sum, 2700); }
inline std::vector<OpCase> mean_cases() { return reduce_cases(OpKind::Mean, 2720); }

inline std::vector<OpCase> tensor_op_cases() {
  std::vector<OpCase> all;
  for (auto* make : {add_broadcast_cases, sub_cases, mul_cases, div_cases, scale_shift_cases, activation_cases,
                     concat_cases, split_cases, slice_cases, sum_cases, mean_cases, dropout_cases, matmul_cases,
                     transpose_cases, batch_norm_cases})
    for (OpCase& c : make()) all.push_back(std::move(c));
  return all;
}

}  // namespace sg::test
