// The capture plan: every tensor of a step gets a fixed offset before anything runs.
// Persistent tensors (parameters, gradients, optimizer state, step scalars) are laid out once in
// the persistent region and never move; the rest share the transient region by liveness.
#pragma once

#include <string>
#include <vector>

#include "stepgraph/ir.h"

namespace sg {

constexpr size_t kArenaAlign = 256;

struct Placement {
  enum class Region : uint8_t { Persistent, Transient };
  Region region = Region::Transient;
  size_t offset = 0;
  size_t bytes = 0;
  int first = 0, last = 0;  // live over ops [first, last]; inputs, live_out and the outputs of
                            // the invariant prefix (ir.h): the whole step
};

struct MemoryPlan {
  std::vector<Placement> at;         // per tensor id
  size_t persistent_bytes = 0;
  size_t transient_bytes = 0;        // the transient region's peak
  size_t transient_unshared = 0;     // what the transient tensors would take without reuse
  size_t peak_bytes() const { return persistent_bytes + transient_bytes; }
};

// A tensor a backend reads later than the program says: kept live at least until op `last`
// (Backend::lifetime_hints; CUDA's batched weight gradients read dZ and X after their op).
struct LifetimeHint {
  TensorId tensor = kNone;
  int last = 0;
};

// Liveness-based first-fit placement (ggml-alloc style): an op's outputs are placed before its
// dead inputs are freed, so no op's output aliases its input. Offsets are 256-byte aligned.
// `extend`: lifetimes lengthened as the backend asks.
MemoryPlan plan_memory(const Program& p, const std::vector<LifetimeHint>& extend = {});

// Human-readable summary: region sizes and the largest tensors.
std::string describe_plan(const Program& p, const MemoryPlan& plan);

}  // namespace sg
