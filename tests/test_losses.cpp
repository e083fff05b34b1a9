// The elementwise losses (L1, Huber, BCE with logits) and softmax cross-entropy's label smoothing
// and class weights end to end: hand-checked values, a few training steps that lower each, the
// configuration's keys and errors. Their kernels against float64 finite differences and CUDA
// against the CPU are op-table cases (op_cases.h); torch parity is python/tests/test_losses.py.
#include <gtest/gtest.h>

#include <cmath>

#include "stepgraph/config.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

float loss_of(const LossPtr& loss, const HostArray& pred, const HostArray& target) {
  Program p;
  GraphBuilder g(p);
  const TensorId P = g.tensor("pred", pred.shape(), Role::Input), T = g.tensor("target", target.shape(), Role::Input);
  const LossOutputs lo = loss->build(g, P, T);
  PoisonedRun run(Device::CPU, p);
  run.set("pred", pred);
  run.set("target", target);
  run.exe->run();
  return run.get(lo.loss).data<float>()[0];
}

TEST(Losses, HandCheckedValues) {
  const HostArray pred = HostArray::f32({2, 2}, {0.0f, 2.0f, -1.0f, 0.5f});
  const HostArray target = HostArray::f32({2, 2}, {0.5f, 0.0f, -1.0f, 1.0f});
  // d = -0.5, 2, 0, -0.5
  EXPECT_NEAR(loss_of(std::make_shared<L1Loss>(), pred, target), (0.5 + 2 + 0 + 0.5) / 4, 1e-7);
  EXPECT_NEAR(loss_of(std::make_shared<L1Loss>(Reduction::Sum), pred, target), 3.0, 1e-6);
  // Huber(1): 0.125, 1 * (2 - 0.5) = 1.5, 0, 0.125
  EXPECT_NEAR(loss_of(std::make_shared<HuberLoss>(1.0), pred, target), (0.125 + 1.5 + 0.125) / 4, 1e-7);
  // BCE on logits 0, 2, -1, 0.5 against 0.5, 0, ... (targets as probabilities)
  const HostArray probs = HostArray::f32({2, 2}, {0.5f, 0.0f, 1.0f, 0.25f});
  double want = 0;
  for (int k = 0; k < 4; ++k) {
    const double z = pred.data<float>()[k], t = probs.data<float>()[k], s = 1 / (1 + std::exp(-z));
    want += -(t * std::log(s) + (1 - t) * std::log(1 - s));
  }
  EXPECT_NEAR(loss_of(std::make_shared<BinaryCrossEntropyWithLogits>(), pred, probs), want / 4, 1e-6);
  // Large logits stay finite (the stable form).
  EXPECT_NEAR(loss_of(std::make_shared<BinaryCrossEntropyWithLogits>(), HostArray::f32({1, 2}, {200.0f, -200.0f}),
                      HostArray::f32({1, 2}, {0.0f, 1.0f})),
              200.0, 1e-3);
}

TEST(Losses, EachTrainsAModel) {
  for (LossPtr loss : std::vector<LossPtr>{std::make_shared<L1Loss>(), std::make_shared<HuberLoss>(0.5),
                                           std::make_shared<BinaryCrossEntropyWithLogits>()}) {
    SCOPED_TRACE(loss->describe());
    Trainer t(sequential({dense(16, Activation::Tanh), dense(3)}), loss, std::make_shared<Adam>(1e-2), Device::CPU, 1);
    t.compile({32, 4});
    const HostArray X = random_f32({32, 4}, 5);
    HostArray y = random_f32({32, 3}, 6, 0.5);
    if (loss->describe().rfind("bce", 0) == 0)
      for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = y.data<float>()[i] > 0 ? 1.0f : 0.0f;
    const float first = t.one_step(X, y);
    float last = first;
    for (int s = 0; s < 150; ++s) last = t.one_step(X, y);
    EXPECT_LT(last, 0.7f * first);
  }
}

TEST(Losses, ConfigKeysAndErrors) {
  auto with_loss = [](const std::string& loss) {
    return R"({"model": {"layers": [{"type": "dense", "units": 1}]}, "loss": )" + loss +
           R"(, "data": {"source": "synthetic_regression", "samples": 64, "features": 3, "targets": 1},
               "train": {"steps": 2, "batch_size": 8}})";
  };
  EXPECT_EQ(parse_config_text(with_loss(R"({"type": "huber", "delta": 0.25})"), "c").loss->describe(),
            "huber(delta=0.25, mean)");
  EXPECT_EQ(parse_config_text(with_loss(R"({"type": "l1", "reduction": "sum"})"), "c").loss->describe(), "l1(sum)");
  EXPECT_EQ(parse_config_text(with_loss(R"({"type": "bce_with_logits"})"), "c").loss->describe(),
            "bce_with_logits(mean)");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"type": "huber", "delta": -1})"), "c"), "loss.delta",
               "expected a number in");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"type": "l1", "delta": 1})"), "c"), "loss.delta: unknown key");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"type": "hubber"})"), "c"), "loss.type", "huber", "bce_with_logits");
  EXPECT_ERROR(HuberLoss(0.0), "delta must be a positive number");
}

// Cross-entropy's loss and dlogits on the CPU (labels i32, optional valid-row count).
std::pair<float, HostArray> ce_of(const SoftmaxCrossEntropy& loss, const HostArray& z, const HostArray& y,
                                  int32_t valid = -1) {
  Program p;
  GraphBuilder g(p);
  const TensorId Z = g.tensor("z", z.shape(), Role::Input), Y = g.tensor("y", y.shape(), Role::Input, DType::I32);
  const TensorId V = valid >= 0 ? g.tensor("valid", {1}, Role::Input, DType::I32) : kNone;
  const LossOutputs lo = loss.build(g, Z, Y, V);
  PoisonedRun run(Device::CPU, p);
  run.set("z", z);
  run.set("y", y);
  if (valid >= 0) run.set("valid", HostArray::i32({1}, {valid}));
  run.exe->run();
  return {run.get(lo.loss).data<float>()[0], run.get(lo.dpred)};
}

TEST(Losses, CrossEntropySmoothingAndWeightsHandChecked) {
  const HostArray z = HostArray::f32({2, 3}, {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 2.0f});
  const HostArray y = HostArray::i32({2}, {0, 1});
  const std::vector<float> w = {0.5f, 2.0f, 1.0f};
  // -log p per row and class, then torch's documented loss: target q = (1 - eps) onehot + eps / C,
  // each class weighted, the mean over the rows' w[y].
  double nl[2][3];
  for (int i = 0; i < 2; ++i) {
    const float* r = z.data<float>() + 3 * i;
    const double lse = std::log(std::exp(r[0]) + std::exp(r[1]) + std::exp(r[2]));
    for (int c = 0; c < 3; ++c) nl[i][c] = lse - r[c];
  }
  auto want = [&](double eps, bool weighted, Reduction r) {
    double total = 0, denom = 0;
    for (int i = 0; i < 2; ++i) {
      const int yi = y.data<int32_t>()[i];
      for (int c = 0; c < 3; ++c)
        total += (weighted ? w[c] : 1.0) * ((1 - eps) * (c == yi) + eps / 3) * nl[i][c];
      denom += weighted ? w[yi] : 1.0;
    }
    return r == Reduction::Mean ? total / denom : total;
  };
  for (Reduction r : {Reduction::Mean, Reduction::Sum})
    for (double eps : {0.0, 0.1, 0.4})
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(cat(reduction_name(r), " eps ", eps, weighted ? " weighted" : ""));
        const SoftmaxCrossEntropy loss(r, eps, weighted ? w : std::vector<float>{});
        const auto [got, dz] = ce_of(loss, z, y);
        EXPECT_NEAR(got, want(eps, weighted, r), 1e-6);
        // The gradient of each row sums to 0 (softmax's), whatever the target distribution.
        for (int i = 0; i < 2; ++i) {
          const float* g = dz.data<float>() + 3 * i;
          EXPECT_NEAR(g[0] + g[1] + g[2], 0.0, 1e-6);
        }
      }
  // Unit weights and no smoothing are the plain loss; the default is bitwise the plain kernel.
  const auto [plain, dplain] = ce_of(SoftmaxCrossEntropy(), z, y);
  const auto [unit, dunit] = ce_of(SoftmaxCrossEntropy(Reduction::Mean, 0.0, {1.0f, 1.0f, 1.0f}), z, y);
  EXPECT_NEAR(unit, plain, 1e-6);
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(dunit.data<float>()[k], dplain.data<float>()[k], 1e-7) << k;
  EXPECT_EQ(SoftmaxCrossEntropy().describe(), "softmax_cross_entropy(mean)");
  EXPECT_EQ(SoftmaxCrossEntropy(Reduction::Sum, 0.1, w).describe(),
            "softmax_cross_entropy(label_smoothing=0.1, class_weights[3], sum)");
}

// A padded last batch: rows past `valid` change nothing, the weighted mean included; labels of
// weight 0 count nothing, and a batch whose targets all weigh 0 has loss 0 and no gradient.
TEST(Losses, CrossEntropyWeightsOnPaddedBatches) {
  const HostArray z = random_f32({5, 4}, 3, 2.0);
  const HostArray y = HostArray::i32({5}, {2, 0, 3, 1, 1});
  const SoftmaxCrossEntropy loss(Reduction::Mean, 0.2, {1.0f, 0.0f, 3.0f, 0.5f});
  std::vector<float> head(z.data<float>(), z.data<float>() + 12);
  const auto [part, dpart] = ce_of(loss, HostArray::f32({3, 4}, head), HostArray::i32({3}, {2, 0, 3}));
  const auto [padded, dpadded] = ce_of(loss, z, y, 3);
  EXPECT_FLOAT_EQ(padded, part);
  for (int k = 0; k < 20; ++k) EXPECT_EQ(dpadded.data<float>()[k], k < 12 ? dpart.data<float>()[k] : 0.0f) << k;
  const auto [none, dnone] = ce_of(loss, z, HostArray::i32({5}, {1, 1, 1, 1, 1}));
  EXPECT_EQ(none, 0.0f);
  for (int k = 0; k < 20; ++k) EXPECT_EQ(dnone.data<float>()[k], 0.0f) << k;
}

TEST(Losses, CrossEntropySmoothingAndWeightsTrainAModel) {
  const HostArray X = random_f32({48, 4}, 11);
  std::vector<int32_t> labels(48);
  for (int i = 0; i < 48; ++i) labels[i] = X.data<float>()[4 * i] > 0 ? (X.data<float>()[4 * i + 1] > 0 ? 2 : 1) : 0;
  Trainer t(sequential({dense(16, Activation::Tanh), dense(3)}),
            std::make_shared<SoftmaxCrossEntropy>(Reduction::Mean, 0.1, std::vector<float>{1.0f, 2.0f, 0.5f}),
            std::make_shared<Adam>(1e-2), Device::CPU, 1);
  t.compile({48, 4});
  const HostArray y = HostArray::i32({48}, labels);
  const float first = t.one_step(X, y);
  float last = first;
  for (int s = 0; s < 150; ++s) last = t.one_step(X, y);
  EXPECT_LT(last, 0.6f * first);
  EXPECT_NE(t.explain().find("softmax_cross_entropy(label smoothing 0.1, 3 class weights, mean)"), std::string::npos)
      << t.explain();
  // evaluate's chunks (48 + 48 + 4 rows) add up to the weighted mean over all rows at once.
  const HostArray X2 = random_f32({100, 4}, 12);
  std::vector<int32_t> l2(100);
  for (int i = 0; i < 100; ++i) l2[i] = i % 3;
  const HostArray y2 = HostArray::i32({100}, l2);
  const SoftmaxCrossEntropy same(Reduction::Mean, 0.1, {1.0f, 2.0f, 0.5f});
  EXPECT_NEAR(t.evaluate(X2, y2).loss, ce_of(same, t.predict(X2), y2).first, 1e-5);
}

TEST(Losses, CrossEntropyConfigKeysAndErrors) {
  auto with_loss = [](const std::string& loss) {
    return R"({"model": {"layers": [{"type": "dense", "units": 3}]}, "loss": )" + loss +
           R"(, "data": {"source": "synthetic_classification", "samples": 64, "features": 4, "classes": 3},
               "train": {"steps": 2, "batch_size": 8, "device": "cpu", "log_every": 0}})";
  };
  EXPECT_EQ(parse_config_text(with_loss(R"({"label_smoothing": 0.1, "class_weights": [1, 2.5, 0]})"), "c")
                .loss->describe(),
            "softmax_cross_entropy(label_smoothing=0.1, class_weights[3], mean)");
  EXPECT_EQ(parse_config_text(with_loss(R"({"type": "softmax_cross_entropy", "label_smoothing": 0})"), "c")
                .loss->describe(),
            "softmax_cross_entropy(mean)");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"label_smoothing": 1})"), "c"), "loss.label_smoothing",
               "expected a number in [0, 1), got 1");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"label_smoothing": "0.1"})"), "c"), "loss.label_smoothing",
               "the string \"0.1\"");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"class_weights": 2})"), "c"), "loss.class_weights",
               "expected an array of numbers >= 0, one per class, got the integer 2");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"class_weights": []})"), "c"), "loss.class_weights", "an empty array");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"class_weights": [1, -1, 2]})"), "c"), "loss.class_weights[1]",
               "got -1");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"class_weights": [1, true]})"), "c"), "loss.class_weights[1]",
               "a boolean");
  EXPECT_ERROR(parse_config_text(with_loss(R"({"smoothing": 0.1})"), "c"), "loss.smoothing: unknown key",
               "label_smoothing, class_weights");
  EXPECT_ERROR(SoftmaxCrossEntropy(Reduction::Mean, -0.1), "label_smoothing must be in [0, 1), got -0.1");
  EXPECT_ERROR(SoftmaxCrossEntropy(Reduction::Mean, 0.0, {1.0f, NAN}), "class weight 1", "finite number >= 0");
  // The count against the classes, when the loss meets the logits.
  Trainer t(sequential({dense(4)}), std::make_shared<SoftmaxCrossEntropy>(Reduction::Mean, 0.0, std::vector<float>{1, 2, 3}),
            std::make_shared<SGD>(0.1));
  EXPECT_ERROR(t.compile({8, 5}), "3 class weights", "logits [8, 4] have 4 classes");
}

}  // namespace
}  // namespace sg::test
