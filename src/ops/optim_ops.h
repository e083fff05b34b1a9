// The optimizer's ops: the learning-rate schedule and the in-place parameter updates, each
// update one op over every parameter. Their rows of the op table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_schedule(const OpCheck& c);
std::function<void()> cpu_schedule(const CpuBind& b);
void check_update(const OpCheck& c);
std::function<void()> cpu_update(const CpuBind& b);
std::string update_summary(const Op& op);

// step += 1, then sched = {lr, 1 - beta1^t, 1 - beta2^t, step, skip} from the device step counter;
// with a loss (and norm), the watch of non-finite steps (optim/nan_watch.h) and skip from it.
inline constexpr OpDef kSchedule{OpKind::Schedule, "schedule", "step hyper loss? norm?", "step sched watch?",
                                 check_schedule, no_gradient, cpu_schedule};
// in {hyper, sched, P..., G..., M...} out {P..., M...}, in place (M only with momentum).
inline constexpr OpDef kSgdUpdate{OpKind::SgdUpdate, "sgd_update", "hyper sched tensors...", "tensors...",
                                  check_update, no_gradient, cpu_update, nullptr, nullptr, update_summary};
// in {hyper, sched, P..., G..., M..., V...} out {P..., M..., V...}, in place.
inline constexpr OpDef kAdamUpdate{OpKind::AdamUpdate, "adam_update", "hyper sched tensors...", "tensors...",
                                   check_update, no_gradient, cpu_update, nullptr, nullptr, update_summary};
// A user-defined rule's update (custom_optimizer.h): SgdUpdate's slots, the rule's states.
std::function<void()> cpu_custom_update(const CpuBind& b);
inline constexpr OpDef kCustomUpdate{OpKind::CustomUpdate, "custom_update", "hyper sched tensors...", "tensors...",
                                     check_update, no_gradient, cpu_custom_update, nullptr, nullptr, update_summary};
// in {G...} out {norm[2], G...}: the gradients rescaled in place.
void check_clip(const OpCheck& c);
std::function<void()> cpu_clip(const CpuBind& b);
std::string clip_attrs_text(const Op& op);
inline constexpr OpDef kClipGradNorm{OpKind::ClipGradNorm, "clip_grad_norm", "G...", "norm G...", check_clip,
                                     no_gradient, cpu_clip, nullptr, clip_attrs_text};

}  // namespace sg::ops
