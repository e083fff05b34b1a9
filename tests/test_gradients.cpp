// Gradients of every op and of whole programs against central finite differences of an
// independent float64 forward evaluation.
#include <functional>

#include "test_util.h"

namespace sg::test {
namespace {

struct Case {
  std::string name;
  LayerPtr model;
  std::shared_ptr<Loss> loss;
  Shape input;
  // The input batch (default: N(0, 1) features); token models need integer ids.
  std::function<HostArray(uint64_t seed)> make_input = nullptr;
};

// Random labels for a prediction [B, ..., C]: classes in [0, C); per-token targets (rank > 2)
// also get some -1 (no target) labels.
HostArray random_targets(const Shape& pred, uint64_t seed) {
  const Shape ls(pred.begin(), pred.end() - 1);
  HostArray y = random_labels(numel(ls), pred.back(), seed).reshaped(ls);
  if (pred.size() > 2)
    for (int64_t i = 0; i < y.numel(); i += 3) y.data<int32_t>()[i] = -1;
  return y;
}

void check_gradients(const Case& c, uint64_t seed) {
  Built b = build(*c.model, *c.loss, c.input, /*backward=*/true);
  Runner run(b.p);
  std::map<std::string, std::vector<double>> values;
  // Random parameters (biases too: zero biases would hide bias-gradient bugs).
  for (const ParamSpec& s : b.specs) {
    HostArray a = random_f32(s.shape, mix_seed(seed, s.name), 0.6);
    run.set(s.name, a);
    values[s.name] = to_double(a);
  }
  HostArray X = c.make_input ? c.make_input(seed + 1) : random_f32(c.input, seed + 1);
  run.set("input", X);
  values["input"] = to_double(X);
  const Shape pred_shape = b.p.tensor(b.pred).shape;
  HostArray y = c.loss->target_dtype() == DType::I32 ? random_targets(pred_shape, seed + 2)
                                                      : random_f32(pred_shape, seed + 2);
  run.set("target", y);
  values["target"] = to_double(y);
  run.run();

  const double loss = eval_double(b.p, values);
  EXPECT_TRUE(near(run.get("loss").data<float>()[0], loss, 1e-5, 1e-5)) << c.name << " loss";

  const double h = 1e-6;
  for (const ParamGrad& pg : b.grads) {
    const std::string& pname = b.p.tensor(pg.param).name;
    HostArray g = run.get(b.p.tensor(pg.grad).name);
    std::vector<double>& p = values[pname];
    for (size_t k = 0; k < p.size(); ++k) {
      const double keep = p[k];
      p[k] = keep + h;
      double lp = eval_double(b.p, values);
      p[k] = keep - h;
      double lm = eval_double(b.p, values);
      p[k] = keep;
      double fd = (lp - lm) / (2 * h);
      EXPECT_TRUE(near(g.data<float>()[k], fd, 2e-5, 2e-4)) << c.name << ": d loss / d " << pname << "[" << k << "]";
    }
  }
}

TEST(Gradients, DenseEveryActivationWithMse) {
  for (Activation a : {Activation::None, Activation::ReLU, Activation::GELU, Activation::Tanh,
                       Activation::Sigmoid, Activation::Sin, Activation::Softplus}) {
    Case c{cat("dense ", activation_name(a)), sequential({dense(5, a), dense(3)}),
           std::make_shared<MeanSquaredError>(), {4, 3}};
    check_gradients(c, 10 + static_cast<int>(a));
  }
}

TEST(Gradients, DenseWithoutBias) {
  check_gradients({"no bias", sequential({dense(4, Activation::Tanh, Init::xavier(), false), dense(2, Activation::None, std::nullopt, false)}),
                   std::make_shared<MeanSquaredError>(Reduction::Sum), {3, 5}},
                  21);
}

TEST(Gradients, SeedMlpSoftmaxCrossEntropyMeanAndSum) {
  check_gradients({"seed mlp mean", sequential({dense(16, Activation::ReLU), dense(11)}),
                   std::make_shared<SoftmaxCrossEntropy>(Reduction::Mean), {8, 12}},
                  31);
  check_gradients({"seed mlp sum", sequential({dense(16, Activation::ReLU), dense(11)}),
                   std::make_shared<SoftmaxCrossEntropy>(Reduction::Sum), {8, 12}},
                  32);
}

TEST(Gradients, ResidualDag) {
  auto model = sequential({dense(6, Activation::Tanh),
                           residual(sequential({dense(6, Activation::GELU), dense(6)})),
                           residual(dense(6, Activation::Sin)), dense(4)});
  check_gradients({"residual", model, std::make_shared<SoftmaxCrossEntropy>(), {5, 3}}, 41);
}

TEST(Gradients, SharedParameters) {
  // The same layer object applied three times: one weight, gradients accumulated.
  auto shared = dense(5, Activation::Tanh);
  auto model = sequential({shared, shared, residual(shared), dense(2)});
  Built b = build(*model, MeanSquaredError(), {3, 5}, true);
  int params = 0;
  for (const TensorInfo& t : b.p.tensors()) params += t.role == Role::Parameter;
  EXPECT_EQ(params, 4);  // shared weight + bias, last layer weight + bias
  check_gradients({"shared", model, std::make_shared<MeanSquaredError>(), {3, 5}}, 51);
}

// Feature rows viewed as images: a dense layer in front makes the first image op's input
// gradient (dgrad) part of what is checked.
LayerPtr image_block(Shape image, std::vector<LayerPtr> layers) {
  auto s = sequential(std::move(layers));
  s->set_input_shape(std::move(image));
  return s;
}

TEST(Gradients, Conv2dPaddingStrideDilationBiasRelu) {
  struct G {
    int64_t kernel, stride, padding, dilation;
    Activation act;
    bool bias;
  };
  int seed = 60;
  for (G c : {G{3, 1, 1, 1, Activation::ReLU, true}, G{3, 2, 1, 1, Activation::None, true},
              G{2, 2, 0, 1, Activation::ReLU, false}, G{3, 1, 2, 2, Activation::None, false},
              G{3, 2, 2, 2, Activation::ReLU, true}, G{1, 1, 0, 1, Activation::None, true}}) {
    Conv2dOptions o{c.kernel, c.stride, c.padding, c.dilation, c.act, std::nullopt, c.bias};
    auto model = sequential({dense(5 * 6 * 3, Activation::Tanh),
                             image_block({5, 6, 3}, {conv2d(4, o), conv2d(3, {2, 1, 1, 1, Activation::ReLU}), flatten()}),
                             dense(3)});
    check_gradients({cat("conv kernel ", c.kernel, " stride ", c.stride, " padding ", c.padding, " dilation ",
                         c.dilation, " ", activation_name(c.act), c.bias ? " bias" : " no bias"),
                     model, std::make_shared<MeanSquaredError>(), {2, 4}},
                    ++seed);
  }
}

TEST(Gradients, MaxPoolGlobalAvgPoolFlatten) {
  auto model = sequential({dense(6 * 5 * 2, Activation::Tanh),
                           image_block({6, 5, 2}, {max_pool2d(2), conv2d(3, {3, 1, 1, 1, Activation::ReLU}),
                                                   max_pool2d(3, 1, 1), flatten()}),
                           dense(4)});
  check_gradients({"max pools and flatten", model, std::make_shared<SoftmaxCrossEntropy>(), {3, 5}}, 71);
  auto gap = sequential({dense(4 * 4 * 3, Activation::Tanh),
                         image_block({4, 4, 3}, {conv2d(5, {3, 2, 1}), max_pool2d(2, 1), global_avg_pool()}),
                         dense(3)});
  check_gradients({"global average pool", gap, std::make_shared<SoftmaxCrossEntropy>(), {3, 5}}, 72);
}

// Token ids [B, S] in [0, vocab) as f32 (how batches carry them).
std::function<HostArray(uint64_t)> token_ids(Shape s, int64_t vocab) {
  return [=](uint64_t seed) {
    HostArray a(DType::F32, s);
    Rng r(seed);
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(r.below(vocab));
    return a;
  };
}

TEST(Gradients, DenseAndLayerNormOnSequences) {
  // [B, S, E] features: dense and layer norm act on each position's row.
  auto model = sequential({dense(6, Activation::Tanh), layer_norm(), dense(5, Activation::GELU), layer_norm(1e-3),
                           dense(3)});
  Case c{"sequence rows", model, std::make_shared<MeanSquaredError>(), {2, 4, 3}};
  Built b = build(*model, *c.loss, c.input, false);
  EXPECT_EQ(b.p.tensor(b.pred).shape, (Shape{2, 4, 3}));
  check_gradients(c, 81);
}

TEST(Gradients, EmbeddingWithAndWithoutPositions) {
  // Ids repeat within a batch (vocab 5, 12 tokens): the scatter-add must sum them.
  check_gradients({"embedding + positions", sequential({embedding(5, 4, 6), dense(3)}),
                   std::make_shared<MeanSquaredError>(), {3, 4}, token_ids({3, 4}, 5)},
                  82);
  check_gradients({"embedding", sequential({embedding(7, 3), layer_norm(), dense(2)}),
                   std::make_shared<MeanSquaredError>(Reduction::Sum), {2, 5}, token_ids({2, 5}, 7)},
                  83);
}

TEST(Gradients, SelfAttentionCausalAndNot) {
  for (bool causal : {false, true})
    for (int64_t heads : {1, 2}) {
      // Q, K and V come from one input, so dQ, dK and dV all reach the projection weights and,
      // accumulated, the embedding table.
      auto model = sequential({embedding(6, 4, 5), self_attention(heads, causal), dense(3)});
      check_gradients({cat("attention ", heads, " heads", causal ? " causal" : ""), model,
                       std::make_shared<MeanSquaredError>(), {2, 5}, token_ids({2, 5}, 6)},
                      90 + heads + (causal ? 10 : 0));
    }
}

TEST(Gradients, TransformerBlockPerTokenCrossEntropyWithIgnoredTargets) {
  auto block = sequential({residual(sequential({layer_norm(), self_attention(2, true)})),
                           residual(sequential({layer_norm(), dense(8, Activation::GELU), dense(4)})), layer_norm(),
                           dense(6)});
  auto model = sequential({embedding(6, 4, 4), block});
  check_gradients({"transformer block", model, std::make_shared<SoftmaxCrossEntropy>(), {3, 4}, token_ids({3, 4}, 6)},
                  111);
  check_gradients({"transformer block sum", model, std::make_shared<SoftmaxCrossEntropy>(Reduction::Sum), {2, 4},
                   token_ids({2, 4}, 6)},
                  112);
}

}  // namespace
}  // namespace sg::test
