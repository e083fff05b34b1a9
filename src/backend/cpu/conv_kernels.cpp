// CPU reference for convolution and pooling: NHWC images, KRSC filters, double accumulation.
// Parallel over batch rows; each output element is summed by one thread in a fixed order, so
// results do not depend on the thread count.
#include <limits>

#include "backend/activation_math.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/parallel.h"

namespace sg::cpu {

namespace {
inline void store(float* out, double v, bool acc) { *out = acc ? static_cast<float>(*out + v) : static_cast<float>(v); }

// The input row (h) or column (w) that output position p reads through filter tap r; outside
// [0, extent) is padding.
inline int64_t tap(int64_t p, int64_t r, int64_t stride, int64_t pad, int64_t dil) { return p * stride - pad + r * dil; }
}  // namespace

void conv2d_forward(const float* X, const float* Wt, const float* b, float* Y, const ConvShape& s, Activation act) {
  const int64_t C = s.C, K = s.K;
  parallel_for(s.N * s.P, s.Q * K * s.R * s.S * C, [&](int64_t row0, int64_t row1) {
    std::vector<double> acc(static_cast<size_t>(K));
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t n = row / s.P, p = row % s.P;
      for (int64_t q = 0; q < s.Q; ++q) {
        for (int64_t k = 0; k < K; ++k) acc[k] = b ? b[k] : 0.0;
        for (int64_t r = 0; r < s.R; ++r) {
          const int64_t h = tap(p, r, s.stride_h, s.pad_h, s.dil_h);
          if (h < 0 || h >= s.H) continue;
          for (int64_t t = 0; t < s.S; ++t) {
            const int64_t w = tap(q, t, s.stride_w, s.pad_w, s.dil_w);
            if (w < 0 || w >= s.W) continue;
            const float* x = X + ((n * s.H + h) * s.W + w) * C;
            for (int64_t k = 0; k < K; ++k) {
              const float* f = Wt + ((k * s.R + r) * s.S + t) * C;
              double d = 0;
              for (int64_t c = 0; c < C; ++c) d += static_cast<double>(x[c]) * f[c];
              acc[k] += d;
            }
          }
        }
        float* y = Y + (row * s.Q + q) * K;
        for (int64_t k = 0; k < K; ++k) y[k] = static_cast<float>(act_forward<double>(act, static_cast<float>(acc[k])));
      }
    }
  });
}

void conv2d_backward(const float* dY, const float* X, const float* Wt, const float* Y, float* dX, float* dW,
                     float* db, const ConvShape& s, Activation act, bool acc_dx, bool acc_dw, bool acc_db) {
  const int64_t C = s.C, K = s.K, RSC = s.R * s.S * C, rows = s.N * s.P * s.Q;
  // dZ [N*P*Q, K] in double: the reference keeps full precision between the fused stages.
  std::vector<double> dZ(static_cast<size_t>(rows * K));
  for (int64_t i = 0; i < rows * K; ++i) dZ[i] = dY[i] * act_derivative<double>(act, Y[i], 0.0);
  if (db) {
    for (int64_t k = 0; k < K; ++k) {
      double sum = 0;
      for (int64_t i = 0; i < rows; ++i) sum += dZ[i * K + k];
      store(db + k, sum, acc_db);
    }
  }
  if (dW) {
    // dW[k,r,t,c] = sum over (n, p, q) of dZ[n,p,q,k] X[n, h(p,r), w(q,t), c]; one filter per item.
    parallel_for(K, rows * RSC, [&](int64_t k0, int64_t k1) {
      std::vector<double> acc(static_cast<size_t>(RSC));
      for (int64_t k = k0; k < k1; ++k) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t n = 0; n < s.N; ++n)
          for (int64_t p = 0; p < s.P; ++p)
            for (int64_t q = 0; q < s.Q; ++q) {
              const double d = dZ[((n * s.P + p) * s.Q + q) * K + k];
              if (d == 0.0) continue;
              for (int64_t r = 0; r < s.R; ++r) {
                const int64_t h = tap(p, r, s.stride_h, s.pad_h, s.dil_h);
                if (h < 0 || h >= s.H) continue;
                for (int64_t t = 0; t < s.S; ++t) {
                  const int64_t w = tap(q, t, s.stride_w, s.pad_w, s.dil_w);
                  if (w < 0 || w >= s.W) continue;
                  const float* x = X + ((n * s.H + h) * s.W + w) * C;
                  double* a = acc.data() + (r * s.S + t) * C;
                  for (int64_t c = 0; c < C; ++c) a[c] += d * x[c];
                }
              }
            }
        for (int64_t i = 0; i < RSC; ++i) store(dW + k * RSC + i, acc[i], acc_dw);
      }
    });
  }
  if (dX) {
    // dX[n,h,w,c] = sum of dZ[n,p,q,k] W[k,r,t,c] over the taps that read (h, w); one image per item.
    const int64_t HWC = s.H * s.W * C;
    parallel_for(s.N, s.P * s.Q * K * RSC, [&](int64_t n0, int64_t n1) {
      std::vector<double> acc(static_cast<size_t>(HWC));
      for (int64_t n = n0; n < n1; ++n) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t p = 0; p < s.P; ++p)
          for (int64_t q = 0; q < s.Q; ++q)
            for (int64_t k = 0; k < K; ++k) {
              const double d = dZ[((n * s.P + p) * s.Q + q) * K + k];
              if (d == 0.0) continue;
              for (int64_t r = 0; r < s.R; ++r) {
                const int64_t h = tap(p, r, s.stride_h, s.pad_h, s.dil_h);
                if (h < 0 || h >= s.H) continue;
                for (int64_t t = 0; t < s.S; ++t) {
                  const int64_t w = tap(q, t, s.stride_w, s.pad_w, s.dil_w);
                  if (w < 0 || w >= s.W) continue;
                  const float* f = Wt + ((k * s.R + r) * s.S + t) * C;
                  double* a = acc.data() + (h * s.W + w) * C;
                  for (int64_t c = 0; c < C; ++c) a[c] += d * f[c];
                }
              }
            }
        for (int64_t i = 0; i < HWC; ++i) store(dX + n * HWC + i, acc[i], acc_dx);
      }
    });
  }
}

namespace {
// The input offset of the first maximum of output (n, p, q)'s window for channel c.
inline int64_t window_argmax(const float* X, const ConvShape& s, int64_t n, int64_t p, int64_t q, int64_t c) {
  int64_t best = -1;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < s.R; ++r) {
    const int64_t h = tap(p, r, s.stride_h, s.pad_h, 1);
    if (h < 0 || h >= s.H) continue;
    for (int64_t t = 0; t < s.S; ++t) {
      const int64_t w = tap(q, t, s.stride_w, s.pad_w, 1);
      if (w < 0 || w >= s.W) continue;
      const int64_t at = ((n * s.H + h) * s.W + w) * s.C + c;
      // Strictly greater: the first maximum in scan order wins a tie; a NaN is taken at once
      // and then kept, so it propagates.
      if (best < 0 || X[at] > mx || (X[at] != X[at] && mx == mx)) {
        best = at;
        mx = X[at];
      }
    }
  }
  return best;
}
}  // namespace

void max_pool2d(const float* X, float* Y, const ConvShape& s) {
  parallel_for(s.N * s.P, s.Q * s.C * s.R * s.S, [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t n = row / s.P, p = row % s.P;
      for (int64_t q = 0; q < s.Q; ++q)
        for (int64_t c = 0; c < s.C; ++c) Y[(row * s.Q + q) * s.C + c] = X[window_argmax(X, s, n, p, q, c)];
    }
  });
}

void max_pool2d_backward(const float* dY, const float* X, float* dX, const ConvShape& s, bool acc) {
  const int64_t HWC = s.H * s.W * s.C;
  parallel_for(s.N, s.P * s.Q * s.C * s.R * s.S, [&](int64_t n0, int64_t n1) {
    std::vector<double> g(static_cast<size_t>(HWC));
    for (int64_t n = n0; n < n1; ++n) {
      std::fill(g.begin(), g.end(), 0.0);
      for (int64_t p = 0; p < s.P; ++p)
        for (int64_t q = 0; q < s.Q; ++q)
          for (int64_t c = 0; c < s.C; ++c)
            g[window_argmax(X, s, n, p, q, c) - n * HWC] += dY[((n * s.P + p) * s.Q + q) * s.C + c];
      for (int64_t i = 0; i < HWC; ++i) store(dX + n * HWC + i, g[i], acc);
    }
  });
}

void global_avg_pool(const float* X, float* Y, int64_t N, int64_t HW, int64_t C) {
  std::vector<double> sum(static_cast<size_t>(C));
  for (int64_t n = 0; n < N; ++n) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t i = 0; i < HW; ++i)
      for (int64_t c = 0; c < C; ++c) sum[c] += X[(n * HW + i) * C + c];
    for (int64_t c = 0; c < C; ++c) Y[n * C + c] = static_cast<float>(sum[c] / static_cast<double>(HW));
  }
}

void global_avg_pool_backward(const float* dY, float* dX, int64_t N, int64_t HW, int64_t C, bool acc) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < HW; ++i)
      for (int64_t c = 0; c < C; ++c)
        store(dX + (n * HW + i) * C + c, dY[n * C + c] / static_cast<double>(HW), acc);
}

void copy(const float* X, float* Y, int64_t n, bool acc) {
  for (int64_t i = 0; i < n; ++i) store(Y + i, X[i], acc);
}

}  // namespace sg::cpu
