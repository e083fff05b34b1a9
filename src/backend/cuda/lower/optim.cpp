// The optimizer step: the schedule (fused into the update launch when it precedes it) and one
// multi-tensor launch for every parameter.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

void Lowering::update_op(int i, const Op& op) {
  const bool adam = op.kind == OpKind::AdamUpdate;
  const int64_t n = adam ? op.attr<AdamAttrs>().num_params : op.attr<SgdAttrs>().num_params;
  const bool has_m = adam || op.attr<SgdAttrs>().momentum != 0.0;
  std::vector<ChunkRef> chunks;
  for (int64_t k = 0; k < n; ++k) {
    ParamDesc d{};
    d.p = f(op.in[2 + k]);
    d.g = f(op.in[2 + n + k]);
    d.m = has_m ? f(op.in[2 + 2 * n + k]) : nullptr;
    d.v = adam ? f(op.in[2 + 3 * n + k]) : nullptr;
    d.n = count(op.in[2 + k]);
    for (int64_t start = 0; start < d.n; start += kOptimChunk) chunks.push_back({d, start});
  }
  auto* dchunk = reinterpret_cast<ChunkRef*>(own(chunks.size() * sizeof(ChunkRef)));
  be_.upload(dchunk, chunks.data(), chunks.size() * sizeof(ChunkRef));
  be_.synchronize();
  const int nchunks = static_cast<int>(chunks.size());
  const float *hyper = f(op.in[0]), *sched = f(op.in[1]);
  // The schedule op right before, computed in this launch (FusionPlan::schedule_in_update).
  std::optional<FusedSchedule> fs;
  if (const auto it = fusions_.schedule_in_update.find(i - 1); it != fusions_.schedule_in_update.end() && it->second == i) {
    const Op& sc = p_.ops()[i - 1];
    fs = FusedSchedule{i32(sc.out[0]), f(sc.out[1]), reinterpret_cast<unsigned*>(own(sizeof(unsigned))),
                       sc.attr<ScheduleAttrs>(), f(sc.in[2]), f(sc.in[3]), i32(sc.out[2])};
  }
  notes_ << "one multi-tensor launch: " << n << " tensors, " << nchunks << " blocks"
         << (fs ? fs->loss ? ", schedule fused (the loss watched for NaN and inf)" : ", schedule fused" : "");
  if (adam) {
    const AdamAttrs a = op.attr<AdamAttrs>();
    return add_step(op, [=](cudaStream_t s) { adam_update(dchunk, nchunks, hyper, sched, a, fs ? &*fs : nullptr, s); });
  }
  const SgdAttrs a = op.attr<SgdAttrs>();
  add_step(op, [=](cudaStream_t s) { sgd_update(dchunk, nchunks, hyper, sched, a, fs ? &*fs : nullptr, s); });
}

void Lowering::clip_op(const Op& op) {
  std::vector<ChunkRef> chunks;
  for (size_t k = 0; k < op.in.size(); ++k) {
    ParamDesc d{};
    d.p = f(op.in[k]);
    d.n = count(op.in[k]);
    for (int64_t start = 0; start < d.n; start += kOptimChunk) chunks.push_back({d, start});
  }
  auto* dchunk = reinterpret_cast<ChunkRef*>(own(chunks.size() * sizeof(ChunkRef)));
  be_.upload(dchunk, chunks.data(), chunks.size() * sizeof(ChunkRef));
  be_.synchronize();
  const int nchunks = static_cast<int>(chunks.size());
  auto* partials = reinterpret_cast<double*>(own(chunks.size() * sizeof(double)));
  auto* counter = reinterpret_cast<unsigned*>(own(sizeof(unsigned)));
  float* norm = f(op.out[0]);
  const float max_norm = static_cast<float>(op.attr<ClipAttrs>().max_norm);
  notes_ << "two multi-tensor launches (" << op.in.size() << " gradients, " << nchunks
         << " blocks): the global norm, then the gradients scaled in place";
  add_step(op, [=](cudaStream_t s) { clip_grad_norm(dchunk, nchunks, partials, counter, norm, max_norm, s); });
}

void Lowering::schedule_op(int i, const Op& op) {
  const auto& in = op.in;
  const auto& out = op.out;
  // Followed by the update op that reads it: computed inside that launch instead.
  if (fusions_.schedule_in_update.count(i)) {
    notes_ << "fused into the optimizer launch (its last block advances the step)";
    return;
  }
  int32_t* step = i32(out[0]);
  const float* hyper = f(in[1]);
  float* sched = f(out[1]);
  const ScheduleAttrs a = op.attr<ScheduleAttrs>();
  const float *loss = f(in[2]), *norm = f(in[3]);
  int32_t* watch = i32(out[2]);
  notes_ << "1-thread kernel: step += 1, lr and bias corrections from the device step"
         << (loss ? ", the loss watched for NaN and inf" : "");
  return add_step(op, [=](cudaStream_t s) { schedule(step, hyper, sched, a, loss, norm, watch, s); });
}

}  // namespace sg::cuda
