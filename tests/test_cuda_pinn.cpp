// Physics-informed steps and the products they lean on, on the CUDA backend: jets, expression
// losses and sampling against the CPU reference, graph replay against eager execution, the
// concurrent boundary branch, and 3xTF32 products (whole steps and the tensor-core kernel
// against fp64). The GPU tests skip (saying why) without a usable GPU.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "stepgraph/bench.h"
#include "stepgraph/config.h"
#include "stepgraph/pinn.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_util.h"
#ifdef STEPGRAPH_HAVE_CUDA
#include <cuda_runtime.h>

#include <random>

#include "backend/cuda/kernels/dense_kernels.cuh"
#include "backend/cuda/runtime/stream_plan.h"
#include "backend/cuda/kernels/tf32x3_gemm.h"
#include "own_gemm_check.h"
#endif

namespace sg::test {
namespace {

// A whole physics-informed step (sampling, jets, expression losses, backward, optimizer).
Built pinn_program(const pinn::Problem& prob, Layer& model, const Optimizer& opt) {
  Built b;
  GraphBuilder g(b.p);
  CustomStep cs = pinn::make_step(prob)(g, model);
  b.grads = append_backward(b.p, cs.seeds, cs.num_forward_ops);
  b.p.tensor(cs.loss).live_out = true;
  opt.build(g, b.grads);
  b.specs = g.param_specs();
  return b;
}

pinn::Problem mixed_problem(int64_t interior, int64_t boundary) {
  // Every kind of jet component and expression feature: mixed and pure second derivatives,
  // coordinates, constants, functions, powers, two loss terms.
  pinn::Problem p = pinn::parse_problem(nlohmann::json::parse(R"J({
    "coordinates": ["x", "y"], "domain": [[0, 1], [-1, 1]],
    "constants": {"k": 0.7},
    "residual": "u_xx + k*u_yy*u - sin(x)*u_x + u_xy^2 - exp(-y)*tanh(u_y)",
    "conditions": [{"on": "boundary", "residual": "u - x*y", "weight": 3}],
    "resample_every": 2})J"));
  p.terms[0].points = interior;
  p.terms[1].points = boundary;
  return p;
}

TEST(Cuda, PinnJetsLossesAndSamplingMatchCpu) {
  REQUIRE_GPU();
  // Small point sets use our dense kernel; 2048 points (10240 jet rows) take cuBLASLt.
  for (int64_t points : {64, 2048}) {
    for (Activation a : {Activation::Tanh, Activation::Sin, Activation::Sigmoid, Activation::GELU, Activation::Softplus}) {
      auto model = sequential({dense(32, a), dense(24, a), dense(1)});
      Built b = pinn_program(mixed_problem(points, 40), *model, Adam(1e-3));
      // 3e-4: a one-element bias gradient summed over points with opposite signs carries the
      // fp32 rounding of the plain (boundary) path's softplus at 1.5e-4 of its size.
      const std::string explain = compare_backends(b.p, b.specs, 41 + static_cast<int>(a),
                                                   cat("pinn ", activation_name(a), " ", points, " points, 3 steps"), 3, 3e-4);
      // Past 4096 jet rows the last layer is skinny, and the last jet backward computes its dX.
      if (points == 2048) EXPECT_NE(explain.find("dX: in the next jet backward"), std::string::npos) << explain;
      if (points == 2048) EXPECT_NE(explain.find("computed here, not stored"), std::string::npos) << explain;
    }
  }
  for (bool trainable : {false, true}) {
    auto model = sequential({std::make_shared<FourierFeatures>(2, 1.0, trainable), dense(32, Activation::Tanh), dense(1)});
    Built b = pinn_program(mixed_problem(300, 40), *model, AdamW(1e-3));
    const std::string explain =
        compare_backends(b.p, b.specs, 51, trainable ? "trainable Fourier features" : "fixed Fourier features", 2, 1e-4);
    // Fixed features fold the projection into their jet kernel; trainable ones need P for B's
    // gradient, so it is a product of its own.
    EXPECT_EQ(explain.find("projects the inputs itself") != std::string::npos, !trainable) << explain;
    // And reads the points themselves, writing the seed jet on the side (one launch).
    EXPECT_EQ(explain.find("read from the points") != std::string::npos, !trainable) << explain;
  }
  // Laplacian components (JetSpec::trace) next to a plain pair, in the vectorized kernels (width
  // 32) and the one-column ones (width 30).
  pinn::Problem heat = pinn::parse_problem(nlohmann::json::parse(R"J({
    "coordinates": ["t", "x", "y"], "domain": [[0, 1], [0, 1], [-1, 1]],
    "residual": "u_t - 0.1*(u_yy + u_xx) + u_xy*u", "conditions": [{"on": "t=0", "residual": "u - x*y", "points": 30}],
    "interior_points": 500})J"));
  for (int64_t width : {32, 30}) {
    auto model = sequential({dense(width, Activation::Tanh), dense(width, Activation::Sin), dense(1)});
    Built b = pinn_program(heat, *model, Adam(1e-3));
    compare_backends(b.p, b.specs, 55, cat("2D heat with a Laplacian, width ", width), 2, 1e-4);
  }
  // Tanh over a jet with one second-order component in 1, 3 and 4 inputs: the vectorized jet
  // kernels' TANH1 forms (2 inputs: the built-in problems below). Width 32 takes the last jet
  // backward with the one-output layer's dW on the side, width 24 the one without.
  for (const char* spec : {R"J({"coordinates": ["x"], "domain": [[0, 1]], "residual": "u_xx + sin(x)",
                               "conditions": [{"on": "boundary", "residual": "u"}], "interior_points": 1500})J",
                           R"J({"coordinates": ["x", "y", "z"], "domain": [[0, 1], [0, 1], [0, 1]],
                               "residual": "u_xx + u_yy + u_zz - x*y", "conditions": [{"on": "boundary", "residual": "u"}],
                               "interior_points": 1000})J",
                           R"J({"coordinates": ["t", "x", "y", "z"], "domain": [[0, 1], [0, 1], [0, 1], [0, 1]],
                               "residual": "u_t - u_xx - u_yy - u_zz", "conditions": [{"on": "t=0", "residual": "u - x*y*z"}],
                               "interior_points": 1000})J"}) {
    const pinn::Problem p = pinn::parse_problem(nlohmann::json::parse(spec));
    for (int64_t width : {32, 24}) {
      auto model = sequential({dense(width, Activation::Tanh), dense(width, Activation::Tanh), dense(1)});
      Built b = pinn_program(p, *model, Adam(1e-3));
      const std::string explain = compare_backends(b.p, b.specs, 57, cat(p.dim(), "D tanh jets, width ", width), 2, 1e-4);
      EXPECT_EQ(explain.find("from the activation's jet recomputed here") != std::string::npos, width == 32) << explain;
    }
  }
  for (const char* name : {"poisson2d", "heat1d", "burgers1d"}) {
    pinn::Problem p = pinn::builtin_problem(name);
    for (auto& t : p.terms) t.points = std::min<int64_t>(t.points, 1000);
    auto model = sequential({dense(64, Activation::Tanh), dense(64, Activation::Tanh), dense(1)});
    Built b = pinn_program(p, *model, Adam(1e-3));
    const std::string explain = compare_backends(b.p, b.specs, 61, name, 2, 1e-4);
    // Past 4096 jet rows the last layer is skinny; with width 64 and a Laplacian-like jet the
    // last jet backward forms its dX, dW and db (its input, the activation, recomputed).
    EXPECT_NE(explain.find("from the activation's jet recomputed here"), std::string::npos) << explain;
    // And the last jet dense kernel forms the one-output layer's forward.
    EXPECT_NE(explain.find("forms this one output from Y in registers"), std::string::npos) << explain;
    // Each loss kernel after the first adds its term onto the total (2 or 3 terms).
    size_t sums = 0;
    for (size_t at = explain.find("also the sum 'loss total'"); at != std::string::npos; at = explain.find("also the sum", at + 1)) ++sums;
    EXPECT_EQ(sums, p.terms.size() - 1) << explain;
    // And the first two terms (one network pass) share a launch.
    EXPECT_NE(explain.find("(one launch for both terms)"), std::string::npos) << explain;
  }
}

// Jet layers of width 64 and 128 over four-component jets take the fused jet dense kernel
// (jet_dense.cuh): the product with the activation's jet in its epilogue, and the input gradient
// with the activation's jet backward. Point counts that fill no whole tile (1001 points: 31 full
// tiles of 32 and 9 over; 77 boundary rows of value-only points), inputs of depth 32 (Fourier
// features), 64 and 128, and every activation the jets take.
TEST(Cuda, JetDenseKernelMatchesCpu) {
  REQUIRE_GPU();
  pinn::Problem first_order = pinn::parse_problem(nlohmann::json::parse(R"J({
    "coordinates": ["x", "y", "z"], "domain": [[0, 1], [0, 1], [0, 1]],
    "residual": "u_x + u_y*u - 0.5*u_z - sin(x)", "conditions": [{"on": "boundary", "residual": "u - y*z", "points": 77}],
    "interior_points": 1001})J"));
  pinn::Problem poisson = pinn::builtin_problem("poisson2d"), burgers = pinn::builtin_problem("burgers1d");
  for (pinn::Problem* p : {&poisson, &burgers}) {
    p->terms[0].points = 1001;
    for (size_t t = 1; t < p->terms.size(); ++t) p->terms[t].points = 77;
  }
  struct Case {
    pinn::Problem* problem;
    int64_t width;
    Activation act;
    bool fourier;
  };
  const Case cases[] = {{&poisson, 128, Activation::Tanh, false}, {&poisson, 64, Activation::Sin, true},
                        {&burgers, 64, Activation::Sigmoid, false}, {&burgers, 128, Activation::GELU, false},
                        {&first_order, 64, Activation::Softplus, false}, {&first_order, 128, Activation::Tanh, true}};
  int seed = 81;
  for (const Case& c : cases) {
    std::vector<LayerPtr> layers;
    if (c.fourier) layers.push_back(std::make_shared<FourierFeatures>(16, 1.0, false));
    for (int k = 0; k < 3; ++k) layers.push_back(dense(c.width, c.act));
    layers.push_back(dense(1));
    auto model = sequential(layers);
    Built b = pinn_program(*c.problem, *model, Adam(1e-3));
    const std::string what = cat("jet dense, width ", c.width, ", ", activation_name(c.act), c.fourier ? ", Fourier" : "");
    // GELU's jet (its third derivative in the backward) carries fp32 rounding at ~1.5e-4, as in
    // PinnJetsLossesAndSamplingMatchCpu.
    const double tol = c.act == Activation::GELU ? 3e-4 : 1e-4;
    const std::string explain = compare_backends(b.p, b.specs, seed++, what, 2, tol);
    EXPECT_NE(explain.find("its jet dense kernel applies the activation"), std::string::npos) << explain;
    EXPECT_NE(explain.find("in the jet dense kernel"), std::string::npos) << explain;
    // The output layer's forward in the last jet dense kernel's epilogue (U compared above).
    EXPECT_NE(explain.find("from Y in registers"), std::string::npos) << explain;
  }
}

// Fusion off (LowerOptions::fusion false): a PINN with Fourier features and jet layers the
// jet dense kernel takes lowers every op on its own (no op done by another, no jet dense kernel,
// no loss launch adding the sum, no two terms in one launch) and still matches the CPU.
TEST(Cuda, PinnFusionOffLowersEveryOpOnItsOwn) {
  REQUIRE_GPU();
  pinn::Problem p = pinn::builtin_problem("poisson2d");
  p.terms[0].points = 1001;
  for (size_t t = 1; t < p.terms.size(); ++t) p.terms[t].points = 77;
  auto model = sequential({std::make_shared<FourierFeatures>(16, 1.0, false), dense(64, Activation::Tanh),
                           dense(64, Activation::Tanh), dense(1)});
  Built b = pinn_program(p, *model, Adam(1e-3));
  const std::string fused = compare_backends(b.p, b.specs, 95, "PINN, fusion on", 2);
  EXPECT_NE(fused.find("done by '"), std::string::npos) << fused;
  LowerOptions o;
  o.fusion = false;
  const std::string plain = compare_backends(b.p, b.specs, 95, "PINN, fusion off", 2, 1e-4, o);
  for (const char* fusion : {"done by '", "jet dense kernel", "also the sum", "one launch"})
    EXPECT_EQ(plain.find(fusion), std::string::npos) << fusion << "\n" << plain;
}

std::unique_ptr<Trainer> pinn_trainer(ExecMode mode, const pinn::Problem& p, int64_t width = 32,
                                      Precision precision = Precision::FP32, bool concurrent = true) {
  TrainerOptions o;
  o.mode = mode;
  o.lower.precision = precision;
  o.lower.concurrent = concurrent;
  auto t = std::make_unique<Trainer>(sequential({dense(width, Activation::Tanh), dense(width, Activation::Tanh), dense(1)}),
                                     pinn::make_step(p), std::make_shared<Adam>(1e-3), Device::CUDA, 9, o);
  t->compile_custom();
  return t;
}

TEST(Cuda, PinnGraphReplayEqualsEagerBitwise) {
  REQUIRE_GPU();
  pinn::Problem p = mixed_problem(700, 100);
  auto graph = pinn_trainer(ExecMode::Graph, p), eager = pinn_trainer(ExecMode::Eager, p);
  expect_bitwise_same_steps({graph.get(), eager.get()}, 50);
  EXPECT_EQ(graph->capture_count(), 1);
}

// An inverse problem: observations riding in the residual's pass and a coefficient read by the
// residual and a condition (its gradient summed over the rows of its column of dU).
pinn::Problem inverse_problem() {
  pinn::Problem p = pinn::parse_problem(nlohmann::json::parse(R"J({
    "type": "burgers1d", "interior_points": 1500, "boundary_points": 300,
    "coefficients": {"nu": 0.05}, "observations": [{"sample_exact": 400, "seed": 2, "weight": 3}]})J"));
  return p;
}

TEST(Cuda, InverseProblemMatchesTheCpuAndReplaysAsEager) {
  REQUIRE_GPU();
  auto model = sequential({dense(32, Activation::Tanh), dense(32, Activation::Tanh), dense(1)});
  Built b = pinn_program(inverse_problem(), *model, Adam(1e-3));
  compare_backends(b.p, b.specs, 61, "burgers with a coefficient and observations, 3 steps", 3, 3e-4);
  auto graph = pinn_trainer(ExecMode::Graph, inverse_problem()), eager = pinn_trainer(ExecMode::Eager, inverse_problem());
  expect_bitwise_same_steps({graph.get(), eager.get()}, 30);
  EXPECT_EQ(graph->capture_count(), 1);
  EXPECT_NE(graph->coefficients().at("nu"), 0.05f);
}

// Fixed points and frozen Fourier features (the invariant prefix, ir.h) run once, before the
// first step, and stay out of the graph. Eager steps and graph replays still agree bit for bit
// and match the CPU, which computes them every step; a checkpoint load that rewrites the
// constant B computes them again.
TEST(Cuda, FixedPointsAndFrozenFeaturesRunOnceOutsideTheGraph) {
  REQUIRE_GPU();
  pinn::Problem p = pinn::builtin_problem("poisson2d");
  p.terms[0].points = 600;
  p.terms[1].points = 90;
  auto make = [&](Device device, ExecMode mode, uint64_t seed) {
    TrainerOptions o;
    o.mode = mode;
    auto t = std::make_unique<Trainer>(
        sequential({std::make_shared<FourierFeatures>(8, 1.0, false), dense(64, Activation::Tanh), dense(1)}),
        pinn::make_step(p), std::make_shared<Adam>(1e-3), device, seed, o);
    t->compile_custom();
    return t;
  };
  auto graph = make(Device::CUDA, ExecMode::Graph, 9), eager = make(Device::CUDA, ExecMode::Eager, 9);
  auto cpu = make(Device::CPU, ExecMode::Eager, 9);
  const std::string explain = graph->explain();
  size_t once = 0;
  for (size_t at = explain.find("[once:"); at != std::string::npos; at = explain.find("[once:", at + 1)) ++once;
  EXPECT_EQ(once, 3u) << "the two samplers and the features kernel (projection and seed jet folded in)\n" << explain;
  for (int s = 0; s < 5; ++s) {
    for (Trainer* t : {graph.get(), eager.get(), cpu.get()}) t->launch();
    EXPECT_TRUE(near(graph->loss(), cpu->loss(), 1e-5, 1e-4)) << "step " << s << ": " << graph->loss() << " vs CPU " << cpu->loss();
  }
  expect_bitwise_same_steps({graph.get(), eager.get()}, 20);
  EXPECT_EQ(graph->capture_count(), 1);
  // Another seed draws another B. Loading its checkpoint rewrites B: the graph trainer must
  // recompute its features and then step exactly as the trainer it was saved from.
  auto other = make(Device::CUDA, ExecMode::Graph, 10);
  expect_same_steps_after_load(*other, {graph.get(), eager.get()}, "fixed_features.safetensors", 3, 5);
}

TEST(Cuda, Tf32x3ProductsKeepFp32Accuracy) {
  REQUIRE_GPU();
  // 8750 points (35000 jet rows of u, u_x, u_y and the Laplacian, after the boundary's 256 value rows): the jet layers' plain
  // products go to cuBLASLt's plans, where tf32x3 offers the 3xTF32 kernels (without autotuning
  // the first of them runs), and their weight gradients (64 x 64 x 35256, split 137 ways) to our
  // 3xTF32 tensor-core kernel. They must meet the fp32 bar, not TF32's 3e-2.
  LowerOptions o;
  o.precision = Precision::TF32X3;
  auto model = sequential({dense(64, Activation::Tanh), dense(64, Activation::Tanh), dense(1)});
  pinn::Problem p = pinn::builtin_problem("poisson2d");
  p.terms[0].points = 8750;
  p.terms[1].points = 256;
  Built pb = pinn_program(p, *model, Adam(1e-3));
  const std::string explain = compare_backends(pb.p, pb.specs, 71, "poisson2d at tf32x3", 2, 1e-4, o);
#ifdef STEPGRAPH_HAVE_CUDA
  const bool have_cutlass = cuda::tf32x3_configs() > 0;
#else
  const bool have_cutlass = false;  // not reached: REQUIRE_GPU skips without a CUDA build
#endif
  EXPECT_NE(explain.find("3xTF32 tensor cores, k split 137 ways"), std::string::npos) << explain;
  if (have_cutlass) EXPECT_NE(explain.find("CUTLASS 3xTF32"), std::string::npos) << explain;
  else EXPECT_NE(explain.find("no CUTLASS headers"), std::string::npos) << explain;
  // Autotuned, with a misaligned width (6: cuBLASLt only).
  o.autotune = Autotune::Heuristic;
  auto odd = sequential({dense(6, Activation::Tanh), dense(64, Activation::Sin), dense(1)});
  Built ob = pinn_program(mixed_problem(2048, 40), *odd, Adam(1e-3));
  compare_backends(ob.p, ob.specs, 72, "mixed problem at tf32x3, autotuned", 2, 3e-4, o);
}

#ifdef STEPGRAPH_HAVE_CUDA
// The 3xTF32 tensor-core kernel alone, in each operand layout the dense layers use, against a
// double-precision product (own_product_error: the forward's bias, pre-activation and tanh, the
// input gradient's accumulation and fused relu', the weight gradient's row sums). Sizes are not
// multiples of the 64 x 64 tile or the 32-deep k-slab.
TEST(Cuda, Tf32x3TensorCoreProductsMatchFp64) {
  REQUIRE_GPU();
  if (!cuda::tf32_tensor_cores()) GTEST_SKIP() << "this GPU or build has no TF32 tensor cores";
  // Enough 64 x 64 tiles (times splits) to fill an H200, or the product is not taken.
  for (const ProductCase& c : {ProductCase{"forward", 8300, 72, 200, false, false, 1},
                               ProductCase{"input gradient", 8260, 132, 68, false, true, 1},
                               ProductCase{"weight gradient, 70 splits (some empty)", 64, 128, 5000, true, true, 70},
                               ProductCase{"weight gradient, one split", 708, 764, 300, true, true, 1}}) {
    // fp32's level: the worst of every output (up to 540K here) of fp32 sums over k <= 5000,
    // ~sqrt(k) roundings of 6e-8; TF32 alone gives ~1e-3.
    EXPECT_LT(own_product_error(c, true, on_tensor_cores), 3e-6) << c.what;
  }
}
#endif

// --mode verify on physics-informed configs: eager, graph and the CPU draw the same points from
// (seed, step), so their losses and parameters agree (graph and eager bitwise).
TEST(Cuda, VerifyModeRunsPhysicsInformedConfigs) {
  REQUIRE_GPU();
  for (const char* name : {"poisson2d.json", "custom_heat.json", "burgers_inverse.json"}) {
    SCOPED_TRACE(name);
    RunConfig cfg = load_config(std::string(SG_SOURCE_DIR) + "/configs/" + name);
    const VerifyResult r = verify_run(cfg, RunOptions{}, 20, 1e-3);
    std::cout << "[ verify   ] " << name << ": " << r.to_json().dump() << "\n";
    EXPECT_EQ(r.graph_vs_eager, 0.0);
    EXPECT_TRUE(r.ok) << r.to_json().dump();
  }
}

TEST(Cuda, Tf32x3GraphReplayEqualsEagerBitwise) {
  REQUIRE_GPU();
  pinn::Problem p = mixed_problem(2048, 100);
  auto graph = pinn_trainer(ExecMode::Graph, p, 64, Precision::TF32X3);
  auto eager = pinn_trainer(ExecMode::Eager, p, 64, Precision::TF32X3);
  expect_bitwise_same_steps({graph.get(), eager.get()}, 30);
}

#ifdef STEPGRAPH_HAVE_CUDA
// The stream planner alone (host logic, no GPU): ops c = a + a and d = b + b touch no common
// memory, e = c + d needs both.
TEST(StreamPlan, IndependentChainsGoToTwoStreamsAndJoinThroughAnEvent) {
  Program p;
  const TensorId a = p.add_tensor({"a", {4}, DType::F32, Role::Input});
  const TensorId b = p.add_tensor({"b", {4}, DType::F32, Role::Input});
  const TensorId c = p.add_tensor({"c", {4}, DType::F32, Role::Activation});
  const TensorId d = p.add_tensor({"d", {4}, DType::F32, Role::Activation});
  const TensorId e = p.add_tensor({"e", {4}, DType::F32, Role::Activation});
  auto add = [&](const char* name, TensorId x, TensorId y, TensorId out) {
    Op op;
    op.kind = OpKind::Add;
    op.name = name;
    op.in = {x, y};
    op.out = {out};
    p.add_op(std::move(op));
  };
  add("c", a, a, c);
  add("d", b, b, d);
  add("e", c, d, e);
  auto steps_of = [&] {
    std::vector<cuda::Step> steps(3);
    for (int i = 0; i < 3; ++i) steps[i].name = p.ops()[i].name, steps[i].op = i;
    return steps;
  };
  // Fake, disjoint addresses 64 bytes apart (each tensor holds 16).
  std::vector<void*> ptrs;
  for (uintptr_t t = 0; t < 5; ++t) ptrs.push_back(reinterpret_cast<void*>(0x1000 + 64 * t));
  std::ostringstream notes;
  auto steps = steps_of();
  ASSERT_TRUE(cuda::plan_streams(p, ptrs, steps, {}, {}, notes));
  EXPECT_EQ(steps[0].stream, 0);
  EXPECT_EQ(steps[1].stream, 1);  // a new chain starts on the other stream
  EXPECT_EQ(steps[2].stream, 0);  // it depends on the step's stream
  EXPECT_EQ(steps[2].wait_for, 1);
  EXPECT_TRUE(steps[1].record);
  EXPECT_FALSE(steps[0].record);
  EXPECT_NE(notes.str().find("concurrent branches: 1 ops on a second stream (1 'd')"), std::string::npos) << notes.str();
  // d in c's memory (the planner reused it): the ops are ordered, all on one stream.
  ptrs[d] = ptrs[c];
  steps = steps_of();
  EXPECT_FALSE(cuda::plan_streams(p, ptrs, steps, {}, {}, notes));
  for (const auto& s : steps) EXPECT_TRUE(s.stream == 0 && s.wait_for == -1 && !s.record) << s.name;
  // Disjoint again, but both use the shared cuBLASLt workspace, or are linked by a fusion.
  ptrs[d] = reinterpret_cast<void*>(0x1000 + 64 * 3);
  steps = steps_of();
  EXPECT_FALSE(cuda::plan_streams(p, ptrs, steps, {}, {0, 1}, notes));
  steps = steps_of();
  EXPECT_FALSE(cuda::plan_streams(p, ptrs, steps, {{0, 1}}, {}, notes));
}
#endif

TEST(Cuda, PinnBoundaryBranchRunsConcurrentlyAndEqualsSerial) {
  REQUIRE_GPU();
  // A derivative condition has a network pass of its own (the value condition rides in the
  // residual's): its chain runs on a second stream; results equal the serial schedule bitwise
  // (every kernel sums in a fixed order), in graph replays and eager steps alike.
  pinn::Problem p = mixed_problem(2048, 300);
  pinn::Problem n = pinn::parse_problem(nlohmann::json::parse(R"J({
    "coordinates": ["x", "y"], "domain": [[0, 1], [-1, 1]],
    "residual": "u_xx + u_yy", "conditions": [{"on": "x=1", "residual": "u_x - y", "points": 200}]})J"));
  p.terms.push_back(n.terms[1]);
  auto serial = pinn_trainer(ExecMode::Graph, p, 64, Precision::FP32, /*concurrent=*/false);
  auto graph = pinn_trainer(ExecMode::Graph, p, 64), eager = pinn_trainer(ExecMode::Eager, p, 64);
  // The lowering's note ("concurrent branches: N ops on a second stream"), not the options line.
  EXPECT_NE(graph->explain().find("concurrent branches:"), std::string::npos) << graph->explain();
  EXPECT_EQ(serial->explain().find("concurrent branches:"), std::string::npos) << serial->explain();
  EXPECT_NE(serial->explain().find("concurrent branches off"), std::string::npos) << serial->explain();
  expect_bitwise_same_steps({serial.get(), graph.get(), eager.get()}, 30);
}

}  // namespace
}  // namespace sg::test
