#include "backend/cpu/norm_kernels.h"

#include <cmath>
#include <vector>

namespace sg::cpu {

namespace {
inline void store(float* out, double v, bool acc) { *out = acc ? static_cast<float>(*out + v) : static_cast<float>(v); }
}  // namespace

void batch_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                float* run_mean, float* run_var, int64_t R, int64_t C, double eps, double momentum) {
  std::vector<double> mu(static_cast<size_t>(C), 0.0), var(static_cast<size_t>(C), 0.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) mu[c] += X[r * C + c];
  for (int64_t c = 0; c < C; ++c) mu[c] /= static_cast<double>(R);
  // Two passes (the deviations from the mean), not E[x^2] - E[x]^2, which cancels badly.
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double d = X[r * C + c] - mu[c];
      var[c] += d * d;
    }
  for (int64_t c = 0; c < C; ++c) {
    var[c] /= static_cast<double>(R);
    // Rounded to float first, so backward sees exactly the statistics forward used.
    mean[c] = static_cast<float>(mu[c]);
    rstd[c] = static_cast<float>(1.0 / std::sqrt(var[c] + eps));
    run_mean[c] = static_cast<float>((1 - momentum) * run_mean[c] + momentum * mu[c]);
    run_var[c] = static_cast<float>((1 - momentum) * run_var[c] +
                                    momentum * var[c] * static_cast<double>(R) / static_cast<double>(R - 1));
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      Y[r * C + c] =
          static_cast<float>((static_cast<double>(X[r * C + c]) - mean[c]) * rstd[c] * gamma[c] + beta[c]);
}

void batch_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t C, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta) {
  std::vector<double> sdy(static_cast<size_t>(C), 0.0), sdyx(static_cast<size_t>(C), 0.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (static_cast<double>(X[r * C + c]) - mean[c]) * rstd[c];
      sdy[c] += dY[r * C + c];
      sdyx[c] += dY[r * C + c] * xhat;
    }
  for (int64_t c = 0; c < C; ++c) {
    if (dgamma) store(dgamma + c, sdyx[c], acc_dgamma);
    if (dbeta) store(dbeta + c, sdy[c], acc_dbeta);
  }
  if (!dX) return;
  const double inv_n = 1.0 / static_cast<double>(R);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (static_cast<double>(X[r * C + c]) - mean[c]) * rstd[c];
      const double g = static_cast<double>(gamma[c]) * rstd[c];
      store(dX + r * C + c, g * (dY[r * C + c] - sdy[c] * inv_n - xhat * sdyx[c] * inv_n), acc_dx);
    }
}

void batch_norm_inference(const float* X, const float* gamma, const float* beta, const float* run_mean,
                          const float* run_var, float* Y, int64_t R, int64_t C, double eps) {
  std::vector<double> rs(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) rs[c] = 1.0 / std::sqrt(static_cast<double>(run_var[c]) + eps);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      Y[r * C + c] =
          static_cast<float>((static_cast<double>(X[r * C + c]) - run_mean[c]) * rs[c] * gamma[c] + beta[c]);
}

}  // namespace sg::cpu
