// Physics-informed ops: jets, Fourier features, collocation points and expression losses, with
// the jet fusions of fusion_plan.h.
#include "backend/cuda/lower/lowering.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace sg::cuda {

ExprTerm Lowering::expression_term(int i, const Op& op, int launcher) {
  const ExprLossAttrs& a = op.attr<ExprLossAttrs>();
  const std::vector<pinn::TapeInstr> tape = a.expr->tape();
  SG_REQUIRE(a.vars.size() <= 64, "op '", op.name, "': ", a.vars.size(), " expression variables (at most 64)");
  ExprTerm t;
  t.M = dim(op.in[1], 0), t.d = dim(op.in[1], 1), t.O = dim(op.in[0], 1);
  ExprLossDevice& e = t.e;
  e.n = static_cast<int>(tape.size());
  e.nvars = static_cast<int>(a.vars.size());
  e.blocks = expression_loss_blocks(t.M);
  auto* dtape = reinterpret_cast<pinn::TapeInstr*>(own(tape.size() * sizeof(pinn::TapeInstr)));
  auto* dvars = reinterpret_cast<ExprVar*>(own(std::max<size_t>(1, a.vars.size()) * sizeof(ExprVar)));
  be_.upload(dtape, tape.data(), tape.size() * sizeof(pinn::TapeInstr));
  if (!a.vars.empty()) be_.upload(dvars, a.vars.data(), a.vars.size() * sizeof(ExprVar));
  e.partials = reinterpret_cast<double*>(own(e.blocks * sizeof(double)));
  e.counter = reinterpret_cast<unsigned*>(own(sizeof(unsigned)));
  be_.synchronize();
  e.tape = dtape;
  e.vars = dvars;
  // This term's rows of U (and dU): a network pass may be shared by several terms.
  t.U = f(op.in[0]) + a.row0 * t.O, t.X = f(op.in[1]);
  t.total = f(op.out[0]), t.term = f(op.out[1]), t.dU = f(op.out[2]) + a.row0 * t.O;
  t.K = a.K;
  t.weight = a.weight;
  t.accumulate_total = op.accumulate[0];
  notes_ << e.n << "-instruction tape in fp64, " << e.blocks << " blocks";
  // The next op sums this term onto the earlier ones (the loss total): a one-element Add that
  // this kernel's last block does (FusionPlan::loss_sum).
  if (const auto it = fusions_.loss_sum.find(i + 1); it != fusions_.loss_sum.end() && it->second == launcher) {
    const Op& add = p_.ops()[i + 1];
    e.sum_in = f(add.in[0]), e.sum = f(add.out[0]);
    notes_ << ", also the sum '" << add.name << "'";
  }
  return t;
}

void Lowering::expression_loss_op(int i, const Op& op) {
  if (const auto it = fusions_.merged_loss.find(i); it != fusions_.merged_loss.end()) {
    notes_ << "done by '" << p_.ops()[it->second].name << "' (one launch for both terms)";
    return;
  }
  notes_ << "expression loss kernel: ";
  const ExprTerm first = expression_term(i, op, i);
  // The next op another term of the same network pass (a boundary term riding in the
  // residual's pass): both in one launch, their blocks side by side.
  if (const auto it = fusions_.merged_loss.find(i + 1); it != fusions_.merged_loss.end() && it->second == i) {
    const Op* next = &p_.ops()[i + 1];
    notes_ << "; and '" << next->name << "': ";
    auto second = std::make_shared<ExprTerm>(expression_term(i + 1, *next, i));
    unsigned* done = reinterpret_cast<unsigned*>(own(sizeof(unsigned)));
    notes_ << "; one launch, deterministic reductions";
    return add_step(op, [=](cudaStream_t s) { expression_loss(first, second.get(), done, s); });
  }
  notes_ << ", deterministic reduction";
  add_step(op, [=](cudaStream_t s) { expression_loss(first, nullptr, nullptr, s); });
}

int Lowering::fused_jet(const std::map<int, int>& plan, int i) {
  for (const auto& [jet, d] : plan)
    if (d == i) return jet;
  return -1;
}

void Lowering::jet_dense_forward(int i, const Op& op) {
  const Op& jet = p_.ops()[i + 1];
  const JetAttrs a = jet.attr<JetAttrs>();
  JetDense g;
  g.K = width(op.in[0]), g.N = dim(op.in[1], 0);
  g.head = a.head, g.B = (rows(op.in[0]) - a.head) / a.jet.K(), g.js = a.jet, g.act = a.act;
  g.X = f(op.in[0]), g.W = f(op.in[1]), g.bias = f(op.in[2]);
  g.Z = f(op.out[0]), g.Y = f(jet.out[0]);
  std::string head;
  if (const auto it = fusions_.jet_dense_head.find(i + 1); it != fusions_.jet_dense_head.end()) {
    const Op& h = p_.ops()[it->second];
    g.W2 = f(h.in[1]), g.bias2 = f(h.in[2]), g.U = f(h.out[0]);
    head = cat(" + the one-output layer '", h.name, "' from Y in registers");
  }
  jet_dense_step(op, g, cat("jet dense kernel: ", rows(op.in[0]), "x", g.N, "x", g.K, " product + bias + ",
                            activation_name(a.act), " jet of '", jet.name, "'", head));
}

void Lowering::jet_dense_backward(const Op& op, const Op& jet) {
  const JetAttrs a = jet.attr<JetAttrs>();
  JetDense g;
  g.backward = true;
  g.K = dim(op.in[2], 0), g.N = width(op.in[1]);
  g.head = a.head, g.B = (rows(op.in[1]) - a.head) / a.jet.K(), g.js = a.jet, g.act = a.act;
  g.X = f(op.in[0]), g.W = f(op.in[2]), g.A = f(jet.in[1]), g.dA = f(jet.out[0]);
  jet_dense_step(op, g, cat("dX + ", activation_name(a.act), " jet backward of '", jet.name, "' in the jet dense kernel ",
                            rows(op.in[1]), "x", g.N, "x", g.K));
}

void Lowering::jet_dense_step(const Op& op, const JetDense& g, const std::string& what) {
  SG_REQUIRE(jet_dense_aligned(g), "op '", op.name, "': the jet dense kernel needs 16-byte aligned tensors");
  notes_ << what << " (fp32, W in shared memory)" << (g.backward ? "; " : "");
  add_step(op, [g](cudaStream_t s) { jet_dense(g, s); });
}

void Lowering::jet_input_op(int i, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  for (const auto& [ff, seed] : fusions_.seed_into_fourier)
    if (seed == i) {
      notes_ << "done by '" << p_.ops()[ff].name << "' (its Fourier jet kernel reads the points and writes the jet)";
      return;
    }
  const float* X = f(in[0]);
  float* J = f(out[0]);
  const JetAttrs a = op.attr<JetAttrs>();
  const int64_t B = dim(in[0], 0);
  std::vector<JetHead> heads;
  for (size_t k = 1; k < in.size(); ++k) heads.push_back({f(in[k]), dim(in[k], 0)});
  notes_ << "jet seed kernel (" << a.jet.K() << " components)";
  if (!heads.empty()) notes_ << ", after the coordinates of " << a.head << " value-only points";
  return add_step(op, [=](cudaStream_t s) { jet_input(X, J, B, a.jet, heads, s); });
}

void Lowering::jet_activation_op(int i, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  float* A = f(in[0]);
  float* Y = f(out[0]);
  const JetAttrs a = op.attr<JetAttrs>();
  const int64_t B = (dim(in[0], 0) - a.head) / a.jet.K(), H = dim(in[0], 1);
  const std::string head = a.head ? cat(", after ", a.head, " value-only rows") : std::string();
  if (const auto it = fusions_.fourier_seeded.find(i); it != fusions_.fourier_seeded.end()) {
    const Op& pr = p_.ops()[it->second];
    const float *X = f(pr.in[0]), *Xh = nullptr, *Bm = f(pr.in[1]);
    float *P = f(pr.out[0]), *J = nullptr;
    const int64_t m = dim(pr.in[1], 0), d = dim(pr.in[1], 1);
    notes_ << "Fourier jet kernel (sincospi" << head << ", with '" << pr.name << "': the projected jet from "
           << "the inputs' value rows";
    if (const auto sd = fusions_.seed_into_fourier.find(i); sd != fusions_.seed_into_fourier.end()) {
      const Op& seed = p_.ops()[sd->second];  // the points, and the head's points before them
      X = f(seed.in[0]), Xh = seed.in.size() > 1 ? f(seed.in[1]) : nullptr, J = f(seed.out[0]);
      notes_ << "; with '" << seed.name << "': read from the points, the seed jet written on the side";
    }
    notes_ << ")";
    return add_step(op, [=](cudaStream_t s) { fourier_features_seeded(X, Xh, J, Bm, P, Y, a.head, B, m, d, a.jet, s); });
  }
  if (const auto it = fusions_.jet_dense_forward.find(i); it != fusions_.jet_dense_forward.end()) {
    notes_ << "done by '" << p_.ops()[it->second].name << "' (its jet dense kernel applies the activation)";
    return;
  }
  if (op.kind == OpKind::FourierFeatures) {
    notes_ << "Fourier jet kernel (sinpi/cospi" << head << ")";
    return add_step(op, [=](cudaStream_t s) { fourier_features(A, Y, a.head, B, H, a.jet, s); });
  }
  const auto fused = fusions_.jet_bias.find(i);
  const float* bias = fused == fusions_.jet_bias.end() ? nullptr : f(p_.ops()[fused->second].in[2]);
  notes_ << activation_name(a.act) << " jet kernel (" << a.jet.K() << " components" << head
         << (bias ? ", adds the dense layer's bias to the value rows" : "") << ")";
  return add_step(op, [=](cudaStream_t s) { jet_activation(A, bias, Y, a.head, B, H, a.jet, a.act, s); });
}

void Lowering::jet_activation_backward_op(int i, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  const float *dY = f(in[0]), *A = f(in[1]);
  float* dA = f(out[0]);
  const JetAttrs a = op.attr<JetAttrs>();
  const int64_t B = (dim(in[1], 0) - a.head) / a.jet.K(), H = dim(in[1], 1);
  const bool acc = op.accumulate[0];
  if (const auto it = fusions_.jet_dense_backward.find(i); it != fusions_.jet_dense_backward.end()) {
    notes_ << "done by '" << p_.ops()[it->second].name << "' (its input-gradient kernel applies the jet derivative)";
    return;
  }
  if (op.kind == OpKind::FourierFeaturesBackward) {
    notes_ << "Fourier jet backward kernel";
    return add_step(op, [=](cudaStream_t s) { fourier_features_backward(dY, A, dA, a.head, B, H, a.jet, acc, s); });
  }
  JetDY from;
  if (const auto it = fusions_.jet_dy.find(i); it != fusions_.jet_dy.end()) {
    const Op& d = p_.ops()[it->second];
    from.dZ = f(d.in[0]), from.W = f(d.in[2]);  // a one-output layer (fusion_plan.h)
    notes_ << activation_name(a.act) << " jet backward kernel (its dY = dZ W of '" << d.name
           << "' computed here, not stored";
    if (const auto g = skinny_grads_.find(it->second); g != skinny_grads_.end()) {
      from.dW = g->second.dW, from.dW_accumulate = g->second.dW_accumulate;
      from.db = g->second.db, from.db_accumulate = g->second.db_accumulate;
      from.partial = reinterpret_cast<float*>(own(jet_dy_weight_partial_floats(a.head, B, H) * sizeof(float)));
      notes_ << "; its dW" << (from.db ? " and db" : "") << " from the activation's jet recomputed here"
             << " in per-block partial sums + ordered sum";
    }
    notes_ << ")";
  } else {
    notes_ << activation_name(a.act) << " jet backward kernel";
  }
  return add_step(op, [=](cudaStream_t s) { jet_activation_backward(dY, from, A, dA, a.head, B, H, a.jet, a.act, acc, s); });
}

void Lowering::sample_points_op(int, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  const int32_t* step = i32(in[0]);
  float* X = f(out[0]);
  const SampleAttrs a = op.attr<SampleAttrs>();
  const int64_t M = dim(out[0], 0), d = dim(out[0], 1);
  notes_ << "counter-based sampling kernel (the CPU's draws, bit for bit)";
  return add_step(op, [=](cudaStream_t s) { sample_points(step, X, M, d, a, s); });
}

void Lowering::observed_points_op(int, const Op& op) {
  const std::vector<float>& table = *op.attr<ObservedAttrs>().table;
  const size_t bytes = table.size() * sizeof(float);
  float* src = reinterpret_cast<float*>(own(bytes));
  be_.upload(src, table.data(), bytes);
  be_.synchronize();
  float *X = f(op.out[0]), *XV = f(op.out[1]);
  const size_t N = static_cast<size_t>(dim(op.out[0], 0)), d = static_cast<size_t>(dim(op.out[0], 1)),
               w = static_cast<size_t>(dim(op.out[1], 1));
  notes_ << "two copies from the table uploaded at lowering";
  add_step(op, [=](cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(XV, src, bytes, cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaMemcpy2DAsync(X, d * sizeof(float), src, w * sizeof(float), d * sizeof(float), N,
                                 cudaMemcpyDeviceToDevice, s));
  });
}

}  // namespace sg::cuda
