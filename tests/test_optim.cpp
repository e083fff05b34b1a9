// Optimizer updates against the formulas written out independently (PyTorch's documented
// algorithms), over several steps so that momentum and bias corrections matter.
#include <cmath>

#include <cstring>

#include "stepgraph/config.h"
#include "stepgraph/optim.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

struct OptimizerRun {
  Program p;
  std::unique_ptr<Runner> run;
  std::vector<std::string> states;

  OptimizerRun(const Optimizer& opt, int64_t n, std::vector<std::string> state_names)
      : states(std::move(state_names)) {
    GraphBuilder g(p);
    TensorId w = p.add_tensor({"w", {n}, DType::F32, Role::Parameter});
    TensorId gw = p.add_tensor({"grad.w", {n}, DType::F32, Role::Gradient});
    opt.build(g, {{w, gw}});
    run = std::make_unique<Runner>(p);
    run->set(kStepTensor, HostArray::i32({1}, {0}));
    run->set(kHyperTensor, HostArray::f32({2}, {static_cast<float>(opt.lr()), static_cast<float>(opt.weight_decay())}));
    for (const std::string& s : states) run->set("optim." + s + ".w", HostArray(DType::F32, {n}));
  }
};

constexpr int64_t kN = 7;
constexpr int kSteps = 4;

// Runs kSteps of `opt` and of `reference(step, p, g)` on the same gradients.
template <class Ref>
void compare(const Optimizer& opt, std::vector<std::string> states, Ref reference) {
  OptimizerRun r(opt, kN, std::move(states));
  HostArray w = random_f32({kN}, 1);
  r.run->set("w", w);
  std::vector<double> p = to_double(w);
  for (int t = 1; t <= kSteps; ++t) {
    HostArray g = random_f32({kN}, 100 + t);
    r.run->set("grad.w", g);
    r.run->run();
    reference(t, p, to_double(g));
    HostArray got = r.run->get("w");
    for (int64_t k = 0; k < kN; ++k)
      EXPECT_TRUE(near(got.data<float>()[k], p[k], 1e-6, 1e-5)) << opt.describe() << " step " << t << " [" << k << "]";
  }
  EXPECT_EQ(r.run->get(kStepTensor).data<int32_t>()[0], kSteps);
}

TEST(Optimizers, SgdPlainWithWeightDecay) {
  const double lr = 0.1, wd = 0.01;
  compare(SGD(lr, 0, false, wd), {}, [&](int, std::vector<double>& p, std::vector<double> g) {
    for (int64_t k = 0; k < kN; ++k) p[k] -= lr * (g[k] + wd * p[k]);
  });
}

TEST(Optimizers, SgdMomentumAndNesterov) {
  for (bool nesterov : {false, true}) {
    const double lr = 0.05, mu = 0.9, wd = 0.001;
    std::vector<double> buf(kN);
    compare(SGD(lr, mu, nesterov, wd), {"momentum"},
            [&](int t, std::vector<double>& p, std::vector<double> g) {
              for (int64_t k = 0; k < kN; ++k) {
                double gk = g[k] + wd * p[k];
                buf[k] = t == 1 ? gk : mu * buf[k] + gk;
                p[k] -= lr * (nesterov ? gk + mu * buf[k] : buf[k]);
              }
            });
  }
}

TEST(Optimizers, SgdDampening) {
  const double lr = 0.05, mu = 0.8, damp = 0.3;
  std::vector<double> buf(kN);
  compare(SGD(lr, mu, false, 0.0, damp), {"momentum"}, [&](int t, std::vector<double>& p, std::vector<double> g) {
    for (int64_t k = 0; k < kN; ++k) {
      buf[k] = t == 1 ? g[k] : mu * buf[k] + (1 - damp) * g[k];
      p[k] -= lr * buf[k];
    }
  });
}

void adam_reference(bool decoupled) {
  const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
  std::vector<double> m(kN), v(kN);
  auto ref = [&](int t, std::vector<double>& p, std::vector<double> g) {
    for (int64_t k = 0; k < kN; ++k) {
      if (decoupled) p[k] *= 1 - lr * wd;
      else g[k] += wd * p[k];
      m[k] = b1 * m[k] + (1 - b1) * g[k];
      v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k];
      double mhat = m[k] / (1 - std::pow(b1, t)), vhat = v[k] / (1 - std::pow(b2, t));
      p[k] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  };
  if (decoupled) compare(AdamW(lr, b1, b2, eps, wd), {"m", "v"}, ref);
  else compare(Adam(lr, b1, b2, eps, wd), {"m", "v"}, ref);
}

TEST(Optimizers, Adam) { adam_reference(false); }
TEST(Optimizers, AdamW) { adam_reference(true); }

TEST(Optimizers, ScheduledLearningRateAppliesToTheUpdate) {
  const double lr = 0.2;
  Schedule s = Schedule::step(2, 0.5);
  compare(SGD(lr, 0, false, 0, 0, s), {}, [&](int t, std::vector<double>& p, std::vector<double> g) {
    for (int64_t k = 0; k < kN; ++k) p[k] -= s.lr_at(lr, t) * g[k];
  });
}

// clip_grad_norm_ before step(): the gradient scaled by min(1, max / (|g| + 1e-6)), then the
// weight decay added (PyTorch's order).
TEST(Optimizers, ClipNormScalesTheGradientBeforeTheUpdate) {
  const double lr = 0.1, wd = 0.01;
  for (double max_norm : {0.5, 100.0}) {
    SGD opt(lr, 0, false, wd);
    opt.set_clip_norm(max_norm);
    EXPECT_NE(opt.describe().find(cat("clip_norm=", max_norm)), std::string::npos);
    int clipped = 0;
    compare(opt, {}, [&](int, std::vector<double>& p, std::vector<double> g) {
      double n2 = 0;
      for (double x : g) n2 += x * x;
      const double f = std::min(1.0, max_norm / (std::sqrt(n2) + 1e-6));
      clipped += f < 1;
      for (int64_t k = 0; k < kN; ++k) p[k] -= lr * (f * g[k] + wd * p[k]);
    });
    EXPECT_EQ(clipped, max_norm < 1 ? kSteps : 0) << "max_norm " << max_norm;  // the test can tell
  }
}

// The norm is global: over every gradient together, not each alone.
TEST(Optimizers, ClipNormIsOverAllGradientsTogether) {
  Program p;
  GraphBuilder g(p);
  std::vector<ParamGrad> pg;
  for (const char* n : {"a", "b"}) {
    const TensorId w = p.add_tensor({n, {3}, DType::F32, Role::Parameter});
    pg.push_back({w, p.add_tensor({cat("grad.", n), {3}, DType::F32, Role::Gradient})});
  }
  SGD opt(1.0);
  opt.set_clip_norm(1.0);
  opt.build(g, pg);
  Runner run(p);
  run.set(kStepTensor, HostArray::i32({1}, {0}));
  run.set(kHyperTensor, HostArray::f32({2}, {1.0f, 0.0f}));
  run.set("a", HostArray::f32({3}, {0, 0, 0}));
  run.set("b", HostArray::f32({3}, {0, 0, 0}));
  run.set("grad.a", HostArray::f32({3}, {3, 0, 0}));  // |g| = 5 over both
  run.set("grad.b", HostArray::f32({3}, {0, 4, 0}));
  run.run();
  EXPECT_NEAR(run.get("a").data<float>()[0], -3.0 / (5 + 1e-6), 1e-6);
  EXPECT_NEAR(run.get("b").data<float>()[1], -4.0 / (5 + 1e-6), 1e-6);
  EXPECT_NEAR(run.get("optim.grad_norm").data<float>()[0], 5.0f, 1e-6);
  EXPECT_THROW(opt.set_clip_norm(-1), Error);
  EXPECT_THROW(opt.set_clip_norm(std::nan("")), Error);
}

TEST(Optimizers, InvalidHyperparametersAreErrors) {
  EXPECT_THROW(SGD(-1.0), Error);
  EXPECT_THROW(SGD(0.1, 1.5), Error);
  EXPECT_THROW(SGD(0.1, 0.0, true), Error);
  EXPECT_THROW(Adam(1e-3, 1.0), Error);
  EXPECT_THROW(Adam(1e-3, 0.9, 0.999, 0.0), Error);
  EXPECT_THROW(Schedule::cosine(10, 5), Error);
  EXPECT_THROW(Schedule::step(0, 0.5), Error);
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

// A clipped trainer on CUDA follows the CPU's, and graph replay equals eager bitwise.
TEST(Optimizers, ClipNormOnCudaMatchesTheCpu) {
  REQUIRE_GPU();
  const HostArray X = random_f32({32, 6}, 1, 3.0), Y = random_f32({32, 2}, 2, 3.0);
  auto make = [](Device d, ExecMode m) {
    auto opt = std::make_shared<Adam>(1e-2);
    opt->set_clip_norm(0.1);  // well below these gradients' norm: every step clips
    TrainerOptions o;
    o.mode = m;
    auto t = std::make_unique<Trainer>(sequential({dense(700, Activation::Tanh), dense(2)}),
                                       std::make_shared<MeanSquaredError>(), opt, d, 4, o);
    t->compile({32, 6});
    return t;
  };
  auto cpu = make(Device::CPU, ExecMode::Eager), graph = make(Device::CUDA, ExecMode::Graph),
       eager = make(Device::CUDA, ExecMode::Eager);
  for (int s = 0; s < 6; ++s) {
    const float lc = cpu->one_step(X, Y), lg = graph->one_step(X, Y), le = eager->one_step(X, Y);
    EXPECT_NEAR(lg, lc, 1e-5 * std::fabs(lc)) << "step " << s;
    EXPECT_EQ(std::memcmp(&lg, &le, 4), 0) << "step " << s;
  }
  const auto c = cpu->params(), g = graph->params();
  for (const auto& [name, v] : c) EXPECT_LT(array_diff(v, g.at(name)).rel, 1e-5) << name;
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

TEST(Optimizers, ClipNormFromAConfig) {
  const std::string cfg = R"({"model": {"layers": [{"type": "dense", "units": 2}]},
                              "optimizer": {"type": "sgd", "lr": 0.1, "clip_norm": C}})";
  auto with = [&](const std::string& c) { return std::string(cfg).replace(cfg.find("C}"), 1, c); };
  EXPECT_EQ(parse_config_text(with("0.5"), "c").optimizer->clip_norm(), 0.5);
  const std::string key = ", \"clip_norm\": C";
  EXPECT_EQ(parse_config_text(std::string(cfg).replace(cfg.find(key), key.size(), ""), "c").optimizer->clip_norm(), 0.0);
  EXPECT_ERROR(parse_config_text(with("-1"), "c"), "optimizer.clip_norm", "expected a number in [0, ");
  EXPECT_ERROR(parse_config_text(with("\"big\""), "c"), "optimizer.clip_norm");
}

}  // namespace
}  // namespace sg::test
