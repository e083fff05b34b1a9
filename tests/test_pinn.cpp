// Physics-informed training on the CPU reference: expression losses against hand-written
// residuals, collocation sampling, problem parsing errors, and a short Poisson run whose error
// falls.
#include <cstring>
#include <set>

#include "pinn/expression.h"
#include "backend/cpu/pinn_kernels.h"
#include "stepgraph/pinn.h"
#include "stepgraph/trainer.h"
#include "jet_reference.h"

namespace sg::test {
namespace {

std::shared_ptr<Sequential> small_net() {
  return sequential({dense(16, Activation::Tanh), dense(16, Activation::Tanh), dense(1)});
}

TEST(Pinn, PoissonResidualTermEqualsTheHandWrittenResidual) {
  pinn::Problem p = pinn::builtin_problem("poisson2d");
  p.terms[0].points = 50;
  p.terms[1].points = 20;
  Trainer t(small_net(), pinn::make_step(p), std::make_shared<Adam>(1e-3), Device::CPU, 3);
  t.compile_custom();
  t.launch();
  const Program& pr = t.program();
  // The interior points and the network's jets there, as the step saw them (before the update).
  const int64_t M = 50;
  HostArray X(DType::F32, {M, 2});
  t.backend().download(X.raw(), t.device_ptr("points.0"), X.nbytes());
  TensorId u_id = kNone;
  ExprLossAttrs a;
  for (const Op& op : pr.ops())
    if (op.kind == OpKind::ExpressionLoss && op.name == "loss residual") u_id = op.in[0], a = op.attr<ExprLossAttrs>();
  ASSERT_NE(u_id, kNone);
  // u, u_x, u_y and the Laplacian u_xx + u_yy: the residual reads u_xx and u_yy only as their
  // sum, so one component carries it (no mixed derivative asked for).
  ASSERT_EQ(a.K, 1 + 2 + 1);
  // The boundary term's 20 points ride in the same network pass, as the 20 value rows before
  // the interior's jets.
  ASSERT_EQ(a.row0, 20);
  ASSERT_EQ(pr.tensor(u_id).shape[0], 20 + a.K * M);
  HostArray Uk(DType::F32, pr.tensor(u_id).shape);
  t.backend().download(Uk.raw(), t.device_ptr(pr.tensor(u_id).name), Uk.nbytes());
  double sum = 0;
  const double pi = 3.141592653589793;
  for (int64_t m = 0; m < M; ++m) {
    const double x = X.data<float>()[m * 2], y = X.data<float>()[m * 2 + 1];
    EXPECT_TRUE(x >= 0 && x <= 1 && y >= 0 && y <= 1);
    const double lap = Uk.data<float>()[a.row0 + 3 * M + m];
    const double r = -lap - 2 * pi * pi * std::sin(pi * x) * std::sin(pi * y);
    sum += r * r;
  }
  auto terms = t.loss_terms();
  EXPECT_TRUE(near(terms.at("residual"), sum / M, 1e-6, 1e-5));
  EXPECT_TRUE(near(t.loss(), terms.at("residual") + terms.at("boundary"), 1e-6, 1e-6));
}

TEST(Pinn, CollocationPointsLieWhereAskedAndResample) {
  SampleAttrs a;
  a.seed = 7;
  a.every = 10;
  a.lo[0] = -1, a.hi[0] = 1, a.lo[1] = 0, a.hi[1] = 2;
  const int32_t s0 = 0, s9 = 9, s10 = 10;
  std::vector<float> p0(200), p9(200), p10(200);
  cpu::sample_points(&s0, p0.data(), 100, 2, a);
  cpu::sample_points(&s9, p9.data(), 100, 2, a);
  cpu::sample_points(&s10, p10.data(), 100, 2, a);
  EXPECT_EQ(p0, p9);   // same draw within `every` steps
  EXPECT_NE(p0, p10);  // a new draw after
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(p0[2 * i] >= -1 && p0[2 * i] <= 1);
    EXPECT_TRUE(p0[2 * i + 1] >= 0 && p0[2 * i + 1] <= 2);
  }
  a.face_dim = -2;  // every face
  std::vector<float> b(400);
  cpu::sample_points(&s0, b.data(), 200, 2, a);
  int faces[4] = {0, 0, 0, 0};
  for (int i = 0; i < 200; ++i) {
    const float x = b[2 * i], y = b[2 * i + 1];
    const bool on = x == -1 || x == 1 || y == 0 || y == 2;
    EXPECT_TRUE(on) << x << ", " << y;
    faces[0] += x == -1, faces[1] += x == 1, faces[2] += y == 0, faces[3] += y == 2;
  }
  for (int f : faces) EXPECT_GT(f, 20);
}

// Fixed points, and what follows from them and constants alone (the seed jet, a frozen
// Fourier projection and its features), are the same every step: the invariant prefix, whose
// outputs the memory plan keeps whole so a backend may compute them once.
TEST(Pinn, FixedPointsAndWhatFollowsFromThemFormTheInvariantPrefix) {
  auto prefix_of = [](bool resample, bool trainable) {
    pinn::Problem p = pinn::builtin_problem("poisson2d");
    p.terms[0].points = 40;
    p.terms[1].points = 12;
    if (resample) p.resample_every = 5;
    Trainer t(sequential({std::make_shared<FourierFeatures>(4, 1.0, trainable), dense(16, Activation::Tanh), dense(1)}),
              pinn::make_step(p), std::make_shared<Adam>(1e-3), Device::CPU, 3);
    t.compile_custom();
    const Program& pr = t.program();
    const size_t n = invariant_prefix(pr);
    std::string names;
    for (size_t i = 0; i < n; ++i) names += (i ? ", " : "") + pr.ops()[i].name;
    // No other transient tensor shares memory with what the prefix wrote, at any point of the step.
    const MemoryPlan& plan = t.plan();
    for (size_t i = 0; i < n; ++i)
      for (TensorId a : pr.ops()[i].out) {
        if (a == kNone || plan.at[a].region == Placement::Region::Persistent) continue;
        EXPECT_EQ(plan.at[a].first, 0);
        EXPECT_EQ(plan.at[a].last, static_cast<int>(pr.ops().size()) - 1);
        for (size_t b = 0; b < pr.num_tensors(); ++b) {
          const Placement &x = plan.at[a], &y = plan.at[b];
          if (static_cast<TensorId>(b) == a || y.region == Placement::Region::Persistent || !y.bytes) continue;
          EXPECT_FALSE(x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes)
              << pr.tensor(a).name << " shares memory with " << pr.tensor(static_cast<TensorId>(b)).name;
        }
      }
    return names;
  };
  EXPECT_EQ(prefix_of(false, false), "sample residual, sample boundary, jet residual, 0.project, 0.sincos")
      << "fixed points, frozen Fourier features";
  // A trained B: its projection changes every step; the points and their seed jet do not.
  EXPECT_EQ(prefix_of(false, true), "sample residual, sample boundary, jet residual");
  EXPECT_EQ(prefix_of(true, false), "");  // resampled points
}

// The CPU reference runs that prefix once too: the same steps bit for bit as running it every
// step (a trainer compiled afresh before each step), a step does not recompute it (a poisoned
// feature stays), and a checkpoint load that rewrites the Fourier matrix computes it again.
TEST(Pinn, TheCpuComputesTheInvariantPrefixOnce) {
  pinn::Problem p = pinn::builtin_problem("poisson2d");
  p.terms[0].points = 60;
  p.terms[1].points = 16;
  auto make = [&](uint64_t seed) {
    auto t = std::make_unique<Trainer>(
        sequential({std::make_shared<FourierFeatures>(4, 1.0, false), dense(16, Activation::Tanh), dense(1)}),
        pinn::make_step(p), std::make_shared<Adam>(1e-3), Device::CPU, seed);
    t->compile_custom();
    return t;
  };
  auto once = make(9), every = make(9);
  for (int s = 0; s < 3; ++s) {
    // A new compile keeps the parameters and optimizer state and runs the prefix again first.
    every->invalidate();
    every->compile_custom();
    once->launch();
    every->launch();
    const float a = once->loss(), b = every->loss();
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "step " << s << ": " << a << " vs " << b;
  }
  expect_bitwise_same_steps({once.get(), every.get()}, 1);  // and the whole state

  // The features (0.out) are computed before the first step only: a NaN written there stays.
  auto poisoned = make(9);
  poisoned->launch();
  static_cast<float*>(poisoned->device_ptr("0.out"))[0] = std::numeric_limits<float>::quiet_NaN();
  poisoned->launch();
  EXPECT_TRUE(std::isnan(poisoned->loss())) << "the features were recomputed in the step";

  // Another seed draws another B; loading its checkpoint recomputes the features (and so clears
  // the poison), after which the trainers step exactly as the one it was saved from.
  auto other = make(10);
  expect_same_steps_after_load(*other, {once.get(), poisoned.get()}, "cpu_fixed_features.safetensors", 2, 3);
}

TEST(Pinn, ProblemErrorsNameThePathAndCharacter) {
  auto expect_error = [](const char* json_text, const char* want) {
    try {
      pinn::parse_problem(nlohmann::json::parse(json_text));
      FAIL() << "no error for " << json_text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"coordinates": ["x"], "domain": [[0, 1]], "residual": "u_xx + uxx"})", "unknown name 'uxx'");
  expect_error(R"({"coordinates": ["x"], "domain": [[0, 1]], "residual": "u_xx + uxx"})", "problem.residual");
  expect_error(R"({"coordinates": ["x"], "domain": [[1, 0]], "residual": "u"})", "problem.domain[0]");
  expect_error(R"({"coordinates": ["x"], "domain": [[0, 1]], "residual": "u", "conditions": [{"on": "y=0", "residual": "u"}]})",
               "'y' is not a coordinate");
  expect_error(R"({"coordinates": ["x"], "domain": [[0, 1]], "residual": "u", "conditions": [{"on": "x=2", "residual": "u"}]})",
               "outside the domain");
  expect_error(R"({"type": "wave3d"})", "unknown problem 'wave3d'");
  expect_error(R"({"coordinates": ["x"], "domain": [[0, 1]], "residual": "u", "colour": 1})", "problem.colour: unknown key");
}

TEST(Pinn, CustomProblemMatchesTheBuiltIn) {
  // The same Poisson problem written in the config's terms.
  pinn::Problem custom = pinn::parse_problem(nlohmann::json::parse(R"J({
    "coordinates": ["x", "y"], "domain": [[0, 1], [0, 1]], "outputs": ["u"],
    "residual": "-(u_xx + u_yy) - 2*pi^2*sin(pi*x)*sin(pi*y)",
    "conditions": [{"on": "boundary", "residual": "u", "points": 20}],
    "interior_points": 40, "exact": "sin(pi*x)*sin(pi*y)"})J"));
  pinn::Problem builtin = pinn::builtin_problem("poisson2d");
  builtin.terms[0].points = 40;
  builtin.terms[1].points = 20;
  builtin.terms[1].label = custom.terms[1].label;
  Trainer a(small_net(), pinn::make_step(custom), std::make_shared<Adam>(1e-3), Device::CPU, 1);
  Trainer b(small_net(), pinn::make_step(builtin), std::make_shared<Adam>(1e-3), Device::CPU, 1);
  a.compile_custom();
  b.compile_custom();
  for (int i = 0; i < 3; ++i) {
    a.launch();
    b.launch();
    EXPECT_EQ(a.loss(), b.loss());
  }
}

// The jet each custom residual gets: a sum of pure second derivatives becomes one Laplacian
// component when that needs fewer components than the derivatives one by one.
TEST(Pinn, ALaplacianInTheResidualIsOneJetComponent) {
  struct Case {
    const char* coords;  // and the unit cube as domain
    const char* residual;
    int K;
    std::vector<uint32_t> traces;  // per second-derivative pair, in order: its Laplacian's inputs, 0 for a plain pair
  };
  for (const Case& c : {Case{R"(["x", "y"])", "-(u_yy + u_xx) - x", 4, {3}},
                        Case{R"(["t", "x", "y"])", "u_t - 0.1*(u_xx + u_yy)", 5, {6}},    // heat in 2D: x and y only
                        Case{R"(["t", "x", "y"])", "u_t - 0.1*u_xx - 0.1*u_yy", 5, {6}},  // the coefficient per term
                        Case{R"(["x", "y"])", "x*u_yy + u + u_xx*x", 4, {3}},
                        Case{R"(["x", "y"])", "u_xx + u_yy + u_xy", 5, {0, 3}},         // u_xy and the Laplacian
                        Case{R"(["x", "y"])", "u_xx + u_yy + u*u_xx", 5, {0, 0}},       // u_xx alone too: as written
                        Case{R"(["x", "y"])", "u_xx - u_yy", 5, {0, 0}}}) {
    SCOPED_TRACE(c.residual);
    nlohmann::json j = {{"coordinates", nlohmann::json::parse(c.coords)}, {"residual", c.residual}, {"interior_points", 8}};
    for (size_t i = 0; i < j["coordinates"].size(); ++i) j["domain"].push_back({0, 1});
    pinn::Problem p = pinn::parse_problem(j);
    Program pr;
    GraphBuilder g(pr);
    pinn::make_step(p)(g, *small_net());
    for (const Op& op : pr.ops()) {
      if (op.kind == OpKind::ExpressionLoss) EXPECT_EQ(op.attr<ExprLossAttrs>().K, c.K);
      if (op.kind != OpKind::JetInput) continue;
      const JetSpec& js = op.attr<JetAttrs>().jet;
      ASSERT_EQ(js.npairs, static_cast<int>(c.traces.size()));
      for (int q = 0; q < js.npairs; ++q) EXPECT_EQ(uint32_t{js.trace[q]}, c.traces[static_cast<size_t>(q)]) << "pair " << q;
    }
  }
}

TEST(Pinn, ShortPoissonRunOnTheCpuReducesTheError) {
  pinn::Problem p = pinn::builtin_problem("poisson2d");
  p.terms[0].points = 256;
  p.terms[1].points = 128;
  p.terms[1].weight = 10;
  p.resample_every = 50;
  p.eval_points = 900;
  Trainer t(small_net(), pinn::make_step(p), std::make_shared<Adam>(1e-2), Device::CPU, 0);
  t.compile_custom();
  const double before = pinn::relative_l2_error(t, p);
  for (int i = 0; i < 400; ++i) t.launch();
  const double after = pinn::relative_l2_error(t, p);
  EXPECT_GT(before, 0.5);
  EXPECT_LT(after, 0.5 * before) << "relative L2 error " << before << " -> " << after;
  EXPECT_LT(after, 0.2);
}

// Each built-in problem: a short CPU run lowers the error against its solution.
TEST(Pinn, ShortHeatAndBurgersRunsReduceTheError) {
  for (const char* name : {"heat1d", "burgers1d"}) {
    pinn::Problem p = pinn::builtin_problem(name);
    p.terms[0].points = 256;
    for (size_t k = 1; k < p.terms.size(); ++k) p.terms[k].points = 64, p.terms[k].weight = 10;
    p.resample_every = 50;
    p.eval_points = 400;
    Trainer t(small_net(), pinn::make_step(p), std::make_shared<Adam>(5e-3), Device::CPU, 0);
    t.compile_custom();
    const double before = pinn::relative_l2_error(t, p);
    for (int i = 0; i < 300; ++i) t.launch();
    const double after = pinn::relative_l2_error(t, p);
    EXPECT_LT(after, 0.7 * before) << name << ": relative L2 error " << before << " -> " << after;
  }
}

TEST(Pinn, CheckpointRoundTripAndBatchApisRefuseClearly) {
  pinn::Problem p = pinn::builtin_problem("heat1d");
  for (auto& t : p.terms) t.points = 16;
  Trainer t(small_net(), pinn::make_step(p), std::make_shared<Adam>(1e-3), Device::CPU, 2);
  t.compile_custom();
  for (int i = 0; i < 3; ++i) t.launch();
  const std::string path = std::string(SG_TEST_TMPDIR) + "/pinn.safetensors";
  t.save(path);
  auto saved = t.params();
  t.launch();
  t.load(path);
  EXPECT_EQ(t.step(), 3);
  for (auto& [name, v] : t.params())
    EXPECT_EQ(std::memcmp(v.raw(), saved.at(name).raw(), v.nbytes()), 0) << name;
  EXPECT_THROW(t.one_step(random_f32({4, 2}, 1), random_f32({4, 1}, 2)), Error);
  EXPECT_THROW(t.logits(), Error);
  EXPECT_NE(t.explain().find("custom step with 4 terms"), std::string::npos) << t.explain();
  EXPECT_EQ(t.predict(random_f32({5, 2}, 3)).shape(), (Shape{5, 1}));
}

TEST(Pinn, BurgersReferenceSolutionIsSane) {
  pinn::Problem p = pinn::builtin_problem("burgers1d");
  HostArray pts = HostArray::f32({4, 2}, {0.0f, 0.5f, 0.5f, 0.0f, 0.5f, -0.5f, 0.25f, 0.5f});
  HostArray u = pinn::exact_solution(p, pts);
  EXPECT_NEAR(u.data<float>()[0], -std::sin(3.141592653589793 * 0.5), 1e-6);  // initial condition
  EXPECT_NEAR(u.data<float>()[1], 0.0, 1e-6);                                 // odd in x: u(t, 0) = 0
  EXPECT_GT(u.data<float>()[2], 0.5);   // the wave steepens toward x = 0 from the left
  EXPECT_LT(u.data<float>()[3], -0.5);
  // Away from the shock the viscosity barely matters: the inviscid solution u = -sin(pi (x - u t))
  // at t = 0.25, x = -0.5 (solved by fixed-point iteration) agrees closely.
  double ui = 0.8;
  for (int i = 0; i < 200; ++i) ui = 0.5 * ui + 0.5 * -std::sin(3.141592653589793 * (-0.5 - 0.25 * ui));
  HostArray q = pinn::exact_solution(p, HostArray::f32({1, 2}, {0.25f, -0.5f}));
  EXPECT_NEAR(q.data<float>()[0], ui, 0.01) << "inviscid " << ui;
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

// d loss / d parameter of a whole physics-informed step (residual with second derivatives, two
// value conditions riding in the residual's network pass as its head rows, and a derivative
// condition with a Laplacian in a pass of its own) against central finite differences of a
// float64 evaluation.
TEST(Pinn, ParameterGradientsOfResidualLossesMatchFiniteDifferences) {
  pinn::Problem prob = pinn::parse_problem(nlohmann::json::parse(R"J({
    "coordinates": ["x", "y"], "domain": [[0, 1], [-1, 1]],
    "constants": {"k": 0.7},
    "residual": "u_xx + k*u_yy*u - sin(x)*u_x + u_xy^2",
    "conditions": [{"on": "boundary", "residual": "u - x*y", "points": 6, "weight": 3},
                   {"on": "x=1", "residual": "u_x + y*(u_yy + u_xx)", "points": 4, "weight": 0.5},
                   {"on": "y=-1", "residual": "u*u - x", "points": 3, "weight": 2}],
    "interior_points": 5})J"));
  auto model = sequential({std::make_shared<FourierFeatures>(2, 0.5, true), dense(4, Activation::Tanh),
                           dense(3, Activation::Softplus), dense(1)});
  Program p;
  GraphBuilder g(p);
  CustomStep cs = pinn::make_step(prob)(g, *model);
  auto grads = append_backward(p, cs.seeds, cs.num_forward_ops);
  p.tensor(cs.loss).live_out = true;  // as the Trainer does: read after the step
  const auto specs = g.param_specs();
  Runner run(p);
  run.set(kStepTensor, HostArray::i32({1}, {0}));
  Values v;
  for (const ParamSpec& s : specs) {
    HostArray a = random_f32(s.shape, mix_seed(11, s.name), 0.6);
    run.set(s.name, a);
    v[s.name] = to_double(a);
  }
  run.run();
  for (int k = 0; k < 4; ++k) v[cat("points.", k)] = to_double(run.get(cat("points.", k)));
  // Two network passes: the residual's (with the value conditions' 6 + 3 points first) and the
  // x=1 condition's.
  std::vector<int64_t> row0;
  std::set<TensorId> passes;
  for (const Op& op : p.ops())
    if (op.kind == OpKind::ExpressionLoss) row0.push_back(op.attr<ExprLossAttrs>().row0), passes.insert(op.in[0]);
  EXPECT_EQ(row0, (std::vector<int64_t>{9, 0, 0, 6}));
  EXPECT_EQ(passes.size(), 2u);
  // The loss in float64: each expression loss on its set's jets and points.
  auto loss = [&](const Values& w) {
    double total = 0;
    for (const Op& op : p.ops()) {
      if (op.kind != OpKind::ExpressionLoss) continue;
      const ExprLossAttrs& a = op.attr<ExprLossAttrs>();
      const std::vector<double> U = forward_double(p, w, op.in[0]);
      const std::vector<double>& X = w.at(p.tensor(op.in[1]).name);
      const int64_t M = p.tensor(op.in[1]).shape[0], d = 2;
      double sum = 0;
      for (int64_t m = 0; m < M; ++m) {
        std::vector<double> vars;
        for (const ExprVar& s : a.vars)
          vars.push_back(s.kind == ExprVar::Kind::Coordinate ? X[m * d + s.index]
                         : s.kind == ExprVar::Kind::Jet     ? U[a.row0 + s.index * M + m]
                                                            : s.value);
        const double r = a.expr->eval(vars.data());
        sum += r * r;
      }
      total += a.weight * sum / M;
    }
    return total;
  };
  EXPECT_TRUE(near(run.get("loss").data<float>()[0], loss(v), 1e-5, 1e-4));
  const double h = 1e-6;
  int checked = 0;
  for (const ParamGrad& pg : grads) {
    const std::string& name = p.tensor(pg.param).name;
    HostArray gr = run.get(p.tensor(pg.grad).name);
    for (size_t k = 0; k < v[name].size(); ++k) {
      Values w = v;
      w[name][k] += h;
      const double lp = loss(w);
      w[name][k] -= 2 * h;
      const double lm = loss(w);
      EXPECT_TRUE(near(gr.data<float>()[k], (lp - lm) / (2 * h), 2e-4, 1e-3)) << "d loss / d " << name << "[" << k << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace sg::test
