#include "stepgraph/nn.h"

#include <cmath>

#include "stepgraph/optim.h"
#include "stepgraph/rng.h"

namespace sg {

Dense::Dense(int64_t units, Activation act, std::optional<Init> init, bool bias, bool amax)
    : units_(units), act_(act), bias_(bias), amax_(amax) {
  SG_REQUIRE(units > 0, "dense: units must be positive, got ", units);
  init_ = init ? *init
               : (act == Activation::ReLU || act == Activation::GELU || act == Activation::GELUErf ? Init::he() : Init::xavier());
  SG_REQUIRE(init_.kind != Init::Kind::Normal || init_.std > 0, "dense: normal init needs std > 0, got ",
             init_.std);
}

TensorId GraphBuilder::step_counter() {
  const TensorId t = p_.find(kStepTensor);
  return t != kNone ? t : tensor(kStepTensor, {1}, Role::StepScalar, DType::I32);
}

Dropout::Dropout(double p) : p_(p) {
  SG_REQUIRE(std::isfinite(p) && p >= 0 && p < 1, "dropout: p must be in [0, 1), got ", p);
}

std::string Dropout::describe() const { return cat("dropout(", p_, ")"); }

TensorId Dropout::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  SG_REQUIRE(!g.jet(), "dropout layer '", prefix, "': physics-informed networks take no dropout (their loss reads ",
             "derivatives of one deterministic function)");
  if (!g.training() || p_ == 0) return x;
  const TensorInfo& info = g.program().tensor(x);
  SG_REQUIRE(info.dtype == DType::F32, "dropout layer '", prefix, "' takes f32 values, got ", dtype_name(info.dtype));
  const std::string base = prefix.empty() ? "dropout" : prefix;
  TensorId y = g.tensor(base + ".out", info.shape, Role::Activation);
  Op op;
  op.kind = OpKind::Dropout;
  op.name = base + ".dropout";
  op.in = {x, g.step_counter()};
  op.out = {y};
  // Keyed by the output's name: each call of one layer object draws its own mask.
  op.attrs = DropoutAttrs{p_, mix_seed(g.seed(), "dropout:" + g.program().tensor(y).name)};
  g.program().add_op(std::move(op));
  return y;
}

std::shared_ptr<Dropout> dropout(double p) { return std::make_shared<Dropout>(p); }

TensorId Dense::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  const Shape xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() == 2 || (xs.size() > 2 && !g.jet()), "dense layer '", prefix,
             "' expects a [batch, features] (or [batch, positions, features]) input, got ", shape_str(xs));
  const int64_t B = xs[0], I = xs.back();
  Shape ys = xs;  // each row of the leading dimensions maps I features to units
  ys.back() = units_;
  TensorId W = g.parameter(this, "weight", join_name(prefix, "weight"), {units_, I}, init_, I, units_);
  TensorId b = bias_ ? g.parameter(this, "bias", join_name(prefix, "bias"), {units_}, Init::zeros(), I, units_)
                     : kNone;
  std::string base = prefix.empty() ? "dense" : prefix;
  if (const JetSpec* js = g.jet()) {
    // On jets: the product acts on every component; the bias only on the values; then the
    // activation's jet rule.
    TensorId A = g.tensor(base + ".pre", {B, units_}, Role::Activation);
    Op op;
    op.kind = OpKind::Dense;
    op.name = base + ".dense";
    op.in = {x, W, b};
    op.out = {A, kNone};
    op.attrs = DenseAttrs{Activation::None, g.jet_value_rows()};
    g.program().add_op(std::move(op));
    if (act_ == Activation::None) return A;
    TensorId Y = g.tensor(base + ".out", {B, units_}, Role::Activation);
    Op a;
    a.kind = OpKind::JetActivation;
    a.name = base + "." + activation_name(act_);
    a.in = {A};
    a.out = {Y};
    a.attrs = JetAttrs{*js, act_, g.jet_head()};
    g.program().add_op(std::move(a));
    return Y;
  }
  TensorId Y = g.tensor(base + ".out", ys, Role::Activation);
  TensorId Z = activation_needs_preact(act_) ? g.tensor(base + ".preact", ys, Role::Activation) : kNone;
  Op op;
  op.kind = OpKind::Dense;
  op.name = base + ".dense";
  op.in = {x, W, b};
  op.out = {Y, Z};
  op.attrs = DenseAttrs{act_};
  g.program().add_op(std::move(op));
  if (amax_) {
    TensorId m = g.tensor(base + ".amax", {1}, Role::Activation);
    g.program().tensor(m).live_out = true;  // read after the step
    Op a;
    a.kind = OpKind::AbsMax;
    a.name = base + ".amax";
    a.in = {Y};
    a.out = {m};
    g.program().add_op(std::move(a));
  }
  return Y;
}

std::string Dense::describe() const {
  return cat("dense(", units_, ", ", activation_name(act_), ", init=", init_.str(), bias_ ? ", bias" : ", no bias",
             amax_ ? ", amax)" : ")");
}

Sequential::Sequential(std::vector<LayerPtr> layers) : layers_(std::move(layers)) {
  for (size_t i = 0; i < layers_.size(); ++i)
    SG_REQUIRE(layers_[i] != nullptr, "sequential: layer ", i, " is null");
}

Sequential& Sequential::add(LayerPtr layer) {
  SG_REQUIRE(layer != nullptr, "sequential: cannot add a null layer");
  layers_.push_back(std::move(layer));
  return *this;
}

Sequential& Sequential::set_input_shape(Shape per_sample) {
  for (int64_t d : per_sample)
    SG_REQUIRE(d > 0, "sequential: input shape ", shape_str(per_sample), " must have positive dimensions");
  input_shape_ = std::move(per_sample);
  return *this;
}

TensorId Sequential::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  SG_REQUIRE(!layers_.empty(), "sequential '", prefix, "' has no layers");
  if (!input_shape_.empty()) {
    const Shape& xs = g.program().tensor(x).shape;
    SG_REQUIRE(xs.size() >= 2 && numel(xs) / xs[0] == numel(input_shape_), "the model's input shape ",
               shape_str(input_shape_), " holds ", numel(input_shape_), " values per sample, but the input is ",
               shape_str(xs));
    x = reshape_rows(g, x, input_shape_, prefix.empty() ? "input.shaped" : prefix + ".input_shaped");
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string& own = layers_[i]->name();
    x = layers_[i]->build(g, x, join_name(prefix, own.empty() ? std::to_string(i) : own));
  }
  return x;
}

std::string Sequential::describe() const {
  std::string s = "sequential(";
  if (!input_shape_.empty()) s += "input_shape=" + shape_str(input_shape_) + ", ";
  for (size_t i = 0; i < layers_.size(); ++i) s += (i ? ", " : "") + layers_[i]->describe();
  return s + ")";
}

Residual::Residual(LayerPtr body) : body_(std::move(body)) {
  SG_REQUIRE(body_ != nullptr, "residual: body is null");
}

TensorId Residual::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  TensorId h = body_->build(g, x, prefix);
  const Shape& xs = g.program().tensor(x).shape;
  const Shape& hs = g.program().tensor(h).shape;
  SG_REQUIRE(xs == hs, "residual block '", prefix, "': the body maps ", shape_str(xs), " to ",
             shape_str(hs), "; a residual body must keep the shape");
  std::string base = prefix.empty() ? "residual" : prefix;
  TensorId y = g.tensor(base + ".sum", xs, Role::Activation);
  Op op;
  op.kind = OpKind::Add;
  op.name = base + ".add";
  op.in = {x, h};
  op.out = {y};
  g.program().add_op(std::move(op));
  return y;
}

std::string Residual::describe() const { return "residual(" + body_->describe() + ")"; }

FourierFeatures::FourierFeatures(int64_t features, double sigma, bool trainable)
    : features_(features), sigma_(sigma), trainable_(trainable) {
  SG_REQUIRE(features > 0, "fourier_features: features must be positive, got ", features);
  SG_REQUIRE(sigma > 0, "fourier_features: sigma must be positive, got ", sigma);
}

TensorId FourierFeatures::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  const Shape& xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() == 2, "fourier features '", prefix, "' expect a [points, inputs] input, got ", shape_str(xs));
  const int64_t rows = xs[0], d = xs[1];
  TensorId Bm = g.parameter(this, "B", join_name(prefix, "B"), {features_, d}, Init::normal(sigma_), d, features_,
                            trainable_);
  std::string base = prefix.empty() ? "fourier" : prefix;
  TensorId P = g.tensor(base + ".proj", {rows, features_}, Role::Activation);
  Op op;
  op.kind = OpKind::Dense;  // x B^T: a product without bias (linear, so it acts on jets as is)
  op.name = base + ".project";
  op.in = {x, Bm, kNone};
  op.out = {P, kNone};
  op.attrs = DenseAttrs{Activation::None, g.jet() ? g.jet_value_rows() : 0};
  g.program().add_op(std::move(op));
  TensorId F = g.tensor(base + ".out", {rows, 2 * features_}, Role::Activation);
  Op f;
  f.kind = OpKind::FourierFeatures;
  f.name = base + ".sincos";
  f.in = {P};
  f.out = {F};
  f.attrs = JetAttrs{g.jet() ? *g.jet() : JetSpec{}, Activation::None, g.jet_head()};
  g.program().add_op(std::move(f));
  return F;
}

std::string FourierFeatures::describe() const {
  return cat("fourier_features(", features_, ", sigma=", sigma_, trainable_ ? ", trainable)" : ", fixed)");
}

std::shared_ptr<Dense> dense(int64_t units, Activation act, std::optional<Init> init, bool bias, bool amax) {
  return std::make_shared<Dense>(units, act, init, bias, amax);
}
std::shared_ptr<Sequential> sequential(std::vector<LayerPtr> layers) {
  return std::make_shared<Sequential>(std::move(layers));
}
std::shared_ptr<Residual> residual(LayerPtr body) { return std::make_shared<Residual>(std::move(body)); }

}  // namespace sg
