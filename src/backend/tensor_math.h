// The tensor ops' index math and elementwise formulas (ir.h: Sub ... MeanBackward), shared by the
// CPU reference (src/backend/cpu/tensor_kernels.cpp) and the CUDA kernels
// (src/backend/cuda/kernels/tensor_kernels.cu), so both walk the same geometry.
//
// Broadcasting: A, B and Y have one rank; per axis the sizes are equal or one is 1. A geometry
// merges neighbouring axes that broadcast alike and drops size-1 axes of Y, so a [B, F] + [1, F]
// sum has one broadcast axis and one kept axis, and a same-shape op is one axis.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/host_device.h"
#include "stepgraph/ir.h"

namespace sg {

constexpr int kMaxTensorRank = 8;

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div };

template <class T>
SG_HD T binary_forward(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
  }
  return a;
}
// The formula of a binary kind (Add ... DivBackward).
inline BinaryOp binary_op_of(OpKind k) {
  switch (k) {
    case OpKind::Sub:
    case OpKind::SubBackward: return BinaryOp::Sub;
    case OpKind::Mul:
    case OpKind::MulBackward: return BinaryOp::Mul;
    case OpKind::Div:
    case OpKind::DivBackward: return BinaryOp::Div;
    default: return BinaryOp::Add;
  }
}
// The parameter act_forward takes for an Activation op: leaky_relu's slope, elu's alpha.
inline double activation_param(const ActivationAttrs& a) {
  return a.act == Activation::LeakyReLU ? a.negative_slope : a.act == Activation::ELU ? a.alpha : 0.0;
}

// dY * dY/dA and dY * dY/dB at one element.
template <class T>
SG_HD T binary_grad_a(BinaryOp op, T dy, T, T b) {
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: return dy;
    case BinaryOp::Mul: return dy * b;
    case BinaryOp::Div: return dy / b;
  }
  return dy;
}
template <class T>
SG_HD T binary_grad_b(BinaryOp op, T dy, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return dy;
    case BinaryOp::Sub: return -dy;
    case BinaryOp::Mul: return dy * a;
    case BinaryOp::Div: return -dy * a / (b * b);
  }
  return dy;
}

// Y's (merged) axes and the strides of A and B along them (0 where the operand is broadcast).
struct Broadcast {
  int rank = 0;
  int64_t dims[kMaxTensorRank] = {};
  int64_t sa[kMaxTensorRank] = {}, sb[kMaxTensorRank] = {};
  int64_t count = 1;  // elements of Y
};

// The offsets into A and B of Y's element p (row-major).
// (The first axis takes what is left of p: one division fewer, none for a same-shape op.)
SG_HD void broadcast_offsets(const Broadcast& g, int64_t p, int64_t* ia, int64_t* ib) {
  int64_t a = 0, b = 0;
  for (int k = g.rank - 1; k > 0; --k) {
    const int64_t i = p % g.dims[k];
    p /= g.dims[k];
    a += i * g.sa[k], b += i * g.sb[k];
  }
  *ia = a + p * g.sa[0], *ib = b + p * g.sb[0];
}

// Summing Y-shaped terms onto one operand X (A, or B): X's element j is the sum over r in
// [0, reduced) of the term at Y offset y(j, r), with A and B read at a(j, r) and b(j, r). The kept
// axes are X's own (its row-major order), the reduced ones those where X is broadcast.
struct BroadcastReduce {
  int kept = 0, red = 0;
  int64_t kdim[kMaxTensorRank] = {}, ky[kMaxTensorRank] = {}, ka[kMaxTensorRank] = {}, kb[kMaxTensorRank] = {};
  int64_t rdim[kMaxTensorRank] = {}, ry[kMaxTensorRank] = {}, ra[kMaxTensorRank] = {}, rb[kMaxTensorRank] = {};
  int64_t count = 1;    // elements of X
  int64_t reduced = 1;  // terms per element
};

// The offsets of X's element j's first term (r = 0), and those term r adds to them.
SG_HD void reduce_base(const BroadcastReduce& g, int64_t j, int64_t* y, int64_t* a, int64_t* b) {
  int64_t oy = 0, oa = 0, ob = 0;
  for (int k = g.kept - 1; k > 0; --k) {
    const int64_t i = j % g.kdim[k];
    j /= g.kdim[k];
    oy += i * g.ky[k], oa += i * g.ka[k], ob += i * g.kb[k];
  }
  if (g.kept > 0) oy += j * g.ky[0], oa += j * g.ka[0], ob += j * g.kb[0];
  *y = oy, *a = oa, *b = ob;
}
SG_HD void reduce_step(const BroadcastReduce& g, int64_t r, int64_t* y, int64_t* a, int64_t* b) {
  int64_t oy = 0, oa = 0, ob = 0;
  for (int k = g.red - 1; k > 0; --k) {
    const int64_t i = r % g.rdim[k];
    r /= g.rdim[k];
    oy += i * g.ry[k], oa += i * g.ra[k], ob += i * g.rb[k];
  }
  if (g.red > 0) oy += r * g.ry[0], oa += r * g.ra[0], ob += r * g.rb[0];
  *y = oy, *a = oa, *b = ob;
}

// A tensor seen along one axis: [outer, n, inner] (row-major).
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

// One piece of a concat, split or slice: `rows` rows of w contiguous elements, from src (row
// stride src_ld) to dst (row stride dst_ld). A null src writes zeros (or, with acc, nothing);
// acc adds into dst.
struct Piece {
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t w = 0, src_ld = 0, dst_ld = 0;
  bool acc = false;
};
struct Pieces {
  int64_t rows = 0;  // the axis view's outer size, the same for every piece
  std::vector<Piece> list;
};

// ---- Host side: building the geometries from shapes ----

// The broadcast shape of a and b, or an empty shape when they do not broadcast (different
// ranks, or an axis whose sizes differ and neither is 1).
Shape broadcast_shape(const Shape& a, const Shape& b);
// The geometry of Y = op(A, B) for shapes that broadcast to y.
Broadcast make_broadcast(const Shape& a, const Shape& b, const Shape& y);
// The geometry of summing terms over y onto operand `x_is_a ? a : b`.
BroadcastReduce make_broadcast_reduce(const Shape& a, const Shape& b, const Shape& y, bool x_is_a);
// The axis `axis` of a tensor of rank `rank` (negative counts from the end); -1 when out of range.
int normalize_axis(int32_t axis, size_t rank);
AxisView axis_view(const Shape& s, int axis);
// The pieces of a Concat, Split, SplitBackward, Slice or SliceBackward op over the tensors'
// addresses (f: a tensor's address, null for kNone).
Pieces axis_pieces(const Program& p, const Op& op, const std::function<float*(TensorId)>& f);

}  // namespace sg
