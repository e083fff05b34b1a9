#include <cstdlib>
#include <string>
#include <unordered_map>

#include "stepgraph/ir.h"

#include "core/host_memory.h"

namespace sg {

const char* role_name(Role r) {
  switch (r) {
    case Role::Parameter: return "parameter";
    case Role::Gradient: return "gradient";
    case Role::OptimizerState: return "optimizer_state";
    case Role::StepScalar: return "step_scalar";
    case Role::Constant: return "constant";
    case Role::Input: return "input";
    case Role::Activation: return "activation";
    case Role::Temporary: return "temporary";
  }
  return "?";
}

bool is_persistent(Role r) {
  return r == Role::Parameter || r == Role::Gradient || r == Role::OptimizerState ||
         r == Role::StepScalar || r == Role::Constant;
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::ReLU: return "relu";
    case Activation::GELU: return "gelu";
    case Activation::Tanh: return "tanh";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Sin: return "sin";
    case Activation::Softplus: return "softplus";
  }
  return "?";
}

Activation parse_activation(const std::string& s) {
  for (Activation a : {Activation::None, Activation::ReLU, Activation::GELU, Activation::Tanh,
                       Activation::Sigmoid, Activation::Sin, Activation::Softplus})
    if (s == activation_name(a)) return a;
  throw Error(cat("unknown activation '", s,
                  "': expected one of none, relu, gelu, tanh, sigmoid, sin, softplus"));
}

bool activation_needs_preact(Activation a) {
  return a == Activation::GELU || a == Activation::Sin || a == Activation::Softplus;
}

const char* reduction_name(Reduction r) { return r == Reduction::Mean ? "mean" : "sum"; }

int32_t JetSpec::pair_index(int i, int j) const {
  if (i > j) std::swap(i, j);
  for (int p = 0; p < npairs; ++p)
    if (trace[p] == 0 && pi[p] == i && pj[p] == j) return p;
  return -1;
}

int32_t JetSpec::trace_index(uint32_t mask) const {
  for (int p = 0; p < npairs; ++p)
    if (trace[p] != 0 && trace[p] == mask) return p;
  return -1;
}

int64_t gather_batches_per_epoch(int64_t n, int64_t batch, bool partial_last) {
  return partial_last ? (n + batch - 1) / batch : n / batch;
}

int64_t conv_output_size(int64_t in, int64_t window, int64_t pad, int64_t stride, int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (window - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::GatherBatch: return "gather_batch";
    case OpKind::JetInput: return "jet_input";
    case OpKind::JetActivation: return "jet_activation";
    case OpKind::JetActivationBackward: return "jet_activation_backward";
    case OpKind::FourierFeatures: return "fourier_features";
    case OpKind::FourierFeaturesBackward: return "fourier_features_backward";
    case OpKind::ExpressionLoss: return "expression_loss";
    case OpKind::SamplePoints: return "sample_points";
    case OpKind::Dense: return "dense";
    case OpKind::DenseBackward: return "dense_backward";
    case OpKind::Add: return "add";
    case OpKind::AddBackward: return "add_backward";
    case OpKind::SoftmaxCrossEntropy: return "softmax_cross_entropy";
    case OpKind::MeanSquaredError: return "mse";
    case OpKind::Schedule: return "schedule";
    case OpKind::SgdUpdate: return "sgd_update";
    case OpKind::AdamUpdate: return "adam_update";
    case OpKind::Conv2d: return "conv2d";
    case OpKind::Conv2dBackward: return "conv2d_backward";
    case OpKind::MaxPool2d: return "max_pool2d";
    case OpKind::MaxPool2dBackward: return "max_pool2d_backward";
    case OpKind::GlobalAvgPool: return "global_avg_pool";
    case OpKind::GlobalAvgPoolBackward: return "global_avg_pool_backward";
    case OpKind::Reshape: return "reshape";
    case OpKind::AbsMax: return "abs_max";
    case OpKind::LayerNorm: return "layer_norm";
    case OpKind::LayerNormBackward: return "layer_norm_backward";
    case OpKind::Embedding: return "embedding";
    case OpKind::EmbeddingBackward: return "embedding_backward";
    case OpKind::Attention: return "attention";
    case OpKind::AttentionBackward: return "attention_backward";
  }
  return "?";
}

namespace {

constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 50;

// The tensor's bytes, or UINT64_MAX when the count overflows.
uint64_t checked_bytes(const Shape& s, DType t) {
  uint64_t n = dtype_size(t);
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return UINT64_MAX;
  return n;
}

}  // namespace

TensorId Program::add_tensor(TensorInfo t) {
  SG_REQUIRE(find(t.name) == kNone, "tensor '", t.name, "' is defined twice");
  for (int64_t d : t.shape)
    SG_REQUIRE(d > 0, "tensor '", t.name, "' has shape ", shape_str(t.shape),
               ": every dimension must be positive");
  // Sizes come from user input: a product that overflows must not wrap into a small buffer.
  const uint64_t bytes = checked_bytes(t.shape, t.dtype);
  SG_REQUIRE(bytes <= kMaxTensorBytes, "tensor '", t.name, "' of shape ", shape_str(t.shape), " (",
             dtype_name(t.dtype), ") ",
             bytes == UINT64_MAX ? std::string("has more bytes than a 64-bit size can count")
                                 : "needs " + human_bytes(bytes),
             "; a tensor may hold at most 1 PiB");
  const TensorId id = static_cast<TensorId>(tensors_.size());
  by_name_.emplace(t.name, id);
  tensors_.push_back(std::move(t));
  producer_.push_back(-1);
  return id;
}

TensorId Program::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? kNone : it->second;
}

const TensorInfo& Program::tensor(TensorId id) const {
  SG_ASSERT(id >= 0 && static_cast<size_t>(id) < tensors_.size());
  return tensors_[id];
}
TensorInfo& Program::tensor(TensorId id) {
  SG_ASSERT(id >= 0 && static_cast<size_t>(id) < tensors_.size());
  return tensors_[id];
}

int Program::producer(TensorId t) const {
  SG_ASSERT(t >= 0 && static_cast<size_t>(t) < producer_.size());
  return producer_[t];
}

size_t invariant_prefix(const Program& p) {
  const std::vector<Op>& ops = p.ops();
  std::vector<bool> fixed(p.num_tensors(), false);
  for (size_t t = 0; t < p.num_tensors(); ++t) fixed[t] = p.tensor(static_cast<TensorId>(t)).role == Role::Constant;
  size_t n = 0;
  for (; n < ops.size(); ++n) {
    const Op& op = ops[n];
    bool same = false;
    switch (op.kind) {
      case OpKind::SamplePoints: same = op.attr<SampleAttrs>().every == 0; break;  // ignores its step input
      case OpKind::JetInput:
      case OpKind::FourierFeatures:
      case OpKind::Dense:
      case OpKind::JetActivation:
        same = true;
        for (TensorId t : op.in) same = same && (t == kNone || fixed[t]);
        break;
      default: break;
    }
    for (uint8_t acc : op.accumulate) same = same && !acc;
    if (!same) break;
    for (TensorId t : op.out)
      if (t != kNone) fixed[t] = true;
  }
  if (n == 0) return 0;  // most programs: a batch or a trained weight comes first
  // A prefix output that a later op writes again is not the same every step: end the prefix at
  // its producer (and again, until no such write is left).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = n; i < ops.size() && !changed; ++i)
      for (TensorId t : ops[i].out) {
        const int w = t == kNone || p.tensor(t).role == Role::Constant ? -1 : p.producer(t);
        if (w >= 0 && static_cast<size_t>(w) < n) {
          n = static_cast<size_t>(w), changed = true;
          break;
        }
      }
  }
  return n;
}

void Program::add_op(Op op) {
  if (op.accumulate.empty()) op.accumulate.assign(op.out.size(), 0);
  SG_ASSERT(op.accumulate.size() == op.out.size());
  check_op(op);
  for (TensorId t : op.out)
    if (t != kNone && producer_[t] < 0) producer_[t] = static_cast<int>(ops_.size());
  ops_.push_back(std::move(op));
}

namespace {

// Shape checks per op kind; messages name the op and both shapes.
struct OpChecker {
  const Program& p;
  const Op& op;

  const Shape& shape(TensorId t) const { return p.tensor(t).shape; }
  const std::string& name(TensorId t) const { return p.tensor(t).name; }
  std::string desc(TensorId t) const { return cat("'", name(t), "' ", shape_str(shape(t))); }
  void expect(bool ok, const std::string& what) const {
    SG_REQUIRE(ok, "op '", op.name, "' (", op_kind_name(op.kind), "): ", what);
  }
  void same(TensorId a, TensorId b) const {
    if (a == kNone || b == kNone) return;
    expect(shape(a) == shape(b), cat("'", p.tensor(a).name, "' ", shape_str(shape(a)), " and '",
                                     p.tensor(b).name, "' ", shape_str(shape(b)),
                                     " must have the same shape"));
  }
  void rank(TensorId t, size_t r) const {
    expect(shape(t).size() == r, cat("'", p.tensor(t).name, "' has shape ", shape_str(shape(t)),
                                     ", expected rank ", r));
  }

  // X [..., I] (rank >= 2: [batch, I], or [batch, positions, I] for sequences), W [O, I].
  void dense(TensorId X, TensorId W, TensorId b, TensorId Y) const {
    expect(shape(X).size() >= 2, cat("input ", desc(X), " must be [batch, features] or [batch, ..., features]"));
    rank(W, 2);
    expect(shape(X).back() == shape(W)[1],
           cat("input '", p.tensor(X).name, "' ", shape_str(shape(X)), " has ", shape(X).back(),
               " features but weight '", p.tensor(W).name, "' ", shape_str(shape(W)),
               " expects ", shape(W)[1]));
    if (b != kNone) expect(shape(b) == Shape{shape(W)[0]}, "bias must have shape [out]");
    Shape ys = shape(X);
    ys.back() = shape(W)[0];
    expect(shape(Y) == ys, cat("output ", shape_str(shape(Y)), " must be ", shape_str(ys), " ([batch, ..., out])"));
  }

  void conv2d() const {
    const auto& in = op.in;
    const ConvAttrs& a = op.attr<ConvAttrs>();
    expect(in.size() == 3 && op.out.size() == 1, "expects 3 inputs and 1 output");
    rank(in[0], 4);
    rank(in[1], 4);
    rank(op.out[0], 4);
    expect(a.act == Activation::None || a.act == Activation::ReLU,
           cat("activation ", activation_name(a.act), " is not fused: conv2d takes none or relu"));
    expect(a.stride_h >= 1 && a.stride_w >= 1 && a.dil_h >= 1 && a.dil_w >= 1 && a.pad_h >= 0 && a.pad_w >= 0,
           cat("strides (", a.stride_h, ", ", a.stride_w, ") and dilations (", a.dil_h, ", ", a.dil_w,
               ") must be >= 1 and paddings (", a.pad_h, ", ", a.pad_w, ") >= 0"));
    const Shape &xs = shape(in[0]), &ws = shape(in[1]);
    expect(xs[3] == ws[3], cat("input ", desc(in[0]), " has ", xs[3], " channels but filter ", desc(in[1]),
                               " (KRSC) expects ", ws[3]));
    if (in[2] != kNone)
      expect(shape(in[2]) == Shape{ws[0]}, cat("bias ", desc(in[2]), " must have shape [", ws[0], "]"));
    const int64_t P = conv_output_size(xs[1], ws[1], a.pad_h, a.stride_h, a.dil_h);
    const int64_t Q = conv_output_size(xs[2], ws[2], a.pad_w, a.stride_w, a.dil_w);
    expect(P > 0 && Q > 0, cat("a ", ws[1], "x", ws[2], " filter with dilation (", a.dil_h, ", ", a.dil_w,
                               ") and padding (", a.pad_h, ", ", a.pad_w, ") does not fit the ", xs[1], "x",
                               xs[2], " input ", desc(in[0])));
    const Shape ys{xs[0], P, Q, ws[0]};
    expect(shape(op.out[0]) == ys, cat("output ", desc(op.out[0]), " must be ", shape_str(ys)));
  }

  void max_pool2d() const {
    const PoolAttrs& a = op.attr<PoolAttrs>();
    expect(op.in.size() == 1 && op.out.size() == 1, "expects 1 input and 1 output");
    rank(op.in[0], 4);
    rank(op.out[0], 4);
    expect(a.window_h >= 1 && a.window_w >= 1 && a.stride_h >= 1 && a.stride_w >= 1,
           cat("window (", a.window_h, ", ", a.window_w, ") and stride (", a.stride_h, ", ", a.stride_w,
               ") must be >= 1"));
    expect(a.pad_h >= 0 && a.pad_w >= 0 && 2 * a.pad_h <= a.window_h && 2 * a.pad_w <= a.window_w,
           cat("padding (", a.pad_h, ", ", a.pad_w, ") must be in [0, window / 2]"));
    const Shape& xs = shape(op.in[0]);
    const int64_t P = conv_output_size(xs[1], a.window_h, a.pad_h, a.stride_h);
    const int64_t Q = conv_output_size(xs[2], a.window_w, a.pad_w, a.stride_w);
    expect(P > 0 && Q > 0, cat("a ", a.window_h, "x", a.window_w, " window does not fit the input ", desc(op.in[0])));
    const Shape ys{xs[0], P, Q, xs[3]};
    expect(shape(op.out[0]) == ys, cat("output ", desc(op.out[0]), " must be ", shape_str(ys)));
  }

  void run() const {
    const auto& in = op.in;
    const auto& out = op.out;
    switch (op.kind) {
      case OpKind::Dense:
        expect(in.size() == 3 && out.size() == 2, "expects 3 inputs and 2 outputs");
        dense(in[0], in[1], in[2], out[0]);
        same(out[0], out[1]);
        break;
      case OpKind::DenseBackward:
        expect(in.size() == 5 && out.size() == 3, "expects 5 inputs and 3 outputs");
        same(in[0], in[3]);
        same(out[0], in[1]);
        same(out[1], in[2]);
        break;
      case OpKind::Add:
        expect(in.size() == 2 && out.size() == 1, "expects 2 inputs and 1 output");
        same(in[0], in[1]);
        same(in[0], out[0]);
        break;
      case OpKind::AddBackward:
        expect(in.size() == 1 && out.size() == 2, "expects 1 input and 2 outputs");
        same(in[0], out[0]);
        same(in[0], out[1]);
        break;
      case OpKind::SoftmaxCrossEntropy: {
        expect(in.size() == 3 && out.size() == 2, "expects 3 inputs and 2 outputs");
        expect(shape(in[0]).size() >= 2, cat("logits ", desc(in[0]), " must be [batch, classes] or [batch, ..., classes]"));
        const Shape ls(shape(in[0]).begin(), shape(in[0]).end() - 1);
        expect(shape(in[1]) == ls && p.tensor(in[1]).dtype == DType::I32,
               cat("labels must be i32 ", shape_str(ls), ", got ", dtype_name(p.tensor(in[1]).dtype),
                   " ", shape_str(shape(in[1]))));
        same(in[0], out[1]);
        break;
      }
      case OpKind::MeanSquaredError:
        expect(in.size() == 3 && out.size() == 2, "expects 3 inputs and 2 outputs");
        same(in[0], in[1]);
        same(in[0], out[1]);
        break;
      case OpKind::GatherBatch:
        expect(in.size() == 3 && out.size() == 3, "expects 3 inputs and 3 outputs");
        expect(shape(in[0]).size() == 2 && shape(out[0]).size() == 2 && shape(in[0])[1] == shape(out[0])[1],
               "data X and the batch X must be [N, D] and [B, D]");
        expect(shape(in[0])[0] == shape(in[1])[0] && shape(out[0])[0] == shape(out[1])[0],
               "data y / batch y must have one row per sample");
        break;
      case OpKind::JetInput:
      case OpKind::JetActivation:
      case OpKind::JetActivationBackward:
      case OpKind::FourierFeatures:
      case OpKind::FourierFeaturesBackward: {
        const JetAttrs& a = op.attr<JetAttrs>();
        const JetSpec& js = a.jet;
        for (TensorId t : out)
          if (t != kNone) rank(t, 2);
        const int64_t rows = shape(out[0])[0];
        expect(a.head >= 0 && a.head <= rows && (rows - a.head) % js.K() == 0,
               cat("'", p.tensor(out[0]).name, "' has ", rows, " rows: ", a.head, " value rows, then not a multiple of the ",
                   js.K(), " jet components"));
        if (op.kind == OpKind::JetInput) {
          int64_t head = 0;
          for (size_t k = 1; k < in.size(); ++k) head += shape(in[k])[0];
          expect(!in.empty() && rows == a.head + js.K() * shape(in[0])[0] && head == a.head,
                 cat("jet input: ", rows, " rows, expected the ", head, " rows of the value-only points (",
                     a.head, " in its attributes) + ", js.K(), " x ", shape(in[0])[0], " jet rows"));
        }
        break;
      }
      case OpKind::ExpressionLoss: {
        const ExprLossAttrs& a = op.attr<ExprLossAttrs>();
        expect(in.size() == 2 && out.size() == 3, "expects 2 inputs and 3 outputs");
        expect(a.row0 >= 0 && a.row0 + a.K * shape(in[1])[0] <= shape(in[0])[0],
               cat("U has ", shape(in[0])[0], " rows, expected at least ", a.row0, " + ", a.K, " jet components x ",
                   shape(in[1])[0], " points"));
        same(in[0], out[2]);
        break;
      }
      case OpKind::Conv2d: conv2d(); break;
      case OpKind::Conv2dBackward:
        expect(in.size() == 4 && out.size() == 3, "expects 4 inputs and 3 outputs");
        rank(in[2], 4);
        same(in[0], in[3]);
        same(out[0], in[1]);
        same(out[1], in[2]);
        if (out[2] != kNone)
          expect(shape(out[2]) == Shape{shape(in[2])[0]}, cat("bias gradient ", desc(out[2]), " must be [filters]"));
        break;
      case OpKind::MaxPool2d: max_pool2d(); break;
      case OpKind::MaxPool2dBackward:
        expect(in.size() == 3 && out.size() == 1, "expects 3 inputs and 1 output");
        same(in[0], in[2]);
        same(out[0], in[1]);
        break;
      case OpKind::GlobalAvgPool:
        expect(in.size() == 1 && out.size() == 1, "expects 1 input and 1 output");
        rank(in[0], 4);
        expect(shape(out[0]) == Shape{shape(in[0])[0], shape(in[0])[3]},
               cat("output ", desc(out[0]), " must be [batch, channels] of the input ", desc(in[0])));
        break;
      case OpKind::GlobalAvgPoolBackward:
        expect(in.size() == 1 && out.size() == 1, "expects 1 input and 1 output");
        rank(out[0], 4);
        expect(shape(in[0]) == Shape{shape(out[0])[0], shape(out[0])[3]},
               cat("gradient ", desc(in[0]), " must be [batch, channels] of ", desc(out[0])));
        break;
      case OpKind::AbsMax:
        expect(in.size() == 1 && out.size() == 1, "expects 1 input and 1 output");
        expect(shape(out[0]) == Shape{1}, cat("output ", desc(out[0]), " must be [1]"));
        expect(p.tensor(in[0]).dtype == DType::F32 && p.tensor(out[0]).dtype == DType::F32, "reads and writes f32");
        break;
      case OpKind::Reshape:
        expect(in.size() == 1 && out.size() == 1, "expects 1 input and 1 output");
        expect(numel(shape(in[0])) == numel(shape(out[0])),
               cat(desc(in[0]), " and ", desc(out[0]), " must have the same number of elements"));
        expect(p.tensor(in[0]).dtype == DType::F32 && p.tensor(out[0]).dtype == DType::F32, "reshapes f32 tensors only");
        break;
      case OpKind::LayerNorm: {
        expect(in.size() == 3 && out.size() == 3, "expects 3 inputs and 3 outputs");
        expect(!shape(in[0]).empty(), cat("input ", desc(in[0]), " has no feature dimension"));
        const int64_t E = shape(in[0]).back(), R = numel(shape(in[0])) / E;
        expect(shape(in[1]) == Shape{E} && shape(in[2]) == Shape{E},
               cat("gain ", desc(in[1]), " and shift ", desc(in[2]), " must be [", E, "] for the input ", desc(in[0])));
        same(in[0], out[0]);
        expect(shape(out[1]) == Shape{R} && shape(out[2]) == Shape{R}, cat("row statistics must be [", R, "]"));
        expect(op.attr<NormAttrs>().eps > 0, "eps must be positive");
        break;
      }
      case OpKind::LayerNormBackward:
        expect(in.size() == 5 && out.size() == 3, "expects 5 inputs and 3 outputs");
        same(in[0], in[1]);
        same(out[0], in[1]);
        same(out[1], in[2]);
        same(out[2], in[2]);
        break;
      case OpKind::Embedding: {
        expect(in.size() == 3 && out.size() == 1, "expects 3 inputs and 1 output");
        rank(in[0], 2);
        rank(in[1], 2);
        const DType it = p.tensor(in[0]).dtype;
        expect(it == DType::I32 || it == DType::F32, cat("ids ", desc(in[0]), " must be i32 or f32, got ", dtype_name(it)));
        const int64_t B = shape(in[0])[0], S = shape(in[0])[1], E = shape(in[1])[1];
        if (in[2] != kNone) {
          rank(in[2], 2);
          expect(shape(in[2])[1] == E && shape(in[2])[0] >= S,
                 cat("position table ", desc(in[2]), " must be [P >= ", S, ", ", E, "] for ids ", desc(in[0])));
        }
        expect(shape(out[0]) == Shape{B, S, E}, cat("output ", desc(out[0]), " must be ", shape_str({B, S, E})));
        break;
      }
      case OpKind::EmbeddingBackward:
        expect(in.size() == 2 && out.size() == 2, "expects 2 inputs and 2 outputs");
        rank(in[0], 3);
        for (TensorId t : out)
          if (t != kNone) expect(shape(t).size() == 2 && shape(t)[1] == shape(in[0])[2], cat("gradient ", desc(t), " must be [rows, ", shape(in[0])[2], "]"));
        break;
      case OpKind::Attention: {
        const AttentionAttrs& a = op.attr<AttentionAttrs>();
        expect(in.size() == 3 && out.size() == 2, "expects 3 inputs and 2 outputs");
        rank(in[0], 3);
        same(in[0], in[1]);
        same(in[0], in[2]);
        same(in[0], out[0]);
        const Shape& qs = shape(in[0]);
        expect(a.heads >= 1 && qs[2] % a.heads == 0,
               cat("width ", qs[2], " of ", desc(in[0]), " does not split into ", a.heads, " heads"));
        expect(shape(out[1]) == Shape{qs[0], a.heads, qs[1]},
               cat("log-sum-exp ", desc(out[1]), " must be ", shape_str({qs[0], a.heads, qs[1]})));
        expect(a.scale >= 0, "scale must be >= 0 (0: 1 / sqrt(head dimension))");
        break;
      }
      case OpKind::AttentionBackward:
        expect(in.size() == 6 && out.size() == 3, "expects 6 inputs and 3 outputs");
        for (size_t k = 1; k < 5; ++k) same(in[0], in[k]);
        for (size_t k = 0; k < 3; ++k) same(out[k], in[1 + k]);
        break;
      case OpKind::SamplePoints:
      case OpKind::Schedule:
      case OpKind::SgdUpdate:
      case OpKind::AdamUpdate:
        break;  // built only by the optimizers; shapes are theirs by construction
    }
  }
};

}  // namespace

void Program::check_op(const Op& op) const {
  for (TensorId t : op.in) {
    if (t == kNone) continue;
    SG_REQUIRE(t >= 0 && static_cast<size_t>(t) < tensors_.size(), "op '", op.name,
               "': input id ", t, " does not exist");
    const Role r = tensors_[t].role;
    SG_REQUIRE(is_persistent(r) || r == Role::Input || producer_[t] >= 0, "op '", op.name, "' reads '",
               tensors_[t].name, "' before any op writes it");
  }
  for (TensorId t : op.out)
    SG_REQUIRE(t == kNone || (t >= 0 && static_cast<size_t>(t) < tensors_.size()), "op '",
               op.name, "': output id ", t, " does not exist");
  OpChecker{*this, op}.run();
}

}  // namespace sg
