// Data ops: a batch drawn inside the step from a device-resident data set. Its row of the op
// table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_gather_batch(const OpCheck& c);
std::function<void()> cpu_gather_batch(const CpuBind& b);

// Rows perm_e(pos) of every data array (any dtype, rows of any shape), where step s (the step
// counter before this step) is batch s % batches_per_epoch of epoch e = s / batches_per_epoch,
// and perm_e the keyed Feistel permutation (src/data/feistel.h); valid < B on a padded last
// batch (partial mode).
inline constexpr OpDef kGatherBatch{OpKind::GatherBatch, "gather_batch", "step data...", "valid batch...",
                                    check_gather_batch, no_gradient, cpu_gather_batch};

}  // namespace sg::ops
