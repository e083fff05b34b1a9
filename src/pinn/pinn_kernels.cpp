#include "pinn/pinn_kernels.h"

#include <algorithm>
#include <cmath>

#include "pinn/expression.h"
#include "stepgraph/rng.h"

namespace sg::cpu {

void expression_loss(const float* U, const float* X, float* total, float* term, float* dU, int64_t M,
                     int64_t d, int64_t O, const ExprLossAttrs& a, bool accumulate_total) {
  const pinn::Expression& e = *a.expr;
  const size_t nv = a.vars.size();
  SG_ASSERT(nv == e.variables.size() && nv <= 64);
  double vars[64], grad[64];
  const double scale = a.weight / static_cast<double>(std::max<int64_t>(M, 1));
  double sum = 0;
  std::fill(dU, dU + a.K * M * O, 0.0f);
  for (int64_t m = 0; m < M; ++m) {
    for (size_t v = 0; v < nv; ++v) {
      const ExprVar& s = a.vars[v];
      switch (s.kind) {
        case ExprVar::Kind::Coordinate: vars[v] = X[m * d + s.index]; break;
        case ExprVar::Kind::Jet: vars[v] = U[(s.index * M + m) * O + s.output]; break;
        case ExprVar::Kind::Constant: vars[v] = s.value; break;
      }
    }
    const double r = e.eval_grad(vars, grad);
    sum += r * r;
    for (size_t v = 0; v < nv; ++v) {
      const ExprVar& s = a.vars[v];
      if (s.kind != ExprVar::Kind::Jet) continue;
      float& g = dU[(s.index * M + m) * O + s.output];
      g = static_cast<float>(g + 2.0 * scale * r * grad[v]);
    }
  }
  const double value = scale * sum;
  *term = static_cast<float>(value);
  *total = accumulate_total ? static_cast<float>(*total + value) : static_cast<float>(value);
}

double sample_coordinate(const SampleAttrs& a, int64_t step, int64_t i, int k, int d) {
  const int64_t draw = a.every > 0 ? step / a.every : 0;
  if (k == a.face_dim) return a.face_value;
  if (a.face_dim == -2) {  // every face of the box: this point's face from its own draw
    const uint64_t f = mix_seed(mix_seed(mix_seed(a.seed, static_cast<uint64_t>(draw)), static_cast<uint64_t>(i)), 977) %
                       static_cast<uint64_t>(2 * d);
    if (static_cast<int>(f / 2) == k) return f % 2 ? a.hi[k] : a.lo[k];
  }
  // A counter-based draw: the same (seed, draw, point, coordinate) gives the same number on any
  // device, with no state to carry between steps.
  const uint64_t h = mix_seed(mix_seed(mix_seed(a.seed, static_cast<uint64_t>(draw)), static_cast<uint64_t>(i)),
                              static_cast<uint64_t>(k));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return a.lo[k] + (a.hi[k] - a.lo[k]) * u;
}

void sample_points(const int32_t* step, float* X, int64_t M, int64_t d, const SampleAttrs& a) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < d; ++k)
      X[i * d + k] = static_cast<float>(sample_coordinate(a, *step, i, static_cast<int>(k), static_cast<int>(d)));
}

}  // namespace sg::cpu
