#include "backend/cuda/fusion_plan.h"

#include <cstdint>

#include "backend/cuda/dense_kernels.cuh"

namespace sg::cuda {

namespace {

struct Planner {
  const Program& p;
  const std::vector<void*>& ptrs;
  FusionPlan plan;

  int64_t width(TensorId t) const { return p.tensor(t).shape.back(); }
  int64_t rows(TensorId t) const { return numel(p.tensor(t).shape) / width(t); }

  // The op of `kind` that reads T as its input `slot`, when T has one writer and that op is its
  // only reader (-1 otherwise): T can then live inside a fused launch.
  int only_reader(TensorId T, OpKind kind, size_t slot) const {
    const auto& ops = p.ops();
    int writers = 0, readers = 0, q = -1;
    for (size_t j = 0; j < ops.size(); ++j) {
      for (TensorId o : ops[j].out) writers += o == T;
      for (size_t k = 0; k < ops[j].in.size(); ++k) {
        if (ops[j].in[k] != T) continue;
        ++readers;
        if (ops[j].kind == kind && k == slot) q = static_cast<int>(j);
      }
    }
    return writers == 1 && readers == 1 ? q : -1;
  }

  // Whether tensors a and b share planned memory.
  bool overlap(TensorId a, TensorId b) const {
    if (a == kNone || b == kNone || !ptrs[a] || !ptrs[b]) return false;
    auto range = [&](TensorId t) {
      const uintptr_t q = reinterpret_cast<uintptr_t>(ptrs[t]);
      const TensorInfo& ti = p.tensor(t);
      return std::make_pair(q, q + static_cast<uintptr_t>(numel(ti.shape)) * dtype_size(ti.dtype));
    };
    const auto [a0, a1] = range(a);
    const auto [b0, b1] = range(b);
    return a0 < b1 && b0 < a1;
  }

  // Which backward products can absorb the previous layer's activation derivative.
  void activation_backward() {
    const auto& ops = p.ops();
    for (size_t b = 0; b < ops.size(); ++b) {
      const Op& op = ops[b];
      if (op.kind != OpKind::DenseBackward || op.out[0] == kNone || op.accumulate[0]) continue;
      const int q = only_reader(op.out[0], OpKind::DenseBackward, 0);
      if (q < 0) continue;
      const Op& qop = ops[q];
      if (qop.attr<DenseAttrs>().bias_rows != 0) continue;  // BGRAD epilogues sum every row
      const int P = p.producer(qop.in[3]);
      if (P < 0 || ops[P].kind != OpKind::Dense) continue;
      const Activation act = qop.attr<DenseAttrs>().act;
      const int64_t qwidth = width(qop.in[3]);
      const int64_t B = rows(op.in[1]), I = width(op.in[1]), O = p.tensor(op.in[2]).shape[0];
      if (skinny_dense(B, O, I)) continue;  // its backward kernel applies no activation derivative
      if (prefer_own_gemm(B, I, O)) {
        if (act != Activation::None && (!activation_needs_preact(act) || qop.in[4] != kNone))
          plan.into[static_cast<int>(b)] = q;
        continue;
      }
      if (act == Activation::ReLU) {
        plan.relu_mask.insert(P);
        plan.into[static_cast<int>(b)] = q;
      } else if (act == Activation::GELU && qop.in[4] != kNone && qwidth % 8 == 0) {
        plan.into[static_cast<int>(b)] = q;
      }
    }
  }

  // A one-output skinny layer's input gradient read only by a jet activation's backward (a
  // PINN's last layer after its last tanh): that kernel computes dY = dZ W itself, so the skinny
  // backward skips dX and the [rows, H] tensor is neither written nor read (Fourier 4x128: 2 x
  // 35 MB).
  void jet_dy() {
    const auto& ops = p.ops();
    for (size_t b = 0; b < ops.size(); ++b) {
      const Op& op = ops[b];
      if (op.kind != OpKind::DenseBackward || op.out[0] == kNone || op.accumulate[0] || op.out[1] == kNone) continue;
      if (p.tensor(op.in[2]).shape[0] != 1 || !skinny_dense(rows(op.in[1]), 1, width(op.in[1]))) continue;
      const int q = only_reader(op.out[0], OpKind::JetActivationBackward, 0);
      if (q <= static_cast<int>(b)) continue;
      // The plan ends dZ's life at this op: nothing up to the jet backward may reuse its memory.
      bool kept = true;
      for (int j = static_cast<int>(b) + 1; j <= q; ++j)
        for (TensorId o : ops[j].out) kept = kept && !overlap(o, op.in[0]);
      if (kept) plan.jet_dy[q] = static_cast<int>(b);
    }
  }

  // Fourier features whose projection P = X B^T is read by nothing else, with X a seed jet
  // (JetInput) or plain rows: the features kernel forms P's jet itself (fourier_features_seeded)
  // and writes it on the side, so the projection launches nothing and P is not read back.
  void fourier_seeded() {
    const auto& ops = p.ops();
    for (size_t f = 0; f < ops.size(); ++f) {
      if (ops[f].kind != OpKind::FourierFeatures) continue;
      const TensorId P = ops[f].in[0];
      const int pr = p.producer(P);
      if (pr < 0 || ops[pr].kind != OpKind::Dense || ops[pr].in[2] != kNone) continue;
      if (ops[pr].attr<DenseAttrs>().act != Activation::None) continue;
      if (only_reader(P, OpKind::FourierFeatures, 0) != static_cast<int>(f)) continue;
      const int x = p.producer(ops[pr].in[0]);
      const bool seed = x >= 0 && ops[x].kind == OpKind::JetInput;
      if (!seed && ops[f].attr<JetAttrs>().jet.K() != 1) continue;
      plan.fourier_seeded[static_cast<int>(f)] = pr;
    }
  }
};

}  // namespace

FusionPlan plan_fusions(const Program& p, const std::vector<void*>& ptrs) {
  Planner pl{p, ptrs, {}};
  pl.activation_backward();
  pl.jet_dy();
  pl.fourier_seeded();
  return std::move(pl.plan);
}

}  // namespace sg::cuda
