// Sequence layers: token embedding, layer norm and multi-head self-attention. Tokens are
// [batch, positions, features] tensors.
#include <cmath>

#include "stepgraph/nn.h"

namespace sg {

namespace {

std::string base_name(const std::string& prefix, const char* fallback) { return prefix.empty() ? fallback : prefix; }

void no_jets(GraphBuilder& g, const char* layer, const std::string& prefix) {
  SG_REQUIRE(!g.jet(), layer, " layer '", prefix, "' cannot be used in a physics-informed (jet) model");
}

}  // namespace

Embedding::Embedding(int64_t vocab, int64_t dim, int64_t positions) : vocab_(vocab), dim_(dim), positions_(positions) {
  SG_REQUIRE(vocab > 0, "embedding: vocab must be positive, got ", vocab);
  SG_REQUIRE(dim > 0, "embedding: dim must be positive, got ", dim);
  SG_REQUIRE(positions >= 0, "embedding: positions must be >= 0 (0: no position table), got ", positions);
}

TensorId Embedding::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  no_jets(g, "embedding", prefix);
  const Shape xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() == 2, "embedding layer '", prefix, "' expects token ids [batch, positions], got ", shape_str(xs));
  SG_REQUIRE(positions_ == 0 || xs[1] <= positions_, "embedding layer '", prefix, "': sequences of ", xs[1],
             " tokens are longer than its ", positions_, " positions");
  TensorId table = g.parameter(this, "table", join_name(prefix, "table"), {vocab_, dim_}, Init::normal(0.02), vocab_, dim_);
  TensorId pos = positions_ > 0 ? g.parameter(this, "positions", join_name(prefix, "positions"), {positions_, dim_},
                                              Init::normal(0.02), positions_, dim_)
                                : kNone;
  const std::string base = base_name(prefix, "embedding");
  TensorId Y = g.tensor(base + ".out", {xs[0], xs[1], dim_}, Role::Activation);
  Op op;
  op.kind = OpKind::Embedding;
  op.name = base + ".embedding";
  op.in = {x, table, pos};
  op.out = {Y};
  g.program().add_op(std::move(op));
  return Y;
}

std::string Embedding::describe() const {
  return cat("embedding(vocab ", vocab_, ", dim ", dim_, positions_ ? cat(", positions ", positions_) : "", ")");
}

LayerNorm::LayerNorm(double eps) : eps_(eps) { SG_REQUIRE(eps > 0, "layer_norm: eps must be positive, got ", eps); }

TensorId LayerNorm::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  no_jets(g, "layer_norm", prefix);
  const Shape xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() >= 2, "layer_norm layer '", prefix, "' expects a [batch, ..., features] input, got ",
             shape_str(xs));
  const int64_t E = xs.back(), R = numel(xs) / E;
  TensorId gain = g.parameter(this, "gain", join_name(prefix, "gain"), {E}, Init::ones(), E, E);
  TensorId shift = g.parameter(this, "shift", join_name(prefix, "shift"), {E}, Init::zeros(), E, E);
  const std::string base = base_name(prefix, "layer_norm");
  TensorId Y = g.tensor(base + ".out", xs, Role::Activation);
  TensorId mean = g.tensor(base + ".mean", {R}, Role::Activation);
  TensorId rstd = g.tensor(base + ".rstd", {R}, Role::Activation);
  Op op;
  op.kind = OpKind::LayerNorm;
  op.name = base + ".layer_norm";
  op.in = {x, gain, shift};
  op.out = {Y, mean, rstd};
  op.attrs = NormAttrs{eps_};
  g.program().add_op(std::move(op));
  return Y;
}

std::string LayerNorm::describe() const { return cat("layer_norm(eps=", eps_, ")"); }

SelfAttention::SelfAttention(int64_t heads, bool causal, bool bias) : heads_(heads), causal_(causal), bias_(bias) {
  SG_REQUIRE(heads > 0 && heads <= (1 << 16), "self_attention: heads must be in [1, 65536], got ", heads);
}

TensorId SelfAttention::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  no_jets(g, "self_attention", prefix);
  const Shape xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() == 3, "self_attention layer '", prefix, "' expects [batch, positions, features], got ",
             shape_str(xs));
  const int64_t E = xs[2];
  SG_REQUIRE(E % heads_ == 0, "self_attention layer '", prefix, "': width ", E, " does not split into ", heads_,
             " heads");
  const std::string base = base_name(prefix, "attention");
  // x W^T + b for projection `which` (dim -> dim). The key projection has no bias: it would add
  // q . b to every score of a query alike, which the softmax ignores, so its gradient is zero
  // (only rounding noise, which Adam would turn into a random walk that differs per backend).
  auto project = [&](TensorId in, const std::string& which) {
    TensorId W = g.parameter(this, which + ".weight", join_name(prefix, which + ".weight"), {E, E}, Init::xavier(), E, E);
    TensorId b = bias_ && which != "key"
                     ? g.parameter(this, which + ".bias", join_name(prefix, which + ".bias"), {E}, Init::zeros(), E, E)
                     : kNone;
    TensorId Y = g.tensor(base + "." + which, xs, Role::Activation);
    Op op;
    op.kind = OpKind::Dense;
    op.name = base + "." + which;
    op.in = {in, W, b};
    op.out = {Y, kNone};
    op.attrs = DenseAttrs{Activation::None};
    g.program().add_op(std::move(op));
    return Y;
  };
  TensorId Q = project(x, "query"), K = project(x, "key"), V = project(x, "value");
  TensorId O = g.tensor(base + ".heads", xs, Role::Activation);
  TensorId L = g.tensor(base + ".logsumexp", {xs[0], heads_, xs[1]}, Role::Activation);
  Op op;
  op.kind = OpKind::Attention;
  op.name = base + ".attention";
  op.in = {Q, K, V};
  op.out = {O, L};
  op.attrs = AttentionAttrs{static_cast<int32_t>(heads_), causal_, 1.0 / std::sqrt(static_cast<double>(E / heads_))};
  g.program().add_op(std::move(op));
  return project(O, "output");
}

std::string SelfAttention::describe() const {
  return cat("self_attention(", heads_, " heads", causal_ ? ", causal" : "", bias_ ? ", bias)" : ", no bias)");
}

TransformerBlock::TransformerBlock(int64_t heads, bool causal, int64_t mlp) : heads_(heads), mlp_(mlp), causal_(causal) {
  SG_REQUIRE(heads > 0 && heads <= (1 << 16), "transformer_block: heads must be in [1, 65536], got ", heads);
  SG_REQUIRE(mlp > 0, "transformer_block: mlp must be positive, got ", mlp);
}

TensorId TransformerBlock::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  const Shape& xs = g.program().tensor(x).shape;
  SG_REQUIRE(xs.size() == 3, "transformer_block layer '", prefix, "' expects [batch, positions, features], got ",
             shape_str(xs));
  if (!body_) {
    dim_ = xs[2];
    body_ = sequential({residual(sequential({layer_norm(), self_attention(heads_, causal_)})),
                        residual(sequential({layer_norm(), dense(mlp_, Activation::GELU), dense(dim_)}))});
  }
  SG_REQUIRE(xs[2] == dim_, "transformer_block layer '", prefix, "' was built for width ", dim_, ", got ",
             shape_str(xs));
  return body_->build(g, x, prefix);
}

std::string TransformerBlock::describe() const {
  return cat("transformer_block(", heads_, " heads", causal_ ? ", causal" : "", ", mlp ", mlp_, ")");
}

std::shared_ptr<TransformerBlock> transformer_block(int64_t heads, bool causal, int64_t mlp) {
  return std::make_shared<TransformerBlock>(heads, causal, mlp);
}

std::shared_ptr<Embedding> embedding(int64_t vocab, int64_t dim, int64_t positions) {
  return std::make_shared<Embedding>(vocab, dim, positions);
}
std::shared_ptr<LayerNorm> layer_norm(double eps) { return std::make_shared<LayerNorm>(eps); }
std::shared_ptr<SelfAttention> self_attention(int64_t heads, bool causal, bool bias) {
  return std::make_shared<SelfAttention>(heads, causal, bias);
}

}  // namespace sg
