// The data ops: shape rules and the CPU reference bindings.
#include "ops/data_ops.h"

#include "backend/cpu/cpu_kernels.h"

namespace sg::ops {

void check_gather_batch(const OpCheck& c) {
  const TensorId dX = c.in(0), dY = c.in(1), X = c.out(0), y = c.out(1);
  c.expect(c.shape(dX).size() == 2 && c.shape(X).size() == 2 && c.shape(dX)[1] == c.shape(X)[1],
           cat("data X ", c.desc(dX), " and the batch X ", c.desc(X), " must be [N, D] and [B, D]"));
  c.expect(c.shape(dX)[0] == c.shape(dY)[0] && c.shape(X)[0] == c.shape(y)[0],
           "data y / batch y must have one row per sample");
  c.expect(numel(c.shape(dY)) / c.shape(dY)[0] == numel(c.shape(y)) / c.shape(y)[0],
           cat("batch y ", c.desc(y), " rows must be as wide as those of data y ", c.desc(dY)));
  c.expect(c.dtype(dY) == c.dtype(y), cat("batch y ", c.desc(y), " must have the data's dtype ", dtype_name(c.dtype(dY))));
  for (TensorId t : {c.in(2), c.out(2)})
    c.expect(c.shape(t) == Shape{1} && c.dtype(t) == DType::I32, cat(c.desc(t), " must be i32 [1]"));
  const GatherAttrs& a = c.attr<GatherAttrs>();
  c.expect(a.shards >= 1 && a.shard >= 0 && a.shard < a.shards, cat("shard ", a.shard, " of ", a.shards));
  // A padded last batch has fewer rows than the shards' global batch: its slices would not line up.
  c.expect(a.shards == 1 || !a.partial_last, cat("a padded last batch cannot be sharded (", a.shards, " shards)"));
  const int64_t N = c.shape(dX)[0], G = c.shape(X)[0] * a.shards;
  c.expect(a.partial_last || G <= N, cat("the global batch of ", G, " rows is larger than the ", N, " rows of ", c.desc(dX)));
}

std::function<void()> cpu_gather_batch(const CpuBind& b) {
  const float* dX = b.f(b.in(0));
  const void* dY = b.raw(b.in(1));
  const int32_t* step = b.i32(b.in(2));
  float* X = b.f(b.out(0));
  void* y = b.raw(b.out(1));
  int32_t* valid = b.i32(b.out(2));
  const int64_t N = b.dim(b.in(0), 0), D = b.dim(b.in(0), 1), B = b.dim(b.out(0), 0);
  const size_t row = static_cast<size_t>(b.count(b.in(1)) / N) * dtype_size(b.tensor(b.in(1)).dtype);
  const GatherAttrs a = b.attr<GatherAttrs>();
  return [=] { cpu::gather_batch(dX, dY, step, X, y, valid, N, D, B, row, a); };
}

}  // namespace sg::ops
