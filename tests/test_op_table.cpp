// One backend test that walks the op table (src/ir/op_table.h): every op kind runs its cases
// (tests/op_cases.h: random inputs of several shapes and attributes) with every buffer poisoned
// first, so an output an op forgets to write shows up; the CUDA backend against the CPU reference
// on each case; and every gradient rule, and the losses' built-in gradients, against central
// finite differences of a float64 forward. A new kind is tested by being in the table: it fails
// EveryKindInTheTableHasCases until op_cases.h has cases for it.
//
// Backward kinds (dense_backward, conv2d_backward, ...) have no cases of their own: they are the
// backward ops of their forward kind's gradient cases, so the finite differences check them, and
// the CUDA comparison runs them. Kinds with neither a gradient rule nor a gradient output (the
// optimizer steps and schedule, gather_batch, sample_points, jet_input, abs_max) are checked by
// the poisoned CPU run and the CUDA comparison.
#include <algorithm>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>

#include "ir/op_table.h"
#include "op_cases.h"

namespace sg::test {
namespace {

// ---- Every tolerance of this file ----

// CUDA against the CPU reference, per tensor: relative L2 (||gpu - cpu|| / ||cpu||) and the largest
// element difference over the largest |element| (as tests/test_backends.h compares), each at
// most its tolerance.
struct Tol {
  double rel_l2, rel_max;
};
// fp32 kernels on both sides (the CPU sums in double and rounds): products and sums of up to a
// few hundred terms, and the fp32 math library, land near 1e-7 .. 1e-6. Expression losses and
// sampled points run the same float64 code on both (src/pinn), so they sit far inside it.
constexpr Tol kCudaF32{1e-4, 1e-3};
// i32 outputs (gathered labels, valid-row counts, the step counter), copies (gathered rows,
// reshapes) and a maximum of magnitudes: nothing to round, so bit for bit.
constexpr Tol kCudaExact{0, 0};
// GELU jets: the third derivative of GELU in the backward carries fp32 rounding near 1.5e-4
// (as in test_cuda_pinn.cpp).
constexpr Tol kCudaGeluJet{3e-4, 3e-3};
// Both measures divide by at least this absolute scale (per element), so a tensor whose values
// are all below it is compared absolutely (1e-6 rms, 1e-5 at most at fp32). One is zero in exact
// arithmetic: layer norm over one feature has dX = 0, which the CPU cancels exactly while the
// GPU's FMA (dY gamma kept unrounded) leaves residues of ~6e-7 (rounding times rstd = 1 /
// sqrt(eps)). Every other tensor here is above it.
constexpr double kCudaAbsFloor = 1e-2;
// The option train.attention "cudnn_bf16" (not the default): Q, K, V, O and dO rounded to bf16
// (8 significant bits) around cuDNN's fused attention (as in test_cudnn_attention.cpp).
constexpr Tol kCudaAttentionBf16{3e-2, 3e-2};

// The CPU against float64: |got - want| <= abs * max(1, max |want| over the tensor) + rel |want|.
struct Near {
  double abs, rel;
};
// The CPU's fp32 forward outputs against the float64 reference evaluated on the same inputs.
constexpr Near kForwardF32{1e-5, 1e-5};
// fp32 gradients (the CPU's backward kernels) against central differences of the float64
// forward, step kFdStep: the differences themselves are good to ~1e-9 (truncation h^2 f''' and
// rounding 1e-16 L / h), so this is fp32 rounding of the gradient sums (as test_gradients.cpp).
// The largest error seen is a tenth of it (layer norm over 2 features, ill-conditioned); the
// forward outputs stay within a hundredth of kForwardF32.
constexpr Near kGradientF32{2e-5, 2e-4};
constexpr double kFdStep = 1e-6;

Tol cuda_tolerance(const OpCase& c, const TensorInfo& t) {
  if (t.dtype == DType::I32) return kCudaExact;
  switch (c.kind) {
    case OpKind::GatherBatch:
    case OpKind::Reshape:
    case OpKind::AbsMax: return kCudaExact;
    case OpKind::JetActivation:
      return c.p.ops()[0].attr<JetAttrs>().act == Activation::GELU ? kCudaGeluJet : kCudaF32;
    default: return kCudaF32;
  }
}

// ---- Running a case ----

// Every tensor some op writes, in first-write order.
std::vector<TensorId> written(const Program& p) {
  std::vector<TensorId> out;
  for (const Op& op : p.ops())
    for (TensorId t : op.out)
      if (t != kNone && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

// The case's program with every tensor kept to the end of the step (none reuses another's memory).
Program kept(const OpCase& c) {
  Program p = c.p;
  for (size_t t = 0; t < p.num_tensors(); ++t) p.tensor(static_cast<TensorId>(t)).live_out = true;
  return p;
}

// Runs `p` once on `d` with every buffer poisoned first and the case's inputs set.
std::unique_ptr<PoisonedRun> run_case(const OpCase& c, const Program& p, Device d, LowerOptions opt = {}) {
  auto r = std::make_unique<PoisonedRun>(d, p, opt);
  for (const auto& [name, a] : c.inputs) r->set(name, a);
  r->exe->run();
  return r;
}

Values input_values(const OpCase& c) {
  Values v;
  for (const auto& [name, a] : c.inputs) v[name] = to_double(a);
  return v;
}

// How an element of a poisoned buffer reads when no op wrote it: NaN, or NaN's bits as an i32.
int64_t first_unwritten(const HostArray& a) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int32_t nan_bits;
  std::memcpy(&nan_bits, &nan, 4);
  for (int64_t k = 0; k < a.numel(); ++k)
    if (a.dtype() == DType::F32 ? !std::isfinite(a.data<float>()[k]) : a.data<int32_t>()[k] == nan_bits) return k;
  return -1;
}

// Expects got[k] near want[k] for every k; reports the first few misses and how many there were.
void expect_near_all(const HostArray& got, const std::vector<double>& want, Near tol, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  int misses = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const double g = got.data<float>()[k];
    if (std::fabs(g - want[k]) <= tol.abs * scale + tol.rel * std::fabs(want[k])) continue;
    if (++misses <= 3) ADD_FAILURE() << what << "[" << k << "]: " << g << ", want " << want[k];
  }
  EXPECT_EQ(misses, 0) << what << ": " << misses << " of " << want.size() << " elements off";
}

// Central differences of f with respect to every element of v[name].
std::vector<double> central_differences(Values& v, const std::string& name, const std::function<double(const Values&)>& f) {
  std::vector<double>& x = v.at(name);
  std::vector<double> fd(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    const double keep = x[k];
    x[k] = keep + kFdStep;
    const double up = f(v);
    x[k] = keep - kFdStep;
    const double down = f(v);
    x[k] = keep;
    fd[k] = (up - down) / (2 * kFdStep);
  }
  return fd;
}

bool has_kind(const Program& p, OpKind k) {
  return std::any_of(p.ops().begin(), p.ops().end(), [k](const Op& op) { return op.kind == k; });
}

bool built_with_cudnn() {
#ifdef STEPGRAPH_HAVE_CUDNN
  return true;
#else
  return false;
#endif
}

// ---- The tests ----

TEST(OpTable, EveryKindInTheTableHasCases) {
  const std::vector<OpCase> cases = all_op_cases();
  std::map<OpKind, int> own, run_by, gradient;
  for (const OpCase& c : cases) {
    ASSERT_FALSE(c.p.ops().empty()) << c.name;
    EXPECT_EQ(c.p.ops()[0].kind, c.kind) << c.name << ": a case's first op is of its kind";
    ++own[c.kind];
    if (c.out != kNone) ++gradient[c.kind];
    std::vector<OpKind> seen;
    for (const Op& op : c.p.ops())
      if (std::find(seen.begin(), seen.end(), op.kind) == seen.end()) seen.push_back(op.kind), ++run_by[op.kind];
  }
  for (const OpDef* row : op_table()) {
    EXPECT_GT(run_by[row->kind], 0) << "op kind '" << row->name
                                    << "' is in no case: add a builder of its cases to all_op_cases() in tests/op_cases.h";
    if (row->gradient != &no_gradient)
      EXPECT_GT(gradient[row->kind], 0) << "op kind '" << row->name
                                        << "' has a gradient rule but no gradient case (OpCase::out) in tests/op_cases.h";
    std::cout << "[ op cases ] " << row->name << ": " << own[row->kind] << " cases"
              << (gradient[row->kind] ? cat(" (", gradient[row->kind], " with gradients)") : "")
              << (own[row->kind] == 0 ? cat(", run by ", run_by[row->kind], " cases of its forward kind") : "") << "\n";
  }
}

// Every output of every op, backward ops included, is written on the CPU reference (finite).
TEST(OpTable, CpuWritesEveryOutput) {
  for (const OpCase& c : all_op_cases()) {
    SCOPED_TRACE(c.name);
    const Program p = kept(c);
    std::unique_ptr<PoisonedRun> cpu;
    try {
      cpu = run_case(c, p, Device::CPU);
    } catch (const Error& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
      continue;
    }
    for (TensorId t : written(p)) {
      const int64_t k = first_unwritten(cpu->get(t));
      EXPECT_LT(k, 0) << c.name << ": " << p.tensor(t).name << " " << shape_str(p.tensor(t).shape) << "[" << k
                      << "] not written (still the poison)";
    }
  }
}

// Runs the case on both backends and compares every tensor an op writes. A program the CUDA
// backend refuses is a failure, or with `may_refuse` (an option that needs a library engine for
// the shape) a skip that says why; returns whether it was compared.
bool compare_with_cuda(const OpCase& c, LowerOptions opt, const std::string& what,
                       const std::function<Tol(const TensorInfo&)>& tol, bool may_refuse = false) {
  const Program p = kept(c);
  std::unique_ptr<PoisonedRun> cpu = run_case(c, p, Device::CPU), gpu;
  try {
    gpu = run_case(c, p, Device::CUDA, opt);
  } catch (const Error& e) {
    if (may_refuse) {
      std::cout << "[ refused  ] " << what << ": " << e.what() << "\n";
      return false;
    }
    ADD_FAILURE() << what << ": the CUDA backend refused it: " << e.what();
    return false;
  }
  for (TensorId t : written(p)) {
    const TensorInfo& info = p.tensor(t);
    const HostArray want = cpu->get(t), got = gpu->get(t);
    if (const int64_t k = first_unwritten(got); k >= 0) {
      ADD_FAILURE() << what << ": " << info.name << " " << shape_str(info.shape) << "[" << k << "] not written on the GPU";
      continue;
    }
    const Tol w = tol(info);
    if (w.rel_l2 == 0) {
      EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0)
          << what << ": " << info.name << " " << shape_str(info.shape) << " is not the CPU's bit for bit";
      continue;
    }
    double diff2 = 0, ref2 = 0, maxdiff = 0, maxref = 0;
    for (int64_t k = 0; k < want.numel(); ++k) {
      const double x = want.data<float>()[k], y = got.data<float>()[k];
      diff2 += (x - y) * (x - y), ref2 += x * x;
      maxdiff = std::max(maxdiff, std::fabs(x - y)), maxref = std::max(maxref, std::fabs(x));
    }
    const double rel = std::sqrt(diff2) / std::max(std::sqrt(ref2), kCudaAbsFloor * std::sqrt(want.numel()));
    const double relmax = maxdiff / std::max(maxref, kCudaAbsFloor);
    EXPECT_TRUE(rel <= w.rel_l2 && relmax <= w.rel_max)
        << what << ": " << info.name << " " << shape_str(info.shape) << " differs from the CPU: rel L2 " << rel
        << ", max diff / max " << relmax << " (tolerance " << w.rel_l2 << ", " << w.rel_max << ")";
  }
  return true;
}

TEST(OpTable, CudaMatchesTheCpuReference) {
  REQUIRE_GPU();
  int compared = 0;
  for (const OpCase& c : all_op_cases()) {
    SCOPED_TRACE(c.name);
    if (has_kind(c.p, OpKind::Conv2d) && !built_with_cudnn()) {
      std::cout << "[ skipped  ] " << c.name
                << ": built without cuDNN, and the CUDA backend refuses convolutions then (it says so)\n";
      continue;
    }
    if (c.kind == OpKind::Custom && !custom_op_def(c.p.ops()[0].attr<CustomAttrs>().id).cuda) {
      std::cout << "[ skipped  ] " << c.name << ": a user-defined op without CUDA kernels (CUDA trainers refuse it)\n";
      continue;
    }
    compared += compare_with_cuda(c, {}, c.name, [&](const TensorInfo& t) { return cuda_tolerance(c, t); });
    // cuDNN's bf16 attention: an option, for head sizes that are multiples of 8.
    if (c.kind == OpKind::Attention && built_with_cudnn()) {
      const Op& op = c.p.ops()[0];
      if (c.p.tensor(op.in[0]).shape[2] / op.attr<AttentionAttrs>().heads % 8 != 0) continue;
      LowerOptions bf16;
      bf16.attention = AttentionMode::CudnnBF16;
      compare_with_cuda(
          c, bf16, c.name + " (cudnn_bf16)", [](const TensorInfo&) { return kCudaAttentionBf16; }, /*may_refuse=*/true);
    }
  }
  std::cout << "[ op cases ] " << compared << " cases compared with the CUDA backend\n";
}

// Every gradient rule: the parameters' gradients of sum(out * dY), as the CPU computes them
// through the rule's backward ops, against central differences of the float64 forward. The
// forward output itself is checked against that reference first.
TEST(OpTable, GradientRulesMatchFiniteDifferences) {
  for (const OpCase& c : all_op_cases()) {
    if (c.out == kNone) continue;
    SCOPED_TRACE(c.name);
    const Program p = kept(c);
    std::unique_ptr<PoisonedRun> cpu = run_case(c, p, Device::CPU);
    Values v = input_values(c);
    expect_near_all(cpu->get(c.out), reference_output(c, v), kForwardF32, c.name + ": " + p.tensor(c.out).name);
    const std::vector<double> dY = v.at(p.tensor(c.dout).name);
    auto L = [&](const Values& w) {
      const std::vector<double> y = reference_output(c, w);
      double s = 0;
      for (size_t k = 0; k < y.size(); ++k) s += y[k] * dY[k];
      return s;
    };
    ASSERT_FALSE(c.grads.empty());
    for (const ParamGrad& g : c.grads) {
      const std::string& name = p.tensor(g.param).name;
      expect_near_all(cpu->get(g.grad), central_differences(v, name, L), kGradientF32, c.name + ": d/d " + name);
    }
  }
}

// The losses' gradient outputs (dlogits, dpred, an expression loss's dU) against central
// differences of their float64 loss value; the loss value itself against that reference.
TEST(OpTable, LossGradientOutputsMatchFiniteDifferences) {
  int checked = 0;
  for (const OpCase& c : all_op_cases()) {
    if (c.losses.empty()) continue;
    SCOPED_TRACE(c.name);
    ++checked;
    const Program p = kept(c);
    std::unique_ptr<PoisonedRun> cpu = run_case(c, p, Device::CPU);
    Values v = input_values(c);
    double loss = 0;
    for (TensorId t : c.losses) loss += cpu->get(t).data<float>()[0];
    HostArray got = HostArray::f32({1}, {static_cast<float>(loss)});
    expect_near_all(got, {reference_loss(c, v)}, kForwardF32, c.name + ": loss");
    for (const auto& [input, grad] : c.loss_grads) {
      const std::string& name = p.tensor(input).name;
      expect_near_all(cpu->get(grad), central_differences(v, name, [&](const Values& w) { return reference_loss(c, w); }),
                      kGradientF32, c.name + ": " + p.tensor(grad).name);
    }
  }
  EXPECT_GT(checked, 0);
}

// The slot lists are checked before any shape rule: counts, and a tensor in every slot that is
// not optional; the rules then name the op, the tensors and what was expected.
TEST(OpTable, SlotsAndShapeRulesRefuseWithNames) {
  auto expect_error = [](const std::function<void()>& f, const std::vector<std::string>& parts) {
    try {
      f();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      for (const std::string& want : parts) EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  Program p;
  const TensorId X = p.add_tensor({"X", {4, 3}, DType::F32, Role::Input});
  const TensorId W = p.add_tensor({"W", {2, 3}, DType::F32, Role::Parameter});
  const TensorId Y = p.add_tensor({"Y", {4, 2}, DType::F32, Role::Activation});
  Op d;
  d.kind = OpKind::Dense;
  d.name = "layer";
  d.attrs = DenseAttrs{};
  d.in = {X, W};
  d.out = {Y, kNone};
  expect_error([&] { p.add_op(d); }, {"op 'layer' (dense)", "expects 3 inputs (X, W, b?), got 2"});
  d.in = {X, kNone, kNone};
  expect_error([&] { p.add_op(d); }, {"op 'layer' (dense)", "input 1 ('W') is required"});
  const TensorId W5 = p.add_tensor({"W5", {2, 5}, DType::F32, Role::Parameter});
  d.in = {X, W5, kNone};
  expect_error([&] { p.add_op(d); }, {"op 'layer' (dense)", "input 'X' [4, 3] has 3 features but weight 'W5' [2, 5] expects 5"});
  d.in = {X, W, kNone};
  d.out = {X, kNone};
  expect_error([&] { p.add_op(d); }, {"output 'X' [4, 3] must be [4, 2]"});

  // A data-set gather whose padded last batch would be sharded, or whose global batch is larger
  // than the data.
  const TensorId dX = p.add_tensor({"data.X", {10, 3}, DType::F32, Role::Input});
  const TensorId dY = p.add_tensor({"data.y", {10}, DType::I32, Role::Input});
  const TensorId step = p.add_tensor({"step", {1}, DType::I32, Role::StepScalar});
  const TensorId bX = p.add_tensor({"batch.X", {4, 3}, DType::F32, Role::Activation});
  const TensorId by = p.add_tensor({"batch.y", {4}, DType::I32, Role::Activation});
  const TensorId valid = p.add_tensor({"valid", {1}, DType::I32, Role::Activation});
  Op g;
  g.kind = OpKind::GatherBatch;
  g.name = "gather";
  g.in = {step, dX, dY};
  g.out = {valid, bX, by};
  g.attrs = GatherAttrs{1, true, /*partial_last=*/true, 0, 2};
  expect_error([&] { p.add_op(g); }, {"op 'gather' (gather_batch)", "padded last batch cannot be sharded"});
  g.attrs = GatherAttrs{1, true, false, 0, 3};
  expect_error([&] { p.add_op(g); }, {"global batch of 12 rows is larger than the 10 rows of 'data.X'"});
  g.attrs = GatherAttrs{1, true, false, 1, 2};
  EXPECT_NO_THROW(p.add_op(g));
}

}  // namespace
}  // namespace sg::test
