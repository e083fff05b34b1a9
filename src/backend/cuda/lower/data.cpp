// The in-graph batch gather from a device-resident data set.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

void Lowering::gather_batch_op(int, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  const float* dX = f(in[0]);
  const void* dY = ptrs_[in[1]];
  const int32_t* step = i32(in[2]);
  float* X = f(out[0]);
  void* y = ptrs_[out[1]];
  int32_t* valid = i32(out[2]);
  const int64_t N = dim(in[0], 0), D = dim(in[0], 1), B = dim(out[0], 0);
  const size_t row = static_cast<size_t>(count(in[1]) / N) * dtype_size(p_.tensor(in[1]).dtype);
  const GatherAttrs a = op.attr<GatherAttrs>();
  notes_ << "in-graph batch gather from the device-resident data set (Feistel shuffle per epoch)";
  return add_step(op, [=](cudaStream_t s) { gather_batch(dX, dY, step, X, y, valid, N, D, B, row, a, s); });
}

}  // namespace sg::cuda
