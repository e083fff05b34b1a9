// Batch norm in a trainer: training steps normalise with the batch's statistics and update the
// running ones (checked against the formulas by hand), predict and evaluate use the running
// statistics, checkpoints carry them (resume is exact), padded or data-parallel batches and
// jets are refused, and on CUDA the steps match the CPU's (graph replay equal to eager). The
// ops' gradients are in the op-table test.
#include <cmath>
#include <cstring>

#include "stepgraph/config.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

// Per channel (the last axis) over the rows of X: the mean and the biased variance.
void channel_stats(const HostArray& X, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t C = X.shape().back(), R = X.numel() / C;
  const float* x = X.data<float>();
  mean.assign(C, 0.0), var.assign(C, 0.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) mean[c] += x[r * C + c] / static_cast<double>(R);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) var[c] += (x[r * C + c] - mean[c]) * (x[r * C + c] - mean[c]) / static_cast<double>(R);
}

std::unique_ptr<Trainer> trainer(std::shared_ptr<Sequential> net, Shape in, TrainerOptions o = {}, Device d = Device::CPU) {
  auto t = std::make_unique<Trainer>(net, std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), d, 3, o);
  t->compile(in);
  return t;
}

std::shared_ptr<Sequential> mlp() {
  // An activation between each dense layer and its batch norm: a bias right before a batch norm
  // has zero gradient but for rounding, which Adam would turn into a walk that differs per backend.
  return sequential({dense(16, Activation::Tanh), batch_norm(), dense(8, Activation::ReLU), batch_norm(0.3, 1e-3), dense(3)});
}

// NHWC: a 4x4 image of 3 channels per row, a convolution-free stack so the CPU build covers it.
std::shared_ptr<Sequential> image_net() {
  auto s = sequential({batch_norm(), flatten(), dense(3)});
  s->set_input_shape({4, 4, 3});
  return s;
}

TEST(BatchNorm, TrainingNormalisesWithTheBatchAndUpdatesTheRunningStatistics) {
  // Features [B, C] and images [B, H, W, C]: a lone batch norm, then MSE against T, so the
  // step's loss is the mean of (xhat - T)^2 with the batch's statistics (gain 1, shift 0).
  for (const bool image : {false, true}) {
    SCOPED_TRACE(image ? "NHWC images" : "features");
    const Shape xs = image ? Shape{6, 4, 4, 3} : Shape{10, 4};
    const HostArray X = random_f32(xs, 1, 2.0), T = random_f32({xs[0], numel(xs) / xs[0]}, 2);
    const HostArray Xrows = X.reshaped({xs[0], numel(xs) / xs[0]});
    std::shared_ptr<Sequential> net = image ? sequential({batch_norm(0.2), flatten()}) : sequential({batch_norm(0.2)});
    if (image) net->set_input_shape({4, 4, 3});
    auto t = trainer(net, Xrows.shape());
    std::vector<double> mean, var;
    channel_stats(X, mean, var);
    const int64_t C = xs.back(), n = X.numel() / C;
    std::vector<double> rm(C, 0.0), rv(C, 1.0);
    for (int s = 0; s < 3; ++s) {
      // The step's loss, from the gain and shift it starts with (1 and 0 at first).
      const auto before = t->params();
      const float *g = before.at("0.gain").data<float>(), *b = before.at("0.shift").data<float>();
      double want = 0;
      for (int64_t k = 0; k < X.numel(); ++k) {
        const int64_t c = k % C;
        const double y = (X.data<float>()[k] - mean[c]) / std::sqrt(var[c] + 1e-5) * g[c] + b[c];
        want += (y - T.data<float>()[k]) * (y - T.data<float>()[k]) / static_cast<double>(X.numel());
      }
      EXPECT_NEAR(t->one_step(Xrows, T), want, 1e-5 * want) << "step " << s;
      const auto p = t->params();
      for (int64_t c = 0; c < C; ++c) {
        rm[c] = 0.8 * rm[c] + 0.2 * mean[c];
        rv[c] = 0.8 * rv[c] + 0.2 * var[c] * n / (n - 1);  // the unbiased variance
        EXPECT_NEAR(p.at("0.running_mean").data<float>()[c], rm[c], 1e-6 * (1 + std::fabs(rm[c]))) << c;
        EXPECT_NEAR(p.at("0.running_var").data<float>()[c], rv[c], 1e-6 * rv[c]) << c;
      }
    }
  }
}

TEST(BatchNorm, PredictAndEvaluateUseTheRunningStatistics) {
  const HostArray X = random_f32({12, 4}, 3, 3.0), T = random_f32({12, 4}, 4);
  auto t = trainer(sequential({batch_norm()}), {12, 4});
  for (int s = 0; s < 4; ++s) t->one_step(X, T);
  const auto p = t->params();
  // Evaluate a batch of other rows: normalised by the running statistics, not its own.
  const HostArray Xe = random_f32({12, 4}, 5, 0.5);
  const HostArray pred = t->predict(Xe);
  double loss = 0;
  for (int64_t k = 0; k < Xe.numel(); ++k) {
    const int64_t c = k % 4;
    const double y = (Xe.data<float>()[k] - p.at("0.running_mean").data<float>()[c]) /
                         std::sqrt(p.at("0.running_var").data<float>()[c] + 1e-5) * p.at("0.gain").data<float>()[c] +
                     p.at("0.shift").data<float>()[c];
    EXPECT_NEAR(pred.data<float>()[k], y, 1e-5 * (1 + std::fabs(y))) << k;
    loss += (y - T.data<float>()[k]) * (y - T.data<float>()[k]) / static_cast<double>(Xe.numel());
  }
  EXPECT_NEAR(t->evaluate(Xe, T).loss, loss, 1e-5 * loss);
  // Predicting changes nothing: the running statistics are the training steps'.
  const auto after = t->params();
  for (const auto& [name, v] : p) EXPECT_EQ(array_diff(v, after.at(name)).relmax, 0.0) << name;
  EXPECT_NE(t->explain().find("batch_norm"), std::string::npos);
}

TEST(BatchNorm, CheckpointsCarryTheRunningStatisticsAndResumeExactly) {
  const HostArray X = random_f32({16, 6}, 6), Y = random_f32({16, 3}, 7);
  auto src = trainer(mlp(), {16, 6}), resumed = trainer(mlp(), {16, 6});
  src->set_batch(X, Y);
  resumed->set_batch(X, Y);
  for (int s = 0; s < 3; ++s) src->launch();
  const std::string path = std::string(SG_TEST_TMPDIR) + "/batch_norm_resume.safetensors";
  src->save(path);
  resumed->load(path);
  for (const char* name : {"1.running_mean", "1.running_var", "3.running_mean", "3.running_var"}) {
    const HostArray a = src->params().at(name), b = resumed->params().at(name);
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << name;
    // Updated by the steps (they start at 0 and 1), so the comparison above means something.
    const float start = std::string(name).find("var") != std::string::npos ? 1.0f : 0.0f;
    float moved = 0;
    for (int64_t k = 0; k < a.numel(); ++k) moved = std::max(moved, std::fabs(a.data<float>()[k] - start));
    EXPECT_GT(moved, 1e-3f) << name;
  }
  expect_bitwise_same_steps({src.get(), resumed.get()}, 4);
  const HostArray pa = src->predict(X), pb = resumed->predict(X);
  EXPECT_EQ(std::memcmp(pa.raw(), pb.raw(), pa.nbytes()), 0);
}

TEST(BatchNorm, PaddedBatchesAreRefusedAndRecaptureTrainsTheSmallerOne) {
  TrainerOptions pad;
  pad.shape_policy = ShapePolicy::Pad;
  EXPECT_ERROR(trainer(mlp(), {16, 6}, pad), "batch norm '1.batch_norm'", "padded training batches are not supported",
               "shape_policy 'recapture'");
  const HostArray X = random_f32({30, 6}, 8), Y = random_f32({30, 3}, 9);
  EXPECT_ERROR(trainer(mlp(), {16, 6})->set_dataset(X, Y, 16, true, LastBatch::Partial),
               "padded training batches are not supported");
  auto t = trainer(mlp(), {16, 6});
  // Recapture: the last 5 rows get a step of their own, normalised by those 5 rows.
  const HostArray X5 = random_f32({5, 6}, 10), Y5 = random_f32({5, 3}, 11);
  EXPECT_TRUE(std::isfinite(t->one_step(X5, Y5)));
  EXPECT_EQ(t->compile_count(), 2);
  EXPECT_ERROR(t->one_step(random_f32({1, 6}, 12), random_f32({1, 3}, 13)), "batch_norm layer '1'",
               "1 value per channel; training needs at least 2");
  // Evaluation pads freely: the running statistics treat each row alone.
  auto e = trainer(mlp(), {16, 6}, {});
  EXPECT_NO_THROW(e->evaluate(X5, Y5));
}

TEST(BatchNorm, ConfigAndErrors) {
  const std::string cfg = R"({"model": {"layers": [{"type": "dense", "units": 8}, {"type": "batch_norm" EXTRA},
                                                   {"type": "dense", "units": 2}]},
                              "data": {"source": "synthetic_regression", "targets": 2}})";
  auto with = [&](const std::string& extra) { return std::string(cfg).replace(cfg.find("EXTRA"), 5, extra); };
  EXPECT_NE(parse_config_text(with(""), "c").model->describe().find("batch_norm(momentum=0.1, eps=1e-05)"),
            std::string::npos);
  EXPECT_NE(parse_config_text(with(R"(, "momentum": 0.01, "eps": 0.001)"), "c").model->describe().find(
                "batch_norm(momentum=0.01, eps=0.001)"),
            std::string::npos);
  EXPECT_ERROR(parse_config_text(with(R"(, "momentum": 0)"), "c"), "model.layers[1].momentum", "must be above 0");
  EXPECT_ERROR(parse_config_text(with(R"(, "momentum": 1.5)"), "c"), "model.layers[1].momentum");
  EXPECT_ERROR(parse_config_text(with(R"(, "eps": -1)"), "c"), "model.layers[1].eps");
  EXPECT_ERROR(parse_config_text(with(R"(, "p": 0.1)"), "c"), "model.layers[1].p", "unknown key");
  EXPECT_ERROR(batch_norm(0.0), "batch_norm: momentum must be in (0, 1], got 0");
  EXPECT_ERROR(batch_norm(0.1, 0.0), "batch_norm: eps must be positive");
  // Jets (physics-informed networks) are refused, naming the layer.
  Program p;
  GraphBuilder g(p);
  const TensorId x = g.tensor("x", {6, 4}, Role::Input);
  JetSpec js;
  js.d = 1;
  g.set_jet(&js, 3);
  auto bn = batch_norm();
  EXPECT_ERROR(bn->build(g, x, "pinn.1"), "batch_norm layer 'pinn.1'", "physics-informed networks take no batch norm");
  // A [B] input has no channel axis.
  Program q;
  GraphBuilder h(q);
  EXPECT_ERROR(bn->build(h, h.tensor("v", {6}, Role::Input), "bn"), "batch_norm layer 'bn' expects [batch, channels]",
               "got [6]");
}

TEST(BatchNorm, CudaMatchesTheCpuOverSeveralSteps) {
  REQUIRE_GPU();
  TrainerOptions eager_mode;
  eager_mode.mode = ExecMode::Eager;
  struct C { const char* what; std::shared_ptr<Sequential> (*net)(); Shape in; int64_t out; };
  for (const C& c : {C{"features", mlp, {64, 6}, 3}, C{"NHWC images", image_net, {40, 48}, 3}}) {
    SCOPED_TRACE(c.what);
    const HostArray X = random_f32(c.in, 14, 2.0), Y = random_f32({c.in[0], c.out}, 15);
    auto cpu = trainer(c.net(), c.in), graph = trainer(c.net(), c.in, {}, Device::CUDA),
         eager = trainer(c.net(), c.in, eager_mode, Device::CUDA);
    for (int s = 0; s < 6; ++s) {
      const float lc = cpu->one_step(X, Y), lg = graph->one_step(X, Y), le = eager->one_step(X, Y);
      EXPECT_NEAR(lg, lc, 1e-4 * std::fabs(lc)) << "step " << s;
      EXPECT_EQ(std::memcmp(&lg, &le, 4), 0) << "graph replay vs eager at step " << s;
    }
    EXPECT_EQ(graph->capture_count(), 1);
    const auto pc = cpu->params(), pg = graph->params(), pe = eager->params();
    for (const auto& [name, v] : pc) {
      EXPECT_LT(array_diff(v, pg.at(name)).rel, 1e-4) << name;
      EXPECT_EQ(std::memcmp(pg.at(name).raw(), pe.at(name).raw(), v.nbytes()), 0) << name << ": graph vs eager";
    }
    const HostArray yc = cpu->predict(X), yg = graph->predict(X);
    EXPECT_LT(array_diff(yc, yg).rel, 1e-4);
  }
}

}  // namespace
}  // namespace sg::test
