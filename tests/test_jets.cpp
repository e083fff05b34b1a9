// Jets (value, input gradient, selected second derivatives propagated forward through encodings,
// dense layers and activations) against central finite differences of the network in float64,
// and the parameter gradients of a loss on jets against finite differences.
#include <functional>

#include "jet_reference.h"

namespace sg::test {
namespace {

JetSpec spec2d() {  // d = 2: u, u_x, u_y, u_xx, u_yy, u_xy
  JetSpec js;
  js.d = 2;
  js.npairs = 3;
  js.pi[0] = 0, js.pj[0] = 0;
  js.pi[1] = 1, js.pj[1] = 1;
  js.pi[2] = 0, js.pj[2] = 1;
  return js;
}

// Builds input -> (jet input) -> model; returns the program and the output tensor.
struct Net {
  Program p;
  std::vector<ParamSpec> specs;
  TensorId out = kNone;
};
Net build_net(Layer& model, int64_t B, int64_t d, const JetSpec* js) {
  Net n;
  GraphBuilder g(n.p);
  TensorId X = g.tensor("input", {B, d}, Role::Input);
  TensorId x = X;
  if (js) {
    x = g.tensor("jet", {js->K() * B, d}, Role::Activation);
    Op op;
    op.kind = OpKind::JetInput;
    op.name = "jet_input";
    op.in = {X};
    op.out = {x};
    op.attrs = JetAttrs{*js, Activation::None};
    n.p.add_op(std::move(op));
    g.set_jet(js, B);
  }
  n.out = model.build(g, x, "");
  n.specs = g.param_specs();
  return n;
}

Values random_params(const std::vector<ParamSpec>& specs, uint64_t seed, Runner* run) {
  Values v;
  for (const ParamSpec& s : specs) {
    HostArray a = random_f32(s.shape, mix_seed(seed, s.name), 0.7);
    if (run) run->set(s.name, a);
    v[s.name] = to_double(a);
  }
  return v;
}

constexpr double kFdStep = 1e-4;  // central differences' step

std::shared_ptr<Sequential> net_for(Activation act, bool fourier) {
  std::vector<LayerPtr> layers;
  if (fourier) layers.push_back(std::make_shared<FourierFeatures>(3, 0.4));
  layers.push_back(dense(6, act));
  layers.push_back(dense(5, act));
  layers.push_back(dense(2));  // vector output: jets per output
  return sequential(layers);
}

// For every activation, with and without Fourier features: runs the jets `js` of a small
// two-output network at B random points in d dimensions and checks component c of output o at
// point b against fd(u, c), where u(s) is that output in float64 at the point moved by s * h
// (s: d steps of -1, 0 or 1), for central differences.
void expect_jets_match_finite_differences(const JetSpec& js, int64_t B, int64_t d, uint64_t seed,
                                          const std::vector<std::string>& names, double tol,
                                          const std::function<double(const std::function<double(std::vector<int>)>&, int)>& fd) {
  for (bool fourier : {false, true}) {
    for (Activation act : {Activation::Tanh, Activation::Sin, Activation::Sigmoid, Activation::GELU,
                           Activation::Softplus}) {
      auto model = net_for(act, fourier);
      Net jet = build_net(*model, B, d, &js), plain = build_net(*model, 1, d, nullptr);
      Runner run(jet.p);
      Values v = random_params(jet.specs, seed + static_cast<int>(act), &run);
      HostArray X = random_f32({B, d}, seed + 12, 0.6);
      run.set("input", X);
      run.run();
      HostArray U = run.get(jet.p.tensor(jet.out).name);
      for (int64_t b = 0; b < B; ++b)
        for (int o = 0; o < 2; ++o) {
          auto u = [&](std::vector<int> steps) {
            Values w = v;
            std::vector<double> x(static_cast<size_t>(d));
            for (int64_t i = 0; i < d; ++i) x[i] = X.data<float>()[b * d + i] + steps[i] * kFdStep;
            w["input"] = x;
            return forward_double(plain.p, w, plain.out)[o];
          };
          for (int c = 0; c < js.K(); ++c)
            EXPECT_TRUE(near(U.data<float>()[(c * B + b) * 2 + o], fd(u, c), tol, tol))
                << activation_name(act) << (fourier ? " fourier" : "") << " point " << b << " output " << o << " "
                << names[c];
        }
    }
  }
}

TEST(Jets, MatchFiniteDifferencesForEveryActivationAndEncoding) {
  const double h = kFdStep;
  expect_jets_match_finite_differences(
      spec2d(), 4, 2, 5, {"u", "u_x", "u_y", "u_xx", "u_yy", "u_xy"}, 2e-4, [h](const auto& u, int c) {
        switch (c) {
          case 0: return u({0, 0});
          case 1: return (u({1, 0}) - u({-1, 0})) / (2 * h);
          case 2: return (u({0, 1}) - u({0, -1})) / (2 * h);
          case 3: return (u({1, 0}) - 2 * u({0, 0}) + u({-1, 0})) / (h * h);
          case 4: return (u({0, 1}) - 2 * u({0, 0}) + u({0, -1})) / (h * h);
          default: return (u({1, 1}) - u({1, -1}) - u({-1, 1}) + u({-1, -1})) / (4 * h * h);
        }
      });
}

JetSpec spec3d_laplacians() {  // d = 3: u, u_x, u_y, u_z, u_xx + u_zz, u_xx + u_yy + u_zz, u_xy
  JetSpec js;
  js.d = 3;
  js.npairs = 3;
  js.trace[0] = 0b101, js.pi[0] = js.pj[0] = -1;
  js.trace[1] = 0b111, js.pi[1] = js.pj[1] = -1;
  js.pi[2] = 0, js.pj[2] = 1;
  return js;
}

TEST(Jets, LaplacianComponentsMatchFiniteDifferences) {
  const double h = kFdStep;
  expect_jets_match_finite_differences(
      spec3d_laplacians(), 3, 3, 9, {"u", "u_x", "u_y", "u_z", "u_xx + u_zz", "u_xx + u_yy + u_zz", "u_xy"}, 3e-4,
      [h](const auto& u, int c) {
        const double u0 = u({0, 0, 0});
        const double dxx = (u({1, 0, 0}) - 2 * u0 + u({-1, 0, 0})) / (h * h);
        const double dyy = (u({0, 1, 0}) - 2 * u0 + u({0, -1, 0})) / (h * h);
        const double dzz = (u({0, 0, 1}) - 2 * u0 + u({0, 0, -1})) / (h * h);
        switch (c) {
          case 0: return u0;
          case 1: return (u({1, 0, 0}) - u({-1, 0, 0})) / (2 * h);
          case 2: return (u({0, 1, 0}) - u({0, -1, 0})) / (2 * h);
          case 3: return (u({0, 0, 1}) - u({0, 0, -1})) / (2 * h);
          case 4: return dxx + dzz;
          case 5: return dxx + dyy + dzz;
          default: return (u({1, 1, 0}) - u({1, -1, 0}) - u({-1, 1, 0}) + u({-1, -1, 0})) / (4 * h * h);
        }
      });
}

// d loss / d parameter for a squared loss on every component of the jet `js`.
void expect_jet_loss_gradients_match_finite_differences(const JetSpec& js, const char* what) {
  const int64_t B = 3;
  for (Activation act : {Activation::Tanh, Activation::Sin, Activation::Sigmoid, Activation::GELU,
                         Activation::Softplus}) {
    SCOPED_TRACE(what);
    auto model = sequential({std::make_shared<FourierFeatures>(2, 0.3, /*trainable=*/true), dense(5, act),
                             residual(dense(5, act)), dense(1)});
    Net n = build_net(*model, B, 2, &js);
    GraphBuilder g(n.p);
    TensorId T = g.tensor("target", n.p.tensor(n.out).shape, Role::Input);
    MeanSquaredError mse(Reduction::Sum);
    LossOutputs lo = mse.build(g, n.out, T, kNone);
    auto grads = append_backward(n.p, n.out, lo.dpred);
    Runner run(n.p);
    Values v = random_params(n.specs, 40 + static_cast<int>(act), &run);
    HostArray X = random_f32({B, 2}, 3, 0.5), Tv = random_f32(n.p.tensor(n.out).shape, 4, 0.3);
    run.set("input", X);
    run.set("target", Tv);
    v["input"] = to_double(X);
    auto loss = [&](const Values& w) {
      auto U = forward_double(n.p, w, n.out);
      double s = 0;
      for (size_t k = 0; k < U.size(); ++k) s += (U[k] - Tv.data<float>()[k]) * (U[k] - Tv.data<float>()[k]);
      return s;
    };
    run.run();
    EXPECT_TRUE(near(run.get("loss").data<float>()[0], loss(v), 1e-5, 1e-5)) << activation_name(act);
    const double h = 1e-6;
    for (const ParamGrad& pg : grads) {
      const std::string& name = n.p.tensor(pg.param).name;
      HostArray gr = run.get(n.p.tensor(pg.grad).name);
      for (size_t k = 0; k < v[name].size(); ++k) {
        Values w = v;
        w[name][k] += h;
        double lp = loss(w);
        w[name][k] -= 2 * h;
        double lm = loss(w);
        // float32 activations and jets against a float64 reference: about 1e-4 relative.
        EXPECT_TRUE(near(gr.data<float>()[k], (lp - lm) / (2 * h), 2e-4, 1e-3))
            << activation_name(act) << " d loss / d " << name << "[" << k << "]";
      }
    }
  }
}

TEST(Jets, ParameterGradientsOfALossOnJetsMatchFiniteDifferences) {
  expect_jet_loss_gradients_match_finite_differences(spec2d(), "u_xx, u_yy, u_xy");
  JetSpec laplacian;
  laplacian.d = 2;
  laplacian.npairs = 1;
  laplacian.trace[0] = 0b11, laplacian.pi[0] = laplacian.pj[0] = -1;
  expect_jet_loss_gradients_match_finite_differences(laplacian, "u_xx + u_yy");
}

TEST(Jets, FrozenFourierMatrixIsAConstantWithoutGradient) {
  const JetSpec js = spec2d();
  auto model = sequential({std::make_shared<FourierFeatures>(4, 1.0), dense(3, Activation::Tanh), dense(1)});
  Net n = build_net(*model, 2, 2, &js);
  EXPECT_EQ(n.p.tensor(n.p.find("0.B")).role, Role::Constant);
  GraphBuilder g(n.p);
  TensorId T = g.tensor("target", n.p.tensor(n.out).shape, Role::Input);
  LossOutputs lo = MeanSquaredError().build(g, n.out, T, kNone);
  auto grads = append_backward(n.p, n.out, lo.dpred);
  for (const ParamGrad& pg : grads) EXPECT_NE(n.p.tensor(pg.param).name, "0.B");
  EXPECT_EQ(grads.size(), 4u);
}

}  // namespace
}  // namespace sg::test
