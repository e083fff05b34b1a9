// Optimizers emit a schedule op (step += 1, learning rate and bias corrections from the step
// counter) and one multi-tensor update op over every parameter. Learning rate, weight decay, step
// and bias corrections live in StepScalar tensors: changing them never changes the program.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stepgraph/autodiff.h"  // ParamGrad
#include "stepgraph/nn.h"

namespace sg {

// Learning-rate schedule as a function of the step t = 1, 2, ...:
//   constant: base
//   step:     base * gamma^floor((t - 1) / step_size)
//   cosine:   t <= warmup: base * t / warmup; then
//             min + (base - min) * (1 + cos(pi * p)) / 2, p = (t - warmup) / (total - warmup),
//             and min = base * min_lr_ratio once t >= total.
struct Schedule {
  ScheduleKind kind = ScheduleKind::Constant;
  int64_t warmup_steps = 0, total_steps = 0;
  double min_lr_ratio = 0.0;
  int64_t step_size = 1;
  double gamma = 0.1;

  static Schedule constant() { return {}; }
  static Schedule step(int64_t step_size, double gamma);
  static Schedule cosine(int64_t warmup_steps, int64_t total_steps, double min_lr_ratio = 0.0);
  double lr_at(double base_lr, int64_t t) const;  // host reference of the same formula
  std::string describe() const;
};

// Names of the StepScalar tensors every optimizer creates.
inline constexpr const char* kStepTensor = "optim.step";    // i32 [1]
inline constexpr const char* kHyperTensor = "optim.hyper";  // f32 [2]: base lr, weight decay
inline constexpr const char* kSchedTensor = "optim.sched";  // f32 [5]: lr, bias1, bias2, step, skip
// i32 [2]: the first step whose loss or gradient norm was NaN or inf, and how many (NonFiniteSteps).
inline constexpr const char* kWatchTensor = "optim.nonfinite";
// The schedule and the watch are the step's own: recomputed or run status, not in checkpoints.
inline bool is_step_status(const std::string& name) { return name == kSchedTensor || name == kWatchTensor; }

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Emits the schedule op and the update op for `params` (with their gradients).
  virtual void build(GraphBuilder& g, const std::vector<ParamGrad>& params) const = 0;
  virtual std::string describe() const = 0;
  double lr() const { return lr_; }
  double weight_decay() const { return weight_decay_; }
  const Schedule& schedule() const { return schedule_; }
  // Gradient clipping by global norm before each update (torch.nn.utils.clip_grad_norm_ before
  // optimizer.step(); weight decay is added after it): every gradient is scaled by
  // min(1, max_norm / (norm + 1e-6)), norm the L2 norm of all of them together, on the device in
  // the step. 0 (the default): no clipping.
  void set_clip_norm(double max_norm);
  double clip_norm() const { return clip_norm_; }

 protected:
  Optimizer(double lr, double wd, Schedule s);
  // The ClipGradNorm op over every gradient, when clip_norm is set (before the schedule op, so
  // that it stays next to the update it is fused into).
  void build_clip(GraphBuilder& g, const std::vector<ParamGrad>& params) const;
  std::string clip_text() const;  // ", clip_norm=1" or nothing
  // The step counter, hyperparameters and schedule op shared by every optimizer.
  void build_schedule(GraphBuilder& g, double beta1, double beta2, TensorId* hyper,
                      TensorId* sched) const;
  double lr_, weight_decay_;
  Schedule schedule_;
  double clip_norm_ = 0;
};
using OptimizerPtr = std::shared_ptr<Optimizer>;

// SGD as PyTorch: g += wd*p; buf = momentum*buf + (1 - dampening)*g (buf = g on step 1);
// g = nesterov ? g + momentum*buf : buf; p -= lr*g.
class SGD : public Optimizer {
 public:
  SGD(double lr, double momentum = 0.0, bool nesterov = false, double weight_decay = 0.0,
      double dampening = 0.0, Schedule s = {});
  void build(GraphBuilder& g, const std::vector<ParamGrad>& params) const override;
  std::string describe() const override;

 private:
  double momentum_, dampening_;
  bool nesterov_;
};

// Adam (L2 weight decay added to the gradient) and AdamW (decoupled: p *= 1 - lr*wd), as PyTorch.
class Adam : public Optimizer {
 public:
  Adam(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
       double weight_decay = 0.0, Schedule s = {}, bool decoupled = false);
  void build(GraphBuilder& g, const std::vector<ParamGrad>& params) const override;
  std::string describe() const override;

 protected:
  double beta1_, beta2_, eps_;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  AdamW(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 1e-2, Schedule s = {})
      : Adam(lr, beta1, beta2, eps, weight_decay, s, true) {}
};

}  // namespace sg
