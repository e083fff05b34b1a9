// Dropout: its mask (rate, scaling, independence of steps, keys and batch size), and its place in
// a trainer: training steps only, deterministic from the seed, exact on resume and on padded
// batches, and on CUDA the same masks as on the CPU. The op's gradient is in the op-table test.
#include <cstring>

#include "backend/dropout_math.h"
#include "stepgraph/config.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

TEST(Dropout, MaskKeepsOneMinusPAndDependsOnKeyAndStep) {
  const int64_t n = 200000;
  for (double p : {0.1, 0.5, 0.9}) {
    int64_t kept = 0, same_next_step = 0, same_other_key = 0;
    const uint32_t th = dropout_threshold(p);
    for (int64_t i = 0; i < n; ++i) {
      const bool k = dropout_keep(7, 3, i, th);
      kept += k;
      same_next_step += k == dropout_keep(7, 4, i, th);
      same_other_key += k == dropout_keep(8, 3, i, th);
    }
    const double q = 1 - p, sd = std::sqrt(p * q / n);
    EXPECT_NEAR(static_cast<double>(kept) / n, q, 5 * sd) << "p " << p;
    // Independent masks agree on a fraction p^2 + q^2 of the elements.
    EXPECT_NEAR(static_cast<double>(same_next_step) / n, p * p + q * q, 0.01) << "p " << p;
    EXPECT_NEAR(static_cast<double>(same_other_key) / n, p * p + q * q, 0.01) << "p " << p;
  }
  EXPECT_EQ(dropout_threshold(0.0), 0u);  // p = 0 keeps everything
  for (int64_t i = 0; i < 1000; ++i) EXPECT_TRUE(dropout_keep(1, 0, i, 0));
}

std::shared_ptr<Sequential> net(double p) {
  return sequential({dense(32, Activation::Tanh), dropout(p), dense(3)});
}

std::unique_ptr<Trainer> trainer(double p, uint64_t seed = 0, TrainerOptions o = {}, Device d = Device::CPU) {
  auto t = std::make_unique<Trainer>(net(p), std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), d,
                                     seed, o);
  t->compile({16, 5});
  return t;
}

TEST(Dropout, TrainingStepsDropAndPredictionsDoNot) {
  const HostArray X = random_f32({16, 5}, 1), Y = random_f32({16, 3}, 2);
  auto t = trainer(0.5);
  // Evaluate and predict: the network without dropout, the same every time.
  const EvalResult before = t->evaluate(X, Y);
  EXPECT_EQ(t->evaluate(X, Y).loss, before.loss);
  const HostArray p1 = t->predict(X), p2 = t->predict(X);
  EXPECT_EQ(std::memcmp(p1.raw(), p2.raw(), p1.nbytes()), 0);
  // The training step's loss (on the parameters evaluate saw) is the loss of a dropped network.
  const float step_loss = t->one_step(X, Y);
  EXPECT_GT(std::fabs(step_loss - before.loss), 1e-4) << step_loss << " vs " << before.loss;
  // p = 0: the step's loss is evaluate's.
  auto none = trainer(0.0);
  const double eval0 = none->evaluate(X, Y).loss;
  EXPECT_FLOAT_EQ(none->one_step(X, Y), static_cast<float>(eval0));
  // The explain names the op in the training step.
  EXPECT_NE(t->explain().find("dropout"), std::string::npos);
}

TEST(Dropout, SeedFixesTheMasksAndResumeContinuesThem) {
  const HostArray X = random_f32({16, 5}, 3), Y = random_f32({16, 3}, 4);
  auto a = trainer(0.3, 5), b = trainer(0.3, 5), c = trainer(0.3, 6);
  for (Trainer* t : {a.get(), b.get(), c.get()}) t->set_batch(X, Y);
  expect_bitwise_same_steps({a.get(), b.get()}, 6);
  for (int s = 0; s < 6; ++s) c->launch();
  // Another seed: other initial weights and masks; the masks alone differ too (same weights).
  auto d = trainer(0.3, 6);
  d->set_params(a->params());
  d->set_batch(X, Y);
  auto e = trainer(0.3, 5);
  e->set_params(a->params());
  e->set_batch(X, Y);
  d->launch(), e->launch();
  EXPECT_NE(d->loss(), e->loss());
  // Resumed at step 4, a run draws the masks of steps 4, 5, ... as the uninterrupted one.
  auto src = trainer(0.3, 9), resumed = trainer(0.3, 9);
  src->set_batch(X, Y);
  resumed->set_batch(X, Y);
  expect_same_steps_after_load(*src, {resumed.get()}, "dropout_resume.safetensors", 4, 5);
}

TEST(Dropout, APaddedBatchTrainsAsTheExactOne) {
  const HostArray X = random_f32({10, 5}, 5), Y = random_f32({10, 3}, 6);
  TrainerOptions pad;
  pad.shape_policy = ShapePolicy::Pad;
  auto padded = trainer(0.4, 2, pad);  // compiled for 16 rows
  auto exact = std::make_unique<Trainer>(net(0.4), std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2),
                                         Device::CPU, 2);
  exact->compile({10, 5});
  for (int s = 0; s < 4; ++s) EXPECT_FLOAT_EQ(padded->one_step(X, Y), exact->one_step(X, Y)) << "step " << s;
  const auto pa = padded->params(), ex = exact->params();
  for (const auto& [name, v] : pa) EXPECT_EQ(array_diff(ex.at(name), v).relmax, 0.0) << name;
}

TEST(Dropout, ConfigAndErrors) {
  const std::string cfg = R"({"model": {"layers": [{"type": "dense", "units": 8}, {"type": "dropout", "p": P},
                                                   {"type": "dense", "units": 2}]},
                              "data": {"source": "synthetic_regression", "targets": 2}})";
  auto with = [&](const std::string& p) { return std::string(cfg).replace(cfg.find("P"), 1, p); };
  EXPECT_EQ(parse_config_text(with("0.25"), "c").model->describe().find("dropout(0.25)") != std::string::npos, true);
  EXPECT_ERROR(parse_config_text(with("1"), "c"), "model.layers[1].p", "must be below 1");
  EXPECT_ERROR(parse_config_text(with("-0.1"), "c"), "model.layers[1].p", "expected a number in [0, 1]");
  EXPECT_ERROR(dropout(1.0), "dropout: p must be in [0, 1), got 1");
  EXPECT_ERROR(dropout(std::nan("")), "dropout: p must be in [0, 1)");
}

TEST(Dropout, CudaDrawsTheCpuMasks) {
  REQUIRE_GPU();
  const HostArray X = random_f32({16, 5}, 7), Y = random_f32({16, 3}, 8);
  TrainerOptions eager_mode;
  eager_mode.mode = ExecMode::Eager;
  auto cpu = trainer(0.5, 3), graph = trainer(0.5, 3, {}, Device::CUDA), eager = trainer(0.5, 3, eager_mode, Device::CUDA);
  for (int s = 0; s < 8; ++s) {
    const float lc = cpu->one_step(X, Y), lg = graph->one_step(X, Y), le = eager->one_step(X, Y);
    EXPECT_NEAR(lg, lc, 1e-5 * std::fabs(lc)) << "step " << s;
    EXPECT_EQ(std::memcmp(&lg, &le, 4), 0) << "graph replay vs eager at step " << s;
  }
  EXPECT_EQ(graph->capture_count(), 1);
  const auto c = cpu->params(), g = graph->params();
  for (const auto& [name, v] : c) EXPECT_LT(array_diff(v, g.at(name)).rel, 1e-5) << name;
}

}  // namespace
}  // namespace sg::test
