// The cases of the op-table test (test_op_table.cpp): for each op kind, programs of one op of that
// kind (with its backward ops where it has a gradient rule) on random inputs of several shapes
// and attributes, and the float64 references the finite differences evaluate.
//
// A new kind: write its <kind>_cases() (a CaseBuilder per case: its input tensors with values,
// then the op, then done(), gradient(out) for a kind with a gradient rule, or loss(...) for one
// that writes its own gradients), list it in all_op_cases(), and give a differentiable kind its
// float64 forward in eval_op_double (test_util.h) or reference_output below. The tensor ops'
// cases are in tensor_op_cases.h, the optimizer's in optim_op_cases.h, the jets' and
// physics-informed kinds' in pinn_op_cases.h.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "custom_test_ops.h"
#include "jet_reference.h"
#include "ops/custom_loss_ops.h"
#include "ops/custom_ops.h"
#include "optim/update_rules.h"
#include "pinn/expression.h"

namespace sg::test {

struct OpCase {
  std::string name;  // "dense gelu [7,17] -> 5"
  OpKind kind;       // the kind under test: the program's first op
  Program p;
  std::map<std::string, HostArray> inputs;  // every tensor that no op writes first, and the in-place ones
  // Gradient cases: the op's differentiable inputs are parameters; `out` is seeded with the
  // cotangent `dout` (an input), so the parameters' gradients are those of sum(out * dout).
  TensorId out = kNone, dout = kNone;
  std::vector<ParamGrad> grads;
  // Loss cases: the loss is the sum of these tensors, and each (input, output) pair is an input
  // with the output the op writes as its gradient.
  std::vector<TensorId> losses;
  std::vector<std::pair<TensorId, TensorId>> loss_grads;
};

// Builds one case: tensors with their values, then the op.
class CaseBuilder {
 public:
  CaseBuilder(OpKind kind, const std::string& what, uint64_t seed) : seed_(seed) {
    c_.kind = kind;
    c_.name = cat(op_kind_name(kind), " ", what);
  }
  TensorId input(const std::string& name, HostArray v, Role role = Role::Input) {
    const TensorId t = c_.p.add_tensor({name, v.shape(), v.dtype(), role});
    c_.inputs.emplace(name, std::move(v));
    return t;
  }
  // N(0, scale^2) values; differentiable inputs default to parameters.
  TensorId random(const std::string& name, Shape s, Role role = Role::Parameter, double scale = 1.0) {
    return input(name, random_f32(std::move(s), mix_seed(seed_, name), scale), role);
  }
  TensorId i32(const std::string& name, Shape s, std::vector<int32_t> v, Role role = Role::Input) {
    return input(name, HostArray::i32(std::move(s), std::move(v)), role);
  }
  TensorId output(const std::string& name, Shape s, DType dt = DType::F32) {
    return c_.p.add_tensor({name, std::move(s), dt, Role::Activation});
  }
  void op(std::vector<TensorId> in, std::vector<TensorId> out, OpAttrs attrs = {}, std::vector<uint8_t> acc = {}) {
    Op o;
    o.kind = c_.kind;
    o.name = cat("op", c_.p.ops().size());
    o.in = std::move(in);
    o.out = std::move(out);
    o.attrs = std::move(attrs);
    o.accumulate = std::move(acc);
    c_.p.add_op(std::move(o));
  }
  uint64_t seed() const { return seed_; }
  // The case as built (kinds without a gradient rule).
  OpCase done() { return std::move(c_); }
  // Seeds `out` with a random cotangent and appends the backward ops.
  OpCase gradient(TensorId out) {
    c_.out = out;
    c_.dout = random("dY", c_.p.tensor(out).shape, Role::Input);
    c_.grads = append_backward(c_.p, {{out, c_.dout}}, 1);
    return done();
  }
  OpCase loss(std::vector<TensorId> losses, std::vector<std::pair<TensorId, TensorId>> grads) {
    c_.losses = std::move(losses);
    c_.loss_grads = std::move(grads);
    return done();
  }

 private:
  OpCase c_;
  uint64_t seed_;
};

inline HostArray uniform_ints(Shape s, int64_t below, uint64_t seed, DType dt = DType::I32) {
  HostArray a(dt, std::move(s));
  Rng r(seed);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const auto v = static_cast<int32_t>(r.below(static_cast<uint64_t>(below)));
    if (dt == DType::I32) a.data<int32_t>()[i] = v;
    else a.data<float>()[i] = static_cast<float>(v);
  }
  return a;
}

// ---- Jets and physics-informed losses and points (pinn_op_cases.h, included at the end) ----

inline std::vector<OpCase> jet_input_cases();
inline std::vector<OpCase> jet_elementwise_cases(OpKind kind);
inline std::vector<OpCase> expression_loss_cases();
inline double expression_loss_double(const Program& p, const Op& op, const Values& v);
inline std::vector<OpCase> sample_points_cases();
inline std::vector<OpCase> observed_points_cases();

// ---- Data ----

inline std::vector<OpCase> gather_batch_cases() {
  std::vector<OpCase> v;
  struct C { const char* what; int64_t N, D, T, B; bool i32_labels, shuffle, partial; int32_t step, shard, shards; };
  int seed = 0;
  for (const C& c : {C{"shuffled, padded last batch", 10, 3, 1, 4, true, true, true, 2, 0, 1},
                     C{"in order, f32 targets [N, 2], second epoch", 9, 1, 2, 3, false, false, false, 5, 0, 1},
                     C{"the whole data set as one batch", 7, 5, 1, 7, true, true, false, 0, 0, 1},
                     C{"shard 1 of 2, second epoch", 13, 2, 1, 3, true, true, false, 3, 1, 2}}) {
    CaseBuilder b(OpKind::GatherBatch, c.what, 500 + seed++);
    const TensorId dX = b.random("data.X", {c.N, c.D}, Role::Input);
    const Shape ys = c.T == 1 ? Shape{c.N} : Shape{c.N, c.T}, bys = c.T == 1 ? Shape{c.B} : Shape{c.B, c.T};
    const TensorId dY = c.i32_labels ? b.input("data.y", uniform_ints(ys, 5, b.seed() + 1)) : b.random("data.y", ys, Role::Input);
    GatherAttrs a;
    a.seed = 3 + seed, a.shuffle = c.shuffle, a.partial_last = c.partial, a.shard = c.shard, a.shards = c.shards;
    b.op({b.i32("step", {1}, {c.step}, Role::StepScalar), dX, dY},
         {b.output("valid", {1}, DType::I32), b.output("X", {c.B, c.D}),
          b.output("y", bys, c.i32_labels ? DType::I32 : DType::F32)},
         a);
    v.push_back(b.done());
  }
  // A graph model's arrays by name: ten of them (two launches on CUDA), ranks 1 to 3, i32 among them.
  CaseBuilder b(OpKind::GatherBatch, "ten arrays of several shapes, padded last batch", 520);
  std::vector<TensorId> in{b.i32("step", {1}, {3}, Role::StepScalar)}, out{b.output("valid", {1}, DType::I32)};
  for (int k = 0; k < 10; ++k) {
    const Shape row = k % 3 == 0 ? Shape{} : k % 3 == 1 ? Shape{2} : Shape{2, 3};
    Shape ds{11}, bs{4};
    ds.insert(ds.end(), row.begin(), row.end());
    bs.insert(bs.end(), row.begin(), row.end());
    const std::string name = "data." + std::to_string(k);
    in.push_back(k == 4 ? b.input(name, uniform_ints(ds, 7, b.seed() + 4)) : b.random(name, ds, Role::Input));
    out.push_back(b.output("batch." + std::to_string(k), bs, k == 4 ? DType::I32 : DType::F32));
  }
  b.op(in, out, GatherAttrs{9, true, true, 0, 1});
  v.push_back(b.done());
  return v;
}

// ---- Dense, Add, AbsMax ----

inline std::vector<OpCase> dense_cases() {
  std::vector<OpCase> v;
  struct C { Shape X; int64_t O; Activation act; bool bias, dX; int64_t bias_rows; };
  int seed = 0;
  for (const C& c : {C{{1, 5}, 3, Activation::None, true, true, 0}, C{{7, 17}, 5, Activation::GELU, true, true, 0},
                     C{{33, 1}, 4, Activation::ReLU, false, false, 0}, C{{7, 5}, 1, Activation::Tanh, true, true, 0},
                     C{{5, 3}, 6, Activation::Sigmoid, true, true, 0}, C{{2, 3, 5}, 4, Activation::Softplus, true, true, 0},
                     C{{9, 4}, 3, Activation::Sin, true, true, 3}, C{{6, 2}, 17, Activation::Tanh, false, true, 0},
                     C{{7, 5}, 4, Activation::SiLU, true, true, 0}, C{{5, 3}, 6, Activation::LeakyReLU, true, true, 0},
                     C{{3, 6}, 5, Activation::ELU, true, true, 0}, C{{4, 5}, 3, Activation::Exp, true, true, 0},
                     C{{2, 3, 4}, 2, Activation::Square, false, true, 0}, C{{9, 7}, 5, Activation::GELUErf, true, true, 0}}) {
    CaseBuilder b(OpKind::Dense, cat(activation_name(c.act), " ", shape_str(c.X), " -> ", c.O, c.bias ? "" : " no bias",
                                     c.dX ? "" : " (X an input)", c.bias_rows ? cat(" bias on ", c.bias_rows, " rows") : ""),
                  600 + seed++);
    const TensorId X = b.random("X", c.X, c.dX ? Role::Parameter : Role::Input);
    const TensorId W = b.random("W", {c.O, c.X.back()}, Role::Parameter, 0.6);
    const TensorId bias = c.bias ? b.random("b", {c.O}) : kNone;
    Shape ys = c.X;
    ys.back() = c.O;
    const TensorId Y = b.output("Y", ys);
    // Activations whose derivative reads the pre-activation keep it (as nn's Dense does).
    const TensorId Z = activation_needs_preact(c.act) ? b.output("Z", ys) : kNone;
    b.op({X, W, bias}, {Y, Z}, DenseAttrs{c.act, c.bias_rows});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> add_cases() {
  std::vector<OpCase> v;
  int seed = 0;
  for (const Shape& s : {Shape{1, 1}, Shape{7, 5}, Shape{33, 17}, Shape{2, 3, 5}}) {
    const bool b_input = seed == 2;  // one side not differentiated
    CaseBuilder b(OpKind::Add, cat(shape_str(s), b_input ? " (B an input)" : ""), 700 + seed++);
    const TensorId A = b.random("A", s), B = b.random("B", s, b_input ? Role::Input : Role::Parameter);
    const TensorId Y = b.output("Y", s);
    b.op({A, B}, {Y});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> abs_max_cases() {
  std::vector<OpCase> v;
  int seed = 0;
  for (const Shape& s : {Shape{1}, Shape{7, 5}, Shape{33, 17}, Shape{2, 3, 4, 5}, Shape{70, 77}}) {
    CaseBuilder b(OpKind::AbsMax, shape_str(s), 800 + seed++);
    b.op({b.random("X", s, Role::Input, 3.0)}, {b.output("amax", {1})});
    v.push_back(b.done());
  }
  return v;
}

// ---- Losses ----

inline std::vector<OpCase> softmax_cross_entropy_cases() {
  std::vector<OpCase> v;
  struct C { Shape z; Reduction r; int32_t valid; bool ignore; };
  int seed = 0;
  for (const C& c : {C{{1, 2}, Reduction::Mean, -1, false}, C{{7, 5}, Reduction::Sum, 4, false},
                     C{{33, 17}, Reduction::Mean, 33, false}, C{{3, 4, 6}, Reduction::Mean, 2, true},
                     C{{5, 1}, Reduction::Mean, -1, false}, C{{2, 7, 3}, Reduction::Sum, -1, true}}) {
    CaseBuilder b(OpKind::SoftmaxCrossEntropy,
                  cat(shape_str(c.z), " ", reduction_name(c.r), c.valid >= 0 ? cat(", ", c.valid, " valid rows") : "",
                      c.ignore ? ", some labels ignored" : ""),
                  900 + seed++);
    const TensorId z = b.random("logits", c.z, Role::Input, 2.0);
    const Shape ls(c.z.begin(), c.z.end() - 1);
    HostArray y = uniform_ints(ls, c.z.back(), b.seed() + 1);
    if (c.ignore)
      for (int64_t i = 1; i < y.numel(); i += 3) y.data<int32_t>()[i] = -1;
    const TensorId labels = b.input("labels", std::move(y));
    const TensorId valid = c.valid >= 0 ? b.i32("valid", {1}, {c.valid}) : kNone;
    const TensorId loss = b.output("loss", {1}), dz = b.output("dlogits", c.z);
    b.op({z, labels, valid}, {loss, dz}, LossAttrs{c.r, c.ignore});
    v.push_back(b.loss({loss}, {{z, dz}}));
  }
  // Label smoothing and class weights (torch's cross_entropy), alone and together, with ignored
  // labels, padded rows and both reductions; a zero weight, and > 32 classes (a warp's lanes
  // loop). Past kCountInBlockRows label rows (the GPU's weight-sum kernel): test_cuda_sequence.cpp.
  struct S { Shape z; Reduction r; int32_t valid; bool ignore; double eps; bool weights; };
  for (const S& c : {S{{6, 5}, Reduction::Mean, -1, false, 0.1, false}, S{{7, 4}, Reduction::Sum, 5, false, 0.25, false},
                     S{{3, 4, 6}, Reduction::Mean, 2, true, 0.2, false}, S{{8, 5}, Reduction::Mean, 6, false, 0.0, true},
                     S{{2, 7, 3}, Reduction::Sum, -1, true, 0.0, true}, S{{3, 4, 6}, Reduction::Mean, 2, true, 0.3, true},
                     S{{9, 37}, Reduction::Mean, 7, false, 0.15, true}, S{{5, 5}, Reduction::Sum, 4, false, 0.1, true}}) {
    LossAttrs a{c.r, c.ignore};
    a.label_smoothing = c.eps;
    if (c.weights)
      for (int64_t k = 0; k < c.z.back(); ++k) a.class_weights.push_back(k == 1 ? 0.0f : 0.25f + 0.5f * static_cast<float>(k % 4));
    CaseBuilder b(OpKind::SoftmaxCrossEntropy,
                  cat(shape_str(c.z), " ", reduction_name(c.r), c.valid >= 0 ? cat(", ", c.valid, " valid rows") : "",
                      c.ignore ? ", some labels ignored" : "", c.eps > 0 ? cat(", label smoothing ", c.eps) : "",
                      c.weights ? ", class weights" : ""),
                  950 + seed++);
    const TensorId z = b.random("logits", c.z, Role::Input, 2.0);
    const Shape ls(c.z.begin(), c.z.end() - 1);
    HostArray y = uniform_ints(ls, c.z.back(), b.seed() + 1);
    if (c.ignore)
      for (int64_t i = 1; i < y.numel(); i += 3) y.data<int32_t>()[i] = -1;
    const TensorId labels = b.input("labels", std::move(y));
    const TensorId valid = c.valid >= 0 ? b.i32("valid", {1}, {c.valid}) : kNone;
    const TensorId loss = b.output("loss", {1}), dz = b.output("dlogits", c.z);
    b.op({z, labels, valid}, {loss, dz}, std::move(a));
    v.push_back(b.loss({loss}, {{z, dz}}));
  }
  return v;
}

inline std::vector<OpCase> mean_squared_error_cases() {
  std::vector<OpCase> v;
  struct C { Shape s; Reduction r; int32_t valid; };
  int seed = 0;
  for (const C& c : {C{{1, 1}, Reduction::Mean, -1}, C{{7, 5}, Reduction::Sum, 3}, C{{33, 17}, Reduction::Mean, -1},
                     C{{4, 2, 3}, Reduction::Mean, 1}}) {
    CaseBuilder b(OpKind::MeanSquaredError,
                  cat(shape_str(c.s), " ", reduction_name(c.r), c.valid >= 0 ? cat(", ", c.valid, " valid rows") : ""),
                  1000 + seed++);
    const TensorId pred = b.random("pred", c.s, Role::Input), target = b.random("target", c.s, Role::Input);
    const TensorId valid = c.valid >= 0 ? b.i32("valid", {1}, {c.valid}) : kNone;
    const TensorId loss = b.output("loss", {1}), dp = b.output("dpred", c.s);
    b.op({pred, target, valid}, {loss, dp}, LossAttrs{c.r, false});
    v.push_back(b.loss({loss}, {{pred, dp}}));
  }
  return v;
}

// L1 and Huber on targets near the predictions (both sides of Huber's delta), BCE on logits
// with targets in [0, 1]; padded rows and both reductions.
inline std::vector<OpCase> pointwise_loss_cases() {
  std::vector<OpCase> v;
  struct C { PointwiseForm form; double delta; Shape s; Reduction r; int32_t valid; };
  int seed = 0;
  for (const C& c : {C{PointwiseForm::L1, 1.0, {7, 5}, Reduction::Mean, -1}, C{PointwiseForm::L1, 1.0, {4, 3}, Reduction::Sum, 2},
                     C{PointwiseForm::Huber, 1.0, {9, 4}, Reduction::Mean, -1},
                     C{PointwiseForm::Huber, 0.3, {5, 2, 3}, Reduction::Sum, 3},
                     C{PointwiseForm::BceWithLogits, 1.0, {6, 5}, Reduction::Mean, 4},
                     C{PointwiseForm::BceWithLogits, 1.0, {33, 1}, Reduction::Sum, -1}}) {
    LossAttrs a{c.r, false};
    a.form = c.form, a.delta = c.delta;
    CaseBuilder b(OpKind::PointwiseLoss,
                  cat(pointwise_form_name(c.form), " ", shape_str(c.s), " ", reduction_name(c.r),
                      c.valid >= 0 ? cat(", ", c.valid, " valid rows") : ""),
                  1100 + seed++);
    const TensorId pred = b.random("pred", c.s, Role::Input, c.form == PointwiseForm::BceWithLogits ? 3.0 : 1.0);
    HostArray t = random_f32(c.s, b.seed() + 7);
    for (int64_t i = 0; i < t.numel(); ++i) {
      float& x = t.data<float>()[i];
      if (c.form == PointwiseForm::BceWithLogits) x = 1.0f / (1.0f + std::exp(-x));  // in (0, 1)
    }
    const TensorId target = b.input("target", std::move(t));
    const TensorId valid = c.valid >= 0 ? b.i32("valid", {1}, {c.valid}) : kNone;
    const TensorId loss = b.output("loss", {1}), dp = b.output("dpred", c.s);
    b.op({pred, target, valid}, {loss, dp}, a);
    v.push_back(b.loss({loss}, {{pred, dp}}));
  }
  return v;
}

// ---- Optimizer (optim_op_cases.h, included at the end) ----

inline std::vector<OpCase> schedule_cases();
inline std::vector<OpCase> sgd_cases();
inline std::vector<OpCase> adam_cases();
inline std::vector<OpCase> custom_update_cases();
inline std::vector<OpCase> clip_grad_norm_cases();

// ---- Images (NHWC, filters KRSC) ----

inline std::vector<OpCase> conv2d_cases() {
  std::vector<OpCase> v;
  struct C { int64_t N, H, W, C, K, R, S; ConvAttrs a; bool bias; };
  auto geo = [](int ph, int pw, int sh, int sw, int dh, int dw, Activation act) {
    ConvAttrs a;
    a.pad_h = ph, a.pad_w = pw, a.stride_h = sh, a.stride_w = sw, a.dil_h = dh, a.dil_w = dw, a.act = act;
    return a;
  };
  int seed = 0;
  for (const C& c : {C{1, 5, 5, 1, 2, 3, 3, geo(1, 1, 1, 1, 1, 1, Activation::ReLU), true},
                     C{2, 7, 6, 3, 4, 3, 2, geo(1, 0, 2, 1, 1, 1, Activation::None), false},
                     C{2, 9, 9, 2, 3, 3, 3, geo(2, 2, 1, 1, 2, 2, Activation::ReLU), true},
                     C{3, 4, 5, 2, 1, 1, 1, geo(0, 0, 1, 1, 1, 1, Activation::None), true}}) {
    const ConvAttrs& a = c.a;
    CaseBuilder b(OpKind::Conv2d,
                  cat("[", c.N, ",", c.H, ",", c.W, ",", c.C, "] * ", c.K, "x", c.R, "x", c.S, " pad ", a.pad_h, "x", a.pad_w,
                      " stride ", a.stride_h, "x", a.stride_w, " dilation ", a.dil_h, "x", a.dil_w, " ",
                      activation_name(a.act), c.bias ? "" : " no bias"),
                  1400 + seed++);
    const TensorId X = b.random("X", {c.N, c.H, c.W, c.C}), W = b.random("W", {c.K, c.R, c.S, c.C}, Role::Parameter, 0.5);
    const TensorId bias = c.bias ? b.random("b", {c.K}) : kNone;
    const int64_t P = conv_output_size(c.H, c.R, a.pad_h, a.stride_h, a.dil_h);
    const int64_t Q = conv_output_size(c.W, c.S, a.pad_w, a.stride_w, a.dil_w);
    const TensorId Y = b.output("Y", {c.N, P, Q, c.K});
    b.op({X, W, bias}, {Y}, a);
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> max_pool2d_cases() {
  std::vector<OpCase> v;
  struct C { Shape X; PoolAttrs a; };
  auto pool = [](int wh, int ww, int sh, int sw, int ph, int pw) {
    PoolAttrs a;
    a.window_h = wh, a.window_w = ww, a.stride_h = sh, a.stride_w = sw, a.pad_h = ph, a.pad_w = pw;
    return a;
  };
  int seed = 0;
  for (const C& c : {C{{1, 4, 4, 1}, pool(2, 2, 2, 2, 0, 0)}, C{{2, 7, 5, 3}, pool(3, 3, 2, 2, 1, 1)},
                     C{{1, 5, 6, 2}, pool(2, 3, 1, 2, 1, 1)}, C{{3, 3, 1, 4}, pool(3, 1, 1, 1, 0, 0)}}) {
    const PoolAttrs& a = c.a;
    CaseBuilder b(OpKind::MaxPool2d,
                  cat(shape_str(c.X), " window ", a.window_h, "x", a.window_w, " stride ", a.stride_h, "x", a.stride_w,
                      " pad ", a.pad_h, "x", a.pad_w),
                  1500 + seed++);
    const TensorId X = b.random("X", c.X);
    const TensorId Y = b.output("Y", {c.X[0], conv_output_size(c.X[1], a.window_h, a.pad_h, a.stride_h),
                                      conv_output_size(c.X[2], a.window_w, a.pad_w, a.stride_w), c.X[3]});
    b.op({X}, {Y}, a);
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> global_avg_pool_cases() {
  std::vector<OpCase> v;
  int seed = 0;
  for (const Shape& s : {Shape{1, 1, 1, 3}, Shape{2, 5, 3, 4}, Shape{3, 7, 1, 1}, Shape{2, 4, 4, 17}}) {
    CaseBuilder b(OpKind::GlobalAvgPool, shape_str(s), 1600 + seed++);
    const TensorId X = b.random("X", s), Y = b.output("Y", {s[0], s[3]});
    b.op({X}, {Y});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> reshape_cases() {
  std::vector<OpCase> v;
  int seed = 0;
  for (const auto& [from, to] : {std::pair<Shape, Shape>{{7, 5}, {35}}, {{2, 3, 4}, {6, 4}}, {{1, 17}, {17, 1}},
                                 {{2, 12}, {2, 2, 3, 2}}}) {
    CaseBuilder b(OpKind::Reshape, cat(shape_str(from), " -> ", shape_str(to)), 1700 + seed++);
    const TensorId X = b.random("X", from), Y = b.output("Y", to);
    b.op({X}, {Y});
    v.push_back(b.gradient(Y));
  }
  return v;
}

// ---- Sequences ----

inline std::vector<OpCase> layer_norm_cases() {
  std::vector<OpCase> v;
  struct C { Shape X; double eps; };
  int seed = 0;
  for (const C& c : {C{{1, 5}, 1e-5}, C{{7, 17}, 1e-5}, C{{2, 3, 8}, 1e-3}, C{{5, 1}, 1e-5}, C{{33, 2}, 1e-5}}) {
    CaseBuilder b(OpKind::LayerNorm, cat(shape_str(c.X), " eps ", c.eps), 1800 + seed++);
    const int64_t E = c.X.back(), R = numel(c.X) / E;
    const TensorId X = b.random("X", c.X), g = b.random("gamma", {E}), beta = b.random("beta", {E});
    const TensorId Y = b.output("Y", c.X);
    b.op({X, g, beta}, {Y, b.output("mean", {R}), b.output("rstd", {R})}, NormAttrs{c.eps});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> embedding_cases() {
  std::vector<OpCase> v;
  struct C { int64_t B, S, V, E, P; bool i32_ids, table_trained; };
  int seed = 0;
  for (const C& c : {C{1, 1, 3, 1, 0, true, true}, C{2, 5, 7, 4, 6, false, true}, C{3, 7, 5, 3, 7, true, true},
                     C{2, 3, 4, 5, 3, true, false}}) {
    CaseBuilder b(OpKind::Embedding,
                  cat(c.i32_ids ? "i32" : "f32", " ids [", c.B, ",", c.S, "], table [", c.V, ",", c.E, "]",
                      c.P ? cat(", positions [", c.P, ",", c.E, "]") : "", c.table_trained ? "" : " (table an input)"),
                  1900 + seed++);
    const TensorId ids = b.input("ids", uniform_ints({c.B, c.S}, c.V, b.seed() + 1, c.i32_ids ? DType::I32 : DType::F32));
    const TensorId table = b.random("table", {c.V, c.E}, c.table_trained ? Role::Parameter : Role::Input);
    const TensorId pos = c.P ? b.random("pos", {c.P, c.E}) : kNone;
    const TensorId Y = b.output("Y", {c.B, c.S, c.E});
    b.op({ids, table, pos}, {Y});
    v.push_back(b.gradient(Y));
  }
  return v;
}

inline std::vector<OpCase> attention_cases() {
  std::vector<OpCase> v;
  struct C { int64_t B, S, H, D; bool causal; double scale; };
  int seed = 0;
  for (const C& c : {C{1, 1, 1, 4, false, 0}, C{2, 7, 2, 4, true, 0}, C{1, 5, 1, 8, false, 0.5},
                     C{2, 9, 3, 8, true, 0}}) {
    CaseBuilder b(OpKind::Attention,
                  cat("B=", c.B, " S=", c.S, " ", c.H, " heads of ", c.D, c.causal ? ", causal" : "",
                      c.scale > 0 ? cat(", scale ", c.scale) : ""),
                  2000 + seed++);
    const Shape s{c.B, c.S, c.H * c.D};
    const TensorId Q = b.random("Q", s), K = b.random("K", s), V = b.random("V", s);
    const TensorId O = b.output("O", s);
    AttentionAttrs a;
    a.heads = static_cast<int32_t>(c.H), a.causal = c.causal, a.scale = c.scale;
    b.op({Q, K, V}, {O, b.output("L", {c.B, c.H, c.S})}, a);
    v.push_back(b.gradient(O));
  }
  return v;
}

// ---- User-defined ops, losses (custom_op_cases.h, included at the end) ----

inline std::vector<OpCase> custom_cases();
inline std::vector<OpCase> custom_loss_cases();
inline void eval_custom_double(const Program& p, const Op& op, Values& v);

// ---- The cases of every kind, and the float64 references ----

// The tensor ops' cases and float64 forward (tensor_op_cases.h, included at the end).
inline std::vector<OpCase> tensor_op_cases();
inline bool is_tensor_op_kind(OpKind k);
inline void eval_tensor_op_double(const Program& p, const Op& op, Values& v);

// Backward kinds have no builder: the gradient cases of their forward kinds run them.
inline std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto* make : {gather_batch_cases, jet_input_cases, expression_loss_cases, sample_points_cases, observed_points_cases, dense_cases,
                     add_cases, softmax_cross_entropy_cases, mean_squared_error_cases, pointwise_loss_cases,
                     schedule_cases, sgd_cases,
                     adam_cases, custom_update_cases, clip_grad_norm_cases, conv2d_cases, max_pool2d_cases, global_avg_pool_cases, reshape_cases,
                     layer_norm_cases, embedding_cases, attention_cases, abs_max_cases, custom_cases, custom_loss_cases})
    for (OpCase& c : make()) all.push_back(std::move(c));
  for (OpKind k : {OpKind::JetActivation, OpKind::FourierFeatures})
    for (OpCase& c : jet_elementwise_cases(k)) all.push_back(std::move(c));
  for (OpCase& c : tensor_op_cases()) all.push_back(std::move(c));
  return all;
}

// The seeded output of a gradient case in float64, from the inputs' values `v`.
inline std::vector<double> reference_output(const OpCase& c, Values v) {
  const Op& op = c.p.ops()[0];
  if (op.kind == OpKind::JetActivation || op.kind == OpKind::FourierFeatures) return forward_double(c.p, v, c.out);
  if (op.kind == OpKind::Custom) {
    eval_custom_double(c.p, op, v);
    return v.at(c.p.tensor(c.out).name);
  }
  if (is_tensor_op_kind(op.kind) || op.kind == OpKind::Add) {  // Add: broadcasting too
    eval_tensor_op_double(c.p, op, v);
    return v.at(c.p.tensor(c.out).name);
  }
  double unused = 0;
  eval_op_double(c.p, op, v, &unused);
  return v.at(c.p.tensor(c.out).name);
}

// The loss of a loss case in float64.
inline double reference_loss(const OpCase& c, Values v) {
  double total = 0;
  for (const Op& op : c.p.ops()) {
    double loss = 0;
    if (op.kind == OpKind::ExpressionLoss) total += expression_loss_double(c.p, op, v);
    else if (eval_op_double(c.p, op, v, &loss)) total += loss;
  }
  return total;
}

}  // namespace sg::test

#include "custom_op_cases.h"
#include "optim_op_cases.h"
#include "pinn_op_cases.h"
#include "tensor_op_cases.h"
