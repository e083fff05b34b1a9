#include "backend/cpu/pinn_kernels.h"

#include <algorithm>
#include <cmath>

#include "pinn/expr_tape.h"
#include "pinn/sample_math.h"

namespace sg::cpu {

void expression_loss(const float* U, const float* X, float* total, float* term, float* dU, int64_t M,
                     int64_t d, int64_t O, const ExprLossAttrs& a, bool accumulate_total) {
  SG_ASSERT(a.vars.size() == a.expr->variables.size());
  const std::vector<pinn::TapeInstr> tape = a.expr->tape();
  const int n = static_cast<int>(tape.size());
  std::vector<double> val(tape.size()), adj(tape.size());
  const double scale = a.weight / static_cast<double>(std::max<int64_t>(M, 1));
  double sum = 0;
  for (int64_t m = 0; m < M; ++m) {
    const double r = pinn::expression_point(tape.data(), n, a.vars.data(), U, X, dU, m, M, d, O, a.K, 2.0 * scale,
                                            val.data(), adj.data());
    sum += r * r;
  }
  const double value = scale * sum;
  *term = static_cast<float>(value);
  if (total) *total = accumulate_total ? static_cast<float>(*total + value) : static_cast<float>(value);
}

void sample_points(const int32_t* step, float* X, int64_t M, int64_t d, const SampleAttrs& a) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < d; ++k)
      X[i * d + k] = static_cast<float>(pinn::sample_coordinate(a, *step, i, static_cast<int>(k), static_cast<int>(d)));
}

}  // namespace sg::cpu
