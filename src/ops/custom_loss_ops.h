// User-defined losses (custom_loss.h): the registry of their definitions, and the row of the op
// table that runs them (OpKind::CustomLoss, one kind for every user loss, told apart by id).
#pragma once

#include "ir/op_table.h"
#include "stepgraph/custom_loss.h"

namespace sg {

const CustomLossDef& custom_loss_def(int32_t id);
int32_t custom_loss_id(const std::string& name);  // an Error naming the registered losses
// The kernel arguments of a CustomLoss op over its tensors' addresses (the CPU's or the device's).
LossArgs custom_loss_args(const Program& p, const Op& op, const std::function<void*(TensorId)>& address);
// infer_grad_scale for a user loss: its CPU kernel probed (custom_loss.h).
GradScale probe_grad_scale(const CustomLossDef& d, const Shape& pred);
// Calls a user loss kernel; whatever it throws comes back as an Error that starts with `who`.
void run_loss_kernel(const LossKernel& k, const LossArgs& args, const std::string& who);

namespace ops {

void check_custom_loss(const OpCheck& c);
std::function<void()> cpu_custom_loss(const CpuBind& b);
std::string custom_loss_attrs_text(const Op& op);

inline constexpr OpDef kCustomLoss{OpKind::CustomLoss, "custom_loss", "pred target valid?", "loss dpred",
                                   check_custom_loss, no_gradient, cpu_custom_loss, nullptr, custom_loss_attrs_text};

}  // namespace ops
}  // namespace sg
