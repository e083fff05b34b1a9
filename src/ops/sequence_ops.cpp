// The sequence ops: shape rules, gradient rules and the CPU reference bindings.
#include "ops/sequence_ops.h"

#include <cmath>

#include "autodiff/grad_builder.h"
#include "backend/cpu/cpu_kernels.h"

namespace sg::ops {

void check_layer_norm(const OpCheck& c) {
  const TensorId X = c.in(0);
  c.expect(!c.shape(X).empty(), cat("input ", c.desc(X), " has no feature dimension"));
  const int64_t E = c.shape(X).back(), R = numel(c.shape(X)) / E;
  c.expect(c.shape(c.in(1)) == Shape{E} && c.shape(c.in(2)) == Shape{E},
           cat("gain ", c.desc(c.in(1)), " and shift ", c.desc(c.in(2)), " must be [", E, "] for the input ", c.desc(X)));
  c.same(X, c.out(0));
  c.expect(c.shape(c.out(1)) == Shape{R} && c.shape(c.out(2)) == Shape{R}, cat("row statistics must be [", R, "]"));
  c.expect(c.attr<NormAttrs>().eps > 0, "eps must be positive");
}

void grad_layer_norm(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::LayerNormBackward, {g.grad(op.out[0]), op.in[0], op.in[1], op.out[1], op.out[2]},
         {op.in[0], op.in[1], op.in[2]});
}

std::function<void()> cpu_layer_norm(const CpuBind& b) {
  const float *X = b.f(b.in(0)), *g = b.f(b.in(1)), *beta = b.f(b.in(2));
  float *Y = b.f(b.out(0)), *mean = b.f(b.out(1)), *rstd = b.f(b.out(2));
  const int64_t E = b.dim(b.in(1), 0), R = b.count(b.in(0)) / E;
  const double eps = b.attr<NormAttrs>().eps;
  return [=] { cpu::layer_norm(X, g, beta, Y, mean, rstd, R, E, eps); };
}

void check_layer_norm_backward(const OpCheck& c) {
  c.same(c.in(0), c.in(1));
  c.same(c.out(0), c.in(1));
  c.same(c.out(1), c.in(2));
  c.same(c.out(2), c.in(2));
}

std::function<void()> cpu_layer_norm_backward(const CpuBind& b) {
  const float *dY = b.f(b.in(0)), *X = b.f(b.in(1)), *g = b.f(b.in(2)), *mean = b.f(b.in(3)), *rstd = b.f(b.in(4));
  float *dX = b.f(b.out(0)), *dg = b.f(b.out(1)), *db = b.f(b.out(2));
  const int64_t E = b.dim(b.in(2), 0), R = b.count(b.in(1)) / E;
  const bool ax = b.accumulate(0), ag = b.accumulate(1), ab = b.accumulate(2);
  return [=] { cpu::layer_norm_backward(dY, X, g, mean, rstd, dX, dg, db, R, E, ax, ag, ab); };
}

void check_embedding(const OpCheck& c) {
  const TensorId ids = c.in(0), table = c.in(1), pos = c.in(2);
  c.rank(ids, 2);
  c.rank(table, 2);
  const DType it = c.dtype(ids);
  c.expect(it == DType::I32 || it == DType::F32, cat("ids ", c.desc(ids), " must be i32 or f32, got ", dtype_name(it)));
  const int64_t B = c.shape(ids)[0], S = c.shape(ids)[1], E = c.shape(table)[1];
  if (pos != kNone) {
    c.rank(pos, 2);
    c.expect(c.shape(pos)[1] == E && c.shape(pos)[0] >= S,
             cat("position table ", c.desc(pos), " must be [P >= ", S, ", ", E, "] for ids ", c.desc(ids)));
  }
  c.expect(c.shape(c.out(0)) == Shape{B, S, E}, cat("output ", c.desc(c.out(0)), " must be ", shape_str({B, S, E})));
}

// The ids have no gradient.
void grad_embedding(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::EmbeddingBackward, {g.grad(op.out[0]), op.in[0]}, {op.in[1], op.in[2]});
}

std::function<void()> cpu_embedding(const CpuBind& b) {
  const bool i32_ids = b.tensor(b.in(0)).dtype == DType::I32;
  const int32_t* ids_i = i32_ids ? b.i32(b.in(0)) : nullptr;
  const float* ids_f = i32_ids ? nullptr : b.f(b.in(0));
  const float *table = b.f(b.in(1)), *pos = b.f(b.in(2));
  float* Y = b.f(b.out(0));
  const int64_t B = b.dim(b.in(0), 0), S = b.dim(b.in(0), 1), V = b.dim(b.in(1), 0), E = b.dim(b.in(1), 1);
  return [=] { cpu::embedding(ids_i, ids_f, table, pos, Y, B, S, V, E); };
}

void check_embedding_backward(const OpCheck& c) {
  c.rank(c.in(0), 3);
  const int64_t E = c.shape(c.in(0))[2];
  for (TensorId t : c.op().out)
    if (t != kNone) c.expect(c.shape(t).size() == 2 && c.shape(t)[1] == E, cat("gradient ", c.desc(t), " must be [rows, ", E, "]"));
}

std::function<void()> cpu_embedding_backward(const CpuBind& b) {
  const bool i32_ids = b.tensor(b.in(1)).dtype == DType::I32;
  const int32_t* ids_i = i32_ids ? b.i32(b.in(1)) : nullptr;
  const float* ids_f = i32_ids ? nullptr : b.f(b.in(1));
  const float* dY = b.f(b.in(0));
  float *dtable = b.f(b.out(0)), *dpos = b.f(b.out(1));
  const int64_t B = b.dim(b.in(0), 0), S = b.dim(b.in(0), 1), E = b.dim(b.in(0), 2);
  const int64_t V = b.out(0) == kNone ? 0 : b.dim(b.out(0), 0), P = b.out(1) == kNone ? 0 : b.dim(b.out(1), 0);
  const bool at = b.accumulate(0), ap = b.accumulate(1);
  return [=] { cpu::embedding_backward(dY, ids_i, ids_f, dtable, dpos, B, S, V, P, E, at, ap); };
}

void check_attention(const OpCheck& c) {
  const AttentionAttrs& a = c.attr<AttentionAttrs>();
  const TensorId Q = c.in(0);
  c.rank(Q, 3);
  c.same(Q, c.in(1));
  c.same(Q, c.in(2));
  c.same(Q, c.out(0));
  const Shape& qs = c.shape(Q);
  c.expect(a.heads >= 1 && qs[2] % a.heads == 0, cat("width ", qs[2], " of ", c.desc(Q), " does not split into ", a.heads, " heads"));
  c.expect(c.shape(c.out(1)) == Shape{qs[0], a.heads, qs[1]},
           cat("log-sum-exp ", c.desc(c.out(1)), " must be ", shape_str({qs[0], a.heads, qs[1]})));
  c.expect(a.scale >= 0, "scale must be >= 0 (0: 1 / sqrt(head dimension))");
}

void grad_attention(GradBuilder& g, const Op& op) {
  g.emit(op, OpKind::AttentionBackward, {g.grad(op.out[0]), op.in[0], op.in[1], op.in[2], op.out[0], op.out[1]},
         {op.in[0], op.in[1], op.in[2]});
}

namespace {

cpu::AttentionShape attention_shape(const CpuBind& b, TensorId Q) {
  const AttentionAttrs& at = b.attr<AttentionAttrs>();
  cpu::AttentionShape a;
  a.B = b.dim(Q, 0), a.S = b.dim(Q, 1), a.H = at.heads, a.D = b.dim(Q, 2) / at.heads;
  a.causal = at.causal;
  a.scale = at.scale > 0 ? at.scale : 1.0 / std::sqrt(static_cast<double>(a.D));
  return a;
}

}  // namespace

std::function<void()> cpu_attention(const CpuBind& b) {
  const cpu::AttentionShape a = attention_shape(b, b.in(0));
  const float *Q = b.f(b.in(0)), *K = b.f(b.in(1)), *V = b.f(b.in(2));
  float *O = b.f(b.out(0)), *L = b.f(b.out(1));
  return [=] { cpu::attention(Q, K, V, O, L, a); };
}

void check_attention_backward(const OpCheck& c) {
  for (size_t k = 1; k < 5; ++k) c.same(c.in(0), c.in(k));
  for (size_t k = 0; k < 3; ++k) c.same(c.out(k), c.in(1 + k));
}

std::function<void()> cpu_attention_backward(const CpuBind& b) {
  const cpu::AttentionShape a = attention_shape(b, b.in(1));
  const float *dO = b.f(b.in(0)), *Q = b.f(b.in(1)), *K = b.f(b.in(2)), *V = b.f(b.in(3)), *O = b.f(b.in(4)),
              *L = b.f(b.in(5));
  float *dQ = b.f(b.out(0)), *dK = b.f(b.out(1)), *dV = b.f(b.out(2));
  const bool aq = b.accumulate(0), ak = b.accumulate(1), av = b.accumulate(2);
  return [=] { cpu::attention_backward(dO, Q, K, V, O, L, dQ, dK, dV, a, aq, ak, av); };
}

std::string attention_attrs_text(const Op& op) {
  const AttentionAttrs& a = op.attr<AttentionAttrs>();
  return cat("(", a.heads, a.heads == 1 ? " head" : " heads", a.causal ? ", causal" : "", ")");
}

}  // namespace sg::ops
