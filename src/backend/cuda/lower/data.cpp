// The in-graph batch gather from a device-resident data set.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

void Lowering::gather_batch_op(int, const Op& op) {
  const int64_t N = dim(op.in[1], 0), B = dim(op.out[1], 0);
  std::vector<GatherRows> arrays;
  for (size_t k = 1; k < op.in.size(); ++k)
    arrays.push_back({ptrs_[op.in[k]], ptrs_[op.out[k]],
                      static_cast<size_t>(count(op.in[k]) / N) * dtype_size(p_.tensor(op.in[k]).dtype)});
  const int32_t* step = i32(op.in[0]);
  int32_t* valid = i32(op.out[0]);
  const GatherAttrs a = op.attr<GatherAttrs>();
  notes_ << "in-graph batch gather of " << arrays.size() << (arrays.size() == 1 ? " array" : " arrays")
         << " from the device-resident data set (Feistel shuffle per epoch)";
  return add_step(op, [=](cudaStream_t s) {
    gather_batch(arrays.data(), static_cast<int>(arrays.size()), step, valid, N, B, a, s);
  });
}

}  // namespace sg::cuda
