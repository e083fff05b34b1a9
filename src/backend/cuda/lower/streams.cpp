// Concurrent streams: what the fusion plan decides of them before lowering (whether the step
// may use two, the ops one launch keeps together) and the assignment after it.
#include "backend/cuda/lower/lowering.h"
#include "backend/cuda/lower/lowerings.h"
#include "stepgraph/distributed.h"

namespace sg::cuda {

std::vector<std::pair<int, int>> FusionPlan::links() const {
  std::vector<std::pair<int, int>> l;
  for (const auto& [b, q] : into) l.emplace_back(b, q);
  for (const auto& [loss, dense] : loss_dense) l.emplace_back(loss, dense);
  for (int bw : loss_dx) l.emplace_back(bw - 1, bw);  // the loss kernel writes its dX
  for (const auto& [jet, dense] : jet_bias) l.emplace_back(jet, dense);
  for (const auto& [jet, dense] : jet_dy) l.emplace_back(jet, dense);
  for (const auto& [ff, pr] : fourier_seeded) l.emplace_back(ff, pr);
  for (const auto& [ff, seed] : seed_into_fourier) l.emplace_back(ff, seed);
  for (const auto& [jet, d] : jet_dense_forward) l.emplace_back(jet, d);
  for (const auto& [jet, h] : jet_dense_head) l.emplace_back(h, jet - 1);
  for (const auto& [jet, d] : jet_dense_backward) l.emplace_back(jet, d);
  for (const auto& [add, loss] : loss_sum) l.emplace_back(add, loss);
  for (const auto& [b, a] : merged_loss) l.emplace_back(b, a);
  for (const std::vector<int>& r : wgrad_runs)  // the last op's launch does the others' weight gradients
    for (int i : r) l.emplace_back(i, r.back());
  return l;
}

std::string one_stream_reason(const Program& p, const LowerOptions& opt) {
  if (!opt.concurrent) return "concurrent off";
  if (opt.comm && !dist::plan_buckets(p, opt.bucket_bytes).empty())
    return "data parallel: the all-reduces take the side stream";
  for (size_t i = 0; i < p.ops().size(); ++i) {
    const Op& op = p.ops()[i];
    if (const char* why = cuda_lowering(op.kind).one_stream)
      return cat("op ", i, " '", op.name, "' (", op_kind_name(op.kind), ") is ", why);
  }
  return "";
}


void Lowering::plan_streams() {
  if (!fusions_.one_stream.empty()) return;  // decided before lowering (FusionPlan::one_stream)
  if (!amax_in_graph_.empty()) {  // known only once cuDNN has accepted a dense+amax graph
    notes_ << "  streams: one (a cuDNN dense+amax graph: its plans share one workspace)\n";
    return;
  }
  concurrent_ = cuda::plan_streams(p_, ptrs_, steps_, fusions_.links(), workspace_users_, notes_);
}

}  // namespace sg::cuda
