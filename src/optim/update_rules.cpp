// User-defined optimizers: the registry of update rules and CustomOptimizer, which emits the
// schedule op and one CustomUpdate op over every parameter.
#include "optim/update_rules.h"

#include <cmath>

#include "core/named_registry.h"

namespace sg {

namespace {

NamedRegistry<UpdateRuleDef>& registry() {
  static NamedRegistry<UpdateRuleDef> r("update rule", "sg::register_update_rule");
  return r;
}

}  // namespace

void register_update_rule(UpdateRuleDef def) {
  SG_REQUIRE(is_registry_name(def.name), "register_update_rule: the name '", def.name, "' must be letters, digits, '_' and '-'");
  SG_REQUIRE(def.cpu, "register_update_rule '", def.name, "': the CPU kernel (cpu) is missing; it is the reference");
  for (size_t i = 0; i < def.state.size(); ++i) {
    SG_REQUIRE(is_registry_name(def.state[i].name, false), "register_update_rule '", def.name, "': state ", i, " is named '",
               def.state[i].name, "'; use letters, digits and '_'");
    SG_REQUIRE(std::isfinite(def.state[i].initial), "register_update_rule '", def.name, "': state '", def.state[i].name,
               "' starts at ", def.state[i].initial, "; expected a finite value");
    for (size_t j = 0; j < i; ++j)
      SG_REQUIRE(def.state[j].name != def.state[i].name, "register_update_rule '", def.name, "': state '",
                 def.state[i].name, "' is declared twice");
  }
  const std::string taken = cat("register_update_rule: a rule named '", def.name, "' is already registered");
  registry().add(std::move(def), taken);
}

int32_t update_rule_id(const std::string& name) { return registry().id(name); }

bool is_registered_update_rule(const std::string& name) { return registry().has(name); }

const UpdateRuleDef& update_rule(int32_t id) { return registry().at(id, "update rule"); }

UpdateArgs update_args(const Program& p, const Op& op, const std::function<void*(TensorId)>& address) {
  const CustomUpdateAttrs& a = op.attr<CustomUpdateAttrs>();
  const size_t n = static_cast<size_t>(a.num_params), states = update_rule(a.rule).state.size();
  UpdateArgs args;
  args.hyper = static_cast<const float*>(address(op.in[0]));
  args.sched = static_cast<const float*>(address(op.in[1]));
  args.constants = a.constants;
  for (size_t k = 0; k < n; ++k) {
    UpdateTensor t;
    t.param = static_cast<float*>(address(op.in[2 + k]));
    t.grad = static_cast<const float*>(address(op.in[2 + n + k]));
    t.size = numel(p.tensor(op.in[2 + k]).shape);
    for (size_t j = 0; j < states; ++j) t.state.push_back(static_cast<float*>(address(op.in[2 + (2 + j) * n + k])));
    args.tensors.push_back(std::move(t));
  }
  return args;
}

void run_update_kernel(const UpdateKernel& k, const UpdateArgs& args, const std::string& who) { run_user_kernel(k, args, who); }

CustomOptimizer::CustomOptimizer(std::string rule, double lr, double weight_decay, Schedule s,
                                 std::vector<double> constants, std::string label)
    : Optimizer(lr, weight_decay, s), rule_(std::move(rule)), label_(std::move(label)), constants_(std::move(constants)) {
  update_rule_id(rule_);  // registered, or an Error listing the registered ones
  for (double c : constants_)
    SG_REQUIRE(std::isfinite(c), "optimizer '", rule_, "': constants must be finite, got ", c);
}

void CustomOptimizer::build(GraphBuilder& g, const std::vector<ParamGrad>& params) const {
  const int32_t id = update_rule_id(rule_);
  const UpdateRuleDef& rule = update_rule(id);
  build_clip(g, params);
  TensorId hyper, sched;
  build_schedule(g, 0, 0, &hyper, &sched);
  Program& p = g.program();
  Op op;
  op.kind = OpKind::CustomUpdate;
  op.name = "optim." + label();
  op.in = {hyper, sched};
  for (const ParamGrad& pg : params) op.in.push_back(pg.param);
  for (const ParamGrad& pg : params) op.in.push_back(pg.grad);
  for (const ParamGrad& pg : params) op.out.push_back(pg.param);
  for (const StateSpec& s : rule.state)
    for (const ParamGrad& pg : params) {
      const TensorInfo info = p.tensor(pg.param);
      const TensorId st = p.add_tensor({cat("optim.", label(), ".", s.name, ".", info.name), info.shape, DType::F32,
                                        Role::OptimizerState});
      if (s.initial != 0.0) g.fill(st, s.initial);
      op.in.push_back(st);
      op.out.push_back(st);
    }
  op.accumulate.assign(op.out.size(), 1);  // in place
  op.attrs = CustomUpdateAttrs{id, static_cast<int64_t>(params.size()), constants_};
  p.add_op(std::move(op));
}

std::string CustomOptimizer::describe() const {
  std::vector<std::string> c;
  for (double v : constants_) c.push_back(cat(v));
  return cat(label(), "(lr=", lr_, c.empty() ? "" : ", constants=[" + joined(c) + "]", ", weight_decay=", weight_decay_,
             ", schedule=", schedule_.describe(), clip_text(), ")");
}

}  // namespace sg
