// User-defined ops (custom_op.h) from a trainer's side: in a Sequential and a model graph, their
// gradients (accumulated with other ops' into one input) against finite differences, explain,
// bad definitions and uses, and on CUDA the user's kernels captured into the step graph (replay
// equals eager bitwise, the launcher is not called again on replay). Their op-level CPU, float64
// and CUDA checks are the op table's (custom_cases in op_cases.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "custom_test_ops.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

// a feeds both the user op and a built-in op, so its gradient sums the two contributions.
std::shared_ptr<Model> mixed_model() {
  auto x = Input({3}, "x");
  auto a = call(dense(4, Activation::Tanh), x), b = call(dense(4), x);
  const std::vector<SymbolicTensor> pm = custom("test_mix", {a, b}, "mix");
  auto y = call(dense(2), concat({pm[0], pm[1] * a, call(custom_layer("test_cube"), b)}));
  return std::make_shared<Model>(std::vector<SymbolicTensor>{x}, y);
}

TEST(CustomOp, GradientsThroughUserOpsMatchFiniteDifferences) {
  register_test_ops();
  const double lr = 1.0;
  Trainer t(mixed_model(), std::make_shared<MeanSquaredError>(), std::make_shared<SGD>(lr), Device::CPU, 3);
  t.compile({6, 3});
  const HostArray X = random_f32({6, 3}, 1), Y = random_f32({6, 2}, 2);
  const auto before = t.params();
  t.one_step(X, Y);
  const auto after = t.params();
  Trainer probe(mixed_model(), std::make_shared<MeanSquaredError>(), std::make_shared<SGD>(1e-12), Device::CPU, 3);
  probe.compile({6, 3});
  int checked = 0;
  for (const auto& param : before) {
    const std::string& name = param.first;  // a structured binding cannot be captured in C++17
    for (int64_t k = 0; k < param.second.numel(); k += 3) {
      auto at = [&](double delta) {
        auto p = before;
        p.at(name).data<float>()[k] += static_cast<float>(delta);
        probe.set_params(p);
        return probe.evaluate(X, Y).loss;
      };
      const double h = 1e-2, fd = (at(h) - at(-h)) / (2 * h);
      const double grad = (param.second.data<float>()[k] - after.at(name).data<float>()[k]) / lr;
      EXPECT_NEAR(grad, fd, 2e-3 + 2e-2 * std::fabs(fd)) << name << "[" << k << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
  // explain marks the ops as user-defined, forward and backward.
  const std::string text = t.explain();
  EXPECT_NE(text.find("custom(user-defined 'test_mix')"), std::string::npos) << text;
  EXPECT_NE(text.find("custom(user-defined 'test_cube', backward)"), std::string::npos) << text;
}

TEST(CustomOp, ASequentialLayer) {
  register_test_ops();
  auto seq = sequential({dense(5, Activation::Tanh), custom_layer("test_cube", "cube"), dense(1)});
  EXPECT_EQ(seq->describe().find("custom(test_cube)") != std::string::npos, true) << seq->describe();
  Trainer t(seq, std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CPU, 1);
  t.compile({16, 2});
  const HostArray X = random_f32({16, 2}, 3), Y = random_f32({16, 1}, 4);
  const float first = t.one_step(X, Y);
  float last = first;
  for (int s = 0; s < 200; ++s) last = t.one_step(X, Y);
  EXPECT_LT(last, 0.5f * first);
}

TEST(CustomOp, BadDefinitionsAndUsesAreClearErrors) {
  register_test_ops();
  CustomOpDef d;
  d.name = "test_cube";
  d.output_shapes = [](const std::vector<Shape>& in) { return in; };
  d.cpu = [](const CustomOpArgs&) {};
  EXPECT_ERROR(register_op(d), "an op named 'test_cube' is already registered");
  d.name = "bad name";
  EXPECT_ERROR(register_op(d), "the name 'bad name' must be letters, digits");
  d.name = "test_no_cpu";
  d.cpu = nullptr;
  EXPECT_ERROR(register_op(d), "'test_no_cpu': the CPU forward (cpu) is missing");
  EXPECT_ERROR(custom_layer("test_unknown"), "no user-defined op named 'test_unknown'", "test_cube");
  auto x = Input({3}, "x"), w = Input({4}, "w");
  EXPECT_ERROR(custom("test_mix", {x, w}), "user-defined op 'test_mix'", "test_mix takes two inputs of one shape");
  // No backward, and its input needs a gradient: refused when the step is built.
  Trainer t(sequential({dense(3), custom_layer("test_nograd"), dense(1)}), std::make_shared<MeanSquaredError>(),
            std::make_shared<SGD>(0.1), Device::CPU, 1);
  EXPECT_ERROR(t.compile({4, 2}), "(user-defined 'test_nograd')", "needs a gradient, but the op has no backward");
  // In front of every parameter it needs none, and trains.
  Trainer first(sequential({custom_layer("test_nograd"), dense(1)}), std::make_shared<MeanSquaredError>(),
                std::make_shared<SGD>(0.1), Device::CPU, 1);
  first.compile({4, 2});
  EXPECT_TRUE(std::isfinite(first.one_step(random_f32({4, 2}, 1), random_f32({4, 1}, 2))));
  // A kernel that throws: the step fails with an Error naming the op and keeps the message.
  if (!is_registered_op("test_throws")) {
    CustomOpDef bad;
    bad.name = "test_throws";
    bad.output_shapes = [](const std::vector<Shape>& in) { return in; };
    bad.cpu = [](const CustomOpArgs&) { throw std::runtime_error("planted failure"); };
    register_op(bad);
  }
  Trainer throws(sequential({custom_layer("test_throws"), dense(1)}), std::make_shared<MeanSquaredError>(),
                 std::make_shared<SGD>(0.1), Device::CPU, 1);
  throws.compile({4, 2});
  EXPECT_ERROR(throws.one_step(random_f32({4, 2}, 1), random_f32({4, 1}, 2)), "user-defined op 'test_throws'",
               "planted failure");
}

// The user's CUDA kernels in the captured step: graph replay equals eager bitwise, CUDA agrees with
// the CPU, and after the capture the launcher is not called again however many steps replay.
TEST(CustomOp, CudaKernelsAreCapturedIntoTheStepGraph) {
  REQUIRE_GPU();
  if (!test_ops_have_cuda()) GTEST_SKIP() << "the tests were built without a CUDA compiler";
  register_test_ops();
  auto model = [] { return sequential({dense(8, Activation::Tanh), custom_layer("test_cube"), dense(2)}); };
  TrainerOptions eager;
  eager.mode = ExecMode::Eager;
  Trainer cpu(model(), std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CPU, 5);
  Trainer graph(model(), std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CUDA, 5);
  Trainer ea(model(), std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CUDA, 5, eager);
  for (Trainer* t : {&cpu, &graph, &ea}) t->compile({32, 3});
  int calls_after_capture = -1;
  for (int s = 0; s < 8; ++s) {
    const HostArray X = random_f32({32, 3}, 10 + s), Y = random_f32({32, 2}, 20 + s);
    const float lc = cpu.one_step(X, Y), lg = graph.one_step(X, Y), le = ea.one_step(X, Y);
    EXPECT_EQ(lg, le) << "step " << s;
    EXPECT_NEAR(lg, lc, 1e-5 * std::max(1.0f, std::fabs(lc))) << "step " << s;
    if (s == 1) calls_after_capture = cube_cuda_calls();
  }
  EXPECT_GE(graph.graph_nodes(), 1);
  const auto pg = graph.params(), pe = ea.params();
  for (const auto& [name, v] : pg) EXPECT_EQ(std::memcmp(v.raw(), pe.at(name).raw(), v.nbytes()), 0) << name;
  // The eager trainer calls the launchers every step (forward + backward: 2 per step); the graph
  // trainer called them at its warm-up and capture only.
  EXPECT_EQ(cube_cuda_calls() - calls_after_capture, 2 * 6) << "the graph trainer called a launcher on replay";
}

// A CUDA launcher that synchronizes inside the capture: the step fails naming the op and what
// capture refused, and the trainer's stream is left usable (an eager trainer on it still runs).
TEST(CustomOp, WhatCaptureForbidsIsAClearErrorAndTheStreamSurvives) {
  REQUIRE_GPU();
  if (!test_ops_have_cuda()) GTEST_SKIP() << "the tests were built without a CUDA compiler";
  register_test_ops();
  auto model = [] { return sequential({custom_layer("test_syncs"), dense(1)}); };
  const HostArray X = random_f32({8, 2}, 1), Y = random_f32({8, 1}, 2);
  Trainer graph(model(), std::make_shared<MeanSquaredError>(), std::make_shared<SGD>(0.1), Device::CUDA, 1);
  graph.compile({8, 2});
  EXPECT_ERROR(graph.one_step(X, Y), "user-defined op 'test_syncs'", "graph capture forbids");
  TrainerOptions eager;
  eager.mode = ExecMode::Eager;
  Trainer ea(model(), std::make_shared<MeanSquaredError>(), std::make_shared<SGD>(0.1), Device::CUDA, 1, eager);
  ea.compile({8, 2});
  EXPECT_TRUE(std::isfinite(ea.one_step(X, Y)));
}

}  // namespace
}  // namespace sg::test
