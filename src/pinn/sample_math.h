// The SamplePoints rule (see ir.h), shared by the CPU reference and the CUDA kernel so that both
// draw bit-identical collocation points.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "stepgraph/ir.h"
#include "stepgraph/rng.h"

namespace sg::pinn {

// Coordinate k of point i for the draw at `step`: a counter-based draw, so the same (seed, draw,
// point, coordinate) gives the same number on any device, with no state to carry between steps.
SG_HD double sample_coordinate(const SampleAttrs& a, int64_t step, int64_t i, int k, int d) {
  const int64_t draw = a.every > 0 ? step / a.every : 0;
  if (k == a.face_dim) return a.face_value;
  const uint64_t point = mix_seed(mix_seed(a.seed, static_cast<uint64_t>(draw)), static_cast<uint64_t>(i));
  if (a.face_dim == -2) {  // every face of the box: this point's face from its own draw
    const uint64_t f = mix_seed(point, 977) % static_cast<uint64_t>(2 * d);
    if (static_cast<int>(f / 2) == k) return f % 2 ? a.hi[k] : a.lo[k];
  }
  const uint64_t h = mix_seed(point, static_cast<uint64_t>(k));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return a.lo[k] + (a.hi[k] - a.lo[k]) * u;
}

}  // namespace sg::pinn
