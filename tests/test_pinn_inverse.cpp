// Inverse problems: observation terms and trainable PDE coefficients (pinn.h), on the CPU
// reference: the data term's value, the coefficients' gradients against finite differences,
// checkpoints, configuration errors, and a diffusivity recovered from observations.
#include <cmath>
#include <cstring>

#include <filesystem>
#include <fstream>

#include "stepgraph/config.h"
#include "stepgraph/data.h"
#include "stepgraph/optim.h"
#include "stepgraph/pinn.h"
#include "stepgraph/trainer.h"
#include "test_util.h"

namespace sg::test {
namespace {

std::shared_ptr<Sequential> net() {
  return sequential({dense(12, Activation::Tanh), dense(12, Activation::Tanh), dense(1)});
}

pinn::Problem parse(const char* text) { return pinn::parse_problem(nlohmann::json::parse(text)); }

// A 1D problem whose residual and one condition read the coefficient k, with observations.
pinn::Problem coefficient_problem() {
  return parse(R"J({
    "coordinates": ["x"], "domain": [[0, 1]],
    "constants": {"c": 0.5},
    "residual": "u_xx - k*u*u + exp(k)*sin(x)",
    "conditions": [{"on": "x=0", "residual": "u - k", "points": 3}, {"on": "x=1", "residual": "u_x + c", "points": 2}],
    "interior_points": 7,
    "coefficients": {"k": 0.3},
    "observations": [{"points": [0.1, 0.4, 0.8], "values": [0.2, -0.1, 0.3], "weight": 2}]})J");
}

float loss_at(Trainer& t, const std::map<std::string, HostArray>& params) {
  t.set_params(params);
  t.launch();
  return t.loss();
}

TEST(PinnInverse, TheObservationTermIsTheWeightedMeanSquaredMisfit) {
  pinn::Problem p = coefficient_problem();
  Trainer t(net(), pinn::make_step(p), std::make_shared<Adam>(1e-3), Device::CPU, 4);
  t.compile_custom();
  const HostArray u = t.predict(p.observations[0].points);
  t.launch();
  double sum = 0;
  for (int m = 0; m < 3; ++m) {
    const double e = u.data<float>()[m] - p.observations[0].values.data<float>()[m];
    sum += e * e;
  }
  const auto terms = t.loss_terms();
  ASSERT_TRUE(terms.count("data")) << "terms: " << terms.size();
  EXPECT_TRUE(near(terms.at("data"), 2 * sum / 3, 1e-7, 1e-5));
  EXPECT_EQ(terms.size(), 4u);  // residual, x=0, x=1, data
  EXPECT_EQ(t.coefficients().size(), 1u);
  EXPECT_NE(t.explain().find("observed_points"), std::string::npos) << t.explain();
}

// With SGD at lr 1 one step moves every parameter by minus its gradient; the loss around the
// initial parameters by central differences must agree for the coefficient (read in two passes)
// and for the network's weights (their gradient now flows through the coefficients' concat).
TEST(PinnInverse, CoefficientAndWeightGradientsMatchFiniteDifferences) {
  pinn::Problem p = coefficient_problem();
  Trainer t(net(), pinn::make_step(p), std::make_shared<SGD>(1.0), Device::CPU, 9);
  t.compile_custom();
  const auto start = t.params();
  ASSERT_TRUE(start.count("coefficient.k"));
  EXPECT_FLOAT_EQ(start.at("coefficient.k").data<float>()[0], 0.3f);
  t.launch();
  const auto after = t.params();
  int checked = 0;
  for (const auto& [name, index] : std::vector<std::pair<std::string, int>>{
           {"coefficient.k", 0}, {"0.weight", 3}, {"1.bias", 5}, {"2.weight", 7}, {"2.bias", 0}}) {
    const double grad = start.at(name).data<float>()[index] - after.at(name).data<float>()[index];
    const double h = 1e-2;
    auto w = start;
    w.at(name).data<float>()[index] += static_cast<float>(h);
    const double lp = loss_at(t, w);
    w.at(name).data<float>()[index] -= static_cast<float>(2 * h);
    const double lm = loss_at(t, w);
    EXPECT_TRUE(near(grad, (lp - lm) / (2 * h), 2e-3, 2e-3)) << "d loss / d " << name << "[" << index << "]";
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(PinnInverse, CheckpointsKeepTheCoefficientsByName) {
  pinn::Problem p = coefficient_problem();
  Trainer t(net(), pinn::make_step(p), std::make_shared<Adam>(1e-2), Device::CPU, 1);
  t.compile_custom();
  for (int i = 0; i < 5; ++i) t.launch();
  const float k = t.coefficients().at("k");
  EXPECT_NE(k, 0.3f);  // it trains
  const std::string path = std::string(SG_TEST_TMPDIR) + "/inverse.safetensors";
  t.save(path);
  t.launch();
  t.load(path);
  EXPECT_EQ(t.coefficients().at("k"), k);
  // A checkpoint without the coefficient does not resume into the inverse problem, and says why.
  pinn::Problem plain = coefficient_problem();
  plain.coefficients.clear();
  plain.constants.push_back({"k", 0.3});
  Trainer f(net(), pinn::make_step(plain), std::make_shared<Adam>(1e-2), Device::CPU, 1);
  f.compile_custom();
  const std::string forward = std::string(SG_TEST_TMPDIR) + "/forward.safetensors";
  f.save(forward);
  try {
    t.load(forward, LoadMode::WeightsOnly);
    FAIL() << "loaded a checkpoint without coefficient.k";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("coefficient.k"), std::string::npos) << e.what();
  }
}

TEST(PinnInverse, BadCoefficientsAndObservationsNameTheirPath) {
  const std::string head = R"J("coordinates": ["t", "x"], "domain": [[0, 1], [0, 1]], "residual": "u_t - a*u_xx", )J";
  struct Bad { std::string body, expect; };
  for (const Bad& b : std::vector<Bad>{
           {R"J("coefficients": {"a": "big"})J", "problem.coefficients.a: expected an initial value"},
           {R"J("coefficients": {"x": 1})J", "problem.coefficients.x: 'x' names both a coordinate and a coefficient"},
           {R"J("coefficients": {"a": 0.1}, "observations": [{"points": [[0, 1, 2]], "values": [1]}])J",
            "problem.observations[0].points: expected f32 [N, 2]"},
           {R"J("coefficients": {"a": 0.1}, "observations": [{"points": [[0, 1]], "values": [[1, 2]]}])J",
            "problem.observations[0].values: expected f32 [1, 1]"},
           {R"J("coefficients": {"a": 0.1}, "observations": [{"points": [[0, 1]], "values": [1], "outputs": ["v"]}])J",
            "problem.observations[0].outputs: 'v' is not an output"},
           {R"J("coefficients": {"a": 0.1}, "observations": [{"points": [[0, 1]], "values": [1], "colour": 2}])J",
            "problem.observations[0].colour: unknown key"},
           {R"J("coefficients": {"a": 0.1}, "observations": [{"sample_exact": 10}])J",
            "problem.observations[0].sample_exact: the problem has no exact solution"},
           {R"J("coefficients": {"a": 0.1}, "observations": [{"file": "/nonexistent/obs.npz"}])J", "/nonexistent/obs.npz"},
           {R"J("coefficients": {"a": 0.1}, "observations": [{"points": [[0, 1]], "values": [1], "label": "residual"}])J",
            "the term label 'residual' is taken"},
           {R"J("observations": [{"points": [[0, 1]], "values": [1]}])J", "unknown name 'a'"}}) {
    try {
      parse(("{" + head + b.body + "}").c_str());
      ADD_FAILURE() << "accepted: " << b.body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.expect), std::string::npos) << e.what() << "\n  expected: " << b.expect;
    }
  }
}

// Observations from an npz file named relative to the config file's folder.
TEST(PinnInverse, ObservationsComeFromAnNpzBesideTheConfig) {
  const auto dir = std::filesystem::path(SG_TEST_TMPDIR) / "inverse_npz";
  std::filesystem::create_directories(dir);
  NamedArrays arrays;
  arrays["X"] = HostArray::f32({3, 2}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  arrays["u"] = HostArray::f32({3}, {1.0f, 2.0f, 3.0f});
  write_npz((dir / "obs.npz").string(), arrays);
  std::ofstream((dir / "config.json").string()) << R"J({"model": {"layers": [{"type": "dense", "units": 1}]},
    "problem": {"type": "heat1d", "coefficients": {"alpha": 0.2},
                "observations": [{"file": "obs.npz", "points": "X", "values": "u", "label": "probe"}]}})J";
  const RunConfig cfg = load_config((dir / "config.json").string());
  ASSERT_TRUE(cfg.problem.has_value());
  const pinn::Observation& ob = cfg.problem->observations.at(0);
  EXPECT_EQ(ob.values.shape(), (Shape{3, 1}));
  EXPECT_EQ(ob.points.data<float>()[5], 0.6f);
  EXPECT_EQ(pinn::term_labels(*cfg.problem).back(), "probe");
}

// A built-in problem takes coefficients by a constant's name: the residual reads the learned
// value, the exact solution (and the observations drawn from it) the true one.
TEST(PinnInverse, HeatDiffusivityIsRecoveredFromObservationsOnTheCpu) {
  pinn::Problem p = parse(R"J({"type": "heat1d", "interior_points": 256, "boundary_points": 192,
    "coefficients": {"alpha": 0.3}, "observations": [{"sample_exact": 256, "seed": 3}], "eval_points": 400})J");
  ASSERT_EQ(p.observations.size(), 1u);
  EXPECT_EQ(p.observations[0].points.shape(), (Shape{256, 2}));
  Trainer t(net(), pinn::make_step(p), std::make_shared<Adam>(1e-2), Device::CPU, 0);
  t.compile_custom();
  for (int i = 0; i < 1500; ++i) t.launch();
  const double alpha = t.coefficients().at("alpha");
  EXPECT_NEAR(alpha, 0.1, 0.01) << "alpha after 1500 steps";
  EXPECT_LT(pinn::relative_l2_error(t, p), 0.2);
}

}  // namespace
}  // namespace sg::test
