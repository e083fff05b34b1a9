// The elementwise losses (L1, Huber, BCE with logits) end to end: hand-checked values, a few
// training steps that lower each, the configuration's keys and errors. Their kernels against
// float64 finite differences and CUDA against the CPU are op-table cases (op_cases.h).
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

}  // namespace
}  // namespace sg::test
