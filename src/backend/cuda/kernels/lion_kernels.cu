// Lion's update (src/optim/lion.cpp has the rule and its CPU reference): up to kLionTensors
// parameter tensors per launch, their pointers passed by value (so the step graph holds one node
// for a small model's update), the learning rate and weight decay read from the step scalars on
// the device. The products are rounded one by one (no fused multiply-add) as the CPU's, so both
// take the same sign where the interpolation is close to zero.
#include "backend/cuda/runtime/cuda_check.h"
#include "optim/lion_math.h"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256, kLionTensors = 32;

struct LionBatch {
  float* p[kLionTensors];
  const float* g[kLionTensors];
  float* m[kLionTensors];
  int64_t end[kLionTensors];  // running element counts: tensor k holds [end[k-1], end[k])
  int count;
};

__global__ void lion_kernel(LionBatch b, const float* hyper, const float* sched, LionConstants c) {
  if (sched[sched::kSkip] != 0.0f) return;  // a skipped step (train.on_nan skip)
  const float lr = sched[sched::kLr], decay = __fsub_rn(1.0f, __fmul_rn(lr, hyper[hyper::kWeightDecay]));
  const int64_t total = b.end[b.count - 1];
  int k = 0;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    while (e >= b.end[k]) ++k;  // elements only grow along the grid-stride loop
    const int64_t i = e - (k ? b.end[k - 1] : 0);
    const float gi = b.g[k][i], mi = b.m[k][i];
    const float u = __fadd_rn(__fmul_rn(c.beta1, mi), __fmul_rn(c.one_minus_beta1, gi));
    const float s = u > 0.0f ? 1.0f : (u < 0.0f ? -1.0f : 0.0f);
    b.p[k][i] = __fsub_rn(__fmul_rn(b.p[k][i], decay), __fmul_rn(lr, s));
    b.m[k][i] = __fadd_rn(__fmul_rn(c.beta2, mi), __fmul_rn(c.one_minus_beta2, gi));
  }
}

void launch(const LionBatch& b, const UpdateArgs& a, const LionConstants& c) {
  const int64_t blocks = (b.end[b.count - 1] + kBlock - 1) / kBlock;
  const unsigned grid = static_cast<unsigned>(blocks < 1 ? 1 : blocks < 65535 * 8 ? blocks : 65535 * 8);
  lion_kernel<<<grid, kBlock, 0, static_cast<cudaStream_t>(a.stream)>>>(b, a.hyper, a.sched, c);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace

void lion_update(const UpdateArgs& a) {
  const LionConstants c = lion_constants(a);
  LionBatch b{};
  for (const UpdateTensor& t : a.tensors) {
    if (t.size == 0) continue;
    b.p[b.count] = t.param, b.g[b.count] = t.grad, b.m[b.count] = t.state[0];
    b.end[b.count] = (b.count ? b.end[b.count - 1] : 0) + t.size;
    if (++b.count == kLionTensors) launch(b, a, c), b = LionBatch{};
  }
  if (b.count) launch(b, a, c);
}

}  // namespace sg::cuda
