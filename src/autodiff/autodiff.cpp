// Reverse-mode differentiation over coarse ops: each op kind's gradient rule is in its row of the
// op table (src/ir/op_table.h); this file walks the forward ops and keeps the gradients.
#include "stepgraph/autodiff.h"

#include "autodiff/grad_builder.h"
#include "ir/op_table.h"

namespace sg {

GradBuilder::GradBuilder(Program& p, size_t num_forward_ops)
    : p_(p), grad_(p.num_tensors(), kNone), written_(p.num_tensors(), false), needs_(p.num_tensors(), false) {
  // A tensor needs a gradient if it is a parameter or computed from one.
  for (size_t t = 0; t < p_.num_tensors(); ++t) needs_[t] = p_.tensor(static_cast<TensorId>(t)).role == Role::Parameter;
  for (size_t i = 0; i < num_forward_ops; ++i) {
    const Op& op = p_.ops()[i];
    bool any = false;
    for (TensorId t : op.in) any = any || (t != kNone && needs_[t]);
    for (TensorId t : op.out)
      if (t != kNone) needs_[t] = any;
  }
}

void GradBuilder::grow() {
  grad_.resize(p_.num_tensors(), kNone);
  written_.resize(p_.num_tensors(), false);
  needs_.resize(p_.num_tensors(), false);
}

void GradBuilder::seed(TensorId pred, TensorId dpred) {
  SG_REQUIRE(needs_[pred], "the prediction '", p_.tensor(pred).name,
             "' does not depend on any parameter: nothing to train");
  SG_REQUIRE(grad_[pred] == kNone, "two loss terms seed the same tensor '", p_.tensor(pred).name, "'");
  grow();
  grad_[pred] = dpred;
  written_[pred] = true;
}

TensorId GradBuilder::slot(TensorId t, uint8_t* acc) {
  *acc = 0;
  if (!needs(t)) return kNone;
  if (grad_[t] == kNone) {
    const TensorInfo info = p_.tensor(t);
    const bool param = info.role == Role::Parameter;
    const TensorId g = p_.add_tensor({(param ? "grad." : "d.") + info.name, info.shape, info.dtype,
                                      param ? Role::Gradient : Role::Temporary});
    grow();
    grad_[t] = g;
  }
  *acc = written_[t] ? 1 : 0;
  written_[t] = true;
  return grad_[t];
}

void GradBuilder::emit(const Op& fwd, OpKind kind, std::vector<TensorId> in, const std::vector<TensorId>& wrt,
                       bool always) {
  emit_with(fwd, kind, fwd.attrs, std::move(in), wrt, always);
}

void GradBuilder::emit_with(const Op& fwd, OpKind kind, OpAttrs attrs, std::vector<TensorId> in,
                            const std::vector<TensorId>& wrt, bool always) {
  Op b;
  b.kind = kind;
  b.name = "backward " + fwd.name;
  b.attrs = std::move(attrs);
  b.in = std::move(in);
  b.out.resize(wrt.size());
  b.accumulate.resize(wrt.size());
  bool any = always;
  for (size_t k = 0; k < wrt.size(); ++k) {
    b.out[k] = slot(wrt[k], &b.accumulate[k]);
    any = any || b.out[k] != kNone;
  }
  if (any) p_.add_op(std::move(b));
}

std::vector<std::pair<TensorId, TensorId>> GradBuilder::parameter_gradients() const {
  std::vector<std::pair<TensorId, TensorId>> out;
  for (size_t t = 0; t < p_.num_tensors(); ++t) {
    if (p_.tensor(static_cast<TensorId>(t)).role != Role::Parameter) continue;
    SG_REQUIRE(grad_[t] != kNone, "parameter '", p_.tensor(static_cast<TensorId>(t)).name,
               "' does not affect the loss");
    out.emplace_back(static_cast<TensorId>(t), grad_[t]);
  }
  return out;
}

namespace {

std::vector<ParamGrad> differentiate(Program& p, const std::vector<std::pair<TensorId, TensorId>>& seeds,
                                     size_t num_forward_ops) {
  GradBuilder g(p, num_forward_ops);
  for (const auto& [pred, dpred] : seeds) g.seed(pred, dpred);
  for (size_t i = num_forward_ops; i-- > 0;) {
    const Op op = p.ops()[i];  // copy: emitting ops may reallocate the op list
    // An op whose outputs have no gradient adds nothing (a split's first piece may be unused
    // while another is read).
    bool seeded = false;
    for (TensorId t : op.out) seeded = seeded || g.grad(t) != kNone;
    if (!seeded) continue;
    op_def(op.kind).gradient(g, op);
  }
  std::vector<ParamGrad> out;
  for (const auto& [param, grad] : g.parameter_gradients()) out.push_back({param, grad});
  return out;
}

}  // namespace

std::vector<ParamGrad> append_backward(Program& p, TensorId pred, TensorId dpred) {
  // Forward ops are those before the op that writes dpred (the fused loss op).
  const int loss_op = p.producer(dpred);
  SG_ASSERT(loss_op >= 0);
  return differentiate(p, {{pred, dpred}}, static_cast<size_t>(loss_op));
}

std::vector<ParamGrad> append_backward(Program& p, const std::vector<std::pair<TensorId, TensorId>>& seeds,
                                       size_t num_forward_ops) {
  SG_REQUIRE(!seeds.empty(), "append_backward: no loss terms");
  return differentiate(p, seeds, num_forward_ops);
}

}  // namespace sg
