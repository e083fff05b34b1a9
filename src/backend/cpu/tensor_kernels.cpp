#include "backend/cpu/tensor_kernels.h"

#include "backend/activation_math.h"
#include "backend/dropout_math.h"

#include <utility>
#include <vector>

namespace sg::cpu {

namespace {
inline void store(float* out, double v, bool acc) { *out = acc ? static_cast<float>(*out + v) : static_cast<float>(v); }
}  // namespace

void binary(BinaryOp op, const float* A, const float* B, float* Y, const Broadcast& g) {
  for (int64_t p = 0; p < g.count; ++p) {
    int64_t ia, ib;
    broadcast_offsets(g, p, &ia, &ib);
    Y[p] = static_cast<float>(binary_forward<double>(op, A[ia], B[ib]));
  }
}

void reduce_terms(BinaryOp op, bool x_is_a, const float* dY, const float* A, const float* B, float* X,
                  const BroadcastReduce& g, double scale, bool acc) {
  for (int64_t j = 0; j < g.count; ++j) {
    int64_t y0, a0, b0;
    reduce_base(g, j, &y0, &a0, &b0);
    double s = 0;
    for (int64_t r = 0; r < g.reduced; ++r) {
      int64_t y, a, b;
      reduce_step(g, r, &y, &a, &b);
      const double dy = dY[y0 + y], av = A ? A[a0 + a] : 0.0, bv = B ? B[b0 + b] : 0.0;
      s += x_is_a ? binary_grad_a<double>(op, dy, av, bv) : binary_grad_b<double>(op, dy, av, bv);
    }
    store(X + j, scale * s, acc);
  }
}

void expand(const float* A, float* Y, const Broadcast& g, double scale, bool acc) {
  for (int64_t p = 0; p < g.count; ++p) {
    int64_t ia, ib;
    broadcast_offsets(g, p, &ia, &ib);
    store(Y + p, scale * A[ia], acc);
  }
}

void scale_shift(const float* X, float* Y, int64_t n, double a, double b, bool acc) {
  for (int64_t k = 0; k < n; ++k) store(Y + k, a * X[k] + b, acc);
}

void activation(const float* X, float* Y, int64_t n, Activation act, double p) {
  for (int64_t k = 0; k < n; ++k) Y[k] = static_cast<float>(act_forward<double>(act, X[k], p));
}

void matmul(const float* A, const float* B, float* Y, int64_t batch, int64_t M, int64_t N, int64_t K, bool trans_a,
            bool trans_b, bool acc) {
  for (int64_t q = 0; q < batch; ++q) {
    const float *a = A + q * M * K, *b = B + q * K * N;
    float* y = Y + q * M * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += static_cast<double>(trans_a ? a[k * M + i] : a[i * K + k]) * (trans_b ? b[j * K + k] : b[k * N + j]);
        store(y + i * N + j, s, acc);
      }
  }
}

void transpose(const float* X, float* Y, const Shape& xs, int a, int b, bool acc) {
  const int r = static_cast<int>(xs.size());
  Shape ys = xs;
  std::swap(ys[a], ys[b]);
  std::vector<int64_t> xstride(r, 1);
  for (int k = r - 2; k >= 0; --k) xstride[k] = xstride[k + 1] * xs[k + 1];
  std::swap(xstride[a], xstride[b]);  // the stride in X of each axis of Y
  const int64_t n = numel(ys);
  std::vector<int64_t> idx(r, 0);
  for (int64_t q = 0; q < n; ++q) {
    int64_t src = 0;
    for (int k = 0; k < r; ++k) src += idx[k] * xstride[k];
    store(Y + q, X[src], acc);
    for (int k = r - 1; k >= 0 && ++idx[k] == ys[k]; --k) idx[k] = 0;
  }
}

void dropout(const float* X, float* Y, int64_t n, double p, uint64_t key, int32_t step, bool acc) {
  const uint32_t threshold = dropout_threshold(p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  for (int64_t k = 0; k < n; ++k) {
    const float v = dropout_keep(key, step, k, threshold) ? X[k] * scale : 0.0f;
    Y[k] = acc ? Y[k] + v : v;
  }
}

void activation_backward(const float* dY, const float* X, const float* Y, float* dX, int64_t n, Activation act,
                         double p, bool acc) {
  for (int64_t k = 0; k < n; ++k) store(dX + k, dY[k] * act_derivative<double>(act, Y[k], X[k], p), acc);
}

void copy_pieces(const Pieces& pieces) {
  for (const Piece& c : pieces.list)
    for (int64_t r = 0; r < pieces.rows; ++r) {
      float* d = c.dst + r * c.dst_ld;
      const float* s = c.src ? c.src + r * c.src_ld : nullptr;
      for (int64_t k = 0; k < c.w; ++k) store(d + k, s ? s[k] : 0.0, c.acc);
    }
}

}  // namespace sg::cpu
