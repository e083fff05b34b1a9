// CPU reference for the sequence-model ops: layer norm, token embedding and scaled dot-product
// attention. Double accumulation; each output element is summed by one thread in a fixed
// order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/parallel.h"

namespace sg::cpu {

namespace {
inline void store(float* out, double v, bool acc) { *out = acc ? static_cast<float>(*out + v) : static_cast<float>(v); }
}  // namespace

void layer_norm(const float* X, const float* gamma, const float* beta, float* Y, float* mean, float* rstd,
                int64_t R, int64_t E, double eps) {
  parallel_for(R, 4 * E, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = X + r * E;
      double s = 0;
      for (int64_t e = 0; e < E; ++e) s += x[e];
      const double mu = s / static_cast<double>(E);
      double v = 0;
      for (int64_t e = 0; e < E; ++e) v += (x[e] - mu) * (x[e] - mu);
      // Rounded to float first, so backward sees exactly the statistics forward used.
      const float m = static_cast<float>(mu), rs = static_cast<float>(1.0 / std::sqrt(v / static_cast<double>(E) + eps));
      mean[r] = m;
      rstd[r] = rs;
      for (int64_t e = 0; e < E; ++e)
        Y[r * E + e] = static_cast<float>((static_cast<double>(x[e]) - m) * rs * gamma[e] + beta[e]);
    }
  });
}

void layer_norm_backward(const float* dY, const float* X, const float* gamma, const float* mean, const float* rstd,
                         float* dX, float* dgamma, float* dbeta, int64_t R, int64_t E, bool acc_dx, bool acc_dgamma,
                         bool acc_dbeta) {
  if (dgamma || dbeta) {
    std::vector<double> dg(static_cast<size_t>(E), 0.0), db(static_cast<size_t>(E), 0.0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t e = 0; e < E; ++e) {
        const double xhat = (static_cast<double>(X[r * E + e]) - mean[r]) * rstd[r];
        dg[e] += dY[r * E + e] * xhat;
        db[e] += dY[r * E + e];
      }
    for (int64_t e = 0; e < E; ++e) {
      if (dgamma) store(dgamma + e, dg[e], acc_dgamma);
      if (dbeta) store(dbeta + e, db[e], acc_dbeta);
    }
  }
  if (!dX) return;
  // dX = rstd (g - mean(g) - xhat mean(g xhat)) with g = dY gamma.
  parallel_for(R, 6 * E, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      double m1 = 0, m2 = 0;
      for (int64_t e = 0; e < E; ++e) {
        const double g = static_cast<double>(dY[r * E + e]) * gamma[e];
        const double xhat = (static_cast<double>(X[r * E + e]) - mean[r]) * rstd[r];
        m1 += g;
        m2 += g * xhat;
      }
      m1 /= static_cast<double>(E);
      m2 /= static_cast<double>(E);
      for (int64_t e = 0; e < E; ++e) {
        const double g = static_cast<double>(dY[r * E + e]) * gamma[e];
        const double xhat = (static_cast<double>(X[r * E + e]) - mean[r]) * rstd[r];
        store(dX + r * E + e, rstd[r] * (g - m1 - xhat * m2), acc_dx);
      }
    }
  });
}

namespace {
// The id of token k (row-major over [B, S]), checked to be an integer in [0, V).
int64_t token_id(const int32_t* ids_i32, const float* ids_f32, int64_t k, int64_t S, int64_t V) {
  if (ids_i32) {
    const int32_t id = ids_i32[k];
    SG_REQUIRE(id >= 0 && id < V, "embedding: token id ", id, " at batch row ", k / S, ", position ", k % S,
               " is outside [0, ", V, "), the embedding's vocabulary");
    return id;
  }
  const float f = ids_f32[k];
  SG_REQUIRE(f >= 0 && f < static_cast<float>(V) && f == std::floor(f), "embedding: token id ", f, " at batch row ",
             k / S, ", position ", k % S, " is not an integer in [0, ", V, "), the embedding's vocabulary");
  return static_cast<int64_t>(f);
}
}  // namespace

void embedding(const int32_t* ids_i32, const float* ids_f32, const float* table, const float* pos, float* Y,
               int64_t B, int64_t S, int64_t V, int64_t E) {
  for (int64_t k = 0; k < B * S; ++k) {
    const float* t = table + token_id(ids_i32, ids_f32, k, S, V) * E;
    const float* p = pos ? pos + (k % S) * E : nullptr;
    for (int64_t e = 0; e < E; ++e) Y[k * E + e] = p ? static_cast<float>(static_cast<double>(t[e]) + p[e]) : t[e];
  }
}

void embedding_backward(const float* dY, const int32_t* ids_i32, const float* ids_f32, float* dtable, float* dpos,
                        int64_t B, int64_t S, int64_t V, int64_t P, int64_t E, bool acc_table, bool acc_pos) {
  const int64_t T = B * S;
  std::vector<double> sum(static_cast<size_t>(E));
  if (dtable) {
    // Tokens sorted by id (stable: in token order within an id), each id's rows summed in
    // double: deterministic, and memory in the number of tokens rather than the vocabulary.
    std::vector<int64_t> id(static_cast<size_t>(T)), order(static_cast<size_t>(T));
    for (int64_t k = 0; k < T; ++k) id[k] = token_id(ids_i32, ids_f32, k, S, V);
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return id[a] < id[b]; });
    if (!acc_table) std::fill(dtable, dtable + V * E, 0.0f);
    for (int64_t i = 0; i < T;) {
      const int64_t v = id[order[i]];
      std::fill(sum.begin(), sum.end(), 0.0);
      for (; i < T && id[order[i]] == v; ++i)
        for (int64_t e = 0; e < E; ++e) sum[e] += dY[order[i] * E + e];
      for (int64_t e = 0; e < E; ++e) dtable[v * E + e] = static_cast<float>(dtable[v * E + e] + sum[e]);
    }
  }
  if (dpos) {
    if (!acc_pos) std::fill(dpos + S * E, dpos + P * E, 0.0f);  // positions beyond S get no gradient
    for (int64_t s = 0; s < S; ++s) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t e = 0; e < E; ++e) sum[e] += dY[(b * S + s) * E + e];
      for (int64_t e = 0; e < E; ++e) store(dpos + s * E + e, sum[e], acc_pos);
    }
  }
}

namespace {
// Row i of head h in batch b of a [B, S, H*D] tensor.
inline const float* head_row(const float* T, const AttentionShape& a, int64_t b, int64_t h, int64_t i) {
  return T + ((b * a.S + i) * a.H + h) * a.D;
}
inline double dot(const float* x, const float* y, int64_t n) {
  double s = 0;
  for (int64_t d = 0; d < n; ++d) s += static_cast<double>(x[d]) * y[d];
  return s;
}
}  // namespace

void attention(const float* Q, const float* K, const float* V, float* O, float* L, const AttentionShape& a) {
  const int64_t S = a.S, D = a.D;
  parallel_for(a.B * a.H, 2 * S * S * D, [&](int64_t t0, int64_t t1) {
    std::vector<double> score(static_cast<size_t>(S)), o(static_cast<size_t>(D));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / a.H, h = t % a.H;
      for (int64_t i = 0; i < S; ++i) {
        const int64_t keys = a.causal ? i + 1 : S;  // the causal mask: keys j <= i
        const float* q = head_row(Q, a, b, h, i);
        double mx = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          score[j] = a.scale * dot(q, head_row(K, a, b, h, j), D);
          mx = std::max(mx, score[j]);
        }
        double se = 0;
        for (int64_t j = 0; j < keys; ++j) se += std::exp(score[j] - mx);
        const double lse = mx + std::log(se);
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j < keys; ++j) {
          const double p = std::exp(score[j] - lse);
          const float* v = head_row(V, a, b, h, j);
          for (int64_t d = 0; d < D; ++d) o[d] += p * v[d];
        }
        float* out = O + ((b * S + i) * a.H + h) * D;
        for (int64_t d = 0; d < D; ++d) out[d] = static_cast<float>(o[d]);
        L[(b * a.H + h) * S + i] = static_cast<float>(lse);
      }
    }
  });
}

void attention_backward(const float* dO, const float* Q, const float* K, const float* V, const float* O,
                        const float* L, float* dQ, float* dK, float* dV, const AttentionShape& a, bool acc_q,
                        bool acc_k, bool acc_v) {
  const int64_t S = a.S, D = a.D;
  // One (batch, head) per item: its rows of dQ, dK, dV are its own columns.
  parallel_for(a.B * a.H, 4 * S * S * D, [&](int64_t t0, int64_t t1) {
    std::vector<double> gq(static_cast<size_t>(S * D)), gk(static_cast<size_t>(S * D)), gv(static_cast<size_t>(S * D));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / a.H, h = t % a.H;
      std::fill(gq.begin(), gq.end(), 0.0);
      std::fill(gk.begin(), gk.end(), 0.0);
      std::fill(gv.begin(), gv.end(), 0.0);
      for (int64_t i = 0; i < S; ++i) {
        const float *q = head_row(Q, a, b, h, i), *dout = head_row(dO, a, b, h, i);
        // D_i = dO_i . O_i = sum_j P_ij (dO_i . V_j)
        const double Di = dot(dout, head_row(O, a, b, h, i), D);
        const double lse = L[(b * a.H + h) * S + i];
        const int64_t keys = a.causal ? i + 1 : S;
        for (int64_t j = 0; j < keys; ++j) {
          const float *k = head_row(K, a, b, h, j), *v = head_row(V, a, b, h, j);
          const double p = std::exp(a.scale * dot(q, k, D) - lse);
          const double ds = p * (dot(dout, v, D) - Di);  // d loss / d score_ij
          for (int64_t d = 0; d < D; ++d) {
            gq[i * D + d] += a.scale * ds * k[d];
            gk[j * D + d] += a.scale * ds * q[d];
            gv[j * D + d] += p * dout[d];
          }
        }
      }
      for (int64_t i = 0; i < S; ++i) {
        const int64_t off = ((b * S + i) * a.H + h) * D;
        for (int64_t d = 0; d < D; ++d) {
          if (dQ) store(dQ + off + d, gq[i * D + d], acc_q);
          if (dK) store(dK + off + d, gk[i * D + d], acc_k);
          if (dV) store(dV + off + d, gv[i * D + d], acc_v);
        }
      }
    }
  });
}

}  // namespace sg::cpu
