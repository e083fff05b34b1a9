// The op table: one row per op kind, the single place an op kind is defined. A row names the
// kind, its input and output slots, and points at its shape rule, its gradient rule and its CPU
// reference kernel. Rows live with their rules in src/ops/<family>_ops.{h,cpp}, and
// src/ops/op_table.cpp lists them in OpKind order; static checks there refuse to build a table
// with a kind missing, out of order, or without one of its parts. The CUDA backend keeps its
// lowering of every kind in a table of its own, checked the same way (src/backend/cuda).
// Adding an op kind: docs/adding-an-op.md.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "stepgraph/ir.h"

namespace sg {

class OpCheck;      // below: what a shape rule sees
class GradBuilder;  // src/autodiff/grad_builder.h: what a gradient rule sees
class CpuBind;      // below: what a CPU kernel binding sees

// A row's slot list is a string of names separated by spaces: "X W b?" has three inputs, the
// last optional (its id may be kNone); "P..." is any number of inputs (at least none), and only
// the last slot may be variadic; "Y?..." is any number of which each may be kNone.
struct OpDef {
  OpKind kind;
  const char* name;     // op_kind_name: "dense", "softmax_cross_entropy"
  const char* inputs;   // slot names
  const char* outputs;
  // Throws an Error naming the op, the tensor and both shapes when the op's tensors do not fit
  // (slot counts and required slots are checked before from the slot lists).
  void (*check)(const OpCheck&);
  // Appends the backward ops of a forward op whose output has a gradient (no_gradient for kinds
  // that are not differentiated: backward ops, losses, optimizer steps, data ops).
  void (*gradient)(GradBuilder&, const Op&);
  // The reference kernel bound to the op's tensors: called once per step.
  std::function<void()> (*cpu)(const CpuBind&);
  // Whether the op computes the same outputs every step when every input is (see
  // invariant_prefix); null: never (it reads the step, or accumulates).
  bool (*same_every_step)(const Op&, bool inputs_fixed) = nullptr;
  // For print_program: the attributes after the kind's name ("(relu)"), and a summary that
  // replaces the tensor lists (an optimizer step's "3 parameters in one launch"). Null: none.
  std::string (*attrs_text)(const Op&) = nullptr;
  std::string (*summary)(const Op&) = nullptr;
};

// The row of a kind.
const OpDef& op_def(OpKind k);
// Every row, in OpKind order.
const std::vector<const OpDef*>& op_table();

// The parsed slot list of a row.
struct Slot {
  std::string name;
  bool optional = false;
  bool variadic = false;
};
std::vector<Slot> parse_slots(const char* list);

// The gradient rule of kinds that have none; reached only when such an op is in a forward pass.
void no_gradient(GradBuilder& g, const Op& op);
// same_every_step for pure ops: the same outputs whenever the inputs are.
bool same_if_inputs_fixed(const Op& op, bool inputs_fixed);

// What a shape rule reads: the program and the op, with helpers whose messages name the op,
// the tensors and their shapes.
class OpCheck {
 public:
  OpCheck(const Program& p, const Op& op) : p_(p), op_(op) {}
  const Program& program() const { return p_; }
  const Op& op() const { return op_; }
  TensorId in(size_t k) const { return op_.in[k]; }
  TensorId out(size_t k) const { return op_.out[k]; }
  const Shape& shape(TensorId t) const { return p_.tensor(t).shape; }
  DType dtype(TensorId t) const { return p_.tensor(t).dtype; }
  const std::string& name(TensorId t) const { return p_.tensor(t).name; }
  // "'name' [2, 3]"
  std::string desc(TensorId t) const;
  // Throws "op 'name' (kind): what" unless ok.
  void expect(bool ok, const std::string& what) const;
  // a and b have the same shape (either may be absent).
  void same(TensorId a, TensorId b) const;
  void rank(TensorId t, size_t r) const;
  template <class T>
  const T& attr() const { return op_.attr<T>(); }

 private:
  const Program& p_;
  const Op& op_;
};

// What a CPU kernel binding reads: the op with its tensors' addresses and shapes.
class CpuBind {
 public:
  CpuBind(const Program& p, const Op& op, const std::vector<void*>& ptrs) : p_(p), op_(op), ptrs_(ptrs) {}
  const Program& program() const { return p_; }
  const Op& op() const { return op_; }
  TensorId in(size_t k) const { return op_.in[k]; }
  TensorId out(size_t k) const { return op_.out[k]; }
  float* f(TensorId t) const { return t == kNone ? nullptr : static_cast<float*>(ptrs_[t]); }
  int32_t* i32(TensorId t) const { return t == kNone ? nullptr : static_cast<int32_t*>(ptrs_[t]); }
  void* raw(TensorId t) const { return t == kNone ? nullptr : ptrs_[t]; }
  const TensorInfo& tensor(TensorId t) const { return p_.tensor(t); }
  int64_t dim(TensorId t, size_t k) const { return p_.tensor(t).shape[k]; }
  int64_t count(TensorId t) const { return numel(p_.tensor(t).shape); }
  bool accumulate(size_t k) const { return op_.accumulate[k] != 0; }
  template <class T>
  const T& attr() const { return op_.attr<T>(); }

 private:
  const Program& p_;
  const Op& op_;
  const std::vector<void*>& ptrs_;
};

}  // namespace sg
