#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "stepgraph/ir.h"

#include "core/host_memory.h"
#include "ir/op_table.h"

namespace sg {

const char* role_name(Role r) {
  switch (r) {
    case Role::Parameter: return "parameter";
    case Role::Gradient: return "gradient";
    case Role::OptimizerState: return "optimizer_state";
    case Role::StepScalar: return "step_scalar";
    case Role::Constant: return "constant";
    case Role::Input: return "input";
    case Role::Activation: return "activation";
    case Role::Temporary: return "temporary";
  }
  return "?";
}

bool is_persistent(Role r) {
  return r == Role::Parameter || r == Role::Gradient || r == Role::OptimizerState ||
         r == Role::StepScalar || r == Role::Constant;
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::ReLU: return "relu";
    case Activation::GELU: return "gelu";
    case Activation::Tanh: return "tanh";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Sin: return "sin";
    case Activation::Softplus: return "softplus";
    case Activation::SiLU: return "silu";
    case Activation::LeakyReLU: return "leaky_relu";
    case Activation::ELU: return "elu";
    case Activation::Exp: return "exp";
    case Activation::Square: return "square";
    case Activation::GELUErf: return "gelu_erf";
  }
  return "?";
}

namespace {
constexpr Activation kActivations[] = {Activation::None,    Activation::ReLU,      Activation::GELU, Activation::Tanh,
                                       Activation::Sigmoid, Activation::Sin,       Activation::Softplus,
                                       Activation::SiLU,    Activation::LeakyReLU, Activation::ELU,  Activation::Exp,
                                       Activation::Square,  Activation::GELUErf};
}  // namespace

std::vector<std::string> activation_names() {
  std::vector<std::string> names;
  for (Activation a : kActivations) names.push_back(activation_name(a));
  return names;
}

Activation parse_activation(const std::string& s) {
  if (s == "gelu_tanh") return Activation::GELU;  // the explicit name of gelu's tanh form
  for (Activation a : kActivations)
    if (s == activation_name(a)) return a;
  std::string all;
  for (Activation a : kActivations) all += cat(all.empty() ? "" : ", ", activation_name(a));
  all += " (gelu_tanh: gelu, the tanh form)";
  throw Error(cat("unknown activation '", s, "': expected one of ", all));
}

bool activation_needs_preact(Activation a) {
  return a == Activation::GELU || a == Activation::GELUErf || a == Activation::Sin || a == Activation::Softplus || a == Activation::SiLU ||
         a == Activation::Square;
}

const char* pointwise_form_name(PointwiseForm f) {
  switch (f) {
    case PointwiseForm::L1: return "l1";
    case PointwiseForm::Huber: return "huber";
    case PointwiseForm::BceWithLogits: return "bce_with_logits";
  }
  return "?";
}

const char* reduction_name(Reduction r) { return r == Reduction::Mean ? "mean" : "sum"; }

NanPolicy parse_nan_policy(const std::string& name) {
  for (NanPolicy p : {NanPolicy::Stop, NanPolicy::Skip, NanPolicy::Continue})
    if (name == nan_policy_name(p)) return p;
  throw Error(cat("on_nan: expected 'stop', 'skip' or 'continue', got '", name, "'"));
}

const char* nan_policy_name(NanPolicy p) {
  switch (p) {
    case NanPolicy::Stop: return "stop";
    case NanPolicy::Skip: return "skip";
    case NanPolicy::Continue: return "continue";
  }
  return "?";
}

int32_t JetSpec::pair_index(int i, int j) const {
  if (i > j) std::swap(i, j);
  for (int p = 0; p < npairs; ++p)
    if (trace[p] == 0 && pi[p] == i && pj[p] == j) return p;
  return -1;
}

int32_t JetSpec::trace_index(uint32_t mask) const {
  for (int p = 0; p < npairs; ++p)
    if (trace[p] != 0 && trace[p] == mask) return p;
  return -1;
}

int64_t gather_batches_per_epoch(int64_t n, int64_t batch, bool partial_last) {
  return partial_last ? (n + batch - 1) / batch : n / batch;
}

int64_t conv_output_size(int64_t in, int64_t window, int64_t pad, int64_t stride, int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (window - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

namespace {

constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 50;

// The tensor's bytes, or UINT64_MAX when the count overflows.
uint64_t checked_bytes(const Shape& s, DType t) {
  uint64_t n = dtype_size(t);
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return UINT64_MAX;
  return n;
}

}  // namespace

TensorId Program::add_tensor(TensorInfo t) {
  SG_REQUIRE(find(t.name) == kNone, "tensor '", t.name, "' is defined twice");
  for (int64_t d : t.shape)
    SG_REQUIRE(d > 0, "tensor '", t.name, "' has shape ", shape_str(t.shape),
               ": every dimension must be positive");
  // Sizes come from user input: a product that overflows must not wrap into a small buffer.
  const uint64_t bytes = checked_bytes(t.shape, t.dtype);
  SG_REQUIRE(bytes <= kMaxTensorBytes, "tensor '", t.name, "' of shape ", shape_str(t.shape), " (",
             dtype_name(t.dtype), ") ",
             bytes == UINT64_MAX ? std::string("has more bytes than a 64-bit size can count")
                                 : "needs " + human_bytes(bytes),
             "; a tensor may hold at most 1 PiB");
  const TensorId id = static_cast<TensorId>(tensors_.size());
  by_name_.emplace(t.name, id);
  tensors_.push_back(std::move(t));
  producer_.push_back(-1);
  return id;
}

TensorId Program::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? kNone : it->second;
}

const TensorInfo& Program::tensor(TensorId id) const {
  SG_ASSERT(id >= 0 && static_cast<size_t>(id) < tensors_.size());
  return tensors_[id];
}
TensorInfo& Program::tensor(TensorId id) {
  SG_ASSERT(id >= 0 && static_cast<size_t>(id) < tensors_.size());
  return tensors_[id];
}

int Program::producer(TensorId t) const {
  SG_ASSERT(t >= 0 && static_cast<size_t>(t) < producer_.size());
  return producer_[t];
}

size_t invariant_prefix(const Program& p) {
  const std::vector<Op>& ops = p.ops();
  std::vector<bool> fixed(p.num_tensors(), false);
  for (size_t t = 0; t < p.num_tensors(); ++t) fixed[t] = p.tensor(static_cast<TensorId>(t)).role == Role::Constant;
  size_t n = 0;
  for (; n < ops.size(); ++n) {
    const Op& op = ops[n];
    bool inputs_fixed = true;
    for (TensorId t : op.in) inputs_fixed = inputs_fixed && (t == kNone || fixed[t]);
    const auto rule = op_def(op.kind).same_every_step;
    bool same = rule && rule(op, inputs_fixed);
    for (uint8_t acc : op.accumulate) same = same && !acc;
    if (!same) break;
    for (TensorId t : op.out)
      if (t != kNone) fixed[t] = true;
  }
  if (n == 0) return 0;  // most programs: a batch or a trained weight comes first
  // A prefix output that a later op writes again is not the same every step: end the prefix at
  // its producer (and again, until no such write is left).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = n; i < ops.size() && !changed; ++i)
      for (TensorId t : ops[i].out) {
        const int w = t == kNone || p.tensor(t).role == Role::Constant ? -1 : p.producer(t);
        if (w >= 0 && static_cast<size_t>(w) < n) {
          n = static_cast<size_t>(w), changed = true;
          break;
        }
      }
  }
  return n;
}

void Program::add_op(Op op) {
  if (op.accumulate.empty()) op.accumulate.assign(op.out.size(), 0);
  SG_ASSERT(op.accumulate.size() == op.out.size());
  check_op(op);
  for (TensorId t : op.out)
    if (t != kNone && producer_[t] < 0) producer_[t] = static_cast<int>(ops_.size());
  ops_.push_back(std::move(op));
}

namespace {

struct KindSlots {
  std::vector<Slot> in, out;
};

// Each kind's slot lists, parsed once.
const KindSlots& slots_of(OpKind k) {
  static const std::vector<KindSlots> all = [] {
    std::vector<KindSlots> v;
    for (const OpDef* d : op_table()) v.push_back({parse_slots(d->inputs), parse_slots(d->outputs)});
    return v;
  }();
  return all[static_cast<size_t>(k)];
}

std::string slot_list(const std::vector<Slot>& slots) {
  std::string s;
  for (const Slot& x : slots) s += cat(s.empty() ? "" : ", ", x.name, x.optional ? "?" : x.variadic ? "..." : "");
  return s;
}

// The op's ids against its row's slots: how many, and that every slot that is not optional has
// a tensor.
void check_slots(const Op& op, const std::vector<Slot>& slots, const std::vector<TensorId>& ids,
                 const char* what) {
  const bool variadic = !slots.empty() && slots.back().variadic;
  const size_t fixed = variadic ? slots.size() - 1 : slots.size();
  SG_REQUIRE(variadic ? ids.size() >= fixed : ids.size() == fixed, "op '", op.name, "' (", op_kind_name(op.kind),
             "): expects ", variadic ? "at least " : "", fixed, " ", what, fixed == 1 ? "" : "s", " (",
             slot_list(slots), "), got ", ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    const Slot& s = slots[std::min(k, slots.size() - 1)];
    SG_REQUIRE(ids[k] != kNone || s.optional, "op '", op.name, "' (", op_kind_name(op.kind), "): ", what, " ", k,
               " ('", s.name, "') is required");
  }
}

}  // namespace

void Program::check_op(const Op& op) const {
  for (TensorId t : op.in) {
    if (t == kNone) continue;
    SG_REQUIRE(t >= 0 && static_cast<size_t>(t) < tensors_.size(), "op '", op.name,
               "': input id ", t, " does not exist");
    const Role r = tensors_[t].role;
    SG_REQUIRE(is_persistent(r) || r == Role::Input || producer_[t] >= 0, "op '", op.name, "' reads '",
               tensors_[t].name, "' before any op writes it");
  }
  for (TensorId t : op.out)
    SG_REQUIRE(t == kNone || (t >= 0 && static_cast<size_t>(t) < tensors_.size()), "op '",
               op.name, "': output id ", t, " does not exist");
  const KindSlots& slots = slots_of(op.kind);
  check_slots(op, slots.in, op.in, "input");
  check_slots(op, slots.out, op.out, "output");
  op_def(op.kind).check(OpCheck(*this, op));
}

}  // namespace sg
