#include "backend/cuda/sequence_lowering.h"

#include <cmath>

#include "backend/cuda/sequence_kernels.cuh"

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

}  // namespace

bool SequenceLowering::handles(OpKind k) {
  switch (k) {
    case OpKind::LayerNorm:
    case OpKind::LayerNormBackward:
    case OpKind::Embedding:
    case OpKind::EmbeddingBackward:
    case OpKind::Attention:
    case OpKind::AttentionBackward: return true;
    default: return false;
  }
}

void SequenceLowering::check_supported(const Program& p, const Op& op) {
  const auto where = [&] { return cat("op '", op.name, "' (", op_kind_name(op.kind), "): "); };
  if (op.kind == OpKind::Attention || op.kind == OpKind::AttentionBackward) {
    const AttentionDims a = attention_dims(p, op);
    SG_REQUIRE(a.D <= kAttentionMaxHeadDim, where(), "head dimension ", a.D, " (width ", a.H * a.D, " / ", a.H,
               " heads, queries ", shape_str({a.B, a.S, a.H * a.D}), ") is above the CUDA attention kernels' limit of ",
               kAttentionMaxHeadDim, "; use more heads, or --device cpu");
  }
  if (op.kind == OpKind::EmbeddingBackward && op.out[0] != kNone) {
    const int64_t V = p.tensor(op.out[0]).shape[0], T = numel(p.tensor(op.in[1]).shape);
    SG_REQUIRE(embedding_backward_supported(V, T), where(), "vocabulary ", V, " x ", T,
               " tokens per step is above the CUDA embedding gradient's limit (vocabulary x tokens <= ",
               kEmbeddingMaxIdReads, "); use smaller batches, or --device cpu");
  }
}

void SequenceLowering::lower(const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  std::ostream& notes = h_.notes;
  switch (op.kind) {
    case OpKind::LayerNorm: {
      const float *X = f(in[0]), *g = f(in[1]), *b = f(in[2]);
      float *Y = f(out[0]), *mean = f(out[1]), *rstd = f(out[2]);
      const int64_t E = dim(in[1], 0), R = count(in[0]) / E;
      const float eps = static_cast<float>(op.attr<NormAttrs>().eps);
      notes << "layer norm kernel (a warp per row, " << R << " rows of " << E << ")";
      return h_.add_step(op, [=](cudaStream_t s) { layer_norm(X, g, b, Y, mean, rstd, R, E, eps, s); });
    }
    case OpKind::LayerNormBackward: {
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
        layer_norm_backward(dY, X, g, mean, rstd, dX, dg, db, R, E, ax, ag, ab, scratch, s);
      });
    }
    case OpKind::Embedding: {
      const bool i32_ids = h_.p.tensor(in[0]).dtype == DType::I32;
      const int32_t* ids_i = i32_ids ? static_cast<const int32_t*>(h_.ptrs[in[0]]) : nullptr;
      const float* ids_f = i32_ids ? nullptr : f(in[0]);
      const float *table = f(in[1]), *pos = f(in[2]);
      float* Y = f(out[0]);
      const int64_t B = dim(in[0], 0), S = dim(in[0], 1), V = dim(in[1], 0), E = dim(in[1], 1);
      notes << "embedding gather kernel" << (pos ? " (+ positions)" : "");
      return h_.add_step(op, [=](cudaStream_t s) { embedding(ids_i, ids_f, table, pos, Y, B, S, V, E, s); });
    }
    case OpKind::EmbeddingBackward: {
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
        embedding_backward(dY, ids_i, ids_f, dtable, dpos, B, S, V, P, E, at, ap, s);
      });
    }
    case OpKind::Attention: {
      const AttentionDims a = attention_dims(h_.p, op);
      const float *Q = f(in[0]), *K = f(in[1]), *V = f(in[2]);
      float *O = f(out[0]), *L = f(out[1]);
      notes << "attention kernel (a thread per query, online softmax, " << a.H << " heads of " << a.D
            << (a.causal ? ", causal" : "") << ")";
      return h_.add_step(op, [=](cudaStream_t s) { attention(Q, K, V, O, L, a, s); });
    }
    case OpKind::AttentionBackward: {
      const AttentionDims a = attention_dims(h_.p, op);
      const float *dO = f(in[0]), *Q = f(in[1]), *K = f(in[2]), *V = f(in[3]), *O = f(in[4]), *L = f(in[5]);
      float *dQ = f(out[0]), *dK = f(out[1]), *dV = f(out[2]);
      const bool aq = op.accumulate[0], ak = op.accumulate[1], av = op.accumulate[2];
      notes << "attention backward kernel: dQ blocks (a thread per query) and dK/dV blocks (a thread per key) in "
               "one launch, probabilities recomputed from the saved log-sum-exp; deterministic, no atomics";
      return h_.add_step(op, [=](cudaStream_t s) {
        attention_backward(dO, Q, K, V, O, L, dQ, dK, dV, a, aq, ak, av, s);
      });
    }
    default: break;
  }
  throw Error(cat("cuda backend: no sequence lowering for op '", op.name, "'"));
}

}  // namespace sg::cuda
