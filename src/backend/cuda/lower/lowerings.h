// The CUDA backend's row for each op kind: the Lowering member that lowers it, and what the
// backend refuses before planning anything (kinds or shapes it cannot run). Indexed by OpKind,
// checked at compile time against the op table's kinds (lowerings.cpp).
#pragma once

#include "stepgraph/backend.h"

namespace sg::cuda {

class Lowering;

struct CudaLowering {
  OpKind kind;
  void (*lower)(Lowering& l, int i, const Op& op);
  // Throws naming the op and what is missing or too large; null: every op of the kind runs.
  void (*refuse)(const Program& p, const Op& op, const LowerOptions& opt) = nullptr;
  // Why a step with an op of this kind stays on one stream (null: it may use two).
  const char* one_stream = nullptr;
};

const CudaLowering& cuda_lowering(OpKind k);

}  // namespace sg::cuda
