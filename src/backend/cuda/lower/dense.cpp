// Dense layers forward (our fused kernel, cuBLASLt with epilogues, the skinny and jet kernels, the
// cuDNN dense+amax graph), the activation statistic, and Add.
#include "backend/cuda/lower/lowering.h"
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/libs/cudnn_dense.h"
#endif

namespace sg::cuda {

int64_t Lowering::bias_rows(const Op& op, int64_t B) const {
  const int64_t br = op.attr<DenseAttrs>().bias_rows;
  return br > 0 && br < B ? br : B;
}

void Lowering::dense_forward(int i, const Op& op) {
  const TensorId X = op.in[0], W = op.in[1], b = op.in[2], Y = op.out[0], Z = op.out[1];
  const int64_t B = rows(X), I = width(X), O = dim(W, 0);
  const Activation act = op.attr<DenseAttrs>().act;
  if (const auto it = fusions_.loss_dense.find(i + 1); it != fusions_.loss_dense.end() && it->second == i) {
    notes_ << "fused into the next op's loss kernel";
    return;
  }
  if (dense_with_amax(i, op)) return;
  if (fused_jet(fusions_.jet_dense_forward, i) >= 0) return jet_dense_forward(i, op);
  if (skinny_dense(B, O, I)) {
    SkinnyDense g;
    g.R = B, g.I = I, g.O = O;
    g.X = f(X), g.W = f(W), g.bias = f(b), g.bias_rows = bias_rows(op, B);
    g.Y = f(Y), g.Z = f(Z), g.act = act;
    notes_ << "skinny dense kernel (" << O << " output" << (O > 1 ? "s" : "")
           << ": a warp per row, W in shared memory, bias" << (g.bias_rows < B ? cat(" on the first ", g.bias_rows, " rows") : "")
           << " fused)";
    return add_step(op, [g](cudaStream_t s) { skinny_forward(g, s); });
  }
  GemmShape s{true, false, O, B, I, I, I, O};
  GemmArgs a{f(W), f(X), nullptr, f(b), nullptr, 0, false};
  const bool bias = b != kNone;
  const cublasLtEpilogue_t bias_epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  float *y = f(Y), *z = f(Z);
  const float* bp = f(b);

  if (prefer_own("Y", B, O, I)) {
    DenseGemm d;
    d.M = B, d.N = O, d.K = I;
    d.A = f(X), d.sam = I, d.sak = 1;
    d.B = f(W), d.sbk = 1, d.sbn = I;
    d.C = y, d.ldc = O;
    d.bias = bp, d.Z = z, d.act = act;
    d.bias_rows = bias_rows(op, B);
    return own_gemm(op, d, nullptr, "fused dense kernel (product + bias + activation)");
  }
  if (const int64_t br = bias_rows(op, B); br < B) {
    // A jet layer: a plain product, then the bias on the value rows only.
    float* pre = z ? z : y;
    GemmArgs ap = a;
    ap.D = pre;
    GemmPlan* g = gemm(s, CUBLASLT_EPILOGUE_DEFAULT, ap);
    SG_REQUIRE(g, "cuBLASLt has no algorithm for a plain fp32 product of ", B, "x", I, " by ", I, "x", O);
    add_gemm(op, g, "gemm");
    // The jet activation reading this output adds the bias itself (FusionPlan::jet_bias).
    if (const auto it = fusions_.jet_bias.find(i + 1); it != fusions_.jet_bias.end() && it->second == i) {
      notes_ << "bias added by the next op's jet kernel";
      return;
    }
    notes_ << "bias on the first " << br << " rows" << (act != Activation::None || z ? " + activation" : "") << " kernel";
    return add_step(op, [=](cudaStream_t st) {
      bias_act_forward(pre, bp, z, y, br, O, act, st);
      if (act != Activation::None || z != nullptr)
        bias_act_forward(pre + br * O, nullptr, z ? z + br * O : nullptr, y + br * O, B - br, O, act, st);
    });
  }

  if (fuse_ && act == Activation::ReLU) {
    if (fusions_.relu_mask.count(i)) {
      const int64_t ld = (O + 127) / 128 * 128;  // in bits
      GemmArgs am = a;
      am.D = y;
      am.aux = own(static_cast<size_t>(ld / 8 * B));
      am.aux_ld = ld;
      if (GemmPlan* g = gemm(s, bias ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_AUX, am)) {
        relu_mask_[i] = {am.aux, ld};
        return add_gemm(op, g, "gemm");
      }
    }
    GemmArgs ar = a;
    ar.D = y;
    if (GemmPlan* g = gemm(s, bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU, ar))
      return add_gemm(op, g, "gemm");
  }
  if (fuse_ && act == Activation::GELU && O % 8 == 0) {
    GemmArgs ag = a;
    ag.D = y;
    ag.aux = z;
    ag.aux_ld = O;
    if (GemmPlan* g = gemm(s, bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX, ag))
      return add_gemm(op, g, "gemm");
  }
  if (act == Activation::None) {
    GemmArgs an = a;
    an.D = y;
    if (GemmPlan* g = gemm(s, fuse_ ? bias_epi : CUBLASLT_EPILOGUE_DEFAULT, an)) {
      add_gemm(op, g, "gemm");
      if (!fuse_ && bias) add_step(op, [=](cudaStream_t st) { bias_act_forward(y, bp, nullptr, y, B, O, act, st); });
      return;
    }
  }
  // Product (with the bias epilogue when possible) into z (or y), then our activation kernel.
  float* pre = z ? z : y;
  GemmArgs ap = a;
  ap.D = pre;
  GemmPlan* g = fuse_ ? gemm(s, bias_epi, ap) : nullptr;
  const bool bias_done = g != nullptr && bias;
  if (!g) g = gemm(s, CUBLASLT_EPILOGUE_DEFAULT, ap);
  SG_REQUIRE(g, "cuBLASLt has no algorithm for a plain fp32 product of ", B, "x", I, " by ", I, "x", O);
  add_gemm(op, g, "gemm");
  const float* badd = bias_done ? nullptr : bp;
  notes_ << "bias+" << activation_name(act) << " kernel";
  add_step(op, [=](cudaStream_t st) { bias_act_forward(pre, badd, z, y, B, O, act, st); });
}

bool Lowering::dense_with_amax(int i, const Op& op) {
  const auto planned = fusions_.amax_graph.find(i);
  if (planned == fusions_.amax_graph.end()) return false;
  const int j = planned->second;
  std::string why;
  try {
    why = try_dense_amax(i, j, op);
  } catch (const std::exception& e) {  // building or trying the plan failed: keep today's path
    why = e.what();
  }
  if (why.empty()) return true;
  std::replace(why.begin(), why.end(), '\n', ' ');  // one line per op in explain
  amax_not_in_graph_[j] = why;                       // said on the AbsMax op's line
  return false;
}

// The FP8 scaling statistic of a dense layer's output.
void Lowering::abs_max_op(int i, const Op& op) {
  if (auto it = amax_in_graph_.find(i); it != amax_in_graph_.end()) {
    notes_ << "computed by the dense layer's cuDNN graph (op " << it->second << " '" << p_.ops()[it->second].name << "')";
    return;
  }
  if (auto it = amax_not_in_graph_.find(i); it != amax_not_in_graph_.end())
    notes_ << "[not in a cuDNN graph: " << it->second << "] ";
  else if (auto r = fusions_.amax_refused.find(i); r != fusions_.amax_refused.end())
    notes_ << "[not in a cuDNN graph: " << r->second << "] ";
  const float* x = f(op.in[0]);
  float* m = f(op.out[0]);
  const int64_t n = count(op.in[0]);
  float* partials = reinterpret_cast<float*>(own(abs_max_blocks(n) * sizeof(float)));
  notes_ << "max |x| kernel (" << abs_max_blocks(n) << " blocks, then one)";
  add_step(op, [=](cudaStream_t s) { abs_max(x, n, partials, m, s); });
}

void Lowering::dense_op(int i, const Op& op) {
  for (const auto& [ff, pr] : fusions_.fourier_seeded)
    if (pr == i) {
      notes_ << "done by '" << p_.ops()[ff].name << "' (its Fourier jet kernel projects the inputs itself)";
      return;
    }
  for (const auto& [jet, h] : fusions_.jet_dense_head)
    if (h == i) {
      notes_ << "done by '" << p_.ops()[jet - 1].name << "' (its jet dense kernel forms this one output from Y in registers)";
      return;
    }
  return dense_forward(i, op);
}

void Lowering::add_op(int i, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  if (const auto it = fusions_.loss_sum.find(i); it != fusions_.loss_sum.end()) {
    notes_ << "done by '" << p_.ops()[it->second].name << "' (its expression loss launch adds the sum)";
    return;
  }
  const float *a = f(in[0]), *b = f(in[1]);
  float* y = f(out[0]);
  const int64_t n = count(out[0]);
  notes_ << "add kernel";
  return add_step(op, [=](cudaStream_t s) { add(a, b, y, n, s); });
}

#ifdef STEPGRAPH_HAVE_CUDNN

std::string Lowering::try_dense_amax(int i, int j, const Op& op) {
  const TensorId X = op.in[0], W = op.in[1], b = op.in[2], Y = op.out[0], Z = op.out[1];
  const Activation act = op.attr<DenseAttrs>().act;
  const int64_t B = rows(X), I = width(X), O = dim(W, 0);
  auto& slot = be_.cudnn_context();
  if (!slot) slot = make_cudnn_context();  // throws naming what is missing (libcudnn.so.9)
  if (!dense_cache_) dense_cache_ = std::make_unique<plan_cache::PlanCache>(plan_cache::resolve_dir(opt_.plan_cache));
  ConvPlanOptions o;
  o.precision = opt_.precision;
  o.autotune = opt_.autotune;
  o.deterministic = opt_.deterministic;
  o.stream = be_.stream();
  o.cache = dense_cache_.get();
  DenseAmaxGeometry g;
  g.B = B, g.I = I, g.O = O, g.bias = b != kNone, g.preact = Z != kNone, g.act = act, g.scale = 1.0f;
  std::string why;
  std::shared_ptr<ConvPlan> plan =
      dense_amax_plan(slot, g, f(X), f(W), f(b), f(Y), f(Z), f(p_.ops()[j].out[0]), o, &why);
  if (!plan) return why;
  dense_plans_.push_back(plan);
  amax_in_graph_[j] = i;
  notes_ << plan->describe() << " (computes '" << p_.ops()[j].name << "')";
  add_step(op, [plan](cudaStream_t s) { plan->run(s); });
  return "";
}

void Lowering::finish_cudnn_dense() {
  if (dense_plans_.empty()) return;
  const size_t most = share_workspace(dense_plans_, [this](size_t bytes) { return own(bytes); });
  notes_ << "  cuDNN dense+amax graphs: " << dense_plans_.size() << ", workspace " << most << " bytes; plan cache "
         << (dense_cache_ && dense_cache_->enabled() ? dense_cache_->dir() : std::string("off")) << "\n";
}

#else

std::string Lowering::try_dense_amax(int, int, const Op&) { return "this build has no cuDNN (CMake did not find its headers)"; }

void Lowering::finish_cudnn_dense() {}

#endif

}  // namespace sg::cuda
