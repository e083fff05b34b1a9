// The tensor ops (ir.h: Sub ... MeanBackward) beyond the op-table walk: their shape rules refuse
// with the op, the tensors, both shapes and what was expected; the printer shows their
// attributes; hand-checked values of broadcasting and the new activations; on a GPU, their
// cases captured into a CUDA graph and replayed. (Outputs, eager CUDA and gradients:
// test_op_table.cpp through tensor_op_cases.h.)
#include <limits>

#include "backend/activation_math.h"
#include "backend/jet_math.h"
#include "op_cases.h"
#include "test_util.h"

namespace sg::test {
namespace {

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    for (const std::string& want : parts) EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

struct Tiny {
  Program p;
  TensorId t(const std::string& name, Shape s, Role r = Role::Input) { return p.add_tensor({name, std::move(s), DType::F32, r}); }
  void op(OpKind k, std::vector<TensorId> in, std::vector<TensorId> out, OpAttrs a = {}) {
    Op o;
    o.kind = k;
    o.name = "x";
    o.in = std::move(in);
    o.out = std::move(out);
    o.attrs = std::move(a);
    p.add_op(std::move(o));
  }
};

TEST(TensorOps, ShapeRulesRefuseWithNames) {
  Tiny g;
  const TensorId A = g.t("A", {4, 3}), B = g.t("B", {2, 3}), R = g.t("R", {4, 3, 1}), Y = g.t("Y", {4, 3});
  const TensorId Y5 = g.t("Y5", {4, 5});
  expect_error([&] { g.op(OpKind::Mul, {A, B}, {Y}); },
               {"op 'x' (mul)", "'A' [4, 3] and 'B' [2, 3] do not broadcast: axis 0 has 4 and 2"});
  expect_error([&] { g.op(OpKind::Add, {A, R}, {Y}); }, {"(add)", "'A' [4, 3] and 'R' [4, 3, 1] must have the same rank"});
  const TensorId B1 = g.t("B1", {1, 3});
  expect_error([&] { g.op(OpKind::Div, {A, B1}, {Y5}); },
               {"(div)", "'Y5' [4, 5] must be [4, 3] (the broadcast shape of 'A' [4, 3] and 'B1' [1, 3])"});
  EXPECT_NO_THROW(g.op(OpKind::Sub, {B1, A}, {Y}));

  expect_error([&] { g.op(OpKind::Concat, {A, A}, {g.t("C", {8, 3})}, ConcatAttrs{0}); },
               {"(concat)", "axis 0 of 'C' [8, 3] is the batch axis"});
  expect_error([&] { g.op(OpKind::Concat, {A, B}, {g.t("C2", {4, 6})}, ConcatAttrs{-1}); },
               {"input 1 'B' [2, 3] must be [4, 3]"});
  expect_error([&] { g.op(OpKind::Concat, {A, A}, {g.t("C3", {4, 7})}, ConcatAttrs{1}); },
               {"output 'C3' [4, 7] has 7 along axis 1 but its inputs add up to 6"});
  expect_error([&] { g.op(OpKind::Concat, {A}, {g.t("C4", {4, 3})}, ConcatAttrs{2}); },
               {"axis 2 is out of range for 'C4' [4, 3] (rank 2)"});

  SplitAttrs sp;
  sp.axis = 1, sp.sizes = {1, 1};
  expect_error([&] { g.op(OpKind::Split, {A}, {g.t("S0", {4, 1}), g.t("S1", {4, 1})}, sp); },
               {"(split)", "sizes add up to 2 but 'A' [4, 3] has 3 along axis 1"});
  sp.sizes = {1, 2};
  expect_error([&] { g.op(OpKind::Split, {A}, {g.t("S2", {4, 1}), g.t("S3", {4, 1})}, sp); },
               {"output 1 'S3' [4, 1] must be [4, 2]"});

  SliceAttrs sl;
  sl.axis = -1, sl.begin = 2, sl.end = 4;
  expect_error([&] { g.op(OpKind::Slice, {A}, {g.t("L", {4, 2})}, sl); },
               {"(slice)", "slice [2, 4) of axis 1 of 'A' [4, 3]: needs 0 <= begin < end <= 3"});

  ReduceAttrs ra;
  ra.axis = 1, ra.keepdims = true;
  expect_error([&] { g.op(OpKind::Mean, {A}, {g.t("M", {4})}, ra); },
               {"(mean)", "output 'M' [4] must be [4, 1] ('A' [4, 3] reduced over axis 1, kept as size 1)"});
  ra.axis = 0;
  expect_error([&] { g.op(OpKind::Sum, {A}, {g.t("M2", {3})}, ra); }, {"(sum)", "is the batch axis"});

  ActivationAttrs act;
  act.act = Activation::LeakyReLU, act.negative_slope = -0.1;
  expect_error([&] { g.op(OpKind::Activation, {A}, {g.t("Z", {4, 3})}, act); },
               {"(activation)", "leaky_relu's negative_slope -0.1 must be finite and >= 0"});
}

TEST(TensorOps, PrinterShowsAttributes) {
  Tiny g;
  const TensorId A = g.t("A", {4, 3}), Y = g.t("Y", {4, 6}), L = g.t("L", {4, 1}), S = g.t("S", {4, 1});
  g.op(OpKind::Concat, {A, A}, {Y}, ConcatAttrs{-1});
  SliceAttrs sl;
  sl.axis = 1, sl.begin = 2, sl.end = 3;
  g.op(OpKind::Slice, {Y}, {L}, sl);
  ActivationAttrs act;
  act.act = Activation::ELU, act.alpha = 0.5;
  g.op(OpKind::Activation, {L}, {g.t("E", {4, 1})}, act);
  g.op(OpKind::ScaleShift, {L}, {g.t("T", {4, 1})}, ScaleShiftAttrs{2, -1});
  ReduceAttrs ra;
  ra.axis = 1, ra.keepdims = true;
  g.op(OpKind::Sum, {Y}, {S}, ra);
  const std::string text = print_program(g.p);
  for (const char* want : {"concat(axis -1)  'x': A[4, 3], A[4, 3] -> Y[4, 6]", "slice(axis 1, [2, 3))",
                           "activation(elu, alpha 0.5)", "scale_shift(a 2, b -1)", "sum(axis 1, keepdims)"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
}

// Broadcasting and the reductions of the gradients, on the CPU reference, by hand.
TEST(TensorOps, BroadcastHandChecked) {
  Tiny g;
  const TensorId A = g.t("A", {2, 1}, Role::Parameter), B = g.t("B", {1, 3}, Role::Parameter), Y = g.t("Y", {2, 3});
  g.op(OpKind::Mul, {A, B}, {Y});
  const TensorId dY = g.t("dY", {2, 3});
  const std::vector<ParamGrad> grads = append_backward(g.p, {{Y, dY}}, 1);
  ASSERT_EQ(grads.size(), 2u);
  Runner r(g.p);
  r.set("A", HostArray::f32({2, 1}, {2, -1}));
  r.set("B", HostArray::f32({1, 3}, {1, 10, 100}));
  r.set("dY", HostArray::f32({2, 3}, {1, 1, 1, 0, 1, 2}));
  r.run();
  const HostArray y = r.get("Y"), da = r.get("grad.A"), db = r.get("grad.B");
  const std::vector<float> want_y = {2, 20, 200, -1, -10, -100};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(y.data<float>()[k], want_y[k]) << k;
  EXPECT_EQ(da.data<float>()[0], 111);       // sum_j dY[0, j] B[j]
  EXPECT_EQ(da.data<float>()[1], 210);       // 0 + 10 + 200
  EXPECT_EQ(db.data<float>()[0], 2);         // sum_i dY[i, 0] A[i]
  EXPECT_EQ(db.data<float>()[1], 2 - 1);
  EXPECT_EQ(db.data<float>()[2], 2 - 2);
}

// gelu (tanh form) and gelu_erf by name, at points where PyTorch's two forms differ.
TEST(TensorOps, GeluFormsByName) {
  EXPECT_EQ(parse_activation("gelu_tanh"), Activation::GELU);
  EXPECT_EQ(parse_activation("gelu"), Activation::GELU);
  EXPECT_EQ(activation_name(parse_activation("gelu_erf")), std::string("gelu_erf"));
  for (double z : {-3.0, -1.0, -0.3, 0.5, 1.7, 4.0}) {
    const double exact = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    EXPECT_NEAR(act_forward<double>(Activation::GELUErf, z), exact, 1e-15) << z;
    // The tanh form is within 5e-4 of it, and not equal.
    const double approx = act_forward<double>(Activation::GELU, z);
    EXPECT_LT(std::fabs(approx - exact), 5e-4) << z;
    EXPECT_GT(std::fabs(approx - exact), 1e-8) << z;
  }
  EXPECT_NEAR(act_forward<double>(Activation::GELUErf, 1.0), 0.8413447460685429, 1e-15);  // Phi(1)
}

// Every activation's derivative (dense and standalone backward) and its jet derivatives up to
// the third (physics-informed networks) against central differences of the forward in float64.
TEST(TensorOps, ActivationDerivativesMatchFiniteDifferences) {
  for (const std::string& name : activation_names()) {
    const Activation a = parse_activation(name);
    for (double z : {-2.3, -0.7, 0.4, 1.9}) {
      const double h = 1e-4;
      auto f = [&](double x) { return act_forward<double>(a, x); };
      auto d1 = [&](double x) { return act_derivative<double>(a, f(x), x); };
      EXPECT_NEAR(d1(z), (f(z + h) - f(z - h)) / (2 * h), 1e-6) << name << " at " << z;
      double g0, g1, g2, g3;
      act_derivs<double>(a, z, &g0, &g1, &g2, &g3);
      EXPECT_NEAR(g0, f(z), 1e-12) << name;
      EXPECT_NEAR(g1, d1(z), 1e-9) << name;
      EXPECT_NEAR(g2, (d1(z + h) - d1(z - h)) / (2 * h), 1e-5) << name << " at " << z;
      double up[4], down[4];
      act_derivs<double>(a, z + h, &up[0], &up[1], &up[2], &up[3]);
      act_derivs<double>(a, z - h, &down[0], &down[1], &down[2], &down[3]);
      EXPECT_NEAR(g3, (up[2] - down[2]) / (2 * h), 1e-5) << name << " at " << z;
    }
  }
}

TEST(TensorOps, NewActivationsHandChecked) {
  EXPECT_DOUBLE_EQ(act_forward<double>(Activation::LeakyReLU, -2.0), -0.02);
  EXPECT_DOUBLE_EQ(act_forward<double>(Activation::LeakyReLU, -2.0, 0.2), -0.4);
  EXPECT_DOUBLE_EQ(act_forward<double>(Activation::ELU, 1.5), 1.5);
  EXPECT_NEAR(act_forward<double>(Activation::ELU, -1.0), std::exp(-1.0) - 1, 1e-15);
  EXPECT_NEAR(act_forward<double>(Activation::SiLU, 1.0), 1 / (1 + std::exp(-1.0)), 1e-15);
  EXPECT_DOUBLE_EQ(act_forward<double>(Activation::Square, -3.0), 9.0);
  EXPECT_DOUBLE_EQ(act_derivative<double>(Activation::Square, 9.0, -3.0), -6.0);
  EXPECT_DOUBLE_EQ(act_derivative<double>(Activation::LeakyReLU, -0.4, -2.0, 0.2), 0.2);
  // Every activation propagates NaN, relu too (as PyTorch), and relu' passes its gradient.
  for (const std::string& name : activation_names()) {
    EXPECT_TRUE(std::isnan(act_forward<float>(parse_activation(name), NAN))) << name;
    EXPECT_TRUE(std::isnan(act_forward<double>(parse_activation(name), NAN))) << name;
  }
  EXPECT_EQ(act_derivative<float>(Activation::ReLU, NAN, NAN), 1.0f);
  for (const char* name : {"silu", "leaky_relu", "elu", "exp", "square"})
    EXPECT_EQ(activation_name(parse_activation(name)), std::string(name));
  EXPECT_TRUE(activation_needs_preact(Activation::SiLU));
  EXPECT_TRUE(activation_needs_preact(Activation::Square));
  EXPECT_FALSE(activation_needs_preact(Activation::ELU));
}

// A small model graph: two dense branches of one input, their product joined with one branch by
// a concat skip, split again, one piece summed and subtracted (broadcast) from the other. H1 is
// read twice (its gradient accumulates across backward ops of different kinds). The CPU's
// gradients of sum(out * dY) against central differences of the float64 forward; on a GPU the
// CUDA backend against the CPU.
struct ModelGraph {
  Program p;
  TensorId out = kNone, dY = kNone;
  std::vector<ParamGrad> grads;
  std::map<std::string, HostArray> inputs;
  size_t forward_ops = 0;
};

ModelGraph model_graph() {
  ModelGraph m;
  Program& p = m.p;
  auto add = [&](const std::string& name, Shape s, Role r) { return p.add_tensor({name, std::move(s), DType::F32, r}); };
  auto op = [&](OpKind k, std::vector<TensorId> in, std::vector<TensorId> out, OpAttrs a = {}) {
    Op o;
    o.kind = k, o.name = cat(p.ops().size(), ".", op_kind_name(k)), o.in = std::move(in), o.out = std::move(out);
    o.attrs = std::move(a);
    p.add_op(std::move(o));
  };
  const TensorId X = add("X", {5, 3}, Role::Input), W1 = add("W1", {4, 3}, Role::Parameter),
                 W2 = add("W2", {4, 3}, Role::Parameter);
  m.inputs.emplace("X", random_f32({5, 3}, 31));
  m.inputs.emplace("W1", random_f32({4, 3}, 32, 0.7));
  m.inputs.emplace("W2", random_f32({4, 3}, 33, 0.7));
  const TensorId H1 = add("H1", {5, 4}, Role::Activation), H2 = add("H2", {5, 4}, Role::Activation);
  op(OpKind::Dense, {X, W1, kNone}, {H1, kNone}, DenseAttrs{Activation::Tanh});
  op(OpKind::Dense, {X, W2, kNone}, {H2, kNone}, DenseAttrs{Activation::None});
  const TensorId P = add("P", {5, 4}, Role::Activation), C = add("C", {5, 8}, Role::Activation);
  op(OpKind::Mul, {H1, H2}, {P});
  op(OpKind::Concat, {P, H1}, {C}, ConcatAttrs{-1});
  const TensorId S0 = add("S0", {5, 3}, Role::Activation), S1 = add("S1", {5, 5}, Role::Activation);
  SplitAttrs sp;
  sp.axis = 1, sp.sizes = {3, 5};
  op(OpKind::Split, {C}, {S0, S1}, sp);
  const TensorId R = add("R", {5, 1}, Role::Activation), Y = add("Y", {5, 3}, Role::Activation);
  ReduceAttrs ra;
  ra.axis = 1, ra.keepdims = true;
  op(OpKind::Mean, {S1}, {R}, ra);
  op(OpKind::Sub, {S0, R}, {Y});
  m.forward_ops = p.ops().size();
  m.out = Y;
  m.dY = add("dY", {5, 3}, Role::Input);
  m.inputs.emplace("dY", random_f32({5, 3}, 34));
  m.grads = append_backward(p, {{Y, m.dY}}, m.forward_ops);
  return m;
}

double model_graph_loss(const ModelGraph& m, Values v) {
  for (size_t i = 0; i < m.forward_ops; ++i) {
    const Op& op = m.p.ops()[i];
    double unused = 0;
    if (op.kind == OpKind::Dense) eval_op_double(m.p, op, v, &unused);
    else eval_tensor_op_double(m.p, op, v);
  }
  const std::vector<double>&y = v.at("Y"), &dy = v.at("dY");
  double s = 0;
  for (size_t k = 0; k < y.size(); ++k) s += y[k] * dy[k];
  return s;
}

TEST(TensorOps, ModelGraphGradientsMatchFiniteDifferences) {
  const ModelGraph m = model_graph();
  ASSERT_EQ(m.grads.size(), 2u);
  PoisonedRun cpu(Device::CPU, m.p);
  for (const auto& [name, a] : m.inputs) cpu.set(name, a);
  cpu.exe->run();
  Values v;
  for (const auto& [name, a] : m.inputs) v[name] = to_double(a);
  for (const ParamGrad& g : m.grads) {
    const std::string& name = m.p.tensor(g.param).name;
    const HostArray got = cpu.get(g.grad);
    std::vector<double>& w = v.at(name);
    for (size_t k = 0; k < w.size(); ++k) {
      const double keep = w[k], h = 1e-6;
      w[k] = keep + h;
      const double up = model_graph_loss(m, v);
      w[k] = keep - h;
      const double down = model_graph_loss(m, v);
      w[k] = keep;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(got.data<float>()[k], fd, 2e-5 + 2e-4 * std::fabs(fd)) << name << "[" << k << "]";
    }
  }
}

TEST(TensorOps, ModelGraphOnCudaMatchesTheCpu) {
  REQUIRE_GPU();
  ModelGraph m = model_graph();
  for (size_t t = 0; t < m.p.num_tensors(); ++t) m.p.tensor(static_cast<TensorId>(t)).live_out = true;
  PoisonedRun cpu(Device::CPU, m.p), gpu(Device::CUDA, m.p);
  for (const auto& [name, a] : m.inputs) cpu.set(name, a), gpu.set(name, a);
  cpu.exe->run();
  gpu.exe->run();
  for (const ParamGrad& g : m.grads) {
    const ArrayDiff d = array_diff(cpu.get(g.grad), gpu.get(g.grad));
    EXPECT_LT(d.unwritten, 0) << m.p.tensor(g.grad).name;
    EXPECT_LE(d.rel, 1e-4) << m.p.tensor(g.grad).name;
  }
  const ArrayDiff d = array_diff(cpu.get(m.out), gpu.get(m.out));
  EXPECT_LE(d.rel, 1e-4);
}

// Each case (forward and backward ops) run once, captured, its outputs poisoned again (state
// updated in place reset to its inputs), and replayed: the graph alone must write them all, equal to the CPU reference. Kernels that
// allocate, synchronize or read the host in a step would fail here.
TEST(TensorOps, CudaGraphReplayMatchesTheCpu) {
  REQUIRE_GPU();
  int replayed = 0;
  for (const OpCase& c : tensor_op_cases()) {
    SCOPED_TRACE(c.name);
    Program p = c.p;
    for (size_t t = 0; t < p.num_tensors(); ++t) p.tensor(static_cast<TensorId>(t)).live_out = true;
    PoisonedRun cpu(Device::CPU, p), gpu(Device::CUDA, p);
    for (const auto& [name, a] : c.inputs) cpu.set(name, a), gpu.set(name, a);
    cpu.exe->run();
    gpu.exe->run();
    ASSERT_TRUE(gpu.exe->can_capture());
    gpu.exe->capture();
    std::vector<TensorId> outs;
    for (const Op& op : p.ops())
      for (TensorId t : op.out)
        if (t != kNone && std::find(outs.begin(), outs.end(), t) == outs.end()) outs.push_back(t);
    for (TensorId t : outs) {
      // State updated in place (batch norm's running statistics) starts again from its input
      // values, so the replay's update is compared with the CPU's one update.
      const auto in = c.inputs.find(p.tensor(t).name);
      if (in != c.inputs.end()) {
        gpu.set(in->first, in->second);
        continue;
      }
      const std::vector<float> nan(numel(p.tensor(t).shape), std::numeric_limits<float>::quiet_NaN());
      gpu.be->upload(gpu.ptrs[t], nan.data(), nan.size() * sizeof(float));
    }
    gpu.exe->replay();
    // As test_op_table.cpp compares (its kCudaF32, kCudaAbsFloor): a gradient that is zero in
    // exact arithmetic (A / A) is compared absolutely.
    for (TensorId t : outs) {
      const HostArray want = cpu.get(t), got = gpu.get(t);
      double diff2 = 0, ref2 = 0, maxdiff = 0, maxref = 0;
      bool written = true;
      for (int64_t k = 0; k < want.numel(); ++k) {
        const double x = want.data<float>()[k], y = got.data<float>()[k];
        written = written && std::isfinite(y);
        diff2 += (x - y) * (x - y), ref2 += x * x;
        maxdiff = std::max(maxdiff, std::fabs(x - y)), maxref = std::max(maxref, std::fabs(x));
      }
      EXPECT_TRUE(written) << p.tensor(t).name << " not written by the replay";
      EXPECT_LE(std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-2 * std::sqrt(want.numel())), 1e-4) << p.tensor(t).name;
      EXPECT_LE(maxdiff / std::max(maxref, 1e-2), 1e-3) << p.tensor(t).name;
    }
    ++replayed;
  }
  std::cout << "[ tensor   ] " << replayed << " cases replayed from CUDA graphs\n";
}

}  // namespace
}  // namespace sg::test
