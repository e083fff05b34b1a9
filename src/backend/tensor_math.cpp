// The tensor ops' geometries from shapes (tensor_math.h).
#include "backend/tensor_math.h"

namespace sg {

namespace {

// Y's axes merged by how A and B broadcast along them (size-1 axes of Y dropped).
struct Merged {
  int rank = 0;
  int64_t dims[kMaxTensorRank] = {};
  bool ba[kMaxTensorRank] = {}, bb[kMaxTensorRank] = {};  // A (B) is broadcast along the axis
};

Merged merge_axes(const Shape& a, const Shape& b, const Shape& y) {
  SG_ASSERT(a.size() == y.size() && b.size() == y.size() && y.size() <= static_cast<size_t>(kMaxTensorRank));
  Merged m;
  for (size_t k = 0; k < y.size(); ++k) {
    if (y[k] == 1) continue;
    const bool pa = a[k] == 1, pb = b[k] == 1;
    if (m.rank > 0 && m.ba[m.rank - 1] == pa && m.bb[m.rank - 1] == pb) {
      m.dims[m.rank - 1] *= y[k];
      continue;
    }
    m.dims[m.rank] = y[k], m.ba[m.rank] = pa, m.bb[m.rank] = pb;
    ++m.rank;
  }
  if (m.rank == 0) m.rank = 1, m.dims[0] = 1;  // one element
  return m;
}

// Row-major strides over the merged axes of an operand, 0 where it is broadcast.
void strides(const Merged& m, const bool* broadcast, int64_t* s) {
  int64_t stride = 1;
  for (int k = m.rank - 1; k >= 0; --k) {
    s[k] = broadcast[k] ? 0 : stride;
    if (!broadcast[k]) stride *= m.dims[k];
  }
}

}  // namespace

Shape broadcast_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return {};
  Shape y(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k] != b[k] && a[k] != 1 && b[k] != 1) return {};
    y[k] = a[k] == 1 ? b[k] : a[k];
  }
  return y;
}

Broadcast make_broadcast(const Shape& a, const Shape& b, const Shape& y) {
  const Merged m = merge_axes(a, b, y);
  Broadcast g;
  g.rank = m.rank;
  for (int k = 0; k < m.rank; ++k) g.dims[k] = m.dims[k], g.count *= m.dims[k];
  strides(m, m.ba, g.sa);
  strides(m, m.bb, g.sb);
  return g;
}

BroadcastReduce make_broadcast_reduce(const Shape& a, const Shape& b, const Shape& y, bool x_is_a) {
  const Merged m = merge_axes(a, b, y);
  int64_t sa[kMaxTensorRank], sb[kMaxTensorRank], sy[kMaxTensorRank];
  const bool none[kMaxTensorRank] = {};
  strides(m, m.ba, sa);
  strides(m, m.bb, sb);
  strides(m, none, sy);
  const bool* bx = x_is_a ? m.ba : m.bb;
  BroadcastReduce g;
  for (int k = 0; k < m.rank; ++k) {
    if (bx[k]) {
      g.rdim[g.red] = m.dims[k], g.ry[g.red] = sy[k], g.ra[g.red] = sa[k], g.rb[g.red] = sb[k];
      g.reduced *= m.dims[k];
      ++g.red;
    } else {
      g.kdim[g.kept] = m.dims[k], g.ky[g.kept] = sy[k], g.ka[g.kept] = sa[k], g.kb[g.kept] = sb[k];
      g.count *= m.dims[k];
      ++g.kept;
    }
  }
  return g;
}

int normalize_axis(int32_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank), k = axis < 0 ? axis + r : axis;
  return k >= 0 && k < r ? static_cast<int>(k) : -1;
}

namespace {

int32_t attr_axis(const Op& op) {
  switch (op.kind) {
    case OpKind::Concat: return op.attr<ConcatAttrs>().axis;
    case OpKind::Split:
    case OpKind::SplitBackward: return op.attr<SplitAttrs>().axis;
    default: return op.attr<SliceAttrs>().axis;
  }
}

}  // namespace

Pieces axis_pieces(const Program& p, const Op& op, const std::function<float*(TensorId)>& f) {
  // The tensor whose axis is cut into pieces: the output of the gathering kinds, the input of
  // the scattering ones.
  const bool gather = op.kind == OpKind::Concat || op.kind == OpKind::SplitBackward || op.kind == OpKind::SliceBackward;
  const TensorId whole = gather ? op.out[0] : op.in[0];
  const Shape& s = p.tensor(whole).shape;
  const int axis = normalize_axis(attr_axis(op), s.size());
  SG_ASSERT(axis > 0);
  const AxisView v = axis_view(s, axis);
  Pieces out;
  out.rows = v.outer;
  const int64_t ld = v.n * v.inner;
  auto into_whole = [&](const float* src, int64_t offset, int64_t n) {
    if (n == 0 || (!src && op.accumulate[0])) return;  // adding zeros: nothing to do
    out.list.push_back({src, f(whole) + offset * v.inner, n * v.inner, n * v.inner, ld, op.accumulate[0] != 0});
  };
  auto from_whole = [&](int64_t offset, int64_t n, size_t k) {
    if (op.out[k] == kNone) return;
    out.list.push_back({f(whole) + offset * v.inner, f(op.out[k]), n * v.inner, ld, n * v.inner, op.accumulate[k] != 0});
  };
  int64_t offset = 0;
  switch (op.kind) {
    case OpKind::Concat:
      for (TensorId t : op.in) {
        const int64_t n = p.tensor(t).shape[axis];
        into_whole(f(t), offset, n);
        offset += n;
      }
      break;
    case OpKind::SplitBackward: {
      const std::vector<int64_t>& sizes = op.attr<SplitAttrs>().sizes;
      for (size_t k = 0; k < sizes.size(); ++k) into_whole(f(op.in[k]), offset, sizes[k]), offset += sizes[k];
      break;
    }
    case OpKind::Split: {
      const std::vector<int64_t>& sizes = op.attr<SplitAttrs>().sizes;
      for (size_t k = 0; k < sizes.size(); ++k) from_whole(offset, sizes[k], k), offset += sizes[k];
      break;
    }
    case OpKind::Slice: {
      const SliceAttrs& a = op.attr<SliceAttrs>();
      from_whole(a.begin, a.end - a.begin, 0);
      break;
    }
    case OpKind::SliceBackward: {
      const SliceAttrs& a = op.attr<SliceAttrs>();
      into_whole(nullptr, 0, a.begin);
      into_whole(f(op.in[0]), a.begin, a.end - a.begin);
      into_whole(nullptr, a.end, v.n - a.end);
      break;
    }
    default: SG_ASSERT(false);
  }
  return out;
}

AxisView axis_view(const Shape& s, int axis) {
  AxisView v;
  for (int k = 0; k < static_cast<int>(s.size()); ++k) {
    if (k < axis) v.outer *= s[k];
    else if (k == axis) v.n = s[k];
    else v.inner *= s[k];
  }
  return v;
}

}  // namespace sg
