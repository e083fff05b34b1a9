// Dense layers backward: activation derivative, dW/db and dX on our kernels or cuBLASLt, batched
// weight gradients of runs of layers; and AddBackward.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

namespace {

// The M x N x K weight gradient (dW = dZ^T X) a dense backward op would join a batch with, or
// nothing (wgrad_groups' rules).
std::optional<std::array<int64_t, 3>> wgrad_shape(const Program& p, const Op& op, const DenseDevice& d) {
  if (op.kind != OpKind::DenseBackward) return std::nullopt;
  const TensorId dY = op.in[0], X = op.in[1], W = op.in[2], dW = op.out[1], db = op.out[2];
  if (dW == kNone || op.accumulate[1] || (db != kNone && op.accumulate[2])) return std::nullopt;
  if (p.tensor(X).dtype != DType::F32 || p.tensor(dY).dtype != DType::F32) return std::nullopt;
  const int64_t I = p.tensor(X).shape.back(), B = numel(p.tensor(X).shape) / I, O = p.tensor(W).shape[0];
  const int64_t br = op.attr<DenseAttrs>().bias_rows;
  if ((br > 0 && br < B) || skinny_dense(B, O, I) || !wgrad_batchable(O, I, B, d)) return std::nullopt;
  return std::array<int64_t, 3>{O, I, B};
}

}  // namespace

std::vector<std::vector<int>> wgrad_groups(const Program& p, const LowerOptions& opt, const DenseDevice& d) {
  std::vector<std::vector<int>> runs;
  if (!opt.fusion || opt.comm || opt.precision == Precision::TF32X3) return runs;
  for (const Op& op : p.ops())
    if (op.kind == OpKind::JetInput) return runs;  // the jet fusions take a PINN's dense backward ops
  std::vector<int> run;
  std::array<int64_t, 3> shape{};
  auto close = [&] {
    if (run.size() >= 2) runs.push_back(run);
    run.clear();
  };
  for (size_t i = 0; i < p.ops().size(); ++i) {
    const auto s = wgrad_shape(p, p.ops()[i], d);
    const bool joins = s && !run.empty() && run.back() + 1 == static_cast<int>(i) && *s == shape &&
                       run.size() < static_cast<size_t>(kWgradMaxBatch);
    if (!joins) close();
    if (!s) continue;
    run.push_back(static_cast<int>(i));
    shape = *s;
  }
  close();
  return runs;
}


ColumnSumScratch Lowering::column_sum_scratch(int64_t rows, int64_t cols) {
  ColumnSumScratch sc;
  const int chunks = column_sum_chunks(rows, cols);
  if (chunks > 1) {
    sc.partials = reinterpret_cast<float*>(own(static_cast<size_t>(chunks * cols) * sizeof(float)));
    sc.counters = reinterpret_cast<unsigned*>(own(static_cast<size_t>((cols + 31) / 32) * sizeof(unsigned)));
  }
  return sc;
}

void Lowering::add_to_wgrad_batch(int i, const Op& op, float* dz, bool need_db) {
  WgradRun& r = wgrad_runs_[wgrad_run_of_.at(i)];
  const int64_t B = rows(op.in[1]), I = width(op.in[1]), O = dim(op.in[2], 0);
  WgradBatch& b = r.batch;
  b.M = O, b.N = I, b.K = B, b.ldz = O, b.ldx = I, b.ldw = I;
  b.item[b.count++] = WgradItem{dz, f(op.in[1]), f(op.out[1]), need_db ? f(op.out[2]) : nullptr};
  if (i != r.ops.back()) {
    notes_ << "dW" << (need_db ? " + db" : "") << " in the batched weight-gradient launch at op " << r.ops.back() << "; ";
    return;
  }
  notes_ << "dW" << (need_db ? " + db" : "") << " of ops " << r.ops.front() << "-" << r.ops.back() << " in one launch ("
         << b.count << " x " << O << "x" << I << "x" << B << ", " << kWgradTile << "x" << kWgradTile
         << " tiles over the whole k, on the FP64 tensor cores); ";
  add_step(op, [b](cudaStream_t s) { wgrad_batch(b, s); });
}

void Lowering::dense_backward(int i, const Op& op) {
  const TensorId dY = op.in[0], X = op.in[1], W = op.in[2], Y = op.in[3], Z = op.in[4];
  const TensorId dX = op.out[0], dW = op.out[1], db = op.out[2];
  const int64_t B = rows(X), I = width(X), O = dim(W, 0);
  const Activation act = op.attr<DenseAttrs>().act;
  float* dz = f(dY);  // dY becomes dZ in place: nothing else reads it
  if (act != Activation::None && !dz_ready_.count(i)) {
    const float *y = f(Y), *z = f(Z);
    notes_ << activation_name(act) << "' kernel (in place); ";
    add_step(op, [=](cudaStream_t s) { act_backward_inplace(dz, y, z, B * O, act, s); });
  } else if (dz_ready_.count(i)) {
    notes_ << "dZ from the next layer's fused epilogue; ";
  }

  const bool need_db = db != kNone && !db_done_.count(i);
  if (skinny_dense(B, O, I) && dW != kNone && !fusions_.into.count(i)) {
    SkinnyDense g;
    g.R = B, g.I = I, g.O = O;
    g.X = f(X), g.W = f(W), g.dZ = dz, g.bias_rows = bias_rows(op, B);
    const auto later = std::find_if(fusions_.jet_dy.begin(), fusions_.jet_dy.end(), [&](const auto& kv) { return kv.second == i; });
    const bool dx_later = later != fusions_.jet_dy.end();
    if (dx_later && fusions_.jet_dy_weight.count(later->first)) {
      JetDY& w = skinny_grads_[i];
      w.dW = f(dW), w.dW_accumulate = op.accumulate[1] != 0;
      w.db = need_db ? f(db) : nullptr, w.db_accumulate = op.accumulate[2] != 0;
      notes_ << "done by '" << p_.ops()[later->first].name << "' (its jet backward forms dX, dW"
             << (w.db ? " and db" : "") << ")";
      return;
    }
    g.dX = dX != kNone && !dx_later ? f(dX) : nullptr, g.dX_accumulate = op.accumulate[0] != 0;
    g.dW = f(dW), g.dW_accumulate = op.accumulate[1] != 0;
    g.db = need_db ? f(db) : nullptr, g.db_accumulate = op.accumulate[2] != 0;
    float* partial = reinterpret_cast<float*>(own(skinny_backward_partial_floats(g) * sizeof(float)));
    notes_ << "skinny backward kernel (" << (g.dX ? "dX, " : "") << "dW" << (g.db ? " + db" : "")
           << " partial sums per block) + ordered sum" << (dx_later ? " (dX: in the next jet backward)" : "") << "; ";
    add_step(op, [g, partial](cudaStream_t s) { skinny_backward(g, partial, s); });
    return;
  }
  std::optional<DenseGemm> own_dw, own_dx;
  const bool batched = wgrad_run_of_.count(i) != 0;  // dW and db: add_to_wgrad_batch, after dX
  if (!batched && prefer_own("dW", O, I, B, /*rows=*/true)) {
    DenseGemm d;  // dW[o, i] = sum_b dZ[b, o] X[b, i]; db[o] = sum_b dZ[b, o] on the side
    d.M = O, d.N = I, d.K = B;
    d.A = dz, d.sam = 1, d.sak = O;
    d.B = f(X), d.sbk = I, d.sbn = 1;
    d.C = f(dW), d.ldc = I, d.accumulate = op.accumulate[1] != 0;
    if (need_db) d.rowsum = f(db), d.rowsum_accumulate = op.accumulate[2] != 0, d.rowsum_k = bias_rows(op, B);
    own_dw = d;
  } else if (!batched) {
    cublas_weight_gradient(i, op, need_db);
  }
  std::string dx_what = "dX";
  const int jet = fused_jet(fusions_.jet_dense_backward, i);
  const bool dx_done = fusions_.loss_dx.count(i) != 0 || jet >= 0;
  if (fusions_.loss_dx.count(i)) notes_ << "dX from the loss kernel; ";
  if (dX != kNone && !dx_done && prefer_own("dX", B, I, O)) {
    DenseGemm d;  // dX[b, i] = sum_o dZ[b, o] W[o, i], times the previous activation's derivative
    d.M = B, d.N = I, d.K = O;
    d.A = dz, d.sam = O, d.sak = 1;
    d.B = f(W), d.sbk = I, d.sbn = 1;
    d.C = f(dX), d.ldc = I, d.accumulate = op.accumulate[0] != 0;
    auto fuse = fusions_.into.find(i);
    if (fuse != fusions_.into.end()) {
      const Op& qop = p_.ops()[fuse->second];
      d.dact = qop.attr<DenseAttrs>().act;
      d.dact_y = f(qop.in[3]);
      d.dact_z = f(qop.in[4]);
      dz_ready_.insert(fuse->second);
      dx_what = cat("dX (fusing the ", activation_name(d.dact), "' of '", qop.name, "')");
    }
    own_dx = d;
  }
  // Both products of the layer in one launch when both are ours.
  if (own_dw && own_dx) {
    own_gemm(op, *own_dw, &*own_dx, cat(need_db ? "dW + db and " : "dW and ", dx_what, " in one kernel"));
  } else {
    if (own_dw) own_gemm(op, *own_dw, nullptr, need_db ? "dW + db kernel" : "dW kernel");
    if (own_dx) own_gemm(op, *own_dx, nullptr, dx_what + " kernel");
  }
  if (dX != kNone && !own_dx && !dx_done) cublas_input_gradient(i, op);
  if (batched) add_to_wgrad_batch(i, op, dz, need_db);
  if (jet >= 0) jet_dense_backward(op, p_.ops()[jet]);  // after dW: dA may take X's memory
}

void Lowering::cublas_weight_gradient(int i, const Op& op, bool need_db) {
  const TensorId dY = op.in[0], X = op.in[1], W = op.in[2];
  const TensorId dW = op.out[1], db = op.out[2];
  const int64_t B = rows(X), I = width(X), O = dim(W, 0);
  float* dz = f(dY);
  // dW[O, I] (column-major [I, O]) = X^T dZ; BGRADB sums dZ over the batch into db.
  GemmShape sw{false, true, I, O, B, I, O, I};
  GemmArgs aw{f(X), dz, f(dW), nullptr, nullptr, 0, op.accumulate[1] != 0};
  bool db_fused = false;
  GemmPlan* gw = nullptr;
  const int64_t br = bias_rows(op, B);
  if (fuse_ && need_db && !op.accumulate[2] && br == B) {
    GemmArgs ab = aw;
    ab.bias = f(db);
    gw = gemm(sw, CUBLASLT_EPILOGUE_BGRADB, ab);
    db_fused = gw != nullptr;
  }
  if (!gw) gw = gemm(sw, CUBLASLT_EPILOGUE_DEFAULT, aw);
  SG_REQUIRE(gw, "cuBLASLt has no algorithm for the weight gradient of '", op.name, "'");
  add_gemm(op, gw, "dW gemm");
  if (need_db && !db_fused) {
    float* dbp = f(db);
    const bool acc = op.accumulate[2];
    notes_ << "bias-gradient kernel; ";
    const ColumnSumScratch sc = column_sum_scratch(br, O);
    add_step(op, [=](cudaStream_t s) { column_sum(dz, dbp, br, O, acc, sc, s); });
  } else if (db != kNone && db_done_.count(i)) {
    notes_ << "db from the next layer's fused epilogue; ";
  }
}

void Lowering::cublas_input_gradient(int i, const Op& op) {
  const TensorId dY = op.in[0], X = op.in[1], W = op.in[2], dX = op.out[0];
  const int64_t B = rows(X), I = width(X), O = dim(W, 0);
  float* dz = f(dY);
  // dX[B, I] (column-major [I, B]) = W^T-view times dZ.
  GemmShape sx{false, false, I, B, O, I, O, I};
  GemmArgs ax{f(W), dz, f(dX), nullptr, nullptr, 0, op.accumulate[0] != 0};
  auto fuse = fusions_.into.find(i);
  if (fuse != fusions_.into.end()) {
    const int q = fuse->second;
    const Op& qop = p_.ops()[q];
    const Activation qa = qop.attr<DenseAttrs>().act;
    const bool bgrad = qop.out[2] != kNone && !qop.accumulate[2];
    GemmArgs af = ax;
    if (bgrad) af.bias = f(qop.out[2]);
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (qa == Activation::ReLU) {
      auto m = relu_mask_.find(p_.producer(qop.in[3]));
      if (m != relu_mask_.end()) {
        af.aux = m->second.first;
        af.aux_ld = m->second.second;
        epi = bgrad ? CUBLASLT_EPILOGUE_DRELU_BGRAD : CUBLASLT_EPILOGUE_DRELU;
      }
    } else {
      af.aux = f(qop.in[4]);
      af.aux_ld = I;
      epi = bgrad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    }
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
      if (GemmPlan* g = gemm(sx, epi, af)) {
        dz_ready_.insert(q);
        if (bgrad) db_done_.insert(q);
        return add_gemm(op, g, cat("dX gemm (fuses '", qop.name, "')").c_str());
      }
    }
  }
  GemmPlan* gx = gemm(sx, CUBLASLT_EPILOGUE_DEFAULT, ax);
  SG_REQUIRE(gx, "cuBLASLt has no algorithm for the input gradient of '", op.name, "'");
  add_gemm(op, gx, "dX gemm");
}

void Lowering::add_backward_op(int, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  const float* dy = f(in[0]);
  float *da = f(out[0]), *db = f(out[1]);
  const int64_t n = count(in[0]);
  const bool aa = op.accumulate[0], ab = op.accumulate[1];
  notes_ << "add_backward kernel";
  return add_step(op, [=](cudaStream_t s) { add_backward(dy, da, db, n, aa, ab, s); });
}

}  // namespace sg::cuda
