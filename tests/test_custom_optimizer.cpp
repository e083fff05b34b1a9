// User-defined optimizers (custom_optimizer.h) and Lion, the built-in written as one: the update
// against a float64 reference, declared state with its initial value, checkpoints (resume
// exactness, a state tensor of the wrong shape), bad definitions, and on CUDA the kernels against
// the CPU and graph replay against eager execution.
#include <cmath>
#include <cstring>

#include "stepgraph/config.h"
#include "stepgraph/custom_optimizer.h"
#include "stepgraph/safetensors.h"
#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

std::shared_ptr<Sequential> mlp() { return sequential({dense(8, Activation::Tanh), dense(3)}); }

// A regression batch (fixed): 16 rows of 5 features, 3 targets.
void step(Trainer& t, int n) {
  const HostArray X = random_f32({16, 5}, 3), y = random_f32({16, 3}, 4);
  for (int i = 0; i < n; ++i) t.one_step(X, y);
}

// Sign descent with momentum, its state starting at `momentum0` (not zero): the declared initial
// value must be there before the first step.
void register_signum() {
  if (is_registered_update_rule("test_signum")) return;
  UpdateRuleDef d;
  d.name = "test_signum";
  d.state = {{"momentum", 0.5}};
  d.cpu = [](const UpdateArgs& a) {
    const float lr = a.sched[sched::kLr], beta = static_cast<float>(a.constants.at(0));
    for (const UpdateTensor& t : a.tensors)
      for (int64_t i = 0; i < t.size; ++i) {
        float& m = t.state[0][i];
        m = beta * m + (1 - beta) * t.grad[i];
        t.param[i] -= lr * static_cast<float>((m > 0) - (m < 0));
      }
  };
  register_update_rule(d);
}

// Lion's update of one program (schedule + update) against the float64 formula.
TEST(CustomOptimizer, LionMatchesItsFormula) {
  Program p;
  GraphBuilder g(p);
  const TensorId P = g.tensor("w", {37}, Role::Parameter), G = g.tensor("grad.w", {37}, Role::Gradient);
  const Lion lion(3e-3, 0.9, 0.99, 0.1);
  lion.build(g, {{P, G}});
  Runner run(p);
  const HostArray p0 = random_f32({37}, 1), g0 = random_f32({37}, 2), m0 = random_f32({37}, 3, 0.1);
  run.set("w", p0);
  run.set("grad.w", g0);
  run.set("optim.lion.m.w", m0);
  run.set(kStepTensor, HostArray::i32({1}, {4}));
  run.set(kHyperTensor, HostArray::f32({2}, {3e-3f, 0.1f}));
  run.run();
  const HostArray p1 = run.get("w"), m1 = run.get("optim.lion.m.w");
  for (int i = 0; i < 37; ++i) {
    const double gi = g0.data<float>()[i], mi = m0.data<float>()[i];
    const double u = 0.9 * mi + 0.1 * gi, s = u > 0 ? 1 : u < 0 ? -1 : 0;
    EXPECT_NEAR(p1.data<float>()[i], p0.data<float>()[i] * (1 - 3e-3 * 0.1) - 3e-3 * s, 2e-7) << i;
    EXPECT_NEAR(m1.data<float>()[i], 0.99 * mi + 0.01 * gi, 2e-7) << i;
  }
  EXPECT_EQ(run.get(kStepTensor).data<int32_t>()[0], 5);
  EXPECT_NE(print_program(p).find("update rule 'lion'"), std::string::npos) << print_program(p);
}

TEST(CustomOptimizer, DeclaredStateStartsAtItsValueAndCheckpointsResumeExactly) {
  register_signum();
  auto make = [] {
    auto opt = std::make_shared<CustomOptimizer>("test_signum", 1e-2, 0.0, Schedule::cosine(2, 20), std::vector<double>{0.8});
    auto t = std::make_unique<Trainer>(mlp(), std::make_shared<MeanSquaredError>(), opt, Device::CPU, 5);
    t->compile({16, 5});
    return t;
  };
  auto a = make();
  const float* m = static_cast<const float*>(a->device_ptr("optim.test_signum.momentum.0.weight"));
  EXPECT_EQ(m[0], 0.5f);
  EXPECT_EQ(m[39], 0.5f);
  step(*a, 3);
  const std::string path = std::string(SG_TEST_TMPDIR) + "/signum.safetensors";
  a->save(path);
  step(*a, 4);
  auto b = make();
  b->load(path);
  EXPECT_EQ(b->step(), 3);
  step(*b, 4);
  for (const auto& [name, v] : a->params())
    EXPECT_EQ(std::memcmp(v.raw(), b->params().at(name).raw(), v.nbytes()), 0) << name;
  EXPECT_NE(a->explain().find("test_signum(lr=0.01, constants=[0.8]"), std::string::npos) << a->explain();
}

TEST(CustomOptimizer, AStateOfTheWrongShapeInACheckpointIsNamed) {
  Trainer t(mlp(), std::make_shared<MeanSquaredError>(), std::make_shared<Lion>(1e-3), Device::CPU, 1);
  t.compile({16, 5});
  step(t, 2);
  const std::string path = std::string(SG_TEST_TMPDIR) + "/lion_bad_state.safetensors";
  t.save(path);
  SafetensorsFile f = read_safetensors(path);
  for (auto& [name, a] : f.tensors)
    if (name == "optim.lion.m.0.weight") a = HostArray(DType::F32, {8, 4});
  write_safetensors(path, f.tensors, f.metadata);
  try {
    t.load(path);
    FAIL() << "loaded a Lion state of the wrong shape";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("optim.lion.m.0.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[8, 4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[8, 5]"), std::string::npos) << msg;
  }
  // Another optimizer's checkpoint does not resume into Lion.
  Trainer adam(mlp(), std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-3), Device::CPU, 1);
  adam.compile({16, 5});
  const std::string apath = std::string(SG_TEST_TMPDIR) + "/adam_for_lion.safetensors";
  adam.save(apath);
  EXPECT_THROW(t.load(apath), Error);
}

TEST(CustomOptimizer, BadDefinitionsAndThrowingKernelsAreNamed) {
  UpdateRuleDef none;
  none.name = "test_no_cpu";
  EXPECT_THROW(register_update_rule(none), Error);
  UpdateRuleDef bad_state;
  bad_state.name = "test_bad_state";
  bad_state.cpu = [](const UpdateArgs&) {};
  bad_state.state = {{"m v", 0.0}};
  EXPECT_THROW(register_update_rule(bad_state), Error);
  try {
    CustomOptimizer("test_not_registered", 1e-3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no update rule named 'test_not_registered'"), std::string::npos) << e.what();
  }
  if (!is_registered_update_rule("test_throws")) {
    UpdateRuleDef d;
    d.name = "test_throws";
    d.cpu = [](const UpdateArgs&) { throw std::runtime_error("planted"); };
    register_update_rule(d);
  }
  Trainer t(mlp(), std::make_shared<MeanSquaredError>(), std::make_shared<CustomOptimizer>("test_throws", 1e-3),
            Device::CPU, 1);
  t.compile({16, 5});
  try {
    step(t, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer 'test_throws' (op 'optim.test_throws'): planted"), std::string::npos)
        << e.what();
  }
}

TEST(CustomOptimizer, LionFromAConfig) {
  RunConfig cfg = parse_config(nlohmann::json::parse(
      R"J({"model": {"layers": [{"type": "dense", "units": 4}]}, "optimizer": {"type": "lion", "weight_decay": 0.5}})J"));
  EXPECT_EQ(cfg.optimizer->describe(), "lion(lr=0.0001, betas=(0.9, 0.99), weight_decay=0.5, schedule=constant)");
  try {
    parse_config(nlohmann::json::parse(R"J({"model": {"layers": [{"type": "dense", "units": 4}]},
                                           "optimizer": {"type": "lion", "eps": 1e-8}})J"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.eps: optimizer \"lion\" has no eps"), std::string::npos) << e.what();
  }
}

// A registered rule goes by its name in a config, with its constants; an unknown name lists both kinds.
TEST(CustomOptimizer, ARegisteredRuleFromAConfig) {
  register_signum();
  RunConfig cfg = parse_config(nlohmann::json::parse(
      R"J({"model": {"layers": [{"type": "dense", "units": 3}]}, "data": {"source": "synthetic_regression",
           "features": 5, "targets": 3}, "optimizer": {"type": "test_signum", "lr": 0.01, "constants": [0.9],
           "clip_norm": 1.0}})J"));
  CustomOptimizer want("test_signum", 0.01, 0.0, Schedule{}, {0.9});
  want.set_clip_norm(1.0);
  EXPECT_EQ(cfg.optimizer->describe(), want.describe());
  Trainer t(cfg.model, cfg.loss, cfg.optimizer, Device::CPU, 1);
  t.compile({16, 5});
  step(t, 3);
  EXPECT_EQ(t.step(), 3);
  auto bad = [](const char* opt) {
    return error_of([&] {
      parse_config(nlohmann::json::parse(std::string(R"J({"model": {"layers": [{"type": "dense", "units": 4}]},
                                                          "optimizer": )J") + opt + "}"));
    });
  };
  EXPECT_TRUE(contains_all(bad(R"({"type": "rmsprop"})"),
                           {"optimizer.type: unknown value \"rmsprop\"; allowed: sgd, adam, adamw, lion, or the name of an "
                            "update rule registered with sg::register_update_rule"}));
  EXPECT_TRUE(contains_all(bad(R"({"type": "test_signum", "constants": [0.9, "x"]})"),
                           {"optimizer.constants[1]: expected a number, got the string \"x\""}));
  EXPECT_TRUE(contains_all(bad(R"({"type": "test_signum", "beta1": 0.9})"), {"optimizer.beta1: unknown key"}));
}

TEST(CustomOptimizer, LionOnCudaMatchesTheCpuAndReplaysAsEager) {
  REQUIRE_GPU();
  auto make = [](Device d, ExecMode mode) {
    TrainerOptions o;
    o.mode = mode;
    auto t = std::make_unique<Trainer>(mlp(), std::make_shared<MeanSquaredError>(),
                                       std::make_shared<Lion>(1e-2, 0.9, 0.99, 0.1, Schedule::cosine(3, 30)), d, 7, o);
    t->compile({16, 5});
    return t;
  };
  auto cpu = make(Device::CPU, ExecMode::Eager), graph = make(Device::CUDA, ExecMode::Graph),
       eager = make(Device::CUDA, ExecMode::Eager);
  for (int i = 0; i < 10; ++i) {
    step(*cpu, 1);
    step(*graph, 1);
    step(*eager, 1);
  }
  for (const auto& [name, v] : cpu->params()) {
    const HostArray gv = graph->params().at(name), ev = eager->params().at(name);
    EXPECT_EQ(std::memcmp(gv.raw(), ev.raw(), gv.nbytes()), 0) << name << ": graph replay differs from eager";
    for (int64_t i = 0; i < v.numel(); ++i)
      EXPECT_NEAR(gv.data<float>()[i], v.data<float>()[i], 1e-4) << name << "[" << i << "]";
  }
  EXPECT_EQ(graph->capture_count(), 1);
  register_signum();  // no CUDA kernel: refused on CUDA, naming the optimizer
  Trainer t(mlp(), std::make_shared<MeanSquaredError>(),
            std::make_shared<CustomOptimizer>("test_signum", 1e-3, 0.0, Schedule{}, std::vector<double>{0.9}),
            Device::CUDA, 1);
  try {
    t.compile({16, 5});
    step(t, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer 'test_signum'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sg::test
