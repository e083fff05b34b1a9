// Layers are builders: given an input tensor they emit coarse ops into a Program and return the
// output tensor. Parameters belong to the layer object, so a layer used twice shares them.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/ir.h"

namespace sg {

// Weight initialisation (biases start at zero).
//   he:     N(0, 2 / fan_in)                      (Kaiming normal, for relu/gelu layers)
//   xavier: U(-a, a), a = sqrt(6 / (fan_in + fan_out))   (Glorot uniform)
//   normal: N(0, std^2)
//   zeros, ones
//   constant: every element the given value (a physics problem's trainable coefficient)
struct Init {
  enum class Kind : uint8_t { He, Xavier, Normal, Zeros, Ones, Constant };
  Kind kind = Kind::He;
  double std = 0.0;  // normal: the standard deviation; constant: the value

  static Init he() { return {Kind::He, 0}; }
  static Init xavier() { return {Kind::Xavier, 0}; }
  static Init normal(double std) { return {Kind::Normal, std}; }
  static Init zeros() { return {Kind::Zeros, 0}; }
  static Init ones() { return {Kind::Ones, 0}; }
  static Init constant(double value) { return {Kind::Constant, value}; }
  std::string str() const;  // "he", "xavier", "normal(0.02)", "zeros", "ones", "constant(0.05)"
};

// How a parameter is initialised: its (fixed) name, shape and rule.
struct ParamSpec {
  std::string name;
  Shape shape;
  Init init;
  int64_t fan_in = 1, fan_out = 1;
};
// Fills the parameter deterministically from (seed, name): adding a layer does not change the
// initial values of the others.
HostArray init_parameter(const ParamSpec& spec, uint64_t seed);

// Emission context: the program under construction and the parameter registry.
class GraphBuilder {
 public:
  explicit GraphBuilder(Program& p) : p_(p) {}
  Program& program() { return p_; }

  // The parameter `local` of layer `owner`: created (named `name`) on first use, the same tensor
  // on every later use by the same owner.
  // trainable = false makes it a Constant: saved and loaded like a parameter, never updated.
  TensorId parameter(const void* owner, const std::string& local, const std::string& name,
                     const Shape& shape, Init init, int64_t fan_in, int64_t fan_out,
                     bool trainable = true);

  // Jet mode (physics-informed training): tensors hold the jets of `points` points (K*points
  // rows, see JetSpec) after `head` rows of plain values; layers then emit jet ops. nullptr:
  // plain values.
  void set_jet(const JetSpec* js, int64_t points, int64_t head = 0) {
    jet_ = js ? *js : JetSpec{};
    jet_on_ = js != nullptr;
    points_ = points;
    head_ = js ? head : 0;
  }
  const JetSpec* jet() const { return jet_on_ ? &jet_ : nullptr; }
  int64_t jet_points() const { return points_; }
  int64_t jet_head() const { return head_; }
  // The rows holding values (that get a bias): the head and the jet's value block.
  int64_t jet_value_rows() const { return head_ + points_; }
  // What the program is for: a training step (the default) or predict / evaluate, which layers
  // such as Dropout leave out; and the seed that keys their random streams (the trainer's).
  void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }
  void set_seed(uint64_t seed) { seed_ = seed; }
  uint64_t seed() const { return seed_; }
  // The step counter (i32 [1], the optimizer's), made on first use.
  TensorId step_counter();
  // A new tensor with a unique name derived from `base`.
  TensorId tensor(const std::string& base, Shape shape, Role role, DType dtype = DType::F32);
  std::string unique_name(const std::string& base) const;

  const std::vector<ParamSpec>& param_specs() const { return specs_; }
  // A persistent tensor (an optimizer's state) that starts at `value` instead of zero.
  void fill(TensorId t, double value) { fills_.push_back({p_.tensor(t).name, value}); }
  const std::vector<std::pair<std::string, double>>& fills() const { return fills_; }
  // The step's total loss, which the optimizer's schedule op watches for NaN and inf (ir.h
  // NanPolicy); set by the trainer before the optimizer is built. kNone: nothing watched.
  void watch_loss(TensorId loss, NanPolicy on_nan) {
    watched_loss_ = loss;
    on_nan_ = on_nan;
  }
  TensorId watched_loss() const { return watched_loss_; }
  NanPolicy on_nan() const { return on_nan_; }

 private:
  Program& p_;
  std::map<std::pair<const void*, std::string>, TensorId> owned_;
  std::vector<ParamSpec> specs_;
  std::vector<std::pair<std::string, double>> fills_;
  JetSpec jet_;
  bool jet_on_ = false;
  int64_t points_ = 0;
  int64_t head_ = 0;
  bool training_ = true;
  uint64_t seed_ = 0;
  TensorId watched_loss_ = kNone;
  NanPolicy on_nan_ = NanPolicy::Stop;
};

inline std::string join_name(const std::string& prefix, const std::string& local) {
  return prefix.empty() ? local : prefix + "." + local;
}

class Layer {
 public:
  virtual ~Layer() = default;
  // Emits this layer's ops for input x and returns the output. `prefix` names its parameters
  // ("0" → "0.weight"). Checks the input shape and says what was expected.
  virtual TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) = 0;
  // One line of hyperparameters, e.g. "dense(256, relu, init=he, bias)".
  virtual std::string describe() const = 0;

  // A layer given a name names its parameters "<name>.weight", ... in a Sequential or a Model
  // (instead of its position). Letters, digits, '_' and '-'; empty: positional.
  const std::string& name() const { return name_; }
  void set_name(std::string name);

 private:
  std::string name_;
};
using LayerPtr = std::shared_ptr<Layer>;

class Dense : public Layer {
 public:
  // init defaults to he for relu/gelu and xavier otherwise. amax: also record max |output| every
  // step (an AbsMax op; Trainer::amax() reads it as '<prefix>.amax').
  Dense(int64_t units, Activation act = Activation::None, std::optional<Init> init = std::nullopt,
        bool bias = true, bool amax = false);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;
  int64_t units() const { return units_; }
  Activation activation() const { return act_; }
  bool has_bias() const { return bias_; }

 private:
  int64_t units_;
  Activation act_;
  Init init_;
  bool bias_;
  bool amax_;
};

class Sequential : public Layer {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<LayerPtr> layers);
  Sequential& add(LayerPtr layer);
  // Views each input row as a sample of this shape before the first layer: {8, 8, 1} makes
  // [batch, 64] feature rows NHWC images [batch, 8, 8, 1] (the config's model.input_shape).
  // Empty: the input as given.
  Sequential& set_input_shape(Shape per_sample);
  const Shape& input_shape() const { return input_shape_; }
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;
  const std::vector<LayerPtr>& layers() const { return layers_; }

 private:
  std::vector<LayerPtr> layers_;
  Shape input_shape_;
};

// y = x + body(x): the body must keep the width. Makes the program a DAG (x has two consumers).
class Residual : public Layer {
 public:
  explicit Residual(LayerPtr body);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;

 private:
  LayerPtr body_;
};

// Random Fourier features: x -> [sin(2 pi x B^T), cos(2 pi x B^T)] with B [features, inputs]
// drawn from N(0, sigma^2); fixed unless trainable. Output width 2 * features.
class FourierFeatures : public Layer {
 public:
  FourierFeatures(int64_t features, double sigma, bool trainable = false);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;

 private:
  int64_t features_;
  double sigma_;
  bool trainable_;
};

// Convolution over NHWC images [batch, height, width, channels] with `filters` square
// kernel x kernel filters (weight [filters, kernel, kernel, channels], KRSC), bias and a fused
// activation (none or relu). Output [batch, P, Q, filters] with P = (H + 2 padding -
// dilation (kernel - 1) - 1) / stride + 1 (Q likewise). init defaults to he for relu and xavier
// otherwise, with fan_in = kernel^2 * channels and fan_out = kernel^2 * filters.
struct Conv2dOptions {
  int64_t kernel = 3, stride = 1, padding = 0, dilation = 1;
  Activation act = Activation::None;
  std::optional<Init> init;
  bool bias = true;
};
class Conv2d : public Layer {
 public:
  Conv2d(int64_t filters, Conv2dOptions options = {});
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;
  int64_t filters() const { return filters_; }

 private:
  int64_t filters_;
  Conv2dOptions o_;
  Init init_;
};

// Max over window x window patches of NHWC images, moving by `stride` (default: the window);
// `padding` (at most window / 2) pads with -infinity. Channels are kept.
class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(int64_t window, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;

 private:
  int64_t window_, stride_, padding_;
};

// The mean over height and width: NHWC [batch, H, W, C] -> [batch, C].
class GlobalAvgPool : public Layer {
 public:
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override { return "global_avg_pool"; }
};

// [batch, d1, d2, ...] -> [batch, d1 * d2 * ...] in row-major (NHWC: h, then w, then channel)
// order; a [batch, features] input passes through unchanged.
class Flatten : public Layer {
 public:
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override { return "flatten"; }
};

// Zeroes each element with probability p in training steps and scales the rest by 1 / (1 - p),
// as torch.nn.Dropout; predict and evaluate pass the input through. The mask comes from the
// device's counter-based generator keyed by (the trainer's seed, the layer's output, the step),
// inside the step graph: resumed runs and graph replays see the same masks.
class Dropout : public Layer {
 public:
  explicit Dropout(double p);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;
  double p() const { return p_; }

 private:
  double p_;
};

// Batch norm over the channels (the last dimension: [B, C] features, NHWC images [B, H, W, C]),
// as torch.nn.BatchNorm1d / BatchNorm2d (affine, tracked running statistics): training steps
// normalise with the batch's mean and biased variance and update the running mean and variance
// (Constants named <prefix>.running_mean / .running_var, saved with the weights) inside the
// step, with the unbiased variance; predict and evaluate use the running statistics. Gain
// starts at 1, shift at 0, running mean at 0, running variance at 1.
class BatchNorm : public Layer {
 public:
  explicit BatchNorm(double momentum = 0.1, double eps = 1e-5);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;
  double momentum() const { return momentum_; }
  double eps() const { return eps_; }

 private:
  double momentum_, eps_;
};

// Sequence models: tokens are [batch, positions, features] tensors.

// Token ids [batch, positions] (f32 holding integers, as batches are f32 feature rows) ->
// vectors [batch, positions, dim]: a learned table [vocab, dim] (N(0, 0.02^2)) plus, with
// `positions` > 0, a learned position table [positions, dim] (N(0, 0.02^2); sequences up to that
// length). Ids outside [0, vocab) are an Error when the step runs.
class Embedding : public Layer {
 public:
  Embedding(int64_t vocab, int64_t dim, int64_t positions = 0);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;
  int64_t positions() const { return positions_; }

 private:
  int64_t vocab_, dim_, positions_;
};

// Normalises each row over the last dimension: (x - mean) / sqrt(var + eps) * gain + shift, gain
// starting at 1 and shift at 0.
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(double eps = 1e-5);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;
  double eps() const { return eps_; }

 private:
  double eps_;
};

// Multi-head self-attention on [batch, positions, dim]: query, key and value projections
// (dense, dim -> dim, xavier), scaled dot-product attention over `heads` heads of dim / heads
// (causal: a position attends to itself and earlier ones only), and an output projection.
// Compose it with residual and layer_norm for a transformer block.
class SelfAttention : public Layer {
 public:
  SelfAttention(int64_t heads, bool causal, bool bias = true);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;

 private:
  int64_t heads_;
  bool causal_, bias_;
};

// A pre-norm transformer block on [batch, positions, dim]:
//   x + self_attention(layer_norm(x)), then h + dense(dim)(gelu(dense(mlp)(layer_norm(h)))).
// Its sub-layers are made on the first build (the width comes from the input) and reused after.
class TransformerBlock : public Layer {
 public:
  TransformerBlock(int64_t heads, bool causal, int64_t mlp);
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override;
  std::string describe() const override;

 private:
  int64_t heads_, mlp_;
  bool causal_;
  int64_t dim_ = 0;
  LayerPtr body_;
};

// Short constructors for readable model definitions:
//   auto model = sg::sequential({sg::dense(256, Activation::ReLU), sg::dense(11)});
std::shared_ptr<Dense> dense(int64_t units, Activation act = Activation::None,
                             std::optional<Init> init = std::nullopt, bool bias = true, bool amax = false);
std::shared_ptr<Sequential> sequential(std::vector<LayerPtr> layers);
std::shared_ptr<Residual> residual(LayerPtr body);
std::shared_ptr<Conv2d> conv2d(int64_t filters, Conv2dOptions options = {});
std::shared_ptr<MaxPool2d> max_pool2d(int64_t window, std::optional<int64_t> stride = std::nullopt,
                                      int64_t padding = 0);
std::shared_ptr<GlobalAvgPool> global_avg_pool();
std::shared_ptr<Flatten> flatten();
std::shared_ptr<Dropout> dropout(double p);
std::shared_ptr<BatchNorm> batch_norm(double momentum = 0.1, double eps = 1e-5);
std::shared_ptr<Embedding> embedding(int64_t vocab, int64_t dim, int64_t positions = 0);
std::shared_ptr<LayerNorm> layer_norm(double eps = 1e-5);
std::shared_ptr<SelfAttention> self_attention(int64_t heads, bool causal, bool bias = true);
std::shared_ptr<TransformerBlock> transformer_block(int64_t heads, bool causal, int64_t mlp);

// Emits a Reshape op: x [batch, ...] viewed as [batch, per_sample...] (same element count).
TensorId reshape_rows(GraphBuilder& g, TensorId x, const Shape& per_sample, const std::string& name);

}  // namespace sg
