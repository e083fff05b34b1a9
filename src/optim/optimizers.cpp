#include <cmath>

#include "stepgraph/optim.h"

namespace sg {

Schedule Schedule::step(int64_t step_size, double gamma) {
  SG_REQUIRE(step_size > 0, "step schedule: step_size must be positive, got ", step_size);
  SG_REQUIRE(gamma > 0, "step schedule: gamma must be positive, got ", gamma);
  Schedule s;
  s.kind = ScheduleKind::Step;
  s.step_size = step_size;
  s.gamma = gamma;
  return s;
}

Schedule Schedule::cosine(int64_t warmup_steps, int64_t total_steps, double min_lr_ratio) {
  SG_REQUIRE(warmup_steps >= 0, "cosine schedule: warmup_steps must be >= 0, got ", warmup_steps);
  SG_REQUIRE(total_steps > warmup_steps, "cosine schedule: total_steps (", total_steps,
             ") must be greater than warmup_steps (", warmup_steps, ")");
  SG_REQUIRE(min_lr_ratio >= 0 && min_lr_ratio <= 1,
             "cosine schedule: min_lr_ratio must be in [0, 1], got ", min_lr_ratio);
  Schedule s;
  s.kind = ScheduleKind::Cosine;
  s.warmup_steps = warmup_steps;
  s.total_steps = total_steps;
  s.min_lr_ratio = min_lr_ratio;
  return s;
}

double Schedule::lr_at(double base, int64_t t) const {
  switch (kind) {
    case ScheduleKind::Constant: return base;
    case ScheduleKind::Step: return base * std::pow(gamma, static_cast<double>((t - 1) / step_size));
    case ScheduleKind::Cosine: {
      if (t <= warmup_steps) return base * static_cast<double>(t) / static_cast<double>(warmup_steps);
      double p = std::min(1.0, static_cast<double>(t - warmup_steps) /
                                   static_cast<double>(total_steps - warmup_steps));
      double lo = base * min_lr_ratio;
      return lo + (base - lo) * 0.5 * (1.0 + std::cos(3.141592653589793 * p));
    }
  }
  return base;
}

std::string Schedule::describe() const {
  switch (kind) {
    case ScheduleKind::Constant: return "constant";
    case ScheduleKind::Step: return cat("step(every ", step_size, ", gamma=", gamma, ")");
    case ScheduleKind::Cosine:
      return cat("cosine(warmup=", warmup_steps, ", total=", total_steps, ", min_ratio=", min_lr_ratio, ")");
  }
  return "?";
}

Optimizer::Optimizer(double lr, double wd, Schedule s) : lr_(lr), weight_decay_(wd), schedule_(s) {
  SG_REQUIRE(std::isfinite(lr) && lr > 0, "optimizer: lr must be a positive number, got ", lr);
  SG_REQUIRE(std::isfinite(wd) && wd >= 0, "optimizer: weight_decay must be >= 0, got ", wd);
}

void Optimizer::set_clip_norm(double max_norm) {
  SG_REQUIRE(std::isfinite(max_norm) && max_norm >= 0, "optimizer: clip_norm must be a positive number (0: no ",
             "clipping), got ", max_norm);
  clip_norm_ = max_norm;
}

std::string Optimizer::clip_text() const { return clip_norm_ > 0 ? cat(", clip_norm=", clip_norm_) : ""; }

void Optimizer::build_clip(GraphBuilder& g, const std::vector<ParamGrad>& params) const {
  if (clip_norm_ <= 0 || params.empty()) return;
  Op op;
  op.kind = OpKind::ClipGradNorm;
  op.name = "optim.clip_grad_norm";
  const TensorId norm = g.tensor("optim.grad_norm", {2}, Role::Activation);
  g.program().tensor(norm).live_out = true;  // the norm before clipping, and the factor
  op.out = {norm};
  for (const ParamGrad& pg : params) {
    op.in.push_back(pg.grad);
    op.out.push_back(pg.grad);
  }
  op.accumulate.assign(op.out.size(), 1);
  op.accumulate[0] = 0;
  op.attrs = ClipAttrs{clip_norm_};
  g.program().add_op(std::move(op));
}

void Optimizer::build_schedule(GraphBuilder& g, double beta1, double beta2, TensorId* hyper,
                               TensorId* sched) const {
  // The step counter may exist already (a device-resident data gather reads it first).
  TensorId step = g.step_counter();
  *hyper = g.tensor(kHyperTensor, {hyper::kSize}, Role::StepScalar);
  *sched = g.tensor(kSchedTensor, {sched::kSize}, Role::StepScalar);
  ScheduleAttrs a;
  a.kind = schedule_.kind;
  a.warmup_steps = schedule_.warmup_steps;
  a.total_steps = schedule_.total_steps;
  a.min_lr_ratio = schedule_.min_lr_ratio;
  a.step_size = schedule_.step_size;
  a.gamma = schedule_.gamma;
  a.beta1 = beta1;
  a.beta2 = beta2;
  a.on_nan = g.on_nan();
  Op op;
  op.kind = OpKind::Schedule;
  op.name = "optim.schedule";
  // The watch, when the trainer names the loss: it and the clipped gradients' norm (when clipped).
  const bool watch = g.watched_loss() != kNone;
  op.in = {step, *hyper, g.watched_loss(), watch ? g.program().find("optim.grad_norm") : kNone};
  op.out = {step, *sched, watch ? g.tensor(kWatchTensor, {2}, Role::StepScalar, DType::I32) : kNone};
  op.accumulate = {1, 0, 1};  // the step counter and the watch are read-modify-write
  op.attrs = a;
  g.program().add_op(std::move(op));
}

namespace {
// in {hyper, sched, P..., G..., then one list per state kind}; out {P..., states...}.
void emit_update(GraphBuilder& g, OpKind kind, const char* name, TensorId hyper, TensorId sched,
                 const std::vector<ParamGrad>& params, const std::vector<std::string>& states,
                 OpAttrs attrs) {
  Program& p = g.program();
  Op op;
  op.kind = kind;
  op.name = name;
  op.in = {hyper, sched};
  for (const ParamGrad& pg : params) op.in.push_back(pg.param);
  for (const ParamGrad& pg : params) op.in.push_back(pg.grad);
  for (const ParamGrad& pg : params) op.out.push_back(pg.param);
  for (const std::string& s : states) {
    for (const ParamGrad& pg : params) {
      const TensorInfo& info = p.tensor(pg.param);
      TensorId st = p.add_tensor({"optim." + s + "." + info.name, info.shape, DType::F32,
                                  Role::OptimizerState});
      op.in.push_back(st);
      op.out.push_back(st);
    }
  }
  op.accumulate.assign(op.out.size(), 1);  // in place
  op.attrs = std::move(attrs);
  p.add_op(std::move(op));
}
}  // namespace

SGD::SGD(double lr, double momentum, bool nesterov, double weight_decay, double dampening, Schedule s)
    : Optimizer(lr, weight_decay, s), momentum_(momentum), dampening_(dampening), nesterov_(nesterov) {
  SG_REQUIRE(momentum >= 0 && momentum < 1, "sgd: momentum must be in [0, 1), got ", momentum);
  SG_REQUIRE(dampening >= 0 && dampening <= 1, "sgd: dampening must be in [0, 1], got ", dampening);
  SG_REQUIRE(!nesterov || (momentum > 0 && dampening == 0),
             "sgd: nesterov needs momentum > 0 and dampening 0");
}

void SGD::build(GraphBuilder& g, const std::vector<ParamGrad>& params) const {
  build_clip(g, params);
  TensorId hyper, sched;
  build_schedule(g, 0, 0, &hyper, &sched);
  SgdAttrs a{static_cast<int64_t>(params.size()), momentum_, dampening_, nesterov_};
  std::vector<std::string> states;
  if (momentum_ != 0.0) states.push_back("momentum");
  emit_update(g, OpKind::SgdUpdate, "optim.sgd", hyper, sched, params, states, a);
}

std::string SGD::describe() const {
  return cat("sgd(lr=", lr_, ", momentum=", momentum_, nesterov_ ? ", nesterov" : "",
             ", weight_decay=", weight_decay_, ", schedule=", schedule_.describe(), clip_text(), ")");
}

Adam::Adam(double lr, double beta1, double beta2, double eps, double weight_decay, Schedule s,
           bool decoupled)
    : Optimizer(lr, weight_decay, s), beta1_(beta1), beta2_(beta2), eps_(eps), decoupled_(decoupled) {
  SG_REQUIRE(beta1 >= 0 && beta1 < 1, "adam: beta1 must be in [0, 1), got ", beta1);
  SG_REQUIRE(beta2 >= 0 && beta2 < 1, "adam: beta2 must be in [0, 1), got ", beta2);
  SG_REQUIRE(eps > 0, "adam: eps must be positive, got ", eps);
}

void Adam::build(GraphBuilder& g, const std::vector<ParamGrad>& params) const {
  build_clip(g, params);
  TensorId hyper, sched;
  build_schedule(g, beta1_, beta2_, &hyper, &sched);
  AdamAttrs a{static_cast<int64_t>(params.size()), beta1_, beta2_, eps_, decoupled_};
  emit_update(g, OpKind::AdamUpdate, decoupled_ ? "optim.adamw" : "optim.adam", hyper, sched,
              params, {"m", "v"}, a);
}

std::string Adam::describe() const {
  return cat(decoupled_ ? "adamw" : "adam", "(lr=", lr_, ", betas=(", beta1_, ", ", beta2_,
             "), eps=", eps_, ", weight_decay=", weight_decay_, ", schedule=", schedule_.describe(), clip_text(), ")");
}

}  // namespace sg
