// Lion's update (src/optim/lion.cpp has the rule and its CPU reference): one launch per
// parameter tensor, the learning rate and weight decay read from the step scalars on the device.
// The products are rounded one by one (no fused multiply-add) as the CPU's, so both take the
// same sign where the interpolation is close to zero.
#include "backend/cuda/runtime/cuda_check.h"
#include "optim/lion_math.h"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

unsigned grid_for(int64_t n) {
  const int64_t g = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(g < 1 ? 1 : g < 65535 * 8 ? g : 65535 * 8);
}

__global__ void lion_kernel(float* p, const float* g, float* m, int64_t n, const float* hyper, const float* sched,
                            LionConstants c) {
  const float lr = sched[sched::kLr], decay = __fsub_rn(1.0f, __fmul_rn(lr, hyper[hyper::kWeightDecay]));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = g[i], mi = m[i];
    const float u = __fadd_rn(__fmul_rn(c.beta1, mi), __fmul_rn(c.one_minus_beta1, gi));
    const float s = u > 0.0f ? 1.0f : (u < 0.0f ? -1.0f : 0.0f);
    p[i] = __fsub_rn(__fmul_rn(p[i], decay), __fmul_rn(lr, s));
    m[i] = __fadd_rn(__fmul_rn(c.beta2, mi), __fmul_rn(c.one_minus_beta2, gi));
  }
}

}  // namespace

void lion_update(const UpdateArgs& a) {
  const LionConstants c = lion_constants(a);
  const cudaStream_t s = static_cast<cudaStream_t>(a.stream);
  for (const UpdateTensor& t : a.tensors) {
    lion_kernel<<<grid_for(t.size), kBlock, 0, s>>>(t.param, t.grad, t.state[0], t.size, a.hyper, a.sched, c);
    KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace sg::cuda
