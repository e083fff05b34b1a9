// The optimizer kernels: the schedule, and SGD and Adam(W) as one multi-tensor launch each (the
// schedule computed inside the launch when it is fused).
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/runtime/pdl.cuh"
#include "backend/cuda/kernels/reduce.cuh"
#include "optim/nan_watch.h"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

struct SchedValues {
  float lr, bias1, bias2, step, skip;
};

// The learning-rate schedule and Adam bias corrections at step t (formulas as in optim.h).
__device__ SchedValues schedule_at(int32_t t, const float* hyper, const ScheduleAttrs& a) {
  const double base = hyper[hyper::kBaseLr];
  double lr = base;
  if (a.kind == ScheduleKind::Step) {
    lr = base * pow(a.gamma, static_cast<double>((t - 1) / a.step_size));
  } else if (a.kind == ScheduleKind::Cosine) {
    if (t <= a.warmup_steps) {
      lr = base * t / static_cast<double>(a.warmup_steps);
    } else {
      double span = static_cast<double>(a.total_steps - a.warmup_steps > 1 ? a.total_steps - a.warmup_steps : 1);
      double prog = fmin(1.0, (t - a.warmup_steps) / span);
      double lo = base * a.min_lr_ratio;
      lr = lo + (base - lo) * 0.5 * (1.0 + cos(3.141592653589793 * prog));
    }
  }
  return {static_cast<float>(lr), static_cast<float>(1.0 - pow(a.beta1, static_cast<double>(t))),
          static_cast<float>(1.0 - pow(a.beta2, static_cast<double>(t))), static_cast<float>(t), 0.0f};
}

__device__ void store_sched(float* sched, const SchedValues& v) {
  sched[sched::kLr] = v.lr;
  sched[sched::kBias1] = v.bias1;
  sched[sched::kBias2] = v.bias2;
  sched[sched::kStep] = v.step;
  sched[sched::kSkip] = v.skip;
}

__global__ void schedule_kernel(int32_t* step, const float* hyper, float* sched, ScheduleAttrs a, const float* loss,
                                const float* norm, int32_t* watch) {
  PDL_PROLOGUE();
  const int32_t t = ++step[0];
  SchedValues v = schedule_at(t, hyper, a);
  v.skip = watch_step(t, loss, norm, watch, a.on_nan);
  store_sched(sched, v);
}

// This step's schedule values: computed here when fused, else read from the schedule op's output.
// Once per block, by its first thread: the double-precision powers are ~400 instructions, and
// with every thread computing them they were most of an optimizer launch's instructions
// (mlp_8x256's 909 blocks: IPC 2.2 for 13 MB of traffic). Every thread of the block must call it.
__device__ SchedValues current_sched(const float* hyper, const float* sched, const FusedSchedule& fs, bool fused) {
  __shared__ SchedValues sv;
  if (threadIdx.x == 0) {
    if (fused) {
      sv = schedule_at(*fs.step + 1, hyper, fs.attrs);
      sv.skip = skip_flag(fs.loss, fs.norm, fs.attrs.on_nan);  // the watch itself is the last block's
    } else {
      sv = SchedValues{sched[sched::kLr], sched[sched::kBias1], sched[sched::kBias2], sched[sched::kStep],
                       sched[sched::kSkip]};
    }
  }
  __syncthreads();
  return sv;
}

// The last block of a fused launch advances the step (every block has read it by then) and
// stores the schedule values every block derived from it (`sv`, this step's).
__device__ void finish_fused_schedule(const SchedValues& sv, const FusedSchedule& fs, bool fused) {
  if (!fused) return;
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(fs.counter, 1u) != gridDim.x - 1) return;
  store_sched(fs.sched, sv);
  *fs.step = *fs.step + 1;  // the step sv was derived from (no block writes it before this one)
  watch_step(*fs.step, fs.loss, fs.norm, fs.watch, fs.attrs.on_nan);
  *fs.counter = 0u;
}

__global__ void sgd_kernel(const ChunkRef* chunks, const float* hyper,
                           const float* sched, SgdAttrs a, FusedSchedule fs, bool fused) {
  PDL_PROLOGUE();
  const ChunkRef c = chunks[blockIdx.x];
  const ParamDesc& d = c.d;
  const SchedValues sv = current_sched(hyper, sched, fs, fused);
  if (sv.skip != 0.0f) return finish_fused_schedule(sv, fs, fused);  // the whole block: sv is shared
  const float lr = sv.lr, wd = hyper[hyper::kWeightDecay];
  const bool first = sv.step <= 1.0f;
  const float mu = static_cast<float>(a.momentum), damp = static_cast<float>(a.dampening);
  const int64_t end = c.start + kOptimChunk < d.n ? c.start + kOptimChunk : d.n;
  for (int64_t i = c.start + threadIdx.x; i < end; i += blockDim.x) {
    float g = d.g[i] + wd * d.p[i];
    if (d.m) {
      float buf = first ? g : mu * d.m[i] + (1.0f - damp) * g;
      d.m[i] = buf;
      g = a.nesterov ? g + mu * buf : buf;
    }
    d.p[i] -= lr * g;
  }
  finish_fused_schedule(sv, fs, fused);
}

// As PyTorch's AdamW / Adam: step_size = lr / bc1, denom = sqrt(v) / sqrt(bc2) + eps.
__global__ void adam_kernel(const ChunkRef* chunks, const float* hyper,
                            const float* sched, AdamAttrs a, FusedSchedule fs, bool fused) {
  PDL_PROLOGUE();
  const ChunkRef c = chunks[blockIdx.x];
  const ParamDesc& d = c.d;
  const int64_t end = c.start + kOptimChunk < d.n ? c.start + kOptimChunk : d.n;
  // Every element's loads are issued before the schedule math and any store (stores through
  // these pointers would otherwise order the next element's loads after them).
  static_assert(kOptimChunk % kBlock == 0, "whole chunks per thread");
  constexpr int kPer = kOptimChunk / kBlock;
  float p[kPer], g[kPer], m[kPer], v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = c.start + threadIdx.x + k * kBlock;
    const bool in = i < end;
    p[k] = in ? d.p[i] : 0.0f, g[k] = in ? d.g[i] : 0.0f, m[k] = in ? d.m[i] : 0.0f, v[k] = in ? d.v[i] : 0.0f;
  }
  const SchedValues sv = current_sched(hyper, sched, fs, fused);
  if (sv.skip != 0.0f) return finish_fused_schedule(sv, fs, fused);  // the whole block: sv is shared
  const float lr = sv.lr, wd = hyper[hyper::kWeightDecay];
  const float step_size = lr / sv.bias1, bc2_sqrt = sqrtf(sv.bias2);
  const float b1 = static_cast<float>(a.beta1), b2 = static_cast<float>(a.beta2), eps = static_cast<float>(a.eps);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = c.start + threadIdx.x + k * kBlock;
    if (i >= end) continue;
    float pk = p[k], gk = g[k];
    if (a.decoupled_weight_decay) pk *= 1.0f - lr * wd;
    else gk += wd * pk;
    const float mk = b1 * m[k] + (1.0f - b1) * gk;
    const float vk = b2 * v[k] + (1.0f - b2) * gk * gk;
    d.m[i] = mk;
    d.v[i] = vk;
    d.p[i] = pk - step_size * mk / (sqrtf(vk) / bc2_sqrt + eps);
  }
  finish_fused_schedule(sv, fs, fused);
}

}  // namespace

void schedule(int32_t* step, const float* hyper, float* sched, const ScheduleAttrs& a, const float* loss,
              const float* norm, int32_t* watch, cudaStream_t s) {
  launch_pdl(schedule_kernel, 1, 1, 0, s, step, hyper, sched, a, loss, norm, watch);
  KERNEL_LAUNCH_CHECK();
}

void sgd_update(const ChunkRef* chunks, int num_chunks, const float* hyper,
                const float* sched, const SgdAttrs& a, const FusedSchedule* fs, cudaStream_t s) {
  launch_pdl(sgd_kernel, static_cast<unsigned>(num_chunks), kBlock, 0, s, chunks, hyper, sched, a,
                                                                  fs ? *fs : FusedSchedule{}, fs != nullptr);
  KERNEL_LAUNCH_CHECK();
}

void adam_update(const ChunkRef* chunks, int num_chunks, const float* hyper,
                 const float* sched, const AdamAttrs& a, const FusedSchedule* fs, cudaStream_t s) {
  launch_pdl(adam_kernel, static_cast<unsigned>(num_chunks), kBlock, 0, s, chunks, hyper, sched, a,
                                                                   fs ? *fs : FusedSchedule{}, fs != nullptr);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
