// User-defined ops (custom_op.h): the registry of their definitions, and the row of the op table
// that runs them (OpKind::Custom, one kind for every user op, told apart by CustomAttrs::id).
#pragma once

#include "ir/op_table.h"
#include "stepgraph/custom_op.h"

namespace sg {

const CustomOpDef& custom_op_def(int32_t id);
int32_t custom_op_id(const std::string& name);  // an Error naming the registered ops
// The kernel arguments of a Custom op over its tensors' addresses (the CPU's or the device's).
CustomOpArgs custom_op_args(const Program& p, const Op& op, const std::function<void*(TensorId)>& address);
// The op's output shapes per sample for per-sample input shapes; errors start with `where`.
std::vector<Shape> custom_output_shapes(const CustomOpDef& d, const std::vector<Shape>& in, const std::string& where);

// Calls a user kernel; whatever it throws comes back as an Error that starts with `who`.
void run_custom_kernel(const CustomKernel& k, const CustomOpArgs& args, const std::string& who);

// Adds the op to g's program on `in` (shapes from the definition); returns its outputs.
std::vector<TensorId> emit_custom(GraphBuilder& g, int32_t id, const std::vector<TensorId>& in, const std::string& label);

namespace ops {

void check_custom(const OpCheck& c);
void grad_custom(GradBuilder& g, const Op& op);
std::function<void()> cpu_custom(const CpuBind& b);
std::string custom_attrs_text(const Op& op);

inline constexpr OpDef kCustom{OpKind::Custom, "custom", "X...", "Y?...", check_custom, grad_custom, cpu_custom,
                               nullptr, custom_attrs_text};

}  // namespace ops
}  // namespace sg
