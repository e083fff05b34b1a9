// Reverse-mode differentiation over coarse ops: one gradient rule per op kind.
#pragma once

#include <vector>

#include "stepgraph/ir.h"

namespace sg {

// A trained tensor and its gradient, as optimizers take them.
struct ParamGrad {
  TensorId param = kNone, grad = kNone;
};

// Appends the backward ops of everything `pred` depends on, seeded with `dpred` (the gradient a
// fused loss op wrote). Ops are visited in reverse; a tensor used by several ops gets the first
// contribution written and the rest accumulated (`Op::accumulate`), so DAGs and shared
// parameters work. Parameter gradients are persistent tensors "grad.<param>"; activation
// gradients are temporaries "d.<tensor>". Returns every parameter with its gradient, in
// parameter creation order. A parameter the loss does not depend on is an Error.
std::vector<ParamGrad> append_backward(Program& p, TensorId pred, TensorId dpred);

// Several loss terms (a PINN's residual and boundary terms): each (tensor, its gradient) pair
// seeds backward; ops [0, num_forward_ops) are the forward pass.
std::vector<ParamGrad> append_backward(Program& p, const std::vector<std::pair<TensorId, TensorId>>& seeds,
                                       size_t num_forward_ops);

}  // namespace sg
