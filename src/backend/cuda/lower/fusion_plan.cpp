#include "backend/cuda/lower/fusion_plan.h"

#include <cstdint>
#include <initializer_list>

#include "backend/cuda/kernels/dense_kernels.cuh"
#include "backend/cuda/kernels/jet_dense.cuh"
#include "backend/cuda/kernels/pinn_kernels.cuh"

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

  // Whether the tensors' planned addresses are 16-byte aligned (the jet dense kernel's float4s).
  bool aligned(std::initializer_list<TensorId> ts) const {
    for (TensorId t : ts)
      if (t != kNone && reinterpret_cast<uintptr_t>(ptrs[t]) % 16 != 0) return false;
    return true;
  }
  // Whether a and b are the same memory with the same shape.
  bool same(TensorId a, TensorId b) const { return ptrs[a] == ptrs[b] && p.tensor(a).shape == p.tensor(b).shape; }

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
      if (!kept) continue;
      plan.jet_dy[q] = static_cast<int>(b);
      // The skinny layer's input is the output of the jet activation forward whose
      // pre-activation this backward reads (a PINN's last hidden layer): dW and db here too.
      const Op& jb = ops[q];
      const int fw = p.producer(op.in[1]);
      if (fw < 0 || ops[fw].kind != OpKind::JetActivation || ops[fw].in[0] != jb.in[1]) continue;
      const JetAttrs &fa = ops[fw].attr<JetAttrs>(), &ba = jb.attr<JetAttrs>();
      const int64_t H = width(op.in[1]), B = (rows(op.in[1]) - ba.head) / ba.jet.K();
      if (fa.act != ba.act || fa.head != ba.head || !same_jet(fa.jet, ba.jet)) continue;
      if (op.out[2] != kNone && op.attr<DenseAttrs>().bias_rows != ba.head + B) continue;
      if (!jet_dy_weight_fits(ba.jet, H) || !aligned({jb.in[1], jb.out[0], op.in[2]})) continue;
      plan.jet_dy_weight.insert(q);
    }
  }
  static bool same_jet(const JetSpec& a, const JetSpec& b) {
    if (a.d != b.d || a.npairs != b.npairs) return false;
    for (int k = 0; k < a.npairs; ++k)
      if (a.pi[k] != b.pi[k] || a.pj[k] != b.pj[k] || a.trace[k] != b.trace[k]) return false;
    return true;
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
      const JetAttrs& fa = ops[f].attr<JetAttrs>();
      if (seed && ops[x].in.size() <= 2 && ops[x].attr<JetAttrs>().head == fa.head &&
          same_jet(ops[x].attr<JetAttrs>().jet, fa.jet) && only_reader(ops[pr].in[0], OpKind::Dense, 0) == pr)
        plan.seed_into_fourier[static_cast<int>(f)] = x;
    }
  }

  // A jet layer's dense op (no activation of its own, no separate pre-activation, the bias on
  // the value rows) and the jet activation right after it that reads its output: one launch of
  // the jet dense kernel writes both outputs. The activation's output must not share memory with
  // anything the dense op reads or writes.
  void jet_dense_forward() {
    const auto& ops = p.ops();
    for (size_t j = 1; j < ops.size(); ++j) {
      const Op& jet = ops[j];
      const Op& d = ops[j - 1];
      if (jet.kind != OpKind::JetActivation || d.kind != OpKind::Dense || jet.in[0] != d.out[0]) continue;
      const DenseAttrs& da = d.attr<DenseAttrs>();
      const JetAttrs& ja = jet.attr<JetAttrs>();
      if (da.act != Activation::None || d.out[1] != kNone || jet.accumulate[0]) continue;
      if (!aligned({d.in[0], d.in[1], d.in[2], d.out[0], jet.out[0]})) continue;
      const int64_t R = rows(d.in[0]), B = (R - ja.head) / ja.jet.K();
      if (ja.head + ja.jet.K() * B != R) continue;
      if (d.in[2] != kNone && da.bias_rows != ja.head + B) continue;
      if (!jet_dense_fits(ja.jet, width(d.in[0]), p.tensor(d.in[1]).shape[0])) continue;
      bool apart = true;
      for (TensorId t : {d.in[0], d.in[1], d.in[2], d.out[0]}) apart = apart && !overlap(jet.out[0], t);
      if (!apart) continue;
      plan.jet_dense_forward[static_cast<int>(j)] = static_cast<int>(j - 1);
      if (j + 1 < ops.size()) output_layer(static_cast<int>(j), ops[j + 1], B);
    }
  }
  // The one-output layer after fused jet activation j (jet_dense_head): it reads the activation's
  // output, writes only U (no pre-activation, no accumulation), with its bias on the value rows;
  // U shares memory with nothing the jet dense launch reads or writes.
  void output_layer(int j, const Op& h, int64_t B) {
    const Op &jet = p.ops()[j], &d = p.ops()[j - 1];
    const JetAttrs& ja = jet.attr<JetAttrs>();
    if (h.kind != OpKind::Dense || h.in[0] != jet.out[0] || p.tensor(h.in[1]).shape[0] != 1) return;
    const DenseAttrs& ha = h.attr<DenseAttrs>();
    if (ha.act != Activation::None || h.out[1] != kNone || h.accumulate[0] || !aligned({h.in[1]})) return;
    if (h.in[2] != kNone && ha.bias_rows != ja.head + B) return;
    for (TensorId t : {d.in[0], d.in[1], d.in[2], d.out[0], jet.out[0], h.in[1], h.in[2]})
      if (overlap(h.out[0], t)) return;
    plan.jet_dense_head[j] = j + 1;
  }

  // A jet layer's dense backward whose input gradient dY only the jet activation backward right
  // after it reads: that product's epilogue applies the jet derivative and writes dA. The
  // lowering runs the weight gradient first, so dA may take the memory of the layer input X
  // (read by the weight gradient only), not of W or the gradients.
  void jet_dense_backward() {
    const auto& ops = p.ops();
    for (size_t j = 1; j < ops.size(); ++j) {
      const Op& jet = ops[j];
      const Op& b = ops[j - 1];
      if (jet.kind != OpKind::JetActivationBackward || b.kind != OpKind::DenseBackward) continue;
      if (b.out[0] == kNone || b.accumulate[0] || jet.accumulate[0]) continue;
      if (b.attr<DenseAttrs>().act != Activation::None || !aligned({b.in[0], b.in[2], jet.in[1], jet.out[0]})) continue;
      if (only_reader(b.out[0], OpKind::JetActivationBackward, 0) != static_cast<int>(j)) continue;
      const JetAttrs& ja = jet.attr<JetAttrs>();
      const int64_t R = rows(b.in[1]), B = (R - ja.head) / ja.jet.K();
      if (ja.head + ja.jet.K() * B != R) continue;
      if (!jet_dense_fits(ja.jet, p.tensor(b.in[2]).shape[0], width(b.in[1]))) continue;
      // dZ and A may be dA itself (the same memory and shape): each block reads a tile's rows of
      // dZ before it writes the same rows of dA, and a thread reads A where it then writes dA.
      bool apart = !overlap(jet.out[0], b.in[2]) && !overlap(jet.out[0], b.out[1]) && !overlap(jet.out[0], b.out[2]);
      for (TensorId t : {b.in[0], jet.in[1]}) apart = apart && (!overlap(jet.out[0], t) || same(jet.out[0], t));
      if (apart) plan.jet_dense_backward[static_cast<int>(j)] = static_cast<int>(j - 1);
    }
  }
};

}  // namespace

FusionPlan plan_fusions(const Program& p, const std::vector<void*>& ptrs, bool jet_dense) {
  Planner pl{p, ptrs, {}};
  pl.activation_backward();
  pl.jet_dy();
  pl.fourier_seeded();
  if (jet_dense) {
    pl.jet_dense_forward();
    pl.jet_dense_backward();
  }
  return std::move(pl.plan);
}

}  // namespace sg::cuda
