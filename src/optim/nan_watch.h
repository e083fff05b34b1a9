// The schedule op's watch (ir.h NanPolicy), shared by the CPU reference and the CUDA kernels:
// a step whose loss or gradient norm is NaN or inf is recorded in watch = {first such step,
// how many}, on the device, so that nothing is read back each step; the run looks at it when it
// next reads the loss.
#pragma once

#include <cmath>
#include <cstdint>

#include "stepgraph/ir.h"

#include "core/host_device.h"

namespace sg {

// Records step t when `loss` (or the clipped gradients' norm[0], when given) is not finite;
// returns sched[kSkip] for it: 1 when the policy skips such a step. No loss: nothing watched.
SG_HD bool watched_finite(const float* loss, const float* norm) {
  return !loss || (std::isfinite(*loss) && (!norm || std::isfinite(norm[0])));
}
SG_HD float skip_flag(const float* loss, const float* norm, NanPolicy on_nan) {
  return on_nan == NanPolicy::Skip && !watched_finite(loss, norm) ? 1.0f : 0.0f;
}
SG_HD float watch_step(int32_t t, const float* loss, const float* norm, int32_t* watch, NanPolicy on_nan) {
  if (watched_finite(loss, norm)) return 0.0f;
  if (watch[0] == 0) watch[0] = t;
  watch[1] += 1;
  return skip_flag(loss, norm, on_nan);
}

}  // namespace sg
