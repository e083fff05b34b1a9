// Lowering of user-defined ops (OpKind::Custom): the registered CUDA launcher, called once per
// step while the step is run op by op and once at capture; replays re-run what it launched.
#include "backend/cuda/lower/lowering.h"
#include "core/named_registry.h"
#include "ops/custom_loss_ops.h"
#include "ops/custom_ops.h"
#include "optim/update_rules.h"

namespace sg::cuda {

namespace {

// After a user's launcher: inside a capture, a synchronize, an allocation or work on another
// stream invalidates it; outside, a bad launch leaves its error. Either way the user's code is
// named here, not later.
void check_user_launch(cudaStream_t s, const std::string& who) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  const cudaError_t q = cudaStreamIsCapturing(s, &st);
  const cudaError_t e = cudaGetLastError();
  SG_REQUIRE(st != cudaStreamCaptureStatusInvalidated && q == cudaSuccess, who,
             ": its CUDA function did something graph capture forbids (a synchronize, an allocation, a copy to "
             "pageable memory or work on another stream; launch on the given stream only): ",
             cudaGetErrorString(e != cudaSuccess ? e : q));
  SG_REQUIRE(e == cudaSuccess, who, ": its CUDA function left an error: ", cudaGetErrorString(e));
}

// The step that runs a user's kernel k on the step's stream and checks what it did.
template <class Kernel, class Args>
std::function<void(cudaStream_t)> user_step(const Kernel* k, Args args, std::string who) {
  return [k, args, who](cudaStream_t s) mutable {
    args.stream = s;
    run_user_kernel(*k, args, who);
    check_user_launch(s, who);
  };
}

}  // namespace

void Lowering::custom_op(const Op& op) {
  const CustomAttrs a = op.attr<CustomAttrs>();
  const CustomOpDef& d = custom_op_def(a.id);
  const CustomKernel* k = a.backward ? &d.cuda_backward : &d.cuda;  // registry entries never move
  SG_REQUIRE(*k, "op '", op.name, "' (user-defined '", d.name, "'): no CUDA ", a.backward ? "backward" : "forward",
             " is registered (", a.backward ? "cuda_backward" : "cuda", "); train it on the CPU backend, or register one");
  CustomOpArgs args = custom_op_args(p_, op, [&](TensorId t) { return ptrs_[t]; });
  notes_ << "user-defined op '" << d.name << "'" << (a.backward ? " (backward)" : "");
  const std::string who = cat("user-defined op '", d.name, "'", a.backward ? " (backward)" : "");
  add_step(op, user_step(k, std::move(args), who));
}

void Lowering::custom_update_op(const Op& op) {
  const UpdateRuleDef& rule = update_rule(op.attr<CustomUpdateAttrs>().rule);  // entries never move
  const std::string who = cat("optimizer '", rule.name, "' (op '", op.name, "')");
  SG_REQUIRE(rule.cuda, who, ": no CUDA kernel is registered for the update rule (cuda); train on the CPU backend, ",
             "or register one");
  const int sc = p_.producer(op.in[1]);  // the schedule op
  SG_REQUIRE(rule.honours_skip || sc < 0 || p_.ops()[sc].attr<ScheduleAttrs>().on_nan != NanPolicy::Skip, who,
             ": train.on_nan skip needs a CUDA kernel that leaves a skipped step out (UpdateRuleDef::honours_skip), ",
             "and this rule's does not say it does; use on_nan stop or continue, or train on the CPU backend");
  UpdateArgs args = update_args(p_, op, [&](TensorId t) { return ptrs_[t]; });
  const UpdateKernel* k = &rule.cuda;
  notes_ << "update rule '" << rule.name << "'";
  add_step(op, user_step(k, std::move(args), who));
}

void Lowering::custom_loss_op(const Op& op) {
  const CustomLossDef& d = custom_loss_def(op.attr<CustomLossAttrs>().id);  // entries never move
  const std::string who = cat("user-defined loss '", d.name, "'");
  SG_REQUIRE(d.cuda, who, ": no CUDA kernel is registered (cuda); train it on the CPU backend, or register one");
  LossArgs args = custom_loss_args(p_, op, [&](TensorId t) { return ptrs_[t]; });
  const LossKernel* k = &d.cuda;
  notes_ << "user-defined loss '" << d.name << "'";
  add_step(op, user_step(k, std::move(args), who));
}

}  // namespace sg::cuda
