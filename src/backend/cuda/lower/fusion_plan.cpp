#include "backend/cuda/lower/fusion_plan.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/kernels/dense_dispatch.h"
#include "backend/cuda/kernels/jet_dense.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/pinn_kernels.cuh"
#include "backend/cuda/runtime/cuda_backend.h"
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/libs/cudnn_dense.h"
#endif

namespace sg::cuda {

namespace {

struct Planner {
  const Program& p;
  const std::vector<void*>& ptrs;
  const DenseDevice& dev;
  FusionPlan plan;

  void decide(std::string line) { plan.decisions.push_back(std::move(line)); }
  const char* name(int i) const { return p.ops()[i].name.c_str(); }

  int64_t width(TensorId t) const { return p.tensor(t).shape.back(); }
  int64_t rows(TensorId t) const { return numel(p.tensor(t).shape) / width(t); }
  // Whether one of our kernels takes the product (the dense rules, dense_dispatch.h).
  bool own(int64_t M, int64_t N, int64_t K, bool rows = false) const { return prefer_own_gemm({M, N, K, rows}, dev); }

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
      const std::string what = cat("fuse: ops ", b, ",", q, " -> dX of '", name(b), "' times the ",
                                   activation_name(act), "' of '", name(q), "'");
      if (own(B, I, O)) {
        if (act != Activation::None && (!activation_needs_preact(act) || qop.in[4] != kNone)) {
          plan.into[static_cast<int>(b)] = q;
          decide(cat(what, " (our kernel's epilogue, ", B, "x", I, "x", O, ")"));
        }
        continue;
      }
      if (act == Activation::ReLU) {
        plan.relu_mask.insert(P);
        plan.into[static_cast<int>(b)] = q;
        decide(cat(what, " (cuBLASLt DRELU epilogue; op ", P, " keeps its relu mask)"));
      } else if (act == Activation::GELU && qop.in[4] != kNone && qwidth % 8 == 0) {
        plan.into[static_cast<int>(b)] = q;
        decide(cat(what, " (cuBLASLt DGELU epilogue)"));
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
      decide(cat("fuse: ops ", b, ",", q, " -> the jet backward '", name(q), "' forms dY = dZ W of the one-output layer '",
                 name(b), "' (that dY is never stored)"));
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
      decide(cat("fuse: ops ", b, ",", q, " -> the jet backward also forms the dW and db of '", name(b),
                 "' (its input recomputed from the activation's jet)"));
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
      decide(cat("fuse: ops ", pr, ",", f, " -> the Fourier kernel of '", name(f), "' projects the inputs itself (",
                 "the projection's jet is not read back)"));
      const JetAttrs& fa = ops[f].attr<JetAttrs>();
      if (seed && ops[x].in.size() <= 2 && ops[x].attr<JetAttrs>().head == fa.head &&
          same_jet(ops[x].attr<JetAttrs>().jet, fa.jet) && only_reader(ops[pr].in[0], OpKind::Dense, 0) == pr) {
        plan.seed_into_fourier[static_cast<int>(f)] = x;
        decide(cat("fuse: ops ", x, ",", f, " -> the Fourier kernel reads the points and writes the seed jet of '",
                   name(x), "'"));
      }
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
      decide(cat("fuse: ops ", j - 1, ",", j, " -> one jet dense launch: the product, bias and ", activation_name(ja.act),
                 " jet (W in shared memory)"));
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
    decide(cat("fuse: ops ", j, ",", j + 1, " -> the one-output layer '", h.name, "' in the jet dense epilogue (from Y in registers)"));
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
      if (!apart) continue;
      plan.jet_dense_backward[static_cast<int>(j)] = static_cast<int>(j - 1);
      decide(cat("fuse: ops ", j - 1, ",", j, " -> the input-gradient product applies the ", activation_name(ja.act),
                 " jet derivative (dY never stored)"));
    }
  }
  static bool in_values(const std::map<int, int>& m, int i) {
    return std::any_of(m.begin(), m.end(), [&](const auto& kv) { return kv.second == i; });
  }
  // A dense op another launch already computes (the Fourier kernel's projection, a jet dense
  // kernel's output layer).
  bool done_elsewhere(int i) const { return in_values(plan.fourier_seeded, i) || in_values(plan.jet_dense_head, i); }

  // A last dense layer (no activation, at most 32 outputs) read by the softmax cross-entropy
  // right after it: both in one kernel (the product is tiny; its launch was not).
  void loss_dense() {
    const auto& ops = p.ops();
    for (size_t d = 0; d + 1 < ops.size(); ++d) {
      const Op &op = ops[d], &next = ops[d + 1];
      if (op.kind != OpKind::Dense || done_elsewhere(static_cast<int>(d))) continue;
      const DenseAttrs& a = op.attr<DenseAttrs>();
      const int64_t C = p.tensor(op.in[1]).shape[0], I = p.tensor(op.in[1]).shape[1];
      // Token rows too ([B, S, I] inputs, labels per position with -1 for none).
      if (a.act != Activation::None || a.bias_rows != 0 || op.out[1] != kNone ||
          next.kind != OpKind::SoftmaxCrossEntropy || next.in[0] != op.out[0] || !fused_loss_fits(C, I))
        continue;
      const int l = static_cast<int>(d) + 1;
      // The fused kernel computes the plain loss only; a smoothed or weighted one has its own.
      const LossAttrs& la = next.attr<LossAttrs>();
      if (la.label_smoothing != 0 || !la.class_weights.empty()) {
        decide(cat("not fused: ops ", d, ",", l, ": dense+softmax_ce computes the loss without label smoothing or "
                   "class weights"));
        continue;
      }
      plan.loss_dense[l] = static_cast<int>(d);
      decide(cat("fuse: ops ", d, ",", l, " -> dense+softmax_ce (last layer ", C, " outputs <= 32, no activation)"));
      loss_dx(l, next, op);
    }
  }
  // The fused loss kernel of op l (which computes dense op d) also writes the input gradient of
  // the dense backward right after it, where that backward would launch dX on its own: its dW
  // split over k or on cuBLASLt. Not where dW and dX share one launch, for skinny layers (their
  // kernel does all three), an accumulating dX, or where dX's memory may not be written at op l.
  void loss_dx(int l, const Op& loss, const Op& d) {
    const auto& ops = p.ops();
    const size_t j = static_cast<size_t>(l) + 1;
    if (j >= ops.size()) return;
    const Op& bw = ops[j];
    if (bw.kind != OpKind::DenseBackward || bw.in[0] != loss.out[1] || bw.in[1] != d.in[0] || bw.in[2] != d.in[1] ||
        bw.out[0] == kNone || bw.accumulate[0] != 0)
      return;
    const int64_t B = rows(d.in[0]), I = width(d.in[0]), O = p.tensor(d.in[1]).shape[0];
    const bool one_launch = own(O, I, B, true) && own_gemm_splits(O, I, B, true, false, dev) == 1 && own(B, I, O);
    if (one_launch || skinny_dense(B, O, I)) return;
    if (const std::string why = early_write_refusal(p, ptrs, l, static_cast<int>(j)); !why.empty()) {
      decide(cat("not fused: ops ", l, ",", j, ": the loss kernel does not write dX of '", bw.name, "' (", why, ")"));
      return;
    }
    plan.loss_dx.insert(static_cast<int>(j));
    decide(cat("fuse: ops ", l, ",", j, " -> the loss kernel also writes dX of '", bw.name, "' (", B, "x", I, "x", O,
               "; its dW runs apart)"));
  }

  // A cuBLASLt jet layer (bias on the value rows only, no activation, no pre-activation kept)
  // whose output only the jet activation right after it reads: that kernel adds the bias.
  void jet_bias() {
    const auto& ops = p.ops();
    for (size_t d = 0; d + 1 < ops.size(); ++d) {
      const Op &op = ops[d], &next = ops[d + 1];
      if (op.kind != OpKind::Dense || done_elsewhere(static_cast<int>(d)) || plan.loss_dense.count(static_cast<int>(d) + 1) ||
          in_values(plan.jet_dense_forward, static_cast<int>(d)))
        continue;
      const DenseAttrs& a = op.attr<DenseAttrs>();
      const int64_t B = rows(op.in[0]), I = width(op.in[0]), O = p.tensor(op.in[1]).shape[0];
      const bool some_rows = a.bias_rows > 0 && a.bias_rows < B;
      if (!some_rows || skinny_dense(B, O, I) || own(B, O, I)) continue;  // those kernels add it
      if (op.in[2] == kNone || a.act != Activation::None || op.out[1] != kNone || next.kind != OpKind::JetActivation ||
          next.in[0] != op.out[0])
        continue;
      plan.jet_bias[static_cast<int>(d) + 1] = static_cast<int>(d);
      decide(cat("fuse: ops ", d, ",", d + 1, " -> the jet activation adds the bias of '", op.name, "' to its ",
                 a.bias_rows, " value rows"));
    }
  }

  // Expression losses: two terms of one network pass in one launch; the Add summing a term onto
  // the total done by that term's launch (its last block).
  void expression_losses() {
    const auto& ops = p.ops();
    auto sum_after = [&](size_t term, int launcher) {
      if (term + 1 >= ops.size()) return;
      const Op &op = ops[term], &add = ops[term + 1];
      if (add.kind == OpKind::Add && add.in[1] == op.out[1] && add.in[0] != op.out[1] &&
          numel(p.tensor(add.out[0]).shape) == 1 && !add.accumulate[0]) {
        plan.loss_sum[static_cast<int>(term) + 1] = launcher;
        decide(cat("fuse: ops ", term, ",", term + 1, " -> the loss kernel of '", name(launcher),
                   "' adds the term onto the total"));
      }
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.kind != OpKind::ExpressionLoss || plan.merged_loss.count(static_cast<int>(i))) continue;
      sum_after(i, static_cast<int>(i));
      const Op* next = i + 1 < ops.size() ? &ops[i + 1] : nullptr;
      if (next && next->kind == OpKind::ExpressionLoss && next->in[0] == op.in[0] && next->out[0] == kNone &&
          op.out[0] == kNone) {
        plan.merged_loss[static_cast<int>(i) + 1] = static_cast<int>(i);
        decide(cat("fuse: ops ", i, ",", i + 1, " -> both loss terms of one network pass in one launch"));
        sum_after(i + 1, static_cast<int>(i));
      }
    }
  }

  // The schedule computed inside the optimizer launch that reads it.
  void schedule() {
    const auto& ops = p.ops();
    for (size_t i = 0; i + 1 < ops.size(); ++i) {
      const Op &op = ops[i], &u = ops[i + 1];
      if (op.kind == OpKind::Schedule && (u.kind == OpKind::SgdUpdate || u.kind == OpKind::AdamUpdate) &&
          u.in[1] == op.out[1]) {
        plan.schedule_in_update[static_cast<int>(i)] = static_cast<int>(i) + 1;
        decide(cat("fuse: ops ", i, ",", i + 1, " -> the schedule inside the optimizer launch (its last block advances the step)"));
      }
    }
  }

  // Batched weight gradients (wgrad_groups): a run's dZ and X must outlive their ops. The
  // trainer's memory plan keeps them (CudaBackend::lifetime_hints); a plan made without that
  // is checked here.
  void wgrad(const LowerOptions& opt) {
    for (std::vector<int>& run : wgrad_groups(p, opt, dev)) {
      const Op& first = p.ops()[run.front()];
      const int64_t I = width(first.in[1]), B = rows(first.in[1]), O = p.tensor(first.in[2]).shape[0];
      if (!wgrad_inputs_kept(run)) {
        decide(cat("weight gradients of ops ", run.front(), "-", run.back(),
                   " not batched: the memory plan reuses a layer's dZ or X before op ", run.back(),
                   " (planned without the backend's lifetime hints)"));
        continue;
      }
      decide(cat("batch: ops ", run.front(), "-", run.back(), " -> ", run.size(), " weight gradients ", O, "x", I, "x", B,
                 " in one launch at op ", run.back()));
      plan.wgrad_runs.push_back(std::move(run));
    }
  }
  // Whether no op after a run member and up to the run's last writes where its dY (dZ) or X lie.
  bool wgrad_inputs_kept(const std::vector<int>& run) const {
    for (size_t a = 0; a + 1 < run.size(); ++a) {
      const Op& op = p.ops()[run[a]];
      for (int j = run[a] + 1; j <= run.back(); ++j) {
        const Op& later = p.ops()[j];
        std::vector<TensorId> written = later.out;
        if (later.kind == OpKind::DenseBackward) written.push_back(later.in[0]);  // dY becomes dZ in place
        for (TensorId t : written)
          if (overlap(t, op.in[0]) || overlap(t, op.in[1])) return false;
      }
    }
    return true;
  }

  // A dense layer whose output an AbsMax op reads: one cuDNN graph computes both where the
  // graph can express the layer (the lowering tries it; cuDNN may still have no engine).
  void amax(bool fusion) {
    const auto& ops = p.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind != OpKind::Dense || done_elsewhere(static_cast<int>(i)) || plan.loss_dense.count(static_cast<int>(i) + 1))
        continue;
      int j = -1;
      for (size_t k = i + 1; k < ops.size() && j < 0; ++k)
        if (ops[k].kind == OpKind::AbsMax && ops[k].in[0] == ops[i].out[0]) j = static_cast<int>(k);
      if (j < 0) continue;
      const std::string why = fusion ? amax_refusal(static_cast<int>(i), j) : "fusion off";
      if (!why.empty()) {
        plan.amax_refused[j] = why;
        if (fusion) decide(cat("not fused: ops ", i, ",", j, ": amax on its own kernel (", why, ")"));
        continue;
      }
      plan.amax_graph[static_cast<int>(i)] = j;
      decide(cat("fuse: ops ", i, ",", j, " -> dense + amax in one cuDNN graph (where cuDNN has an engine for it)"));
    }
  }
  std::string amax_refusal(int i, int j) const {
#ifdef STEPGRAPH_HAVE_CUDNN
    const Op& op = p.ops()[i];
    const Activation act = op.attr<DenseAttrs>().act;
    if (std::string r = dense_amax_refusal(act); !r.empty()) return r;
    const int64_t br = op.attr<DenseAttrs>().bias_rows;
    if (br > 0 && br < rows(op.in[0])) return "a jet layer (the bias on the value rows only)";
    if (op.out[1] != kNone && act == Activation::None) return "a pre-activation of a layer without activation";
    return early_write_refusal(p, ptrs, i, j);
#else
    (void)i, (void)j;
    return "this build has no cuDNN (CMake did not find its headers)";
#endif
  }
};

}  // namespace

std::string early_write_refusal(const Program& p, const std::vector<void*>& ptrs, int i, int j) {
  const TensorId m = p.ops()[j].out[0];
  const char* mp = static_cast<const char*>(ptrs[m]);
  const size_t mb = static_cast<size_t>(numel(p.tensor(m).shape)) * sizeof(float);
  auto overlaps = [&](TensorId t) {
    if (t == kNone || t == m) return false;
    const char* tp = static_cast<const char*>(ptrs[t]);
    const size_t tb = static_cast<size_t>(numel(p.tensor(t).shape)) * sizeof(float);
    return tp < mp + mb && mp < tp + tb;
  };
  auto why = [&](TensorId t) { return cat("'", p.tensor(m).name, "' shares memory with '", p.tensor(t).name, "'"); };
  const auto& ops = p.ops();
  for (int k = i; k < j; ++k) {
    for (TensorId t : ops[k].out)
      if (overlaps(t)) return why(t);
    if (k == i)
      for (TensorId t : ops[k].in)
        if (overlaps(t)) return why(t);
  }
  return "";
}

FusionPlan plan_fusions(const Program& p, const std::vector<void*>& ptrs, const LowerOptions& opt, bool jet_dense,
                        const DenseDevice& dev) {
  Planner pl{p, ptrs, dev, {}};
  pl.plan.one_stream = one_stream_reason(p, opt);
  if (!opt.fusion) {
    pl.amax(false);
    return std::move(pl.plan);
  }
  pl.activation_backward();
  pl.jet_dy();
  pl.fourier_seeded();
  if (jet_dense) {
    pl.jet_dense_forward();
    pl.jet_dense_backward();
  }
  pl.loss_dense();
  pl.jet_bias();
  pl.amax(true);
  pl.expression_losses();
  pl.schedule();
  pl.wgrad(opt);
  return std::move(pl.plan);
}

}  // namespace sg::cuda
