// The batch-norm layer: the training op (batch statistics, running statistics updated in place)
// or, in predict and evaluate programs, the inference op over the running statistics.
#include <cmath>

#include "stepgraph/nn.h"

namespace sg {

BatchNorm::BatchNorm(double momentum, double eps) : momentum_(momentum), eps_(eps) {
  SG_REQUIRE(std::isfinite(momentum) && momentum > 0 && momentum <= 1, "batch_norm: momentum must be in (0, 1], got ",
             momentum);
  SG_REQUIRE(std::isfinite(eps) && eps > 0, "batch_norm: eps must be positive, got ", eps);
}

std::string BatchNorm::describe() const { return cat("batch_norm(momentum=", momentum_, ", eps=", eps_, ")"); }

TensorId BatchNorm::build(GraphBuilder& g, TensorId x, const std::string& prefix) {
  SG_REQUIRE(!g.jet(), "batch_norm layer '", prefix, "': physics-informed networks take no batch norm (their loss ",
             "reads derivatives of one pointwise function, which batch statistics would couple across points)");
  const TensorInfo info = g.program().tensor(x);
  SG_REQUIRE(info.shape.size() >= 2, "batch_norm layer '", prefix, "' expects [batch, channels] features or ",
             "[batch, height, width, channels] images, got ", shape_str(info.shape));
  SG_REQUIRE(info.dtype == DType::F32, "batch_norm layer '", prefix, "' takes f32 values, got ", dtype_name(info.dtype));
  const int64_t C = info.shape.back(), n = numel(info.shape) / C;
  SG_REQUIRE(!g.training() || n >= 2, "batch_norm layer '", prefix, "': the input ", shape_str(info.shape), " has ", n,
             " value per channel; training needs at least 2 (as torch: a batch of one row has no variance)");
  // The same names in training and evaluation programs: the trainer's persistent tensors.
  TensorId gain = g.parameter(this, "gain", join_name(prefix, "gain"), {C}, Init::ones(), C, C);
  TensorId shift = g.parameter(this, "shift", join_name(prefix, "shift"), {C}, Init::zeros(), C, C);
  TensorId rm = g.parameter(this, "running_mean", join_name(prefix, "running_mean"), {C}, Init::zeros(), C, C,
                            /*trainable=*/false);
  TensorId rv = g.parameter(this, "running_var", join_name(prefix, "running_var"), {C}, Init::ones(), C, C,
                            /*trainable=*/false);
  const std::string base = prefix.empty() ? "batch_norm" : prefix;
  TensorId Y = g.tensor(base + ".out", info.shape, Role::Activation);
  Op op;
  op.name = base + ".batch_norm";
  op.in = {x, gain, shift, rm, rv};
  op.attrs = BatchNormAttrs{eps_, momentum_};
  if (g.training()) {
    op.kind = OpKind::BatchNorm;
    op.out = {Y, g.tensor(base + ".mean", {C}, Role::Activation), g.tensor(base + ".rstd", {C}, Role::Activation), rm,
              rv};
  } else {
    op.kind = OpKind::BatchNormInference;
    op.out = {Y};
  }
  g.program().add_op(std::move(op));
  return Y;
}

std::shared_ptr<BatchNorm> batch_norm(double momentum, double eps) { return std::make_shared<BatchNorm>(momentum, eps); }

}  // namespace sg
