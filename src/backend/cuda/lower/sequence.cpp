#include "backend/cuda/lower/sequence.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "backend/cuda/kernels/bf16_kernels.cuh"
#include "backend/cuda/kernels/sequence_kernels.cuh"
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/libs/cudnn_sdpa.h"
#endif

namespace sg::cuda {

namespace {

AttentionDims attention_dims(const Program& p, const Op& op) {
  const AttentionAttrs& at = op.attr<AttentionAttrs>();
  const Shape& q = p.tensor(op.kind == OpKind::Attention ? op.in[0] : op.in[1]).shape;
  AttentionDims a;
  a.B = q[0], a.S = q[1], a.H = at.heads, a.D = q[2] / at.heads;
  a.causal = at.causal;
  a.scale = static_cast<float>(at.scale > 0 ? at.scale : 1.0 / std::sqrt(static_cast<double>(a.D)));
  return a;
}

// "op 'x' (attention, queries [2, 8, 64], 4 heads of 16, causal)"
std::string attention_where(const Op& op, const AttentionDims& a) {
  return cat("op '", op.name, "' (", op_kind_name(op.kind), ", queries ", shape_str({a.B, a.S, a.H * a.D}), ", ", a.H,
             " heads of ", a.D, a.causal ? ", causal" : "", ")");
}

// cuDNN's fused attention cannot run this op: never a silent fall back to the fp32 kernels (the
// user asked for bf16 attention), but the way to get them.
[[noreturn]] void refuse_cudnn(const Op& op, const AttentionDims& a, const std::string& why) {
  throw Error(cat(attention_where(op, a), ": train.attention \"cudnn_bf16\" cannot run it: ", why,
                  "; use train.attention \"fp32\" (the CLI's --attention fp32) for the project's own fp32 attention "
                  "kernels"));
}

// Why cuDNN's fused SDPA cannot take attention of these dimensions in this build, as far as the
// host can tell before building a plan ("" when it may).
std::string cudnn_sdpa_refusal(const AttentionDims& a) {
#ifdef STEPGRAPH_HAVE_CUDNN
  if (a.D % 8 != 0 || a.D > 256)
    return cat("cuDNN's fused attention needs a head size that is a multiple of 8, at most 256 (got ", a.D, ")");
  return "";
#else
  (void)a;
  return "this build has no cuDNN (CMake found no cuDNN frontend headers; scripts/setup.sh installs them)";
#endif
}

}  // namespace

SequenceLowering::SequenceLowering(LoweringHooks h) : h_(std::move(h)) {}
SequenceLowering::~SequenceLowering() = default;

void SequenceLowering::check_supported(const Program& p, const Op& op, AttentionMode attention) {
  const auto where = [&] { return cat("op '", op.name, "' (", op_kind_name(op.kind), "): "); };
  if (op.kind == OpKind::Attention || op.kind == OpKind::AttentionBackward) {
    const AttentionDims a = attention_dims(p, op);
    if (attention == AttentionMode::CudnnBF16) {
      const std::string why = cudnn_sdpa_refusal(a);
      if (!why.empty()) refuse_cudnn(op, a, why);
    } else {
#ifdef STEPGRAPH_HAVE_CUDNN
      const char* other = a.D % 8 == 0 && a.D <= 256 ? ", train.attention \"cudnn_bf16\"" : "";
#else
      const char* other = "";
#endif
      SG_REQUIRE(a.D <= kAttentionMaxHeadDim, where(), "head dimension ", a.D, " (width ", a.H * a.D, " / ", a.H,
                 " heads, queries ", shape_str({a.B, a.S, a.H * a.D}),
                 ") is above the CUDA attention kernels' limit of ", kAttentionMaxHeadDim, "; use more heads", other,
                 ", or --device cpu");
    }
  }
  if (op.kind == OpKind::EmbeddingBackward && op.out[0] != kNone) {
    const int64_t V = p.tensor(op.out[0]).shape[0], T = numel(p.tensor(op.in[1]).shape);
    SG_REQUIRE(embedding_backward_supported(V, T), where(), "vocabulary ", V, " x ", T,
               " tokens per step is above the CUDA embedding gradient's limit (vocabulary x tokens <= ",
               kEmbeddingMaxIdReads, "); use smaller batches, or --device cpu");
  }
}

void SequenceLowering::layer_norm(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  std::ostream& notes = h_.notes;
  const float *X = f(in[0]), *g = f(in[1]), *b = f(in[2]);
  float *Y = f(out[0]), *mean = f(out[1]), *rstd = f(out[2]);
  const int64_t E = dim(in[1], 0), R = count(in[0]) / E;
  const float eps = static_cast<float>(op.attr<NormAttrs>().eps);
  notes << "layer norm kernel (a warp per row, " << R << " rows of " << E << ")";
  return h_.add_step(op, [=](cudaStream_t s) { sg::cuda::layer_norm(X, g, b, Y, mean, rstd, R, E, eps, s); });
}

void SequenceLowering::layer_norm_backward(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  std::ostream& notes = h_.notes;
  const float *dY = f(in[0]), *X = f(in[1]), *g = f(in[2]), *mean = f(in[3]), *rstd = f(in[4]);
  float *dX = f(out[0]), *dg = f(out[1]), *db = f(out[2]);
  const int64_t E = dim(in[2], 0), R = count(in[1]) / E;
  const bool ax = op.accumulate[0], ag = op.accumulate[1], ab = op.accumulate[2];
  const int64_t scratch_floats = (dg || db) ? layer_norm_grad_scratch_floats(R, E) : 0;
  LayerNormGradScratch scratch;
  if (scratch_floats) {
    scratch.partials = reinterpret_cast<float*>(h_.own(scratch_floats * sizeof(float)));
    scratch.counters = reinterpret_cast<unsigned*>(h_.own(static_cast<size_t>((E + 31) / 32) * sizeof(unsigned)));
  }
  notes << "layer norm backward kernel: dX a warp per row";
  if (dg || db) notes << ", gain/shift gradients in the same launch";
  if (scratch_floats) notes << " (" << layer_norm_grad_chunks(R, E) << " row chunks, summed in chunk order)";
  notes << "; deterministic";
  return h_.add_step(op, [=](cudaStream_t s) {
    sg::cuda::layer_norm_backward(dY, X, g, mean, rstd, dX, dg, db, R, E, ax, ag, ab, scratch, s);
  });
}

void SequenceLowering::embedding(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  std::ostream& notes = h_.notes;
  const bool i32_ids = h_.p.tensor(in[0]).dtype == DType::I32;
  const int32_t* ids_i = i32_ids ? static_cast<const int32_t*>(h_.ptrs[in[0]]) : nullptr;
  const float* ids_f = i32_ids ? nullptr : f(in[0]);
  const float *table = f(in[1]), *pos = f(in[2]);
  float* Y = f(out[0]);
  const int64_t B = dim(in[0], 0), S = dim(in[0], 1), V = dim(in[1], 0), E = dim(in[1], 1);
  notes << "embedding gather kernel" << (pos ? " (+ positions)" : "");
  return h_.add_step(op, [=](cudaStream_t s) { sg::cuda::embedding(ids_i, ids_f, table, pos, Y, B, S, V, E, s); });
}

void SequenceLowering::embedding_backward(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  std::ostream& notes = h_.notes;
  const bool i32_ids = h_.p.tensor(in[1]).dtype == DType::I32;
  const int32_t* ids_i = i32_ids ? static_cast<const int32_t*>(h_.ptrs[in[1]]) : nullptr;
  const float* ids_f = i32_ids ? nullptr : f(in[1]);
  const float* dY = f(in[0]);
  float *dtable = f(out[0]), *dpos = f(out[1]);
  const int64_t B = dim(in[0], 0), S = dim(in[0], 1), E = dim(in[0], 2);
  const int64_t V = out[0] == kNone ? 0 : dim(out[0], 0), P = out[1] == kNone ? 0 : dim(out[1], 0);
  const bool at = op.accumulate[0], ap = op.accumulate[1];
  notes << "embedding backward kernel: a block per vocabulary row summing its tokens' rows in token order"
        << (dpos ? ", the position gradient in the same launch" : "") << "; deterministic, no atomics";
  return h_.add_step(op, [=](cudaStream_t s) {
    sg::cuda::embedding_backward(dY, ids_i, ids_f, dtable, dpos, B, S, V, P, E, at, ap, s);
  });
}

void SequenceLowering::attention(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  std::ostream& notes = h_.notes;
  if (h_.opt.attention == AttentionMode::CudnnBF16) return attention_cudnn(op);
  const AttentionDims a = attention_dims(h_.p, op);
  const float *Q = f(in[0]), *K = f(in[1]), *V = f(in[2]);
  float *O = f(out[0]), *L = f(out[1]);
  notes << "attention kernel (a thread per query, online softmax, " << a.H << " heads of " << a.D
        << (a.causal ? ", causal" : "") << ")";
  return h_.add_step(op, [=](cudaStream_t s) { sg::cuda::attention(Q, K, V, O, L, a, s); });
}

void SequenceLowering::attention_backward(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  std::ostream& notes = h_.notes;
  if (h_.opt.attention == AttentionMode::CudnnBF16) return attention_backward_cudnn(op);
  const AttentionDims a = attention_dims(h_.p, op);
  const float *dO = f(in[0]), *Q = f(in[1]), *K = f(in[2]), *V = f(in[3]), *O = f(in[4]), *L = f(in[5]);
  float *dQ = f(out[0]), *dK = f(out[1]), *dV = f(out[2]);
  const bool aq = op.accumulate[0], ak = op.accumulate[1], av = op.accumulate[2];
  notes << "attention backward kernel: dQ blocks (a thread per query) and dK/dV blocks (a thread per key) in "
           "one launch, probabilities recomputed from the saved log-sum-exp; deterministic, no atomics";
  return h_.add_step(op, [=](cudaStream_t s) {
    sg::cuda::attention_backward(dO, Q, K, V, O, L, dQ, dK, dV, a, aq, ak, av, s);
  });
}

void* SequenceLowering::bf16_buffer(int64_t n) { return h_.own(static_cast<size_t>(n) * 2); }

#ifdef STEPGRAPH_HAVE_CUDNN

namespace {

// The backend's cuDNN handle (shared with the convolutions), made on first use.
std::shared_ptr<CudnnContext> cudnn_for(CudaBackend& be, const Op& op, const AttentionDims& a) {
  auto& slot = be.cudnn_context();
  if (!slot) {
    try {
      slot = make_cudnn_context();
    } catch (const Error& e) {  // libcudnn.so.9 missing, or no handle
      refuse_cudnn(op, a, e.what());
    }
  }
  return slot;
}

SdpaGeometry sdpa_geometry(const AttentionDims& a) {
  SdpaGeometry g;
  g.B = a.B, g.S = a.S, g.H = a.H, g.D = a.D, g.causal = a.causal, g.scale = a.scale;
  return g;
}

// (fp32 source, bf16 destination) pairs for one to_bf16 launch.
Bf16Pairs narrowing(std::initializer_list<std::pair<const float*, void*>> pairs) {
  Bf16Pairs p;
  for (const auto& [src, dst] : pairs) {
    p.f32_in[p.count] = src;
    p.bf16_out[p.count] = static_cast<__nv_bfloat16*>(dst);
    ++p.count;
  }
  return p;
}

std::string heads_note(const AttentionDims& a) {
  return cat(a.H, " heads of ", a.D, a.causal ? ", causal" : "");
}

}  // namespace

// Q, K, V to bf16 (kept for the backward), the fused forward writing bf16 O and the fp32
// log-sum-exp L straight into the op's L, then O back to fp32 for the ops that read it.
void SequenceLowering::attention_cudnn(const Op& op) {
  const AttentionDims a = attention_dims(h_.p, op);
  if (const std::string why = cudnn_sdpa_refusal(a); !why.empty()) refuse_cudnn(op, a, why);
  const int64_t n = a.B * a.S * a.H * a.D;
  const float *Q = f(op.in[0]), *K = f(op.in[1]), *V = f(op.in[2]);
  float *O = f(op.out[0]), *L = f(op.out[1]);
  Bf16Attention m;
  m.q = bf16_buffer(n), m.k = bf16_buffer(n), m.v = bf16_buffer(n), m.o = bf16_buffer(n);  // [B, S, H*D] bf16
  saved_[op.out[0]] = m;
  auto ctx = cudnn_for(h_.be, op, a);
  std::string why;
  std::shared_ptr<ConvPlan> plan;
  try {
    plan = sdpa_forward_plan(ctx, sdpa_geometry(a), m.q, m.k, m.v, m.o, L, &why);
  } catch (const Error& e) {
    why = e.what();
  }
  if (!plan) refuse_cudnn(op, a, why);
  plans_.push_back(plan);
  const Bf16Pairs in = narrowing({{Q, m.q}, {K, m.k}, {V, m.v}});
  Bf16Pairs out;
  out.count = 1;
  out.bf16_in[0] = static_cast<const __nv_bfloat16*>(m.o);
  out.f32_out[0] = O;
  h_.notes << "cuDNN fused SDPA (bf16 Q, K, V and O, fp32 accumulation and log-sum-exp; " << heads_note(a)
           << "): Q, K, V to bf16 kernel (round to nearest even); " << plan->describe() << "; O to fp32 kernel";
  h_.add_step(op, [=](cudaStream_t s) {
    to_bf16(in, n, s);
    plan->run(s);
    from_bf16(out, n, s);
  });
}

// dO to bf16, the deterministic fused backward from the forward's bf16 Q, K, V, O and its L,
// then dQ, dK, dV back to fp32 (added in where the op accumulates).
void SequenceLowering::attention_backward_cudnn(const Op& op) {
  const AttentionDims a = attention_dims(h_.p, op);
  if (const std::string why = cudnn_sdpa_refusal(a); !why.empty()) refuse_cudnn(op, a, why);
  const int64_t n = a.B * a.S * a.H * a.D;
  const float *dO = f(op.in[0]), *L = f(op.in[5]);
  if (!d_o_) {  // scratch for the largest attention backward of the program
    int64_t most = 0;
    for (const Op& o : h_.p.ops())
      if (o.kind == OpKind::AttentionBackward) most = std::max(most, count(o.in[1]));
    d_o_ = bf16_buffer(most), dq_ = bf16_buffer(most), dk_ = bf16_buffer(most), dv_ = bf16_buffer(most);
  }
  // The forward's bf16 copies; a backward without its forward in this program converts them.
  Bf16Pairs inputs, o_in;  // Q, K, V, and O in a second launch, when not saved
  Bf16Attention m;
  auto it = saved_.find(op.in[4]);
  const bool convert = it == saved_.end();
  if (convert) {
    m.q = bf16_buffer(n), m.k = bf16_buffer(n), m.v = bf16_buffer(n), m.o = bf16_buffer(n);
    inputs = narrowing({{f(op.in[1]), m.q}, {f(op.in[2]), m.k}, {f(op.in[3]), m.v}});
    o_in = narrowing({{f(op.in[4]), m.o}});
  } else {
    m = it->second;
  }
  auto ctx = cudnn_for(h_.be, op, a);
  std::string why;
  std::shared_ptr<ConvPlan> plan;
  try {
    plan = sdpa_backward_plan(ctx, sdpa_geometry(a), m.q, m.k, m.v, m.o, d_o_, L, dq_, dk_, dv_,
                              h_.opt.deterministic, &why);
  } catch (const Error& e) {
    why = e.what();
  }
  if (!plan) refuse_cudnn(op, a, why);
  plans_.push_back(plan);
  const Bf16Pairs d_in = narrowing({{dO, d_o_}});
  Bf16Pairs grads;
  const char* names[3] = {"dQ", "dK", "dV"};
  void* bf[3] = {dq_, dk_, dv_};
  std::string what, acc;
  for (int k = 0; k < 3; ++k) {
    if (op.out[k] == kNone) continue;
    grads.bf16_in[grads.count] = static_cast<const __nv_bfloat16*>(bf[k]);
    grads.f32_out[grads.count] = f(op.out[k]);
    grads.accumulate[grads.count] = op.accumulate[k] != 0;
    what += cat(what.empty() ? "" : ", ", names[k]);
    if (op.accumulate[k]) acc += cat(acc.empty() ? "" : ", ", names[k]);
    ++grads.count;
  }
  h_.notes << "cuDNN fused SDPA backward (bf16 dO, Q, K, V, O and gradients, fp32 accumulation; " << heads_note(a)
           << "): " << (convert ? "Q, K, V, O and " : "the forward's bf16 Q, K, V, O; ")
           << "dO to bf16 kernel; " << plan->describe();
  if (grads.count) h_.notes << "; " << what << " to fp32 kernel" << (acc.empty() ? "" : " (" + acc + " accumulate)");
  h_.add_step(op, [=](cudaStream_t s) {
    if (convert) {
      to_bf16(inputs, n, s);
      to_bf16(o_in, n, s);
    }
    to_bf16(d_in, n, s);
    plan->run(s);
    if (grads.count) from_bf16(grads, n, s);
  });
}

void SequenceLowering::finish() {
  if (plans_.empty()) return;
  const size_t most = share_workspace(plans_, h_.own);
  h_.notes << "  cuDNN SDPA plans: " << plans_.size() << ", workspace " << most
           << " bytes shared by them (bf16 attention: the heuristic's engine; train.autotune and the plan cache do "
              "not apply to them yet)\n";
}

#else  // no cuDNN: check_supported refuses AttentionMode::CudnnBF16 before lowering

void SequenceLowering::attention_cudnn(const Op& op) {
  const AttentionDims a = attention_dims(h_.p, op);
  refuse_cudnn(op, a, cudnn_sdpa_refusal(a));
}
void SequenceLowering::attention_backward_cudnn(const Op& op) { attention_cudnn(op); }
void SequenceLowering::finish() {}

#endif

}  // namespace sg::cuda
