// The registry of user-defined losses, the row of the op table that runs them, and CustomLoss,
// the Loss that emits one.
#include "ops/custom_loss_ops.h"

#include <cmath>

#include "core/named_registry.h"
#include "stepgraph/rng.h"

namespace sg {

namespace {

NamedRegistry<CustomLossDef>& registry() {
  static NamedRegistry<CustomLossDef> r("user-defined loss", "sg::register_loss");
  return r;
}

Shape target_of(const CustomLossDef& d, const Shape& pred) { return d.target_shape ? d.target_shape(pred) : pred; }

}  // namespace

void register_loss(CustomLossDef def) {
  SG_REQUIRE(is_registry_name(def.name), "register_loss: the name '", def.name, "' must be letters, digits, '_' and '-'");
  SG_REQUIRE(def.cpu, "register_loss '", def.name, "': the CPU kernel (cpu) is missing; it is the reference");
  const std::string taken = cat("register_loss: a loss named '", def.name, "' is already registered");
  registry().add(std::move(def), taken);
}

int32_t custom_loss_id(const std::string& name) { return registry().id(name); }

bool is_registered_loss(const std::string& name) { return registry().has(name); }

const CustomLossDef& custom_loss_def(int32_t id) { return registry().at(id, "custom loss"); }

LossArgs custom_loss_args(const Program& p, const Op& op, const std::function<void*(TensorId)>& address) {
  LossArgs a;
  a.pred = static_cast<const float*>(address(op.in[0]));
  a.target = static_cast<const float*>(address(op.in[1]));
  a.valid_rows = op.in.size() > 2 && op.in[2] != kNone ? static_cast<const int32_t*>(address(op.in[2])) : nullptr;
  a.loss = static_cast<float*>(address(op.out[0]));
  a.dpred = static_cast<float*>(address(op.out[1]));
  a.pred_shape = p.tensor(op.in[0]).shape;
  a.target_shape = p.tensor(op.in[1]).shape;
  return a;
}

void run_loss_kernel(const LossKernel& k, const LossArgs& args, const std::string& who) { run_user_kernel(k, args, who); }

GradScale probe_grad_scale(const CustomLossDef& d, const Shape& pred) {
  SG_REQUIRE(pred.size() >= 1 && pred[0] >= 1, "infer_grad_scale of '", d.name, "': a prediction shape with a batch ",
             "axis, got ", shape_str(pred));
  // B copies of one row against B copies of its target, and that row alone: a mean over the
  // batch puts 1/B on each row's gradient (the same loss), a sum 1 (B times the loss).
  Shape one = pred;
  one[0] = 1;
  const Shape tone = target_of(d, one), tall = target_of(d, pred);
  const int64_t per = numel(one), tper = numel(tone), B = pred[0];
  SG_REQUIRE(numel(tall) == B * tper, "infer_grad_scale of '", d.name, "': its target shape for ", shape_str(pred),
             " is ", shape_str(tall), ", not ", B, " rows of ", shape_str(tone));
  Rng rng(mix_seed(0, d.name));
  std::vector<float> p(static_cast<size_t>(per)), t(static_cast<size_t>(tper));
  for (float& v : p) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  for (float& v : t) v = static_cast<float>(rng.uniform(0.1, 0.9));  // targets in (0, 1) suit most losses
  std::vector<float> P, T;
  for (int64_t b = 0; b < B; ++b) P.insert(P.end(), p.begin(), p.end()), T.insert(T.end(), t.begin(), t.end());
  auto value = [&](const std::vector<float>& pr, const std::vector<float>& ta, const Shape& ps, const Shape& ts) {
    std::vector<float> dp(pr.size());
    float loss = 0;
    const int32_t valid = static_cast<int32_t>(ps[0]);
    LossArgs a;
    a.pred = pr.data(), a.target = ta.data(), a.valid_rows = &valid, a.loss = &loss, a.dpred = dp.data();
    a.pred_shape = ps, a.target_shape = ts;
    run_loss_kernel(d.cpu, a, cat("user-defined loss '", d.name, "'"));
    return loss;
  };
  const double l1 = value(p, t, one, tone), lb = value(P, T, pred, tall);
  SG_REQUIRE(std::isfinite(l1) && std::isfinite(lb) && l1 != 0.0, "infer_grad_scale of '", d.name,
             "': its loss on a probe batch is ", lb, " (one row: ", l1, "); expected a finite, nonzero value");
  GradScale g;
  g.scale = lb / (static_cast<double>(B) * l1);
  g.reduction = std::fabs(g.scale * B - 1.0) < 1e-3 ? Reduction::Mean : Reduction::Sum;
  return g;
}

GradScale infer_grad_scale(const Loss& loss, const Shape& pred) {
  GradScale g;
  g.scale = loss.grad_scale(pred);  // a CustomLoss probes its kernel here and keeps the reduction
  g.reduction = loss.reduction();
  return g;
}

CustomLoss::CustomLoss(std::string name, std::string label)
    : Loss(Reduction::Mean), name_(std::move(name)), label_(std::move(label)) {
  custom_loss_id(name_);  // registered, or an Error listing the registered ones
}

LossOutputs CustomLoss::build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const {
  Program& p = g.program();
  LossOutputs o;
  o.loss = g.tensor("loss", {1}, Role::Activation);
  o.dpred = g.tensor("d.pred", p.tensor(pred).shape, Role::Temporary);
  Op op;
  op.kind = OpKind::CustomLoss;
  op.name = "loss " + name_;
  op.in = {pred, target, valid};
  op.out = {o.loss, o.dpred};
  op.attrs = CustomLossAttrs{custom_loss_id(name_)};
  p.add_op(std::move(op));
  return o;
}

Shape CustomLoss::target_shape(const Shape& pred) const { return target_of(custom_loss_def(custom_loss_id(name_)), pred); }

std::string CustomLoss::describe() const { return cat("user loss '", label_.empty() ? name_ : label_, "'"); }

double CustomLoss::grad_scale(const Shape& pred) const {
  const GradScale g = probe_grad_scale(custom_loss_def(custom_loss_id(name_)), pred);
  const_cast<CustomLoss*>(this)->reduction_ = g.reduction;  // what the probe found, for explain
  return g.scale;
}

namespace ops {

void check_custom_loss(const OpCheck& c) {
  const CustomLossDef& d = custom_loss_def(c.attr<CustomLossAttrs>().id);
  c.expect(c.shape(c.out(0)) == Shape{1}, cat("loss ", c.desc(c.out(0)), " must be [1]"));
  c.same(c.in(0), c.out(1));
  const Shape want = target_of(d, c.shape(c.in(0)));
  c.expect(c.shape(c.in(1)) == want && c.dtype(c.in(1)) == DType::F32,
           cat("target ", c.desc(c.in(1)), ": user loss '", d.name, "' takes f32 ", shape_str(want), " for pred ",
               c.desc(c.in(0))));
}

std::function<void()> cpu_custom_loss(const CpuBind& b) {
  const Op& op = b.op();
  const CustomLossDef& d = custom_loss_def(op.attr<CustomLossAttrs>().id);  // entries never move
  const LossArgs args = custom_loss_args(b.program(), op, [&](TensorId t) { return b.raw(t); });
  const LossKernel* k = &d.cpu;
  const std::string who = cat("user-defined loss '", d.name, "'");
  return [=] { run_loss_kernel(*k, args, who); };
}

std::string custom_loss_attrs_text(const Op& op) {
  return cat("('", custom_loss_def(op.attr<CustomLossAttrs>().id).name, "', user-defined)");
}

}  // namespace ops
}  // namespace sg
