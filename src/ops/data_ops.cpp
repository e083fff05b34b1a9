// The data ops: shape rules and the CPU reference bindings.
#include "ops/data_ops.h"

#include "backend/cpu/cpu_kernels.h"

namespace sg::ops {

void check_gather_batch(const OpCheck& c) {
  const Op& op = c.op();
  c.expect(op.in.size() >= 2 && op.in.size() == op.out.size(),
           cat("needs the step and at least one data array, and one batch per data array; got ", op.in.size(),
               " inputs and ", op.out.size(), " outputs"));
  for (TensorId t : {c.in(0), c.out(0)})
    c.expect(c.shape(t) == Shape{1} && c.dtype(t) == DType::I32, cat(c.desc(t), " must be i32 [1]"));
  const TensorId first = c.in(1);
  c.expect(!c.shape(first).empty(), cat("data ", c.desc(first), " must have a row axis"));
  const int64_t N = c.shape(first)[0], B = c.shape(c.out(1)).empty() ? 0 : c.shape(c.out(1))[0];
  for (size_t k = 1; k < op.in.size(); ++k) {
    const TensorId d = c.in(k), b = c.out(k);
    Shape rows_of_d = c.shape(d), rows_of_b = c.shape(b);
    c.expect(!rows_of_d.empty() && rows_of_d[0] == N,
             cat("data ", c.desc(d), " must have the ", N, " rows of ", c.desc(first)));
    c.expect(!rows_of_b.empty() && rows_of_b[0] == B, cat("batch ", c.desc(b), " must have ", B, " rows"));
    rows_of_d.erase(rows_of_d.begin());
    rows_of_b.erase(rows_of_b.begin());
    c.expect(numel(rows_of_d) == numel(rows_of_b),
             cat("batch ", c.desc(b), " rows must be as wide as those of data ", c.desc(d)));
    c.expect(c.dtype(d) == c.dtype(b), cat("batch ", c.desc(b), " must have the data's dtype ", dtype_name(c.dtype(d))));
  }
  const GatherAttrs& a = c.attr<GatherAttrs>();
  c.expect(a.shards >= 1 && a.shard >= 0 && a.shard < a.shards, cat("shard ", a.shard, " of ", a.shards));
  // A padded last batch has fewer rows than the shards' global batch: its slices would not line up.
  c.expect(a.shards == 1 || !a.partial_last, cat("a padded last batch cannot be sharded (", a.shards, " shards)"));
  const int64_t G = B * a.shards;
  c.expect(B > 0, cat("the batch ", c.desc(c.out(1)), " must have rows"));
  c.expect(a.partial_last || G <= N, cat("the global batch of ", G, " rows is larger than the ", N, " rows of ", c.desc(first)));
}

std::function<void()> cpu_gather_batch(const CpuBind& b) {
  const Op& op = b.op();
  std::vector<cpu::GatherArray> arrays;
  const int64_t N = b.dim(b.in(1), 0), B = b.dim(b.out(1), 0);
  for (size_t k = 1; k < op.in.size(); ++k)
    arrays.push_back({b.raw(b.in(k)), b.raw(b.out(k)),
                      static_cast<size_t>(b.count(b.in(k)) / N) * dtype_size(b.tensor(b.in(k)).dtype)});
  const int32_t* step = b.i32(b.in(0));
  int32_t* valid = b.i32(b.out(0));
  const GatherAttrs a = b.attr<GatherAttrs>();
  return [=] { cpu::gather_batch(arrays, step, valid, N, B, a); };
}

}  // namespace sg::ops
