// User-defined optimizers: an in-place update rule over every (parameter, gradient, state...)
// written outside stepgraph and registered at run time, its state tensors declared so that they
// are planned with the step, saved in checkpoints and restored. The step's learning rate and
// step count come from the device step scalars (`sched`), so a schedule or set_lr() never
// recaptures the step graph.
//
//   sg::UpdateRuleDef sign;                              // sign SGD with momentum
//   sign.name = "signum";
//   sign.state = {{"momentum", 0.0}};                    // per parameter, shaped as it
//   sign.cpu = [](const sg::UpdateArgs& a) {
//     const float lr = a.sched[sg::sched::kLr], beta = static_cast<float>(a.constants[0]);
//     for (const sg::UpdateTensor& t : a.tensors)
//       for (int64_t i = 0; i < t.size; ++i) {
//         float& m = t.state[0][i];
//         m = beta * m + (1 - beta) * t.grad[i];
//         t.param[i] -= lr * ((m > 0) - (m < 0));
//       }
//   };
//   sign.cuda = [](const sg::UpdateArgs& a) { ... launch on (cudaStream_t)a.stream, reading lr from a.sched ... };
//   sg::register_update_rule(sign);
//   auto opt = std::make_shared<sg::CustomOptimizer>("signum", 1e-3, 0.0, sg::Schedule{}, std::vector<double>{0.9});
//
// Lion (below) is a built-in written this way (src/optim/lion.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "stepgraph/optim.h"

namespace sg {

struct UpdateTensor {
  float* param = nullptr;
  const float* grad = nullptr;  // after clipping (optimizer.clip_norm); weight decay is the rule's
  std::vector<float*> state;    // one per UpdateRuleDef::state, each `size` floats
  int64_t size = 0;
};

struct UpdateArgs {
  std::vector<UpdateTensor> tensors;  // every trained parameter
  // Step scalars (ir.h): hyper[hyper::kBaseLr], hyper[hyper::kWeightDecay]; sched[sched::kLr] the
  // learning rate of this step (after the schedule), sched[sched::kStep] the step t = 1, 2, ...
  // (bias corrections, if the rule has any, come from it and the constants); sched[sched::kSkip]
  // is 1 on a step to be skipped (train.on_nan skip: see UpdateRuleDef::honours_skip). Device
  // memory on CUDA: read them in the kernel, never on the host.
  const float* hyper = nullptr;
  const float* sched = nullptr;
  std::vector<double> constants;  // the optimizer's own hyperparameters (CustomOptimizer)
  void* stream = nullptr;         // CUDA: the cudaStream_t to launch on; CPU: null
};
using UpdateKernel = std::function<void(const UpdateArgs&)>;

struct StateSpec {
  std::string name;      // letters, digits, '_' (checkpoint tensors "optim.<rule>.<name>.<parameter>")
  double initial = 0.0;  // every element's value before the first step
};

struct UpdateRuleDef {
  std::string name;  // letters, digits, '_' and '-'
  std::vector<StateSpec> state;
  UpdateKernel cpu;   // required: the reference
  UpdateKernel cuda;  // optional: without it, CUDA trainers refuse the optimizer
  // The CUDA kernel writes nothing when sched[sched::kSkip] is set, so a trainer may skip
  // non-finite steps with this rule (NanPolicy::Skip; the CPU skips them before the kernel runs).
  bool honours_skip = false;
};

// Registers the rule for this process; an Error when the name is taken or the CPU kernel is missing.
void register_update_rule(UpdateRuleDef def);
bool is_registered_update_rule(const std::string& name);

// An optimizer running a registered rule: the schedule op, then one update op over every
// parameter whose kernels are the rule's. `constants` reach the kernels as UpdateArgs::constants.
// `label` (default: the rule's name) names it in describe() and its state tensors, so that two
// registrations of one rule (a Python class registered per object) read each other's checkpoints.
class CustomOptimizer : public Optimizer {
 public:
  CustomOptimizer(std::string rule, double lr, double weight_decay = 0.0, Schedule s = {},
                  std::vector<double> constants = {}, std::string label = "");
  void build(GraphBuilder& g, const std::vector<ParamGrad>& params) const override;
  // "<rule>(lr=..., constants=[...], weight_decay=..., schedule=...)"; checkpoints compare it.
  std::string describe() const override;
  const std::string& rule() const { return rule_; }
  const std::string& label() const { return label_.empty() ? rule_ : label_; }
  const std::vector<double>& constants() const { return constants_; }

 private:
  std::string rule_, label_;
  std::vector<double> constants_;
};

// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), as lion-pytorch:
// c = beta1 m + (1 - beta1) g; p *= 1 - lr wd; p -= lr sign(c); m = beta2 m + (1 - beta2) g, with
// sign(0) = 0. Its usual learning rate is 3-10x smaller than AdamW's, its weight decay larger.
class Lion : public CustomOptimizer {
 public:
  explicit Lion(double lr = 1e-4, double beta1 = 0.9, double beta2 = 0.99, double weight_decay = 0.0, Schedule s = {});
  std::string describe() const override;  // "lion(lr=..., betas=(0.9, 0.99), weight_decay=..., schedule=...)"
};

}  // namespace sg
