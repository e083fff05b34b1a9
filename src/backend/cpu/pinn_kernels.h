// CPU reference kernels of the physics-informed ops (ExpressionLoss, SamplePoints; see ir.h).
#pragma once

#include <cstdint>

#include "stepgraph/ir.h"

namespace sg::cpu {

// weight * mean_m r(m)^2 with r an expression over X[m] and U's jet components at point m;
// *term = that value, *total (+)= it, dU = its gradient with respect to U.
void expression_loss(const float* U, const float* X, float* total, float* term, float* dU, int64_t M,
                     int64_t d, int64_t O, const ExprLossAttrs& a, bool accumulate_total);

// The points of the draw at `step` (pinn::sample_coordinate in src/pinn/sample_math.h).
void sample_points(const int32_t* step, float* X, int64_t M, int64_t d, const SampleAttrs& a);

}  // namespace sg::cpu
