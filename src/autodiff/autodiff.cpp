#include "stepgraph/autodiff.h"

namespace sg {

namespace {

class Differentiator {
 public:
  Differentiator(Program& p, size_t num_forward_ops)
      : p_(p), n_fwd_(num_forward_ops), grad_(p.num_tensors(), kNone),
        written_(p.num_tensors(), false), needs_(p.num_tensors(), false) {}

  std::vector<ParamGrad> run(const std::vector<std::pair<TensorId, TensorId>>& seeds) {
    mark_needs_grad();
    for (const auto& [pred, dpred] : seeds) {
      SG_REQUIRE(needs_[pred], "the prediction '", p_.tensor(pred).name,
                 "' does not depend on any parameter: nothing to train");
      SG_REQUIRE(grad_[pred] == kNone, "two loss terms seed the same tensor '", p_.tensor(pred).name, "'");
      set_grad(pred, dpred);
      written_[pred] = true;
    }
    for (size_t i = n_fwd_; i-- > 0;) {
      const Op op = p_.ops()[i];  // copy: emitting ops may reallocate the op list
      if (op.out.empty() || op.out[0] == kNone || grad_[op.out[0]] == kNone) continue;
      switch (op.kind) {
        case OpKind::Dense: dense(op); break;
        case OpKind::Add: add(op); break;
        case OpKind::JetActivation: elementwise(op, OpKind::JetActivationBackward); break;
        case OpKind::FourierFeatures: elementwise(op, OpKind::FourierFeaturesBackward); break;
        case OpKind::Conv2d: conv2d(op); break;
        case OpKind::MaxPool2d: single_input(op, OpKind::MaxPool2dBackward, {op.in[0], op.out[0]}); break;
        case OpKind::GlobalAvgPool: single_input(op, OpKind::GlobalAvgPoolBackward, {}); break;
        case OpKind::Reshape: single_input(op, OpKind::Reshape, {}); break;
        case OpKind::LayerNorm:
          fused(op, OpKind::LayerNormBackward, {grad_[op.out[0]], op.in[0], op.in[1], op.out[1], op.out[2]},
                {op.in[0], op.in[1], op.in[2]});
          break;
        case OpKind::Embedding:  // the ids have no gradient
          fused(op, OpKind::EmbeddingBackward, {grad_[op.out[0]], op.in[0]}, {op.in[1], op.in[2]});
          break;
        case OpKind::Attention:
          fused(op, OpKind::AttentionBackward, {grad_[op.out[0]], op.in[0], op.in[1], op.in[2], op.out[0], op.out[1]},
                {op.in[0], op.in[1], op.in[2]});
          break;
        default:
          throw Error(cat("op '", op.name, "' (", op_kind_name(op.kind),
                          ") has no gradient rule and cannot be in a forward pass"));
      }
    }
    std::vector<ParamGrad> out;
    for (size_t t = 0; t < p_.num_tensors(); ++t) {
      if (p_.tensor(static_cast<TensorId>(t)).role != Role::Parameter) continue;
      SG_REQUIRE(grad_[t] != kNone, "parameter '", p_.tensor(static_cast<TensorId>(t)).name,
                 "' does not affect the loss");
      out.push_back({static_cast<TensorId>(t), grad_[t]});
    }
    return out;
  }

 private:
  // A tensor needs a gradient if it is a parameter or computed from one.
  void mark_needs_grad() {
    for (size_t t = 0; t < p_.num_tensors(); ++t)
      needs_[t] = p_.tensor(static_cast<TensorId>(t)).role == Role::Parameter;
    for (size_t i = 0; i < n_fwd_; ++i) {
      const Op& op = p_.ops()[i];
      bool any = false;
      for (TensorId t : op.in) any = any || (t != kNone && needs_[t]);
      for (TensorId t : op.out)
        if (t != kNone) needs_[t] = any;
    }
  }

  void set_grad(TensorId t, TensorId g) { grad_.resize(p_.num_tensors(), kNone), grad_[t] = g; }

  // The gradient slot for input `t` of a backward op, or kNone if `t` needs none. Sets *acc when
  // an earlier backward op already wrote it.
  TensorId slot(TensorId t, uint8_t* acc) {
    *acc = 0;
    if (t == kNone || !needs_[t]) return kNone;
    if (grad_[t] == kNone) {
      const TensorInfo info = p_.tensor(t);
      bool param = info.role == Role::Parameter;
      TensorId g = p_.add_tensor({(param ? "grad." : "d.") + info.name, info.shape, info.dtype,
                                  param ? Role::Gradient : Role::Temporary});
      grad_.resize(p_.num_tensors(), kNone);
      written_.resize(p_.num_tensors(), false);
      needs_.resize(p_.num_tensors(), false);
      grad_[t] = g;
    }
    *acc = written_[t] ? 1 : 0;
    written_[t] = true;
    return grad_[t];
  }

  // d(act(X W^T + b)): one coarse op computes dX, dW and db.
  void dense(const Op& op) {
    Op b;
    b.kind = OpKind::DenseBackward;
    b.name = "backward " + op.name;
    b.attrs = op.attrs;
    b.in = {grad_[op.out[0]], op.in[0], op.in[1], op.out[0], op.out[1]};
    b.out.resize(3);
    b.accumulate.resize(3);
    for (int k = 0; k < 3; ++k) b.out[k] = slot(op.in[k], &b.accumulate[k]);
    p_.add_op(std::move(b));
  }

  // d(act(conv(X, W) + b)): one coarse op computes dX (dgrad), dW (wgrad) and db; relu' from Y.
  void conv2d(const Op& op) {
    Op b;
    b.kind = OpKind::Conv2dBackward;
    b.name = "backward " + op.name;
    b.attrs = op.attrs;
    b.in = {grad_[op.out[0]], op.in[0], op.in[1], op.out[0]};
    b.out.resize(3);
    b.accumulate.resize(3);
    for (int k = 0; k < 3; ++k) b.out[k] = slot(op.in[k], &b.accumulate[k]);
    p_.add_op(std::move(b));
  }

  // A backward op reading `in` and writing the gradients of `wrt` (kNone where one needs none);
  // skipped when none does.
  void fused(const Op& op, OpKind backward, std::vector<TensorId> in, const std::vector<TensorId>& wrt) {
    Op b;
    b.kind = backward;
    b.name = "backward " + op.name;
    b.attrs = op.attrs;
    b.in = std::move(in);
    b.out.resize(wrt.size());
    b.accumulate.resize(wrt.size());
    bool any = false;
    for (size_t k = 0; k < wrt.size(); ++k) {
      b.out[k] = slot(wrt[k], &b.accumulate[k]);
      any = any || b.out[k] != kNone;
    }
    if (any) p_.add_op(std::move(b));
  }

  // Ops with one differentiable input: backward in {dY, extra...} out {dX}; skipped when the
  // input needs no gradient (an image reshaped from the input batch).
  void single_input(const Op& op, OpKind backward, std::vector<TensorId> extra) {
    Op b;
    b.kind = backward;
    b.name = "backward " + op.name;
    b.attrs = op.attrs;
    b.in = {grad_[op.out[0]]};
    b.in.insert(b.in.end(), extra.begin(), extra.end());
    b.out.resize(1);
    b.accumulate.resize(1);
    b.out[0] = slot(op.in[0], &b.accumulate[0]);
    if (b.out[0] != kNone) p_.add_op(std::move(b));
  }

  // Jet activations and Fourier features: in {A} out {Y} -> backward in {dY, A} out {dA}.
  void elementwise(const Op& op, OpKind backward) {
    Op b;
    b.kind = backward;
    b.name = "backward " + op.name;
    b.attrs = op.attrs;
    b.in = {grad_[op.out[0]], op.in[0]};
    b.out.resize(1);
    b.accumulate.resize(1);
    b.out[0] = slot(op.in[0], &b.accumulate[0]);
    if (b.out[0] != kNone) p_.add_op(std::move(b));
  }

  // d(A + B) = dY to both.
  void add(const Op& op) {
    Op b;
    b.kind = OpKind::AddBackward;
    b.name = "backward " + op.name;
    b.in = {grad_[op.out[0]]};
    b.out.resize(2);
    b.accumulate.resize(2);
    for (int k = 0; k < 2; ++k) b.out[k] = slot(op.in[k], &b.accumulate[k]);
    p_.add_op(std::move(b));
  }

  Program& p_;
  size_t n_fwd_;
  std::vector<TensorId> grad_;
  std::vector<bool> written_, needs_;
};

}  // namespace

std::vector<ParamGrad> append_backward(Program& p, TensorId pred, TensorId dpred) {
  // Forward ops are those before the op that writes dpred (the fused loss op).
  int loss_op = p.producer(dpred);
  SG_ASSERT(loss_op >= 0);
  return Differentiator(p, static_cast<size_t>(loss_op)).run({{pred, dpred}});
}

std::vector<ParamGrad> append_backward(Program& p, const std::vector<std::pair<TensorId, TensorId>>& seeds,
                                       size_t num_forward_ops) {
  SG_REQUIRE(!seeds.empty(), "append_backward: no loss terms");
  return Differentiator(p, num_forward_ops).run(seeds);
}

}  // namespace sg
