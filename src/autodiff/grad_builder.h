// What a gradient rule (OpDef::gradient, src/ir/op_table.h) sees while append_backward walks the
// forward ops in reverse: each forward tensor's gradient so far, and a way to add backward ops
// that write the gradients of the op's inputs.
#pragma once

#include <vector>

#include "stepgraph/ir.h"

namespace sg {

class GradBuilder {
 public:
  GradBuilder(Program& p, size_t num_forward_ops);

  Program& program() { return p_; }
  // The gradient of tensor t (kNone while it has none, or for t = kNone).
  TensorId grad(TensorId t) const { return t == kNone ? kNone : grad_[t]; }
  // Whether t needs a gradient: a parameter, or computed from one.
  bool needs(TensorId t) const { return t != kNone && needs_[t]; }

  // The tensor a backward op writes t's gradient into, or kNone when t needs none. The first
  // contribution creates it ("grad.<param>" for parameters, "d.<tensor>" otherwise); *acc is set
  // when an earlier backward op has written it, so this one must add into it.
  TensorId slot(TensorId t, uint8_t* acc);

  // Appends the backward op `kind` of `fwd` ("backward <fwd name>", fwd's attributes) reading
  // `in` and writing the gradients of `wrt` (kNone where one needs none). Skipped when none of
  // them needs a gradient, unless `always`.
  void emit(const Op& fwd, OpKind kind, std::vector<TensorId> in, const std::vector<TensorId>& wrt,
            bool always = false);
  // The same with attributes of its own (a concat's backward is a split, which needs the sizes).
  void emit_with(const Op& fwd, OpKind kind, OpAttrs attrs, std::vector<TensorId> in,
                 const std::vector<TensorId>& wrt, bool always = false);

  // Used by append_backward.
  void seed(TensorId pred, TensorId dpred);
  std::vector<std::pair<TensorId, TensorId>> parameter_gradients() const;

 private:
  void grow();
  Program& p_;
  std::vector<TensorId> grad_;
  std::vector<bool> written_, needs_;
};

}  // namespace sg
