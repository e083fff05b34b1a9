// User-defined losses (custom_loss.h): the loss a user kernel writes trains a model, its gradient
// scale is inferred from its CPU kernel and reported, padded batches honour the valid rows, bad
// definitions and throwing kernels are named, and on CUDA its kernel runs inside the step graph.
#include <cmath>
#include <cstring>

#include "custom_test_ops.h"
#include "stepgraph/config.h"
#include "stepgraph/custom_loss.h"
#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

std::shared_ptr<Sequential> mlp() { return sequential({dense(8, Activation::Tanh), dense(3)}); }

double log_cosh_mean(const HostArray& pred, const HostArray& target, int64_t rows) {
  const int64_t per = pred.numel() / pred.shape()[0];
  double sum = 0;
  for (int64_t i = 0; i < rows * per; ++i) sum += std::log(std::cosh(double(pred.data<float>()[i]) - target.data<float>()[i]));
  return sum / static_cast<double>(rows * per);
}

// A sum of squares: its gradient scale is 1.
void register_sum_of_squares() {
  if (is_registered_loss("test_sum_sq")) return;
  CustomLossDef d;
  d.name = "test_sum_sq";
  d.cpu = [](const LossArgs& a) {
    double s = 0;
    for (int64_t i = 0; i < numel(a.pred_shape); ++i) {
      const double e = static_cast<double>(a.pred[i]) - a.target[i];
      s += e * e;
      a.dpred[i] = static_cast<float>(2 * e);
    }
    *a.loss = static_cast<float>(s);
  };
  register_loss(d);
}

// A registered loss goes by its name in a config (its kernel is all its settings).
TEST(CustomLoss, ARegisteredLossFromAConfig) {
  register_sum_of_squares();
  RunConfig cfg = parse_config(nlohmann::json::parse(
      R"J({"model": {"layers": [{"type": "dense", "units": 3}]}, "data": {"source": "synthetic_regression",
           "features": 5, "targets": 3}, "loss": {"type": "test_sum_sq"}})J"));
  EXPECT_EQ(cfg.loss->describe(), CustomLoss("test_sum_sq").describe());
  EXPECT_TRUE(contains_all(error_of([] {
                             parse_config(nlohmann::json::parse(
                                 R"J({"model": {"layers": [{"type": "dense", "units": 3}]}, "data": {"source":
                                      "synthetic_regression", "features": 5, "targets": 3},
                                      "loss": {"type": "test_sum_sq", "reduction": "sum"}})J"));
                           }),
                           {"loss.reduction: unknown key; allowed keys here: type"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             parse_config(nlohmann::json::parse(
                                 R"J({"model": {"layers": [{"type": "dense", "units": 3}]}, "loss": {"type": "dice"}})J"));
                           }),
                           {"loss.type: unknown value \"dice\"; allowed: softmax_cross_entropy, mse, l1, huber, "
                            "bce_with_logits, or the name of a loss registered with sg::register_loss"}));
}

TEST(CustomLoss, AUserLossTrainsAndItsScaleIsInferred) {
  register_test_ops();
  Trainer t(mlp(), std::make_shared<CustomLoss>("test_log_cosh"), std::make_shared<Adam>(1e-2), Device::CPU, 3);
  t.compile({16, 5});
  const HostArray X = random_f32({16, 5}, 1), y = random_f32({16, 3}, 2);
  const double first = log_cosh_mean(t.predict(X), y, 16);
  const float l0 = t.one_step(X, y);
  EXPECT_TRUE(near(l0, first, 1e-7, 1e-5)) << l0 << " vs " << first;
  float l = l0;
  for (int i = 0; i < 100; ++i) l = t.one_step(X, y);
  EXPECT_LT(l, 0.5 * l0);
  const std::string explain = t.explain();
  EXPECT_NE(explain.find("loss: user loss 'test_log_cosh'; gradient scale 0.0625 (mean over 16 rows)"), std::string::npos)
      << explain;
  EXPECT_NE(explain.find("custom_loss('test_log_cosh', user-defined)"), std::string::npos) << explain;
  const GradScale g = infer_grad_scale(CustomLoss("test_log_cosh"), {16, 3});
  EXPECT_NEAR(g.scale, 1.0 / 16, 1e-6);
  EXPECT_EQ(g.reduction, Reduction::Mean);
  register_sum_of_squares();
  const GradScale s = infer_grad_scale(CustomLoss("test_sum_sq"), {16, 3});
  const GradScale m = infer_grad_scale(MeanSquaredError(), {16, 3});  // a built-in: per element
  EXPECT_NEAR(m.scale, 1.0 / 48, 1e-12);
  EXPECT_EQ(m.reduction, Reduction::Mean);
  EXPECT_NEAR(s.scale, 1.0, 1e-5);
  EXPECT_EQ(s.reduction, Reduction::Sum);
}

// Shape policy pad: a batch of 10 rows padded to 16 has the loss of those 10 rows.
TEST(CustomLoss, PaddedRowsAreNotCounted) {
  register_test_ops();
  TrainerOptions o;
  o.shape_policy = ShapePolicy::Pad;
  Trainer t(mlp(), std::make_shared<CustomLoss>("test_log_cosh"), std::make_shared<Adam>(1e-2), Device::CPU, 3, o);
  t.compile({16, 5});
  const HostArray X = random_f32({10, 5}, 1), y = random_f32({10, 3}, 2);
  const double want = log_cosh_mean(t.predict(X), y, 10);
  EXPECT_TRUE(near(t.one_step(X, y), want, 1e-7, 1e-5));
}

TEST(CustomLoss, BadDefinitionsAndKernelsAreNamed) {
  CustomLossDef none;
  none.name = "test_loss_no_cpu";
  EXPECT_THROW(register_loss(none), Error);
  try {
    CustomLoss("test_unregistered_loss");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no user-defined loss named 'test_unregistered_loss'"), std::string::npos)
        << e.what();
  }
  if (!is_registered_loss("test_loss_throws")) {
    CustomLossDef d;
    d.name = "test_loss_throws";
    d.cpu = [](const LossArgs& a) {
      if (a.pred_shape[0] > 1) throw std::runtime_error("planted");
      *a.loss = 1;
    };
    register_loss(d);
  }
  Trainer t(mlp(), std::make_shared<CustomLoss>("test_loss_throws"), std::make_shared<Adam>(1e-3), Device::CPU, 1);
  t.compile({4, 5});
  try {
    t.one_step(random_f32({4, 5}, 1), random_f32({4, 3}, 2));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("user-defined loss 'test_loss_throws': planted"), std::string::npos) << e.what();
  }
  // A target of the wrong shape is refused before anything runs.
  register_test_ops();
  Trainer u(mlp(), std::make_shared<CustomLoss>("test_log_cosh"), std::make_shared<Adam>(1e-3), Device::CPU, 1);
  u.compile({4, 5});
  EXPECT_THROW(u.one_step(random_f32({4, 5}, 1), random_f32({4, 2}, 2)), Error);
}

TEST(CustomLoss, CudaKernelRunsInTheStepGraph) {
  REQUIRE_GPU();
  register_test_ops();
  if (!test_ops_have_cuda()) GTEST_SKIP() << "the tests were built without a CUDA compiler for their user kernels";
  auto make = [](Device d, ExecMode mode) {
    TrainerOptions o;
    o.mode = mode;
    auto t = std::make_unique<Trainer>(mlp(), std::make_shared<CustomLoss>("test_log_cosh"), std::make_shared<Adam>(1e-2),
                                       d, 4, o);
    t->compile({16, 5});
    return t;
  };
  auto cpu = make(Device::CPU, ExecMode::Eager), graph = make(Device::CUDA, ExecMode::Graph),
       eager = make(Device::CUDA, ExecMode::Eager);
  const HostArray X = random_f32({16, 5}, 1), y = random_f32({16, 3}, 2);
  for (int i = 0; i < 10; ++i) {
    const float lc = cpu->one_step(X, y), lg = graph->one_step(X, y), le = eager->one_step(X, y);
    EXPECT_EQ(lg, le) << "step " << i;
    EXPECT_TRUE(near(lg, lc, 1e-6, 1e-4)) << "step " << i;
  }
  for (const auto& [name, v] : graph->params())
    EXPECT_EQ(std::memcmp(v.raw(), eager->params().at(name).raw(), v.nbytes()), 0) << name;
  EXPECT_EQ(graph->capture_count(), 1);
}

}  // namespace
}  // namespace sg::test
