// Model graphs (the functional API): symbolic tensors made by Inputs, layers applied to them and
// tensor ops between them, and a Model from chosen inputs to named outputs.
//
//   auto x1 = sg::Input({3}, "x1"), x2 = sg::Input({3}, "x2");
//   auto enc = sg::dense(8, sg::Activation::Tanh);
//   enc->set_name("enc");                           // parameters enc.weight, enc.bias
//   auto a = sg::call(enc, x1), b = sg::call(enc, x2);   // one layer twice: shared weights
//   auto c = sg::concat({a * b, a - b});
//   sg::Model model({x1, x2}, {{"u", sg::call(sg::dense(1), c) + a.sum(-1, true)}});
//
// Every node knows its per-sample shape when it is made: a layer or op that does not fit its
// inputs is an Error there, naming the node and the shapes. A Model is also a Layer, so a model
// of one input and one output goes wherever a layer does (a Sequential, a Trainer, a checkpoint).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/nn.h"

namespace sg {

struct ModelNode;

// One output of a model-graph node. Cheap to copy (it shares the node).
class SymbolicTensor {
 public:
  SymbolicTensor() = default;
  SymbolicTensor(std::shared_ptr<const ModelNode> node, int index) : node_(std::move(node)), index_(index) {}
  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const;  // per sample: without the batch axis
  DType dtype() const;
  // The node's name as given, or its kind ("dense", "concat") when it was given none.
  std::string name() const;
  const std::shared_ptr<const ModelNode>& node() const { return node_; }
  int index() const { return index_; }

  // Over one feature axis (1.., or negative from the end; the batch axis is axis 0).
  SymbolicTensor sum(int axis = -1, bool keepdims = false) const;
  SymbolicTensor mean(int axis = -1, bool keepdims = false) const;
  SymbolicTensor slice(int axis, int64_t begin, int64_t end) const;  // [begin, end) along axis
  SymbolicTensor transpose(int axis_a = -2, int axis_b = -1) const;   // two feature axes swapped
  // The same values per sample in another shape (row-major; one size may be -1: inferred).
  SymbolicTensor reshape(Shape shape) const;

 private:
  std::shared_ptr<const ModelNode> node_;
  int index_ = 0;
};

// A model input: `shape` per sample (e.g. {3}, or {8, 8, 1} for NHWC images), f32 or i32 (token ids).
SymbolicTensor Input(Shape shape, std::string name, DType dtype = DType::F32);

// The layer applied to x: a new node; the same layer object applied again shares its parameters.
// (Named call, not apply: std::apply would be found by argument lookup on the shared_ptr.)
SymbolicTensor call(const LayerPtr& layer, const SymbolicTensor& x);

// Elementwise, broadcasting per axis (equal sizes, or one of them 1; the ranks must agree).
SymbolicTensor operator+(const SymbolicTensor& a, const SymbolicTensor& b);
SymbolicTensor operator-(const SymbolicTensor& a, const SymbolicTensor& b);
SymbolicTensor operator*(const SymbolicTensor& a, const SymbolicTensor& b);
SymbolicTensor operator/(const SymbolicTensor& a, const SymbolicTensor& b);
// With numbers: a scale and shift, a X + b.
SymbolicTensor operator+(const SymbolicTensor& x, double c);
SymbolicTensor operator+(double c, const SymbolicTensor& x);
SymbolicTensor operator-(const SymbolicTensor& x, double c);
SymbolicTensor operator-(double c, const SymbolicTensor& x);
SymbolicTensor operator*(const SymbolicTensor& x, double c);
SymbolicTensor operator*(double c, const SymbolicTensor& x);
SymbolicTensor operator/(const SymbolicTensor& x, double c);
SymbolicTensor operator-(const SymbolicTensor& x);
SymbolicTensor scale_shift(const SymbolicTensor& x, double scale, double shift, std::string name = "");

// Joined along a feature axis; split into pieces of the given sizes along one.
SymbolicTensor concat(const std::vector<SymbolicTensor>& xs, int axis = -1, std::string name = "");
std::vector<SymbolicTensor> split(const SymbolicTensor& x, const std::vector<int64_t>& sizes, int axis = -1,
                                  std::string name = "");
// Batched matrix products: per sample, a [..., M, K] times b [..., K, N] (the same leading axes),
// each operand optionally transposed over its last two axes.
SymbolicTensor matmul(const SymbolicTensor& a, const SymbolicTensor& b, bool trans_a = false, bool trans_b = false,
                      std::string name = "");
// A standalone activation (leaky_relu's slope and elu's alpha in `attrs`).
SymbolicTensor activation(const SymbolicTensor& x, Activation act, std::string name = "");
SymbolicTensor activation(const SymbolicTensor& x, const ActivationAttrs& attrs, std::string name = "");
// Names a node made by an operator (u = sg::named(a + b, "u")): for explain, errors and describe.
SymbolicTensor named(const SymbolicTensor& x, std::string name);

class Model : public Layer {
 public:
  // outputs in order, by name. Every output must depend only on the listed inputs.
  Model(std::vector<SymbolicTensor> inputs, std::vector<std::pair<std::string, SymbolicTensor>> outputs);
  // One output, named "output".
  Model(std::vector<SymbolicTensor> inputs, SymbolicTensor output);

  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  Shape input_shape(const std::string& name) const;   // per sample
  DType input_dtype(const std::string& name) const;
  Shape output_shape(const std::string& name) const;  // per sample
  // What is legal but probably a mistake (an input no output reads), one line each.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Emits the model for batch tensors of the inputs (in input_names() order, [batch, shape...],
  // or [batch, features] rows holding the same count); returns the outputs in output_names() order.
  std::vector<TensorId> build_all(GraphBuilder& g, const std::vector<TensorId>& inputs, const std::string& prefix);
  // As a layer: one input and one output.
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  // One line per node ("c = concat(mul_2, sub_3, t; axis=-1)"), joined by "; ".
  std::string describe() const override;

 private:
  struct Step {
    std::shared_ptr<const ModelNode> node;
    std::string label;   // unique among the model's nodes
    std::string prefix;  // layers: their parameters' prefix
  };
  std::vector<SymbolicTensor> inputs_;
  std::vector<std::string> input_names_, output_names_;
  std::vector<SymbolicTensor> outputs_;
  std::vector<Step> steps_;  // every node the outputs need, in creation (topological) order
  std::vector<std::string> warnings_;
};
using ModelPtr = std::shared_ptr<Model>;

}  // namespace sg
