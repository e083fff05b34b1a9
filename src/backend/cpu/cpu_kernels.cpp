#include "backend/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/activation_math.h"
#include "backend/cpu/parallel.h"
#include "backend/jet_math.h"
#include "backend/loss_math.h"
#include "data/feistel.h"
#include "optim/nan_watch.h"

namespace sg::cpu {

namespace {
inline void store(float* out, double v, bool acc) { *out = acc ? static_cast<float>(*out + v) : static_cast<float>(v); }
}  // namespace

void gather_batch(const std::vector<GatherArray>& arrays, const int32_t* step, int32_t* valid, int64_t N,
                  int64_t B, const GatherAttrs& a) {
  const int64_t G = B * a.shards;  // the global batch; this one is its slice a.shard
  const int64_t bpe = gather_batches_per_epoch(N, G, a.partial_last);
  const int64_t s = *step, epoch = s / bpe, pos0 = (s % bpe) * G + a.shard * B;
  const int64_t v = std::min(B, N - pos0);
  *valid = static_cast<int32_t>(v);
  for (int64_t j = 0; j < B; ++j) {
    const uint64_t pos = static_cast<uint64_t>(pos0 + (j < v ? j : 0));  // padding repeats a real row
    const int64_t r = a.shuffle ? static_cast<int64_t>(feistel_permute(pos, N, a.seed, epoch)) : static_cast<int64_t>(pos);
    for (const GatherArray& g : arrays)
      std::memcpy(static_cast<char*>(g.batch) + j * g.row_bytes, static_cast<const char*>(g.data) + r * g.row_bytes,
                  g.row_bytes);
  }
}

void dense_forward(const float* X, const float* W, const float* b, float* Y, float* Z, int64_t B,
                   int64_t I, int64_t O, Activation act, int64_t bias_rows) {
  parallel_for(B, I * O, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = X + r * I;
      for (int64_t o = 0; o < O; ++o) {
        const float* w = W + o * I;
        double s = b && r < bias_rows ? b[o] : 0.0;
        for (int64_t i = 0; i < I; ++i) s += static_cast<double>(x[i]) * w[i];
        // Rounding z to float first makes the activation see exactly what Z stores.
        float z = static_cast<float>(s);
        if (Z) Z[r * O + o] = z;
        Y[r * O + o] = static_cast<float>(act_forward<double>(act, z));
      }
    }
  });
}

void dense_backward(const float* dY, const float* X, const float* W, const float* Y,
                    const float* Z, float* dX, float* dW, float* db, int64_t B, int64_t I,
                    int64_t O, Activation act, bool acc_dx, bool acc_dw, bool acc_db, int64_t bias_rows) {
  // dZ in double: the reference keeps full precision between the fused stages.
  std::vector<double> dZ(static_cast<size_t>(B * O));
  for (int64_t k = 0; k < B * O; ++k)
    dZ[k] = dY[k] * act_derivative<double>(act, Y[k], Z ? Z[k] : 0.0f);
  if (db) {
    for (int64_t o = 0; o < O; ++o) {
      double s = 0;
      for (int64_t r = 0; r < bias_rows; ++r) s += dZ[r * O + o];
      store(db + o, s, acc_db);
    }
  }
  if (dW) {
    parallel_for(O, B * I, [&](int64_t o0, int64_t o1) {
      std::vector<double> row(static_cast<size_t>(I));
      for (int64_t o = o0; o < o1; ++o) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int64_t r = 0; r < B; ++r) {
          double d = dZ[r * O + o];
          if (d == 0.0) continue;
          const float* x = X + r * I;
          for (int64_t i = 0; i < I; ++i) row[i] += d * x[i];
        }
        for (int64_t i = 0; i < I; ++i) store(dW + o * I + i, row[i], acc_dw);
      }
    });
  }
  if (dX) {
    parallel_for(B, O * I, [&](int64_t r0, int64_t r1) {
      std::vector<double> row(static_cast<size_t>(I));
      for (int64_t r = r0; r < r1; ++r) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int64_t o = 0; o < O; ++o) {
          double d = dZ[r * O + o];
          if (d == 0.0) continue;
          const float* w = W + o * I;
          for (int64_t i = 0; i < I; ++i) row[i] += d * w[i];
        }
        for (int64_t i = 0; i < I; ++i) store(dX + r * I + i, row[i], acc_dx);
      }
    });
  }
}

void jet_input(const float* X, float* J, int64_t B, const JetSpec& js) {
  const int64_t d = js.d, K = js.K();
  for (int64_t c = 0; c < K; ++c)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < d; ++k)
        J[(c * B + b) * d + k] = c == 0 ? X[b * d + k] : (c == 1 + k ? 1.0f : 0.0f);
}

namespace {
// Runs `fn(a[K], out...)` for every point and column of a jet tensor: gathers the K components
// (strided by B*H) into a small array in double.
template <class Fn>
void for_each_jet(int64_t B, int64_t H, Fn fn) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) fn(b, h, [=](int c) { return (c * B + b) * H + h; });
}
}  // namespace

void jet_activation(const float* A, float* Y, int64_t B, int64_t H, const JetSpec& js, Activation act) {
  const int K = js.K();
  for_each_jet(B, H, [&](int64_t, int64_t, auto at) {
    double a[1 + kMaxJetDim + kMaxJetPairs] = {}, y[1 + kMaxJetDim + kMaxJetPairs] = {}, g0 = 0, g1 = 0, g2 = 0, g3 = 0;
    for (int c = 0; c < K; ++c) a[c] = A[at(c)];
    act_derivs<double>(act, a[0], &g0, &g1, &g2, &g3);
    jet_apply<double>(js, g0, g1, g2, a, y);
    for (int c = 0; c < K; ++c) Y[at(c)] = static_cast<float>(y[c]);
  });
}

void jet_activation_backward(const float* dY, const float* A, float* dA, int64_t B, int64_t H,
                             const JetSpec& js, Activation act, bool acc) {
  const int K = js.K();
  for_each_jet(B, H, [&](int64_t, int64_t, auto at) {
    double a[1 + kMaxJetDim + kMaxJetPairs] = {}, dy[1 + kMaxJetDim + kMaxJetPairs], da[1 + kMaxJetDim + kMaxJetPairs];
    double g0 = 0, g1 = 0, g2 = 0, g3 = 0;
    for (int c = 0; c < K; ++c) a[c] = A[at(c)], dy[c] = dY[at(c)];
    act_derivs<double>(act, a[0], &g0, &g1, &g2, &g3);
    jet_apply_backward<double>(js, g1, g2, g3, a, dy, da);
    for (int c = 0; c < K; ++c) store(dA + at(c), da[c], acc);
  });
}

void fourier_features(const float* P, float* F, int64_t B, int64_t m, const JetSpec& js) {
  const int K = js.K();
  for_each_jet(B, m, [&](int64_t b, int64_t h, auto at) {
    double p[1 + kMaxJetDim + kMaxJetPairs] = {}, y[1 + kMaxJetDim + kMaxJetPairs], g0 = 0, g1 = 0, g2 = 0, g3 = 0;
    for (int c = 0; c < K; ++c) p[c] = P[at(c)];
    for (int part = 0; part < 2; ++part) {
      fourier_derivs<double>(part == 1, p[0], &g0, &g1, &g2, &g3);
      jet_apply<double>(js, g0, g1, g2, p, y);
      for (int c = 0; c < K; ++c) F[(c * B + b) * 2 * m + part * m + h] = static_cast<float>(y[c]);
    }
  });
}

void fourier_features_backward(const float* dF, const float* P, float* dP, int64_t B, int64_t m,
                               const JetSpec& js, bool acc) {
  const int K = js.K();
  for_each_jet(B, m, [&](int64_t b, int64_t h, auto at) {
    double p[1 + kMaxJetDim + kMaxJetPairs] = {}, dy[1 + kMaxJetDim + kMaxJetPairs], da[1 + kMaxJetDim + kMaxJetPairs];
    double sum[1 + kMaxJetDim + kMaxJetPairs] = {};
    double g0 = 0, g1 = 0, g2 = 0, g3 = 0;
    for (int c = 0; c < K; ++c) p[c] = P[at(c)];
    for (int part = 0; part < 2; ++part) {
      for (int c = 0; c < K; ++c) dy[c] = dF[(c * B + b) * 2 * m + part * m + h];
      fourier_derivs<double>(part == 1, p[0], &g0, &g1, &g2, &g3);
      jet_apply_backward<double>(js, g1, g2, g3, p, dy, da);
      for (int c = 0; c < K; ++c) sum[c] += da[c];
    }
    for (int c = 0; c < K; ++c) store(dP + at(c), sum[c], acc);
  });
}

void add(const float* A, const float* B, float* Y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) Y[k] = A[k] + B[k];
}

void add_backward(const float* dY, float* dA, float* dB, int64_t n, bool acc_a, bool acc_b) {
  for (int64_t k = 0; k < n; ++k) {
    if (dA) store(dA + k, dY[k], acc_a);
    if (dB) store(dB + k, dY[k], acc_b);
  }
}

namespace {
int64_t valid_rows(const int32_t* valid, int64_t B) {
  if (!valid) return B;
  SG_REQUIRE(*valid >= 0 && *valid <= B, "loss: valid row count ", *valid, " is outside [0, ", B, "]");
  return *valid;
}
}  // namespace

void softmax_cross_entropy(const float* logits, const int32_t* labels, const int32_t* valid,
                           float* loss, float* dlogits, int64_t B, int64_t C, Reduction r, int64_t per_row,
                           bool ignore_negative) {
  const int64_t V = valid_rows(valid, B) * per_row;  // label rows that are not padding
  int64_t counted = 0;
  for (int64_t i = 0; i < V; ++i) counted += !(ignore_negative && labels[i] < 0);
  const double scale = r == Reduction::Mean ? 1.0 / static_cast<double>(std::max<int64_t>(counted, 1)) : 1.0;
  double total = 0;
  std::fill(dlogits + V * C, dlogits + B * per_row * C, 0.0f);
  for (int64_t i = 0; i < V; ++i) {
    const float* z = logits + i * C;
    int32_t y = labels[i];
    if (ignore_negative && y < 0) {
      std::fill(dlogits + i * C, dlogits + (i + 1) * C, 0.0f);
      continue;
    }
    SG_REQUIRE(y >= 0 && y < C, "softmax_cross_entropy: label ", y, " of row ", i,
               " is outside [0, ", C, ")");
    double mx = z[0];
    for (int64_t c = 1; c < C; ++c) mx = std::max(mx, static_cast<double>(z[c]));
    double se = 0;
    for (int64_t c = 0; c < C; ++c) se += std::exp(z[c] - mx);
    double lse = mx + std::log(se);
    total += lse - z[y];
    for (int64_t c = 0; c < C; ++c) {
      double p = std::exp(z[c] - lse);
      dlogits[i * C + c] = static_cast<float>((p - (c == y ? 1.0 : 0.0)) * scale);
    }
  }
  *loss = static_cast<float>(total * scale);
}

void softmax_cross_entropy_smoothed(const float* logits, const int32_t* labels, const int32_t* valid, float* loss,
                                    float* dlogits, int64_t B, int64_t C, Reduction r, int64_t per_row,
                                    bool ignore_negative, double label_smoothing, const float* class_weights) {
  const int64_t V = valid_rows(valid, B) * per_row;
  const double eps = label_smoothing, u = eps / static_cast<double>(C);
  auto w = [&](int64_t c) { return class_weights ? static_cast<double>(class_weights[c]) : 1.0; };
  double W = 0;  // the smoothing term's gradient has sum_c w[c] p_c
  for (int64_t c = 0; c < C; ++c) W += w(c);
  double denom = 0;  // the mean's: sum of w[y] over the labelled rows (torch's weighted mean)
  for (int64_t i = 0; i < V; ++i) {
    const int32_t y = labels[i];
    if (ignore_negative && y < 0) continue;
    SG_REQUIRE(y >= 0 && y < C, "softmax_cross_entropy: label ", y, " of row ", i, " is outside [0, ", C, ")");
    denom += w(y);
  }
  const double scale = r == Reduction::Mean ? (denom > 0 ? 1.0 / denom : 0.0) : 1.0;
  double total = 0;
  std::fill(dlogits + V * C, dlogits + B * per_row * C, 0.0f);
  for (int64_t i = 0; i < V; ++i) {
    const float* z = logits + i * C;
    const int32_t y = labels[i];
    if (ignore_negative && y < 0) {
      std::fill(dlogits + i * C, dlogits + (i + 1) * C, 0.0f);
      continue;
    }
    double mx = z[0];
    for (int64_t c = 1; c < C; ++c) mx = std::max(mx, static_cast<double>(z[c]));
    double se = 0;
    for (int64_t c = 0; c < C; ++c) se += std::exp(z[c] - mx);
    const double lse = mx + std::log(se), a = (1 - eps) * w(y);
    double smooth = 0;
    for (int64_t c = 0; c < C; ++c) smooth += w(c) * (lse - z[c]);
    total += a * (lse - z[y]) + u * smooth;
    // d/dz_c: a (p_c - [c = y]) + u (W p_c - w[c])
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(z[c] - lse);
      dlogits[i * C + c] = static_cast<float>((p * (a + u * W) - u * w(c) - (c == y ? a : 0.0)) * scale);
    }
  }
  *loss = static_cast<float>(total * scale);
}

void mean_squared_error(const float* pred, const float* target, const int32_t* valid, float* loss,
                        float* dpred, int64_t B, int64_t T, Reduction r) {
  const int64_t n = valid_rows(valid, B) * T;
  const double scale = r == Reduction::Mean ? 1.0 / static_cast<double>(std::max<int64_t>(n, 1)) : 1.0;
  double total = 0;
  std::fill(dpred + n, dpred + B * T, 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    double d = static_cast<double>(pred[k]) - target[k];
    total += d * d;
    dpred[k] = static_cast<float>(2.0 * d * scale);
  }
  *loss = static_cast<float>(total * scale);
}

void pointwise_loss(const float* pred, const float* target, const int32_t* valid, float* loss, float* dpred,
                    int64_t B, int64_t T, Reduction r, PointwiseForm form, double delta) {
  const int64_t n = valid_rows(valid, B) * T;
  const double scale = r == Reduction::Mean ? 1.0 / static_cast<double>(std::max<int64_t>(n, 1)) : 1.0;
  double total = 0;
  std::fill(dpred + n, dpred + B * T, 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    double g = 0;
    total += sg::pointwise_loss<double>(form, delta, pred[k], target[k], &g);
    dpred[k] = static_cast<float>(g * scale);
  }
  *loss = static_cast<float>(total * scale);
}

void schedule(int32_t* step, const float* hyper, float* sched, const ScheduleAttrs& a, const float* loss,
              const float* norm, int32_t* watch) {
  const int32_t t = ++step[0];
  const double base = hyper[hyper::kBaseLr];
  double lr = base;
  switch (a.kind) {
    case ScheduleKind::Constant: break;
    case ScheduleKind::Step: lr = base * std::pow(a.gamma, static_cast<double>((t - 1) / a.step_size)); break;
    case ScheduleKind::Cosine:
      if (t <= a.warmup_steps) {
        lr = base * t / static_cast<double>(a.warmup_steps);
      } else {
        double span = static_cast<double>(std::max<int64_t>(a.total_steps - a.warmup_steps, 1));
        double prog = std::min(1.0, (t - a.warmup_steps) / span);
        double lo = base * a.min_lr_ratio;
        lr = lo + (base - lo) * 0.5 * (1.0 + std::cos(3.141592653589793 * prog));
      }
      break;
  }
  sched[sched::kLr] = static_cast<float>(lr);
  sched[sched::kBias1] = static_cast<float>(1.0 - std::pow(a.beta1, t));
  sched[sched::kBias2] = static_cast<float>(1.0 - std::pow(a.beta2, t));
  sched[sched::kStep] = static_cast<float>(t);
  sched[sched::kSkip] = watch_step(t, loss, norm, watch, a.on_nan);
}

void sgd_update(const std::vector<ParamSlice>& ps, const float* hyper, const float* sched,
                const SgdAttrs& a) {
  if (sched[sched::kSkip] != 0.0f) return;
  const double lr = sched[sched::kLr], wd = hyper[hyper::kWeightDecay];
  const bool first = sched[sched::kStep] <= 1.0f;
  for (const ParamSlice& s : ps) {
    for (int64_t k = 0; k < s.n; ++k) {
      double g = s.g[k] + wd * s.p[k];
      if (a.momentum != 0.0) {
        double buf = first ? g : a.momentum * s.m[k] + (1.0 - a.dampening) * g;
        s.m[k] = static_cast<float>(buf);
        g = a.nesterov ? g + a.momentum * buf : buf;
      }
      s.p[k] = static_cast<float>(s.p[k] - lr * g);
    }
  }
}

void clip_grad_norm(const std::vector<std::pair<float*, int64_t>>& grads, float* norm, double max_norm) {
  double sq = 0;
  for (const auto& [g, n] : grads)
    for (int64_t k = 0; k < n; ++k) sq += static_cast<double>(g[k]) * g[k];
  const float total = static_cast<float>(std::sqrt(sq));
  // As torch: the factor from the (f32) norm, clamped at 1; NaN stays NaN (a diverged step shows).
  const float factor = std::fmin(static_cast<float>(max_norm) / (total + 1e-6f), 1.0f);
  norm[0] = total;
  norm[1] = std::isnan(total) ? total : factor;
  if (norm[1] == 1.0f) return;
  for (const auto& [g, n] : grads)
    for (int64_t k = 0; k < n; ++k) g[k] *= norm[1];
}

void adam_update(const std::vector<ParamSlice>& ps, const float* hyper, const float* sched,
                 const AdamAttrs& a) {
  if (sched[sched::kSkip] != 0.0f) return;
  const double lr = sched[sched::kLr], wd = hyper[hyper::kWeightDecay];
  const double bc1 = sched[sched::kBias1], bc2 = sched[sched::kBias2];
  const double step_size = lr / bc1, bc2_sqrt = std::sqrt(bc2);
  for (const ParamSlice& s : ps) {
    for (int64_t k = 0; k < s.n; ++k) {
      double p = s.p[k], g = s.g[k];
      if (a.decoupled_weight_decay) p *= 1.0 - lr * wd;
      else g += wd * p;
      double m = a.beta1 * s.m[k] + (1.0 - a.beta1) * g;
      double v = a.beta2 * s.v[k] + (1.0 - a.beta2) * g * g;
      s.m[k] = static_cast<float>(m);
      s.v[k] = static_cast<float>(v);
      p -= step_size * m / (std::sqrt(v) / bc2_sqrt + a.eps);
      s.p[k] = static_cast<float>(p);
    }
  }
}

}  // namespace sg::cpu
