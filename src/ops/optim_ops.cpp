// The optimizer's ops: shape rules and the CPU reference bindings.
#include "ops/optim_ops.h"

#include <cmath>

#include "backend/cpu/cpu_kernels.h"
#include "optim/update_rules.h"

namespace sg::ops {

namespace {

int64_t num_params(const Op& op) {
  if (op.kind == OpKind::CustomUpdate) return op.attr<CustomUpdateAttrs>().num_params;
  return op.kind == OpKind::AdamUpdate ? op.attr<AdamAttrs>().num_params : op.attr<SgdAttrs>().num_params;
}
// State tensors per parameter: Adam's two moments, SGD's momentum buffer when it has one, a
// user rule's declared ones.
int64_t num_states(const Op& op) {
  if (op.kind == OpKind::CustomUpdate)
    return static_cast<int64_t>(update_rule(op.attr<CustomUpdateAttrs>().rule).state.size());
  return op.kind == OpKind::AdamUpdate ? 2 : op.attr<SgdAttrs>().momentum != 0.0 ? 1 : 0;
}

}  // namespace

void check_schedule(const OpCheck& c) {
  c.expect(c.shape(c.in(0)) == Shape{1} && c.dtype(c.in(0)) == DType::I32, cat("step ", c.desc(c.in(0)), " must be i32 [1]"));
  c.expect(c.out(0) == c.in(0), "writes the step counter it reads");
  c.expect(c.shape(c.in(1)) == Shape{hyper::kSize}, cat("hyperparameters ", c.desc(c.in(1)), " must be [", hyper::kSize, "]"));
  c.expect(c.shape(c.out(1)) == Shape{sched::kSize}, cat("schedule ", c.desc(c.out(1)), " must be [", sched::kSize, "]"));
  // The watch: a loss [1] and its i32 [2] record come together; a norm [2] only with them.
  const bool watched = c.in(2) != kNone;
  c.expect(watched == (c.out(2) != kNone) && (watched || c.in(3) == kNone),
           "watches a loss (input 2) into a watch (output 2): both or neither, and a norm only with them");
  if (!watched) return;
  c.expect(numel(c.shape(c.in(2))) == 1, cat("loss ", c.desc(c.in(2)), " must hold one value"));
  if (c.in(3) != kNone) c.expect(c.shape(c.in(3)) == Shape{2}, cat("gradient norm ", c.desc(c.in(3)), " must be [2]"));
  c.expect(c.shape(c.out(2)) == Shape{2} && c.dtype(c.out(2)) == DType::I32,
           cat("watch ", c.desc(c.out(2)), " must be i32 [2]"));
}

std::function<void()> cpu_schedule(const CpuBind& b) {
  int32_t* step = b.i32(b.out(0));
  const float* hyper = b.f(b.in(1));
  float* sched = b.f(b.out(1));
  const ScheduleAttrs a = b.attr<ScheduleAttrs>();
  const float *loss = b.f(b.in(2)), *norm = b.f(b.in(3));
  int32_t* watch = b.i32(b.out(2));
  return [=] { cpu::schedule(step, hyper, sched, a, loss, norm, watch); };
}

void check_update(const OpCheck& c) {
  const Op& op = c.op();
  const int64_t n = num_params(op), s = num_states(op);
  c.expect(n >= 1 && static_cast<int64_t>(op.in.size()) == 2 + n * (2 + s) &&
               static_cast<int64_t>(op.out.size()) == n * (1 + s),
           cat("expects 2 + ", 2 + s, " x ", n, " inputs and ", 1 + s, " x ", n, " outputs for ", n,
               " parameters, got ", op.in.size(), " and ", op.out.size()));
  for (int64_t k = 0; k < n; ++k) {
    const TensorId P = c.in(2 + k);
    c.expect(c.out(k) == P, cat("updates parameter ", c.desc(P), " in place"));
    c.same(P, c.in(2 + n + k));  // its gradient
    for (int64_t j = 0; j < s; ++j) {
      c.same(P, c.in(2 + (2 + j) * n + k));
      c.expect(c.out((1 + j) * n + k) == c.in(2 + (2 + j) * n + k), cat("updates the state of ", c.desc(P), " in place"));
    }
  }
}

std::function<void()> cpu_update(const CpuBind& b) {
  const Op& op = b.op();
  const bool adam = op.kind == OpKind::AdamUpdate;
  const int64_t n = num_params(op);
  const bool has_m = num_states(op) > 0;
  std::vector<cpu::ParamSlice> slices;
  for (int64_t k = 0; k < n; ++k) {
    cpu::ParamSlice s{};
    s.p = b.f(b.in(2 + k));
    s.g = b.f(b.in(2 + n + k));
    s.m = has_m ? b.f(b.in(2 + 2 * n + k)) : nullptr;
    s.v = adam ? b.f(b.in(2 + 3 * n + k)) : nullptr;
    s.n = b.count(b.in(2 + k));
    slices.push_back(s);
  }
  const float *hyper = b.f(b.in(0)), *sched = b.f(b.in(1));
  if (adam) {
    const AdamAttrs a = b.attr<AdamAttrs>();
    return [=] { cpu::adam_update(slices, hyper, sched, a); };
  }
  const SgdAttrs a = b.attr<SgdAttrs>();
  return [=] { cpu::sgd_update(slices, hyper, sched, a); };
}

void check_clip(const OpCheck& c) {
  const Op& op = c.op();
  c.expect(!op.in.empty() && op.out.size() == op.in.size() + 1,
           cat("expects n gradients in and {norm, the n gradients} out, got ", op.in.size(), " and ", op.out.size()));
  c.expect(c.shape(c.out(0)) == Shape{2} && c.dtype(c.out(0)) == DType::F32,
           cat("norm ", c.desc(c.out(0)), " must be f32 [2]"));
  for (size_t k = 0; k < op.in.size(); ++k) {
    c.expect(c.out(k + 1) == c.in(k), cat("rescales gradient ", c.desc(c.in(k)), " in place"));
    c.expect(c.dtype(c.in(k)) == DType::F32, cat("gradient ", c.desc(c.in(k)), " must be f32"));
  }
  const double m = c.attr<ClipAttrs>().max_norm;
  c.expect(std::isfinite(m) && m > 0, cat("max_norm ", m, " must be a positive number"));
}

std::function<void()> cpu_clip(const CpuBind& b) {
  const Op& op = b.op();
  std::vector<std::pair<float*, int64_t>> grads;
  for (size_t k = 0; k < op.in.size(); ++k) grads.emplace_back(b.f(b.in(k)), b.count(b.in(k)));
  float* norm = b.f(b.out(0));
  const double max_norm = b.attr<ClipAttrs>().max_norm;
  return [=] { cpu::clip_grad_norm(grads, norm, max_norm); };
}

std::string clip_attrs_text(const Op& op) { return cat("(max_norm ", op.attr<ClipAttrs>().max_norm, ")"); }

std::string update_summary(const Op& op) {
  if (op.kind == OpKind::CustomUpdate)
    return cat(num_params(op), " parameters, update rule '", update_rule(op.attr<CustomUpdateAttrs>().rule).name, "'");
  return cat(num_params(op), " parameters in one launch");
}

std::function<void()> cpu_custom_update(const CpuBind& b) {
  const Op& op = b.op();
  const UpdateRuleDef& rule = update_rule(op.attr<CustomUpdateAttrs>().rule);  // entries never move
  const UpdateArgs args = update_args(b.program(), op, [&](TensorId t) -> void* { return b.f(t); });
  const UpdateKernel* k = &rule.cpu;
  const std::string who = cat("optimizer '", rule.name, "' (op '", op.name, "')");
  return [=] {
    if (args.sched[sched::kSkip] == 0.0f) run_update_kernel(*k, args, who);  // else a skipped step
  };
}

}  // namespace sg::ops
