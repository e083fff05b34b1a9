// A float64 interpreter of forward ops (jet ops included), written independently of the
// kernels: the reference the jet and physics-informed tests compare against.
#pragma once

#include "backend/jet_math.h"
#include "test_util.h"

namespace sg::test {

using Values = std::map<std::string, std::vector<double>>;

inline std::vector<double> forward_double(const Program& p, Values v, TensorId out) {
  auto val = [&](TensorId t) -> std::vector<double>& { return v[p.tensor(t).name]; };
  for (const Op& op : p.ops()) {
    const Shape& s0 = p.tensor(op.in[0]).shape;
    switch (op.kind) {
      case OpKind::SamplePoints: break;  // the points come in `v`
      case OpKind::JetInput: {  // the value-only points (inputs 1...) first, as they are
        const JetAttrs& a = op.attr<JetAttrs>();
        const JetSpec& js = a.jet;
        const int64_t B = s0[0], d = s0[1];
        std::vector<double> J;
        for (size_t h = 1; h < op.in.size(); ++h) J.insert(J.end(), val(op.in[h]).begin(), val(op.in[h]).end());
        const int64_t H0 = static_cast<int64_t>(J.size()) / d;
        J.resize((H0 + js.K() * B) * d, 0.0);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t k = 0; k < d; ++k) {
            J[(H0 + b) * d + k] = val(op.in[0])[b * d + k];
            J[(H0 + (1 + k) * B + b) * d + k] = 1.0;
          }
        val(op.out[0]) = J;
        break;
      }
      case OpKind::Dense: {
        const int64_t R = s0[0], I = s0[1], O = p.tensor(op.in[1]).shape[0];
        const DenseAttrs& a = op.attr<DenseAttrs>();
        const int64_t br = a.bias_rows ? a.bias_rows : R;
        const auto& X = val(op.in[0]);
        const auto& W = val(op.in[1]);
        std::vector<double> Y(R * O);
        for (int64_t r = 0; r < R; ++r)
          for (int64_t o = 0; o < O; ++o) {
            double z = op.in[2] != kNone && r < br ? val(op.in[2])[o] : 0.0;
            for (int64_t i = 0; i < I; ++i) z += X[r * I + i] * W[o * I + i];
            double g0, g1, g2, g3;
            act_derivs<double>(a.act, z, &g0, &g1, &g2, &g3);
            Y[r * O + o] = g0;
          }
        val(op.out[0]) = Y;
        break;
      }
      case OpKind::JetActivation:
      case OpKind::FourierFeatures: {
        // The head's value rows are jets with no derivatives (one component), then the K blocks.
        const JetAttrs& a = op.attr<JetAttrs>();
        const bool ff = op.kind == OpKind::FourierFeatures;
        const int64_t H = s0[1], W = ff ? 2 * H : H;
        const auto& A = val(op.in[0]);
        std::vector<double> Y(s0[0] * W);
        auto run = [&](const JetSpec& js, int64_t row0, int64_t B) {
          const int K = js.K();
          for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h) {
              double ac[16], y[16], g0, g1, g2, g3;
              for (int c = 0; c < K; ++c) ac[c] = A[(row0 + c * B + b) * H + h];
              for (int part = 0; part < (ff ? 2 : 1); ++part) {
                if (ff) fourier_derivs<double>(part == 1, ac[0], &g0, &g1, &g2, &g3);
                else act_derivs<double>(a.act, ac[0], &g0, &g1, &g2, &g3);
                jet_apply<double>(js, g0, g1, g2, ac, y);
                for (int c = 0; c < K; ++c) Y[(row0 + c * B + b) * W + part * H + h] = y[c];
              }
            }
        };
        run(JetSpec{}, 0, a.head);
        run(a.jet, a.head, (s0[0] - a.head) / a.jet.K());
        val(op.out[0]) = Y;
        break;
      }
      case OpKind::Add: {
        auto y = val(op.in[0]);
        for (size_t k = 0; k < y.size(); ++k) y[k] += val(op.in[1])[k];
        val(op.out[0]) = y;
        break;
      }
      default: return val(out);  // the loss and backward ops: the forward pass is done
    }
  }
  return val(out);
}

}  // namespace sg::test
