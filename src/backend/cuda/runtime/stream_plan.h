// Concurrent branches in a step: ops that touch no common memory may run at the same time. A
// physics-informed step's boundary terms (their points, network pass, loss and backward) are
// such a chain next to the residual's: short, latency-bound kernels that a second stream hides
// behind the residual's large ones.
#pragma once

#include <ostream>
#include <set>
#include <utility>
#include <vector>

#include "backend/cuda/runtime/cuda_backend.h"
#include "stepgraph/ir.h"

namespace sg::cuda {

// Sets Step::stream, wait_for and record for the lowered `steps` of `p` (each Step::op set;
// Step::once steps run before the step and take no part).
// Each op's footprint is the memory of its tensors at their planned addresses `ptrs` (inputs it
// may change in place, temporaries, count as writes), joined with its `links` (pairs of ops one
// launch does the work of: fusions), plus one shared resource for `workspace_users` (ops with
// cuBLASLt plans, which share a workspace). An op depends on every earlier op whose footprint
// overlaps its own where either writes. It runs on the step's stream if it depends on anything
// there, else on the side stream if it depends on anything there, else (a new chain) on the other
// stream than the op before it; it waits through an event for its latest dependency on the other
// stream. Addresses come after memory planning, so tensors that share memory are ordered too.
// Returns whether any op went to the side stream (else the steps stay serial), and then writes a
// line for explain to `notes`.
bool plan_streams(const Program& p, const std::vector<void*>& ptrs, std::vector<Step>& steps,
                  const std::vector<std::pair<int, int>>& links, const std::set<int>& workspace_users,
                  std::ostream& notes);

}  // namespace sg::cuda
