// The CUDA backend against the CPU reference on one program (shared by the GPU test files).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "stepgraph/graph.h"
#include "test_util.h"

namespace sg::test {

// Keeps every tensor that is not a temporary alive to the end of the step, so no later tensor
// reuses its memory and the comparison sees what each op wrote.
inline void keep_results(Program& prog) {
  for (size_t t = 0; t < prog.num_tensors(); ++t)
    if (prog.tensor(static_cast<TensorId>(t)).role != Role::Temporary) prog.tensor(static_cast<TensorId>(t)).live_out = true;
}

// The same random parameters and optimizer state on both runs (second moments never negative),
// the optimizer at step 3 with learning rate 0.01 and weight decay 0.05.
inline void set_random_state(PoisonedRun& cpu, PoisonedRun& gpu, const Program& prog, const std::vector<ParamSpec>& specs,
                             uint64_t seed) {
  auto set_both = [&](const std::string& name, const HostArray& a) {
    cpu.set(name, a);
    gpu.set(name, a);
  };
  for (const ParamSpec& s : specs) set_both(s.name, random_f32(s.shape, mix_seed(seed, s.name), 0.5));
  for (size_t t = 0; t < prog.num_tensors(); ++t) {
    const TensorInfo& info = prog.tensor(static_cast<TensorId>(t));
    if (info.role == Role::OptimizerState) {
      HostArray s = random_f32(info.shape, seed + t, 0.01);
      if (info.name.rfind("optim.v.", 0) == 0)  // second moments are never negative
        for (int64_t k = 0; k < s.numel(); ++k) s.data<float>()[k] = std::fabs(s.data<float>()[k]);
      set_both(info.name, s);
    }
    if (info.name == "optim.step") set_both(info.name, HostArray::i32({1}, {3}));
    if (info.name == "optim.hyper") set_both(info.name, HostArray::f32({2}, {0.01f, 0.05f}));
  }
}

// Every tensor an op writes (inputs and activation gradients excepted: the GPU turns dY into dZ
// in place) must agree within `tol` (rel L2; 10 tol for max diff / max). An unwritten tensor is
// a failure that stops the comparison: returns false.
inline bool expect_same_results(const Program& prog, PoisonedRun& cpu, PoisonedRun& gpu, const std::string& what,
                                double tol) {
  for (size_t t = 0; t < prog.num_tensors(); ++t) {
    const TensorInfo& info = prog.tensor(static_cast<TensorId>(t));
    if (info.role == Role::Input || info.role == Role::Temporary) continue;
    // Float products against the float64 reference land near 1e-7 .. 1e-6.
    const ArrayDiff d = array_diff(cpu.get(static_cast<TensorId>(t)), gpu.get(static_cast<TensorId>(t)));
    if (d.unwritten >= 0) {
      ADD_FAILURE() << what << ": " << info.name << "[" << d.unwritten << "] not written (NaN)";
      return false;
    }
    EXPECT_TRUE(d.rel <= tol && d.relmax <= 10 * tol)
        << what << ": " << info.name << " " << shape_str(info.shape) << " differs from the CPU: rel L2 " << d.rel
        << ", max diff / max " << d.relmax;
  }
  return true;
}

// Runs `prog` on the CPU and on the GPU with the same fresh random inputs and compares every
// tensor an op writes (expect_same_results). Returns the GPU lowering's explain text.
inline std::string compare_backends(Program prog, const std::vector<ParamSpec>& specs, uint64_t seed,
                                    const std::string& what, int steps = 1, double tol = 1e-4, LowerOptions opt = {}) {
  keep_results(prog);
  PoisonedRun cpu(Device::CPU, prog), gpu(Device::CUDA, prog, opt);
  set_random_state(cpu, gpu, prog, specs, seed);
  int64_t classes = 0;
  for (const Op& op : prog.ops())
    if (op.kind == OpKind::SoftmaxCrossEntropy) classes = prog.tensor(op.in[0]).shape[1];
  for (int step = 0; step < steps; ++step) {
    for (size_t t = 0; t < prog.num_tensors(); ++t) {
      const TensorInfo& info = prog.tensor(static_cast<TensorId>(t));
      if (info.role != Role::Input) continue;
      HostArray a = info.name == "valid_rows" ? HostArray::i32({1}, {static_cast<int32_t>(info.shape[0])})
                    : info.dtype == DType::I32 ? random_labels(info.shape[0], classes, seed + 100 * step + t)
                                               : random_f32(info.shape, seed + 100 * step + t);
      cpu.set(info.name, a);
      gpu.set(info.name, a);
    }
    cpu.exe->run();
    gpu.exe->run();
  }
  expect_same_results(prog, cpu, gpu, what, tol);
  return gpu.exe->describe();
}

inline Built train_program(Layer& model, const Loss& loss, Shape in, const Optimizer& opt) {
  Built b = build(model, loss, in, true);
  GraphBuilder g(b.p);
  opt.build(g, b.grads);
  return b;
}

}  // namespace sg::test
