// Model graphs: symbolic tensors, their nodes, and the Model that emits them (model.h).
#include "stepgraph/model.h"

#include "ir/op_table.h"
#include "ops/custom_ops.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <set>

namespace sg {

// A node of a model graph: an input, a layer applied to one tensor, or a tensor op. Its
// per-sample output shapes are worked out when it is made (by emitting it into a scratch program).
struct ModelNode {
  enum class Kind : uint8_t { Input, Layer, Op };
  Kind kind = Kind::Input;
  std::string name;  // as given; "" when none
  uint64_t id = 0;   // creation order: inputs always come before their users
  std::vector<SymbolicTensor> inputs;
  LayerPtr layer;
  OpKind op = OpKind::Add;
  OpAttrs attrs;
  std::vector<Shape> shapes;  // per sample
  DType dtype = DType::F32;
  Shape target;               // reshape: the per-sample shape asked for (-1: inferred)

  std::string kind_name() const {
    switch (kind) {
      case Kind::Input: return "input";
      case Kind::Layer: return layer->describe().substr(0, layer->describe().find('('));
      case Kind::Op: return op == OpKind::Custom ? custom_op_def(std::get<CustomAttrs>(attrs).id).name : op_kind_name(op);
    }
    return "node";
  }
  std::string display() const { return name.empty() ? kind_name() : name; }
};

namespace {

uint64_t next_id() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

Shape with_batch(int64_t batch, const Shape& per_sample) {
  Shape s{batch};
  s.insert(s.end(), per_sample.begin(), per_sample.end());
  return s;
}

void check_name(const std::string& name, const std::string& what) {
  SG_REQUIRE(!name.empty(), what, " needs a name");
  for (char ch : name)
    SG_REQUIRE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-', what, " name '", name,
               "' may hold only letters, digits, '_' and '-'");
}

// An axis of a batch tensor of rank `rank`: 1 .. rank-1, or negative from the end.
int feature_axis(int axis, size_t rank, const std::string& where) {
  const int r = static_cast<int>(rank);
  const int k = axis < 0 ? axis + r : axis;
  SG_REQUIRE(k >= 0 && k < r, where, ": axis ", axis, " is out of range for a tensor of rank ", r,
             " (the batch axis counts)");
  SG_REQUIRE(k != 0, where, ": axis ", axis, " is the batch axis; ops work along a feature axis (1 .. ", r - 1,
             ", or negative from the end)");
  return k;
}

std::string shapes_of(const ModelNode& n) {
  std::string s;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    s += cat(i ? ", " : "", "'", n.inputs[i].name(), "' ", shape_str(n.inputs[i].shape()));
  return s;
}

// The op's output tensors for batch inputs `in` (their shapes decide), added to the program.
std::vector<TensorId> emit_op(GraphBuilder& g, const ModelNode& n, const std::vector<TensorId>& in,
                              const std::string& label) {
  Program& p = g.program();
  SG_REQUIRE(!g.jet(), "model node '", label, "' (", op_kind_name(n.op),
             "): tensor ops do not run on jets yet; a physics-informed network is a chain of layers");
  if (n.op == OpKind::Custom) return emit_custom(g, std::get<CustomAttrs>(n.attrs).id, in, label);
  const std::string where = cat("model node '", label, "' (", op_kind_name(n.op), ")");
  std::vector<Shape> outs;
  const Shape& x = p.tensor(in[0]).shape;
  switch (n.op) {
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div: {
      const Shape& b = p.tensor(in[1]).shape;
      bool ok = x.size() == b.size();
      Shape y = x;
      for (size_t k = 0; ok && k < x.size(); ++k) {
        ok = x[k] == b[k] || x[k] == 1 || b[k] == 1;
        y[k] = x[k] == 1 ? b[k] : x[k];
      }
      SG_REQUIRE(ok, where, ": ", shapes_of(n),
                 " do not broadcast (the same rank, and per axis equal sizes or one of them 1)");
      outs.push_back(y);
      break;
    }
    case OpKind::ScaleShift:
    case OpKind::Activation: outs.push_back(x); break;
    case OpKind::Concat: {
      const int axis = feature_axis(std::get<ConcatAttrs>(n.attrs).axis, x.size(), where);
      Shape y = x;
      y[axis] = 0;
      for (TensorId t : in) {
        const Shape& s = p.tensor(t).shape;
        Shape a = s, b = x;
        if (s.size() == x.size()) a[axis] = b[axis] = 0;
        SG_REQUIRE(s.size() == x.size() && a == b, where, ": ", shapes_of(n),
                   " must agree on every axis but the joined one (", axis, ")");
        y[axis] += s[axis];
      }
      outs.push_back(y);
      break;
    }
    case OpKind::Split: {
      const SplitAttrs& a = std::get<SplitAttrs>(n.attrs);
      const int axis = feature_axis(a.axis, x.size(), where);
      int64_t sum = 0;
      for (int64_t s : a.sizes) {
        SG_REQUIRE(s > 0, where, ": piece sizes must be positive");
        sum += s;
        Shape y = x;
        y[axis] = s;
        outs.push_back(y);
      }
      SG_REQUIRE(sum == x[axis], where, ": the pieces add up to ", sum, " but '", n.inputs[0].name(), "' ",
                 shape_str(n.inputs[0].shape()), " has ", x[axis], " along axis ", axis);
      break;
    }
    case OpKind::Slice: {
      const SliceAttrs& a = std::get<SliceAttrs>(n.attrs);
      const int axis = feature_axis(a.axis, x.size(), where);
      SG_REQUIRE(a.begin >= 0 && a.begin < a.end && a.end <= x[axis], where, ": [", a.begin, ", ", a.end,
                 ") is not a slice of axis ", axis, " of '", n.inputs[0].name(), "' ", shape_str(n.inputs[0].shape()),
                 " (0 <= begin < end <= ", x[axis], ")");
      Shape y = x;
      y[axis] = a.end - a.begin;
      outs.push_back(y);
      break;
    }
    case OpKind::Sum:
    case OpKind::Mean: {
      const ReduceAttrs& a = std::get<ReduceAttrs>(n.attrs);
      const int axis = feature_axis(a.axis, x.size(), where);
      Shape y = x;
      if (a.keepdims) y[axis] = 1;
      else y.erase(y.begin() + axis);
      outs.push_back(y);
      break;
    }
    case OpKind::MatMul: {
      const Shape& b = p.tensor(in[1]).shape;
      const MatMulAttrs& t = std::get<MatMulAttrs>(n.attrs);
      SG_REQUIRE(x.size() >= 3 && x.size() == b.size() && std::equal(x.begin(), x.end() - 2, b.begin()), where, ": ",
                 shapes_of(n), " must be matrices per sample with the same leading axes (per sample [..., M, K] and "
                 "[..., K, N])");
      const size_t r = x.size();
      const int64_t M = t.trans_a ? x[r - 1] : x[r - 2], K = t.trans_a ? x[r - 2] : x[r - 1];
      const int64_t Kb = t.trans_b ? b[r - 1] : b[r - 2], N = t.trans_b ? b[r - 2] : b[r - 1];
      SG_REQUIRE(K == Kb, where, ": ", shapes_of(n), " do not chain", t.trans_a || t.trans_b ? " (as transposed)" : "",
                 ": ", K, " columns against ", Kb, " rows");
      Shape y(x.begin(), x.end() - 2);
      y.push_back(M);
      y.push_back(N);
      outs.push_back(y);
      break;
    }
    case OpKind::Transpose: {
      const TransposeAttrs& t = std::get<TransposeAttrs>(n.attrs);
      const int a = feature_axis(t.axis_a, x.size(), where), b = feature_axis(t.axis_b, x.size(), where);
      Shape y = x;
      std::swap(y[a], y[b]);
      outs.push_back(y);
      break;
    }
    case OpKind::Reshape: {
      Shape y{x[0]};
      int64_t known = 1, infer = -1;
      for (size_t k = 0; k < n.target.size(); ++k) {
        const int64_t d = n.target[k];
        SG_REQUIRE(d > 0 || (d == -1 && infer < 0), where, ": shape ", shape_str(n.target),
                   " must be positive sizes, with at most one -1 (inferred)");
        if (d == -1) infer = static_cast<int64_t>(k);
        else known *= d;
        y.push_back(d);
      }
      const int64_t per = numel(x) / x[0];
      if (infer >= 0) {
        SG_REQUIRE(per % known == 0, where, ": '", n.inputs[0].name(), "' ", shape_str(n.inputs[0].shape()), " holds ",
                   per, " values per sample, not a multiple of ", known);
        y[static_cast<size_t>(infer) + 1] = per / known;
      }
      SG_REQUIRE(numel(y) / x[0] == per, where, ": '", n.inputs[0].name(), "' ", shape_str(n.inputs[0].shape()),
                 " holds ", per, " values per sample, but ", shape_str(n.target), " holds ", numel(y) / x[0]);
      outs.push_back(y);
      break;
    }
    default: throw Error(cat(where, ": not a model-graph op"));
  }
  Op op;
  op.kind = n.op;
  op.name = label;
  op.in = in;
  op.attrs = n.attrs;
  for (size_t i = 0; i < outs.size(); ++i)
    op.out.push_back(g.tensor(outs.size() == 1 ? label : cat(label, ".", i), outs[i], Role::Activation));
  std::vector<TensorId> ids = op.out;
  p.add_op(std::move(op));
  return ids;
}

// The node's batch outputs for batch inputs `in`. `prefix`: a layer's parameter prefix.
std::vector<TensorId> emit(GraphBuilder& g, const ModelNode& n, const std::vector<TensorId>& in,
                           const std::string& label, const std::string& prefix) {
  if (n.kind == ModelNode::Kind::Op) return emit_op(g, n, in, label);
  return {n.layer->build(g, in[0], prefix)};
}

// Makes the node and works out its shapes: emitted once into a scratch program with batch 2.
SymbolicTensor make_node(std::shared_ptr<ModelNode> n, int index = 0) {
  for (const SymbolicTensor& t : n->inputs) SG_REQUIRE(t.defined(), "model node '", n->display(), "': an input is undefined");
  n->id = next_id();
  Program scratch;
  GraphBuilder g(scratch);
  std::vector<TensorId> in;
  for (size_t i = 0; i < n->inputs.size(); ++i)
    in.push_back(g.tensor(cat("in", i), with_batch(2, n->inputs[i].shape()), Role::Input, n->inputs[i].dtype()));
  std::vector<TensorId> out;
  try {
    out = emit(g, *n, in, n->display(), n->name.empty() ? "layer" : n->name);
  } catch (const Error& e) {
    if (n->kind == ModelNode::Kind::Op) throw;
    throw Error(cat("layer '", n->display(), "' applied to ", shapes_of(*n), ": ", e.what()));
  }
  for (TensorId t : out) {
    const Shape& s = scratch.tensor(t).shape;
    n->shapes.emplace_back(s.begin() + 1, s.end());
  }
  n->dtype = scratch.tensor(out[0]).dtype;
  return SymbolicTensor(std::move(n), index);
}

std::shared_ptr<ModelNode> op_node(OpKind kind, std::vector<SymbolicTensor> inputs, OpAttrs attrs, std::string name) {
  auto n = std::make_shared<ModelNode>();
  n->kind = ModelNode::Kind::Op;
  n->op = kind;
  n->inputs = std::move(inputs);
  n->attrs = std::move(attrs);
  if (!name.empty()) check_name(name, "a model node's");
  n->name = std::move(name);
  return n;
}

SymbolicTensor binary(OpKind kind, const SymbolicTensor& a, const SymbolicTensor& b) {
  return make_node(op_node(kind, {a, b}, {}, ""));
}

std::string node_args(const ModelNode& n, const std::map<const ModelNode*, std::string>& labels) {
  std::string s;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const SymbolicTensor& t = n.inputs[i];
    s += (i ? ", " : "") + labels.at(t.node().get());
    if (t.node()->shapes.size() > 1) s += cat("#", t.index());
  }
  return s;
}

}  // namespace

void Layer::set_name(std::string name) {
  if (!name.empty()) check_name(name, "a layer's");
  name_ = std::move(name);
}

const Shape& SymbolicTensor::shape() const {
  SG_REQUIRE(node_, "an undefined symbolic tensor has no shape");
  return node_->shapes[static_cast<size_t>(index_)];
}
DType SymbolicTensor::dtype() const {
  SG_REQUIRE(node_, "an undefined symbolic tensor has no dtype");
  return node_->dtype;
}
std::string SymbolicTensor::name() const { return node_ ? node_->display() : "undefined"; }

SymbolicTensor SymbolicTensor::sum(int axis, bool keepdims) const {
  ReduceAttrs a;
  a.axis = axis, a.keepdims = keepdims;
  return make_node(op_node(OpKind::Sum, {*this}, a, ""));
}
SymbolicTensor SymbolicTensor::mean(int axis, bool keepdims) const {
  ReduceAttrs a;
  a.axis = axis, a.keepdims = keepdims;
  return make_node(op_node(OpKind::Mean, {*this}, a, ""));
}
SymbolicTensor SymbolicTensor::transpose(int axis_a, int axis_b) const {
  TransposeAttrs a;
  a.axis_a = axis_a, a.axis_b = axis_b;
  return make_node(op_node(OpKind::Transpose, {*this}, a, ""));
}
SymbolicTensor SymbolicTensor::reshape(Shape shape) const {
  SG_REQUIRE(!shape.empty(), "reshape of '", name(), "': give the per-sample shape (e.g. {4, 8})");
  auto n = op_node(OpKind::Reshape, {*this}, {}, "");
  n->target = std::move(shape);
  return make_node(std::move(n));
}

SymbolicTensor matmul(const SymbolicTensor& a, const SymbolicTensor& b, bool trans_a, bool trans_b, std::string name) {
  MatMulAttrs t;
  t.trans_a = trans_a, t.trans_b = trans_b;
  return make_node(op_node(OpKind::MatMul, {a, b}, t, std::move(name)));
}

SymbolicTensor SymbolicTensor::slice(int axis, int64_t begin, int64_t end) const {
  SliceAttrs a;
  a.axis = axis, a.begin = begin, a.end = end;
  return make_node(op_node(OpKind::Slice, {*this}, a, ""));
}

SymbolicTensor Input(Shape shape, std::string name, DType dtype) {
  check_name(name, "an input");
  SG_REQUIRE(!shape.empty(), "input '", name, "': give its per-sample shape (e.g. {3}), not an empty one");
  for (int64_t d : shape) SG_REQUIRE(d > 0, "input '", name, "': shape ", shape_str(shape), " must be positive");
  SG_REQUIRE(dtype == DType::F32 || dtype == DType::I32, "input '", name, "': dtype must be f32 or i32, got ",
             dtype_name(dtype));
  auto n = std::make_shared<ModelNode>();
  n->kind = ModelNode::Kind::Input;
  n->name = std::move(name);
  n->id = next_id();
  n->shapes = {std::move(shape)};
  n->dtype = dtype;
  return SymbolicTensor(std::move(n), 0);
}

SymbolicTensor call(const LayerPtr& layer, const SymbolicTensor& x) {
  SG_REQUIRE(layer != nullptr, "call: the layer is null");
  auto n = std::make_shared<ModelNode>();
  n->kind = ModelNode::Kind::Layer;
  n->layer = layer;
  n->name = layer->name();
  n->inputs = {x};
  return make_node(std::move(n));
}

SymbolicTensor operator+(const SymbolicTensor& a, const SymbolicTensor& b) { return binary(OpKind::Add, a, b); }
SymbolicTensor operator-(const SymbolicTensor& a, const SymbolicTensor& b) { return binary(OpKind::Sub, a, b); }
SymbolicTensor operator*(const SymbolicTensor& a, const SymbolicTensor& b) { return binary(OpKind::Mul, a, b); }
SymbolicTensor operator/(const SymbolicTensor& a, const SymbolicTensor& b) { return binary(OpKind::Div, a, b); }

SymbolicTensor scale_shift(const SymbolicTensor& x, double scale, double shift, std::string name) {
  ScaleShiftAttrs a;
  a.a = scale, a.b = shift;
  return make_node(op_node(OpKind::ScaleShift, {x}, a, std::move(name)));
}
SymbolicTensor operator+(const SymbolicTensor& x, double c) { return scale_shift(x, 1, c); }
SymbolicTensor operator+(double c, const SymbolicTensor& x) { return scale_shift(x, 1, c); }
SymbolicTensor operator-(const SymbolicTensor& x, double c) { return scale_shift(x, 1, -c); }
SymbolicTensor operator-(double c, const SymbolicTensor& x) { return scale_shift(x, -1, c); }
SymbolicTensor operator*(const SymbolicTensor& x, double c) { return scale_shift(x, c, 0); }
SymbolicTensor operator*(double c, const SymbolicTensor& x) { return scale_shift(x, c, 0); }
SymbolicTensor operator/(const SymbolicTensor& x, double c) {
  SG_REQUIRE(c != 0, "'", x.name(), "' / 0: division by zero");
  return scale_shift(x, 1 / c, 0);
}
SymbolicTensor operator-(const SymbolicTensor& x) { return scale_shift(x, -1, 0); }

SymbolicTensor concat(const std::vector<SymbolicTensor>& xs, int axis, std::string name) {
  SG_REQUIRE(!xs.empty(), "concat: no tensors to join");
  ConcatAttrs a;
  a.axis = axis;
  return make_node(op_node(OpKind::Concat, xs, a, std::move(name)));
}

std::vector<SymbolicTensor> split(const SymbolicTensor& x, const std::vector<int64_t>& sizes, int axis,
                                  std::string name) {
  SG_REQUIRE(sizes.size() >= 2, "split of '", x.name(), "': give at least two piece sizes");
  SplitAttrs a;
  a.axis = axis, a.sizes = sizes;
  const SymbolicTensor first = make_node(op_node(OpKind::Split, {x}, a, std::move(name)));
  std::vector<SymbolicTensor> pieces;
  for (size_t i = 0; i < sizes.size(); ++i) pieces.emplace_back(first.node(), static_cast<int>(i));
  return pieces;
}

std::vector<SymbolicTensor> custom(const std::string& op, const std::vector<SymbolicTensor>& inputs, std::string name) {
  SG_REQUIRE(!inputs.empty(), "user-defined op '", op, "': give it at least one input");
  const int32_t id = custom_op_id(op);
  // The output count comes from the definition's shapes (make_node checks them again).
  std::vector<Shape> per;
  for (const SymbolicTensor& t : inputs) per.push_back(t.defined() ? t.shape() : Shape{});
  const size_t outs = custom_output_shapes(custom_op_def(id), per, cat("user-defined op '", op, "'")).size();
  const SymbolicTensor first = make_node(op_node(OpKind::Custom, inputs,
                                                 CustomAttrs{id, false, static_cast<int32_t>(inputs.size()),
                                                             static_cast<int32_t>(outs)},
                                                 std::move(name)));
  std::vector<SymbolicTensor> out;
  for (size_t i = 0; i < outs; ++i) out.emplace_back(first.node(), static_cast<int>(i));
  return out;
}

SymbolicTensor activation(const SymbolicTensor& x, const ActivationAttrs& attrs, std::string name) {
  return make_node(op_node(OpKind::Activation, {x}, attrs, std::move(name)));
}
SymbolicTensor activation(const SymbolicTensor& x, Activation act, std::string name) {
  ActivationAttrs a;
  a.act = act;
  return activation(x, a, std::move(name));
}

SymbolicTensor named(const SymbolicTensor& x, std::string name) {
  SG_REQUIRE(x.defined(), "named: the tensor is undefined");
  const ModelNode& n = *x.node();
  SG_REQUIRE(n.kind == ModelNode::Kind::Op, "named('", name, "'): only an op's result can be renamed here; ",
             n.kind == ModelNode::Kind::Layer ? "give the layer its name (set_name / name=)" : "inputs are named when made");
  auto copy = std::make_shared<ModelNode>(n);
  check_name(name, "a model node's");
  copy->name = std::move(name);
  copy->shapes.clear();
  return make_node(std::move(copy), x.index());
}

Model::Model(std::vector<SymbolicTensor> inputs, SymbolicTensor output)
    : Model(std::move(inputs), {{"output", std::move(output)}}) {}

Model::Model(std::vector<SymbolicTensor> inputs, std::vector<std::pair<std::string, SymbolicTensor>> outputs)
    : inputs_(std::move(inputs)) {
  SG_REQUIRE(!inputs_.empty(), "model: no inputs");
  SG_REQUIRE(!outputs.empty(), "model: no outputs");
  std::set<const ModelNode*> input_nodes;
  for (const SymbolicTensor& t : inputs_) {
    SG_REQUIRE(t.defined() && t.node()->kind == ModelNode::Kind::Input, "model: input '", t.name(),
               "' is not an Input (a model's inputs are the tensors Input made)");
    SG_REQUIRE(input_nodes.insert(t.node().get()).second, "model: input '", t.name(), "' is listed twice");
    SG_REQUIRE(std::find(input_names_.begin(), input_names_.end(), t.name()) == input_names_.end(),
               "model: two inputs are named '", t.name(), "'");
    input_names_.push_back(t.name());
  }
  for (auto& [name, t] : outputs) {
    check_name(name, "a model output's");
    SG_REQUIRE(t.defined(), "model: output '", name, "' is undefined");
    SG_REQUIRE(std::find(output_names_.begin(), output_names_.end(), name) == output_names_.end(),
               "model: two outputs are named '", name, "'");
    output_names_.push_back(name);
    outputs_.push_back(t);
  }
  // Every node the outputs need, found backwards; an Input not among the inputs is an error.
  std::map<uint64_t, std::shared_ptr<const ModelNode>> needed;
  std::vector<std::pair<std::shared_ptr<const ModelNode>, std::string>> pending;
  for (size_t i = 0; i < outputs_.size(); ++i) pending.emplace_back(outputs_[i].node(), output_names_[i]);
  while (!pending.empty()) {
    auto [n, reader] = pending.back();
    pending.pop_back();
    if (!needed.emplace(n->id, n).second) continue;
    SG_REQUIRE(n->kind != ModelNode::Kind::Input || input_nodes.count(n.get()), "model: output '", reader,
               "' depends on input '", n->display(), "', which is not among the model's inputs (",
               [&] {
                 std::string s;
                 for (const std::string& in : input_names_) s += (s.empty() ? "" : ", ") + in;
                 return s;
               }(),
               ")");
    for (const SymbolicTensor& t : n->inputs) pending.emplace_back(t.node(), reader);
  }
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!needed.count(inputs_[i].node()->id))
      warnings_.push_back(cat("model: input '", input_names_[i], "' is not used by any output"));
  // Labels: a node's name, else its kind and position; layers' parameter prefixes: their name,
  // else their position among the model's layers.
  std::set<std::string> labels(input_names_.begin(), input_names_.end());
  std::map<const Layer*, std::string> prefixes;
  std::map<std::string, const Layer*> named_layers;
  int position = 0, layer_index = 0;
  for (const auto& [id, n] : needed) {
    Step s{n, "", ""};
    if (n->kind == ModelNode::Kind::Input) {
      s.label = n->name;
    } else {
      if (n->kind == ModelNode::Kind::Layer) {
        const Layer* l = n->layer.get();
        if (!prefixes.count(l)) {
          if (!l->name().empty()) {
            auto [it, fresh] = named_layers.emplace(l->name(), l);
            SG_REQUIRE(fresh || it->second == l, "model: two different layers are named '", l->name(),
                       "' (one layer object applied twice shares its weights; two need two names)");
          }
          prefixes[l] = l->name().empty() ? std::to_string(layer_index++) : l->name();
        }
        s.prefix = prefixes[l];
      }
      s.label = n->name.empty() ? cat(n->kind_name(), "_", position) : n->name;
      if (n->kind == ModelNode::Kind::Layer && !n->name.empty()) {
        // A named layer applied more than once: its calls are "enc", "enc@1", ...
        int k = 0;
        for (const Step& earlier : steps_) k += earlier.node->layer == n->layer;
        if (k) s.label = cat(n->name, "@", k);
      }
      SG_REQUIRE(labels.insert(s.label).second, "model: two nodes are named '", s.label, "'");
    }
    ++position;
    steps_.push_back(std::move(s));
  }
}

Shape Model::input_shape(const std::string& name) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (input_names_[i] == name) return inputs_[i].shape();
  throw Error(cat("model: no input named '", name, "'"));
}
DType Model::input_dtype(const std::string& name) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (input_names_[i] == name) return inputs_[i].dtype();
  throw Error(cat("model: no input named '", name, "'"));
}
Shape Model::output_shape(const std::string& name) const {
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (output_names_[i] == name) return outputs_[i].shape();
  throw Error(cat("model: no output named '", name, "'"));
}

std::vector<TensorId> Model::build_all(GraphBuilder& g, const std::vector<TensorId>& inputs, const std::string& prefix) {
  SG_REQUIRE(inputs.size() == inputs_.size(), "model: ", inputs.size(), " input tensors for ", inputs_.size(),
             " inputs");
  std::map<const ModelNode*, std::vector<TensorId>> values;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    TensorId x = inputs[i];
    const Shape& xs = g.program().tensor(x).shape;
    const Shape& want = inputs_[i].shape();
    SG_REQUIRE(xs.size() >= 2 && numel(xs) / xs[0] == numel(want), "model input '", input_names_[i], "' takes ",
               shape_str(want), " per sample, got ", shape_str(xs));
    if (Shape(xs.begin() + 1, xs.end()) != want)
      x = reshape_rows(g, x, want, join_name(prefix, input_names_[i] + ".shaped"));
    values[inputs_[i].node().get()] = {x};
  }
  for (const Step& s : steps_) {
    if (s.node->kind == ModelNode::Kind::Input) continue;
    std::vector<TensorId> in;
    for (const SymbolicTensor& t : s.node->inputs) in.push_back(values.at(t.node().get())[static_cast<size_t>(t.index())]);
    values[s.node.get()] = emit(g, *s.node, in, join_name(prefix, s.label), join_name(prefix, s.prefix));
  }
  std::vector<TensorId> out;
  for (const SymbolicTensor& t : outputs_) out.push_back(values.at(t.node().get())[static_cast<size_t>(t.index())]);
  return out;
}

TensorId Model::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  SG_REQUIRE(inputs_.size() == 1 && outputs_.size() == 1, "a model of ", inputs_.size(), " inputs and ",
             outputs_.size(), " outputs used as a layer: a layer takes one input and makes one output; "
             "train it with named inputs and losses instead");
  return build_all(g, {x}, prefix)[0];
}

std::string Model::describe() const {
  std::map<const ModelNode*, std::string> labels;
  std::string s = "model(";
  for (const Step& st : steps_) {
    labels[st.node.get()] = st.label;
    const ModelNode& n = *st.node;
    if (n.kind == ModelNode::Kind::Input) {
      s += cat(st.label, " = input", shape_str(n.shapes[0]), n.dtype == DType::I32 ? " i32" : "", "; ");
    } else if (n.kind == ModelNode::Kind::Layer) {
      s += cat(st.label, " = ", n.layer->describe(), "[", st.prefix, "](", node_args(n, labels), "); ");
    } else {
      Op op;
      op.kind = n.op;
      op.attrs = n.attrs;
      const OpDef& def = op_def(n.op);
      const std::string attrs =
          n.op == OpKind::Reshape ? cat("to ", shape_str(n.shapes[0])) : def.attrs_text ? def.attrs_text(op) : "";
      s += cat(st.label, " = ", op_kind_name(n.op), "(", node_args(n, labels), attrs.empty() ? "" : "; " + attrs,
               "); ");
    }
  }
  s += "outputs ";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    s += cat(i ? ", " : "", output_names_[i], "=", labels.at(outputs_[i].node().get()));
    if (outputs_[i].node()->shapes.size() > 1) s += cat("#", outputs_[i].index());
  }
  return s + ")";
}

}  // namespace sg
