// The op-table cases of the optimizer's kinds: the schedule (with its NaN/inf watch), the SGD,
// Adam(W) and user-rule (Lion) updates, normal and skipped, and gradient clipping. op_cases.h
// includes it at its end and lists the cases in all_op_cases().
#pragma once

#include <cmath>
#include <vector>

#include "op_cases.h"
#include "optim/update_rules.h"

namespace sg::test {

inline std::vector<OpCase> schedule_cases() {
  std::vector<OpCase> v;
  struct C { const char* what; ScheduleKind kind; int32_t step; double beta1, beta2; };
  int seed = 0;
  for (const C& c : {C{"constant, first step, Adam corrections", ScheduleKind::Constant, 0, 0.9, 0.999},
                     C{"step decay every 3 steps at step 7", ScheduleKind::Step, 7, 0, 0},
                     C{"cosine in the warmup", ScheduleKind::Cosine, 2, 0.9, 0.99},
                     C{"cosine after the warmup", ScheduleKind::Cosine, 12, 0, 0},
                     C{"cosine past its last step", ScheduleKind::Cosine, 40, 0.8, 0.999}}) {
    CaseBuilder b(OpKind::Schedule, c.what, 1100 + seed++);
    ScheduleAttrs a;
    a.kind = c.kind, a.warmup_steps = 5, a.total_steps = 20, a.min_lr_ratio = 0.1, a.step_size = 3, a.gamma = 0.5;
    a.beta1 = c.beta1, a.beta2 = c.beta2;
    const TensorId step = b.i32("step", {1}, {c.step}, Role::StepScalar);
    const TensorId hyper = b.input("hyper", HostArray::f32({hyper::kSize}, {0.03f, 0.01f}), Role::StepScalar);
    b.op({step, hyper, kNone, kNone}, {step, b.output("sched", {sched::kSize}), kNone}, a, {1, 0, 1});
    v.push_back(b.done());
  }
  // The watch: a loss and a gradient norm, finite or not, under each policy; the watch already
  // holds an earlier non-finite step in one (its first step stays).
  struct W { const char* what; float loss, norm; NanPolicy on_nan; int32_t first, count; };
  for (const W& w : {W{"watch, finite", 0.5f, 2.0f, NanPolicy::Stop, 0, 0},
                     W{"watch, NaN loss, stop", NAN, 2.0f, NanPolicy::Stop, 0, 0},
                     W{"watch, inf norm, skip", 0.5f, INFINITY, NanPolicy::Skip, 0, 0},
                     W{"watch, NaN loss, skip, earlier one kept", NAN, 1.0f, NanPolicy::Skip, 3, 1},
                     W{"watch, -inf loss, continue", -INFINITY, 1.0f, NanPolicy::Continue, 0, 0},
                     W{"watch, finite, skip", 0.25f, 1.0f, NanPolicy::Skip, 2, 1}}) {
    CaseBuilder b(OpKind::Schedule, w.what, 1100 + seed++);
    ScheduleAttrs a;
    a.beta1 = 0.9, a.beta2 = 0.999, a.on_nan = w.on_nan;
    const TensorId step = b.i32("step", {1}, {6}, Role::StepScalar);
    const TensorId hyper = b.input("hyper", HostArray::f32({hyper::kSize}, {0.03f, 0.01f}), Role::StepScalar);
    const TensorId loss = b.input("loss", HostArray::f32({1}, {w.loss}));
    const TensorId norm = b.input("norm", HostArray::f32({2}, {w.norm, 1.0f}));
    const TensorId watch = b.i32("watch", {2}, {w.first, w.count}, Role::StepScalar);
    b.op({step, hyper, loss, norm}, {step, b.output("sched", {sched::kSize}), watch}, a, {1, 0, 1});
    v.push_back(b.done());
  }
  return v;
}

// An update of parameters of these shapes at step `step` (sched as Schedule writes it); `skip`:
// the step is skipped (sched[kSkip]), so nothing may change.
inline OpCase update_case(OpKind kind, const std::string& what, uint64_t seed, OpAttrs attrs, int states, float step,
                          bool skip = false) {
  CaseBuilder b(kind, what, seed);
  const std::vector<Shape> shapes = {{7, 5}, {17}, {1}};
  const double beta1 = 0.9, beta2 = 0.999;
  const TensorId hyper = b.input("hyper", HostArray::f32({hyper::kSize}, {0.01f, 0.05f}), Role::StepScalar);
  const TensorId sched = b.input(
      "sched",
      HostArray::f32({sched::kSize}, {0.01f, static_cast<float>(1 - std::pow(beta1, step)),
                                      static_cast<float>(1 - std::pow(beta2, step)), step, skip ? 1.0f : 0.0f}),
      Role::StepScalar);
  std::vector<TensorId> P, G, S;
  for (size_t k = 0; k < shapes.size(); ++k) P.push_back(b.random(cat("P", k), shapes[k]));
  for (size_t k = 0; k < shapes.size(); ++k) G.push_back(b.random(cat("G", k), shapes[k], Role::Gradient));
  for (int j = 0; j < states; ++j)
    for (size_t k = 0; k < shapes.size(); ++k) {
      HostArray s = random_f32(shapes[k], mix_seed(seed, cat("S", j, k)), 0.1);
      if (j == 1)  // second moments are never negative
        for (int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] = s.data<float>()[i] * s.data<float>()[i];
      S.push_back(b.input(cat("S", j, ".", k), std::move(s), Role::OptimizerState));
    }
  std::vector<TensorId> in = {hyper, sched}, out = P;
  in.insert(in.end(), P.begin(), P.end());
  in.insert(in.end(), G.begin(), G.end());
  in.insert(in.end(), S.begin(), S.end());
  out.insert(out.end(), S.begin(), S.end());
  b.op(in, out, std::move(attrs));
  return b.done();
}

inline std::vector<OpCase> sgd_cases() {
  auto sgd = [](double momentum, double dampening, bool nesterov) {
    SgdAttrs a;
    a.num_params = 3, a.momentum = momentum, a.dampening = dampening, a.nesterov = nesterov;
    return a;
  };
  return {update_case(OpKind::SgdUpdate, "plain", 1200, sgd(0, 0, false), 0, 3),
          update_case(OpKind::SgdUpdate, "momentum 0.9, dampening 0.1", 1201, sgd(0.9, 0.1, false), 1, 3),
          update_case(OpKind::SgdUpdate, "nesterov momentum", 1202, sgd(0.9, 0, true), 1, 5),
          update_case(OpKind::SgdUpdate, "momentum, first step", 1203, sgd(0.8, 0, false), 1, 1),
          update_case(OpKind::SgdUpdate, "momentum, skipped", 1204, sgd(0.9, 0, false), 1, 3, true)};
}

inline std::vector<OpCase> adam_cases() {
  auto adam = [](bool decoupled) {
    AdamAttrs a;
    a.num_params = 3, a.decoupled_weight_decay = decoupled;
    return a;
  };
  return {update_case(OpKind::AdamUpdate, "Adam at step 3", 1300, adam(false), 2, 3),
          update_case(OpKind::AdamUpdate, "AdamW at step 3", 1301, adam(true), 2, 3),
          update_case(OpKind::AdamUpdate, "AdamW, first step", 1302, adam(true), 2, 1),
          update_case(OpKind::AdamUpdate, "AdamW, skipped", 1303, adam(true), 2, 3, true)};
}

// Lion, the built-in written as a user-defined update rule (custom_optimizer.h).
inline std::vector<OpCase> custom_update_cases() {
  const Lion lion(1e-3);  // registers its rule
  CustomUpdateAttrs a{update_rule_id("lion"), 3, {0.9, 0.99}};
  return {update_case(OpKind::CustomUpdate, "lion at step 3", 1320, a, 1, 3),
          update_case(OpKind::CustomUpdate, "lion, skipped", 1321, a, 1, 3, true)};
}

// Gradients over several chunks of the CUDA launch (512 elements each), clipped or not.
inline std::vector<OpCase> clip_grad_norm_cases() {
  std::vector<OpCase> v;
  int seed = 0;
  for (double max_norm : {1.0, 1e6}) {
    CaseBuilder b(OpKind::ClipGradNorm, cat("max_norm ", max_norm), 1350 + seed++);
    std::vector<TensorId> G;
    for (const Shape& s : {Shape{7, 5}, Shape{1300}, Shape{1}}) G.push_back(b.random(cat("G", G.size()), s, Role::Gradient));
    std::vector<TensorId> out = {b.output("norm", {2})};
    out.insert(out.end(), G.begin(), G.end());
    std::vector<uint8_t> acc(out.size(), 1);
    acc[0] = 0;
    b.op(G, out, ClipAttrs{max_norm}, acc);
    v.push_back(b.done());
  }
  return v;
}

}  // namespace sg::test
