// The registry of user-defined update rules (custom_optimizer.h) and what the backends need to
// run one: the kernel arguments over an update op's tensors, and a guarded call.
#pragma once

#include <functional>

#include "stepgraph/custom_optimizer.h"
#include "stepgraph/ir.h"

namespace sg {

const UpdateRuleDef& update_rule(int32_t id);
int32_t update_rule_id(const std::string& name);  // an Error naming the registered rules

// The arguments of a CustomUpdate op over its tensors' addresses (the CPU's or the device's).
UpdateArgs update_args(const Program& p, const Op& op, const std::function<void*(TensorId)>& address);

// Calls a rule's kernel; whatever it throws comes back as an Error naming the optimizer.
void run_update_kernel(const UpdateKernel& k, const UpdateArgs& args, const std::string& who);

}  // namespace sg
