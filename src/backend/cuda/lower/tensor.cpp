#include "backend/cuda/lower/tensor.h"

#include "backend/cuda/kernels/tensor_kernels.cuh"
#include "backend/dropout_math.h"

#include <utility>

namespace sg::cuda {

namespace {

// Y's axes after merging, for explain: "[7, 5] from [7, 5] and [1, 5]".
std::string shapes_text(const Shape& y, const Shape& a, const Shape& b) {
  return cat(shape_str(y), " from ", shape_str(a), " and ", shape_str(b));
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
  }
  return "?";
}

}  // namespace

bool TensorLowering::broadcasts(const Op& op) const {
  const Program& p = h_.p;
  const Shape& y = p.tensor(op.kind == OpKind::Add ? op.out[0] : op.in[0]).shape;
  const std::vector<TensorId>& operands = op.kind == OpKind::Add ? op.in : op.out;
  for (TensorId t : operands)
    if (t != kNone && p.tensor(t).shape != y) return true;
  return false;
}

void TensorLowering::binary(const Op& op) {
  const BinaryOp bop = binary_op_of(op.kind);
  const float *a = f(op.in[0]), *b = f(op.in[1]);
  float* y = f(op.out[0]);
  const Broadcast g = make_broadcast(shape(op.in[0]), shape(op.in[1]), shape(op.out[0]));
  h_.notes << binary_name(bop) << " kernel" << (g.rank > 1 || g.sa[0] == 0 || g.sb[0] == 0 ? " (broadcast " : " (")
           << shapes_text(shape(op.out[0]), shape(op.in[0]), shape(op.in[1])) << ")";
  h_.add_step(op, [=](cudaStream_t s) { cuda::binary(bop, a, b, y, g, s); });
}

// Each gradient a reduction over its broadcast axes (none: one term per element).
void TensorLowering::binary_backward(const Op& op) {
  const BinaryOp bop = binary_op_of(op.kind);
  const bool reads = op.in.size() == 3;
  const float *dy = f(op.in[0]), *a = reads ? f(op.in[1]) : nullptr, *b = reads ? f(op.in[2]) : nullptr;
  const Shape& sy = shape(op.in[0]);
  auto shape_of = [&](size_t k) -> Shape {
    if (reads) return shape(op.in[1 + k]);
    return op.out[k] != kNone ? shape(op.out[k]) : sy;
  };
  const Shape sa = shape_of(0), sb = shape_of(1);
  h_.notes << binary_name(bop) << "_backward:";
  for (size_t k = 0; k < 2; ++k) {
    float* dx = f(op.out[k]);
    if (!dx) continue;
    const BroadcastReduce g = make_broadcast_reduce(sa, sb, sy, k == 0);
    const int chunks = reduce_chunks(g);
    float* scratch = chunks > 1 ? reinterpret_cast<float*>(h_.own(sizeof(float) * chunks * g.count)) : nullptr;
    const bool acc = op.accumulate[k] != 0;
    h_.notes << " d" << (k == 0 ? "A" : "B") << " kernel";
    if (g.reduced > 1) h_.notes << " (sums " << g.reduced << " terms per element" << (chunks > 1 ? cat(" in ", chunks, " chunks") : "") << ")";
    h_.add_step(op, [=](cudaStream_t s) { reduce_terms(bop, k == 0, dy, a, b, dx, g, 1.0f, acc, scratch, s); });
  }
}

void TensorLowering::scale_shift(const Op& op) {
  const float* x = f(op.in[0]);
  float* y = f(op.out[0]);
  const int64_t n = count(op.out[0]);
  const ScaleShiftAttrs& at = op.attr<ScaleShiftAttrs>();
  const float a = static_cast<float>(at.a), b = static_cast<float>(at.b);
  const bool acc = op.accumulate[0] != 0;
  h_.notes << "scale_shift kernel";
  h_.add_step(op, [=](cudaStream_t s) { cuda::scale_shift(x, y, n, a, b, acc, s); });
}

void TensorLowering::activation(const Op& op) {
  const float* x = f(op.in[0]);
  float* y = f(op.out[0]);
  const int64_t n = count(op.out[0]);
  const Activation act = op.attr<ActivationAttrs>().act;
  const float p = static_cast<float>(activation_param(op.attr<ActivationAttrs>()));
  h_.notes << activation_name(act) << " kernel";
  h_.add_step(op, [=](cudaStream_t s) { cuda::activation(x, y, n, act, p, s); });
}

void TensorLowering::dropout(const Op& op) {
  const float* x = f(op.in[0]);
  const int32_t* step = static_cast<const int32_t*>(h_.ptrs[op.in[1]]);
  float* y = f(op.out[0]);
  const int64_t n = count(op.out[0]);
  const DropoutAttrs a = op.attr<DropoutAttrs>();
  const uint32_t threshold = dropout_threshold(a.p);
  const float scale = static_cast<float>(1.0 / (1.0 - a.p));
  const bool acc = op.accumulate[0] != 0;
  h_.notes << "dropout kernel (p " << a.p << ")";
  h_.add_step(op, [=](cudaStream_t s) { cuda::dropout(x, y, n, threshold, scale, a.key, step, acc, s); });
}

// A gather through swapped strides: the broadcast copy kernel with X's strides permuted.
void TensorLowering::transpose(const Op& op) {
  const Shape& xs = h_.p.tensor(op.in[0]).shape;
  const TransposeAttrs t = op.attr<TransposeAttrs>();
  const int a = normalize_axis(t.axis_a, xs.size()), b = normalize_axis(t.axis_b, xs.size());
  Broadcast g;
  g.rank = static_cast<int>(xs.size());
  int64_t stride = 1;
  for (int k = g.rank - 1; k >= 0; --k) {
    g.dims[k] = xs[k];
    g.sa[k] = stride;
    stride *= xs[k];
  }
  std::swap(g.dims[a], g.dims[b]);
  std::swap(g.sa[a], g.sa[b]);
  g.count = numel(xs);
  const float* x = f(op.in[0]);
  float* y = f(op.out[0]);
  const bool acc = op.accumulate[0] != 0;
  h_.notes << "transpose: strided copy kernel";
  h_.add_step(op, [=](cudaStream_t s) { expand(x, y, g, 1.0f, acc, s); });
}

void TensorLowering::activation_backward(const Op& op) {
  const float *dy = f(op.in[0]), *x = f(op.in[1]), *y = f(op.in[2]);
  float* dx = f(op.out[0]);
  const int64_t n = count(op.out[0]);
  const Activation act = op.attr<ActivationAttrs>().act;
  const float p = static_cast<float>(activation_param(op.attr<ActivationAttrs>()));
  const bool acc = op.accumulate[0] != 0;
  h_.notes << activation_name(act) << "_backward kernel";
  h_.add_step(op, [=](cudaStream_t s) { cuda::activation_backward(dy, x, y, dx, n, act, p, acc, s); });
}

void TensorLowering::pieces(const Op& op) {
  const Pieces pc = axis_pieces(h_.p, op, [&](TensorId t) { return f(t); });
  h_.notes << "copy kernel (" << pc.list.size() << " piece" << (pc.list.size() == 1 ? "" : "s") << ")";
  h_.add_step(op, [=](cudaStream_t s) { copy_pieces(pc, s); });
}

// X summed onto Y seen as X with the axis kept as 1.
void TensorLowering::reduce(const Op& op) {
  const float* x = f(op.in[0]);
  float* y = f(op.out[0]);
  const Shape& xs = shape(op.in[0]);
  const int axis = normalize_axis(op.attr<ReduceAttrs>().axis, xs.size());
  Shape keep = xs;
  keep[axis] = 1;
  const BroadcastReduce g = make_broadcast_reduce(keep, xs, xs, true);
  const float scale = op.kind == OpKind::Mean ? static_cast<float>(1.0 / static_cast<double>(xs[axis])) : 1.0f;
  const int chunks = reduce_chunks(g);
  float* scratch = chunks > 1 ? reinterpret_cast<float*>(h_.own(sizeof(float) * chunks * g.count)) : nullptr;
  const bool acc = op.accumulate[0] != 0;
  h_.notes << "reduce kernel (" << xs[axis] << " terms per element" << (chunks > 1 ? cat(" in ", chunks, " chunks") : "")
           << ")";
  h_.add_step(op, [=](cudaStream_t s) { reduce_terms(BinaryOp::Add, true, x, nullptr, nullptr, y, g, scale, acc, scratch, s); });
}

void TensorLowering::reduce_backward(const Op& op) {
  const float* dy = f(op.in[0]);
  float* dx = f(op.out[0]);
  const Shape& xs = shape(op.out[0]);
  const int axis = normalize_axis(op.attr<ReduceAttrs>().axis, xs.size());
  Shape keep = xs;
  keep[axis] = 1;
  const Broadcast g = make_broadcast(keep, xs, xs);
  const float scale = op.kind == OpKind::MeanBackward ? static_cast<float>(1.0 / static_cast<double>(xs[axis])) : 1.0f;
  const bool acc = op.accumulate[0] != 0;
  h_.notes << "expand kernel";
  h_.add_step(op, [=](cudaStream_t s) { expand(dy, dx, g, scale, acc, s); });
}

}  // namespace sg::cuda
