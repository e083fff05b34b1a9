// Forward-mode jets through elementwise activations, shared by the CPU reference and the CUDA
// kernels. A jet of a scalar field at one point holds its value, first derivatives along
// the d inputs, and the second derivatives a problem asks for (pairs (i, j)); components are
// stacked: 0 = value, 1 + i = d/dx_i, 1 + d + p = d^2/dx_i dx_j for pair p.
//
// For y = g(a) with a a jet:
//   y0 = g(a0),  y_i = g'(a0) a_i,  y_p = g''(a0) a_i a_j + g'(a0) a_p,
// and for a Laplacian component p over the inputs S (JetSpec::trace):
//   y_p = g''(a0) sum_{i in S} a_i^2 + g'(a0) a_p.
#pragma once

#include <cmath>

#include "backend/activation_math.h"
#include "core/host_device.h"
#include "stepgraph/ir.h"

namespace sg {

// g and its first three derivatives at z.
template <class T>
SG_HD void act_derivs(Activation act, T z, T* g0, T* g1, T* g2, T* g3) {
  switch (act) {
    case Activation::None: *g0 = z, *g1 = T(1), *g2 = T(0), *g3 = T(0); return;
    case Activation::ReLU: *g0 = z > T(0) ? z : T(0), *g1 = z > T(0) ? T(1) : T(0), *g2 = T(0), *g3 = T(0); return;
    case Activation::Tanh: {
      const T t = std::tanh(z), s = T(1) - t * t;
      *g0 = t, *g1 = s, *g2 = T(-2) * t * s, *g3 = T(-2) * s * s + T(4) * t * t * s;
      return;
    }
    case Activation::Sin: *g0 = std::sin(z), *g1 = std::cos(z), *g2 = -std::sin(z), *g3 = -std::cos(z); return;
    case Activation::Sigmoid: {
      const T s = T(1) / (T(1) + std::exp(-z)), d1 = s * (T(1) - s), d2 = d1 * (T(1) - T(2) * s);
      *g0 = s, *g1 = d1, *g2 = d2, *g3 = d2 * (T(1) - T(2) * s) - T(2) * d1 * d1;
      return;
    }
    case Activation::Softplus: {
      const T s = T(1) / (T(1) + std::exp(-z)), d1 = s * (T(1) - s);
      *g0 = z > T(20) ? z : std::log1p(std::exp(z)), *g1 = s, *g2 = d1, *g3 = d1 * (T(1) - T(2) * s);
      return;
    }
    case Activation::GELU: {  // 0.5 z (1 + tanh(u)), u = k (z + c z^3)
      const T k = T(0.7978845608028654), c = T(0.044715);
      const T u1 = k * (T(1) + T(3) * c * z * z), u2 = T(6) * k * c * z, u3 = T(6) * k * c;
      const T t = std::tanh(k * (z + c * z * z * z)), s = T(1) - t * t;
      const T t1 = s * u1, t2 = s * u2 - T(2) * t * s * u1 * u1;
      const T t3 = s * u3 - T(6) * t * s * u1 * u2 - T(2) * s * s * u1 * u1 * u1 + T(4) * t * t * s * u1 * u1 * u1;
      *g0 = T(0.5) * z * (T(1) + t);
      *g1 = T(0.5) * (T(1) + t) + T(0.5) * z * t1;
      *g2 = t1 + T(0.5) * z * t2;
      *g3 = T(1.5) * t2 + T(0.5) * z * t3;
      return;
    }
    case Activation::SiLU: {  // z s(z): (z s)^(n) = n s^(n-1) + z s^(n)
      const T s = T(1) / (T(1) + std::exp(-z)), d1 = s * (T(1) - s), d2 = d1 * (T(1) - T(2) * s);
      const T d3 = d2 * (T(1) - T(2) * s) - T(2) * d1 * d1;
      *g0 = z * s, *g1 = s + z * d1, *g2 = T(2) * d1 + z * d2, *g3 = T(3) * d2 + z * d3;
      return;
    }
    case Activation::LeakyReLU: {  // the default slope (act_default_param)
      const T k = T(act_default_param(act));
      *g0 = z > T(0) ? z : k * z, *g1 = z > T(0) ? T(1) : k, *g2 = T(0), *g3 = T(0);
      return;
    }
    case Activation::ELU: {  // the default alpha
      const T a = T(act_default_param(act)), e = a * std::exp(z);
      if (z > T(0)) *g0 = z, *g1 = T(1), *g2 = T(0), *g3 = T(0);
      else *g0 = a * std::expm1(z), *g1 = e, *g2 = e, *g3 = e;
      return;
    }
    case Activation::Exp: {
      const T e = std::exp(z);
      *g0 = e, *g1 = e, *g2 = e, *g3 = e;
      return;
    }
    case Activation::Square: *g0 = z * z, *g1 = T(2) * z, *g2 = T(2), *g3 = T(0); return;
    case Activation::GELUErf: {  // z Phi(z): Phi' = phi, phi' = -z phi
      const T Phi = T(0.5) * (T(1) + std::erf(z * T(0.7071067811865476)));
      const T phi = T(0.3989422804014327) * std::exp(T(-0.5) * z * z);
      *g0 = z * Phi, *g1 = Phi + z * phi, *g2 = phi * (T(2) - z * z), *g3 = phi * (z * z * z - T(4) * z);
      return;
    }
  }
}

// sin(2 pi p) and cos(2 pi p). On the device sincospi reduces the argument exactly (2p is exact
// in binary), so no rounding of 2 pi p enters the phase: accurate for large p, unlike fast-math
// intrinsics. One call gives both.
template <class T>
SG_HD void fourier_sincos(T p, T* s, T* c) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == sizeof(float)) sincospif(T(2) * p, s, c);
  else sincospi(T(2) * p, s, c);
#else
  const T w = T(6.283185307179586);
  *s = std::sin(w * p), *c = std::cos(w * p);
#endif
}
// sin(2 pi p) (cos_part false) or cos(2 pi p) and their derivatives with respect to p, from
// s = sin(2 pi p) and c = cos(2 pi p).
template <class T>
SG_HD void fourier_derivs(bool cos_part, T s, T c, T* g0, T* g1, T* g2, T* g3) {
  const T w = T(6.283185307179586);
  if (!cos_part) *g0 = s, *g1 = w * c, *g2 = -w * w * s, *g3 = -w * w * w * c;
  else *g0 = c, *g1 = -w * s, *g2 = -w * w * c, *g3 = w * w * w * s;
}
template <class T>
SG_HD void fourier_derivs(bool cos_part, T p, T* g0, T* g1, T* g2, T* g3) {
  T s, c;
  fourier_sincos(p, &s, &c);
  fourier_derivs(cos_part, s, c, g0, g1, g2, g3);
}

// v[i] for a run-time i < D. With D known at compile time (the CUDA kernels) every v[k] is read
// and the one wanted kept, so a jet stays in registers: a local array indexed at run time would
// live in memory. On the device the choice is a bit mask, not a select: nvcc turned the chain
// of selects back into an indexed load from a local array (the tanh jet backward kept a 144-byte
// stack frame). D < 0: plain indexing (the CPU reference).
template <int D, class T>
SG_HD T pick_select(const T* v, int i) {
  T r = v[0];
  for (int k = 1; k < D; ++k)
    if (k == i) r = v[k];
  return r;
}
template <int D, class T>
SG_HD void add_at_select(T* v, int i, T x) {
  for (int k = 0; k < D; ++k)
    if (k == i) v[k] += x;
}
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float masked(float x, bool keep) { return __uint_as_float(__float_as_uint(x) & (0u - keep)); }
#endif
template <int D, class T>
SG_HD T pick(const T* v, int i) {
  if constexpr (D < 0) {
    return v[i];
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == sizeof(float)) {
      unsigned r = 0;
      for (int k = 0; k < D; ++k) r |= __float_as_uint(masked(v[k], k == i));
      return __uint_as_float(r);
    } else {
      return pick_select<D>(v, i);
    }
#else
    return pick_select<D>(v, i);
#endif
  }
}
template <int D, class T>
SG_HD void add_at(T* v, int i, T x) {
  if constexpr (D < 0) {
    v[i] += x;
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == sizeof(float)) {
      for (int k = 0; k < D; ++k) v[k] += masked(x, k == i);  // + 0 elsewhere: v unchanged
    } else {
      add_at_select<D>(v, i, x);
    }
#else
    add_at_select<D>(v, i, x);
#endif
  }
}

// The product of first derivatives that second-derivative component p picks up through a
// nonlinearity: a_i a_j for the pair (i, j), sum over S of a_i^2 for a Laplacian over S. a1
// points at the d first derivatives.
template <int D, class T>
SG_HD T pair_product(const JetSpec& js, int p, const T* a1) {
  if (js.trace[p] == 0) return pick<D>(a1, js.pi[p]) * pick<D>(a1, js.pj[p]);
  const int d = D < 0 ? js.d : D;
  T s = T(0);
  for (int k = 0; k < (D < 0 ? kMaxJetDim : D) && k < d; ++k)
    if ((js.trace[p] >> k) & 1) s += a1[k] * a1[k];
  return s;
}
// da1 += c * d pair_product / d a1.
template <int D, class T>
SG_HD void pair_product_backward(const JetSpec& js, int p, const T* a1, T c, T* da1) {
  if (js.trace[p] == 0) {
    add_at<D>(da1, js.pi[p], c * pick<D>(a1, js.pj[p]));
    add_at<D>(da1, js.pj[p], c * pick<D>(a1, js.pi[p]));
    return;
  }
  const int d = D < 0 ? js.d : D;
  for (int k = 0; k < (D < 0 ? kMaxJetDim : D) && k < d; ++k)
    if ((js.trace[p] >> k) & 1) da1[k] += T(2) * c * a1[k];
}

// y = g(a) for one point and one column; a and y hold the K components. D: js.d when known at
// compile time, else -1. NP: a compile-time bound on js.npairs (arrays of 1 + D + NP stay in
// registers on the GPU; the caller dispatches on npairs).
// EXACT: js.npairs is NP (known at compile time), so the pair loop needs no run-time bound.
template <class T, int D = -1, int NP = kMaxJetPairs, bool EXACT = false>
SG_HD void jet_apply(const JetSpec& js, T g0, T g1, T g2, const T* a, T* y) {
  const int d = D < 0 ? js.d : D;
  y[0] = g0;
  for (int i = 0; i < d; ++i) y[1 + i] = g1 * a[1 + i];
  for (int p = 0; p < NP && (EXACT || p < js.npairs); ++p) y[1 + d + p] = g2 * pair_product<D>(js, p, a + 1) + g1 * a[1 + d + p];
}

// da = (dy/da)^T dy for one point and one column.
template <class T, int D = -1, int NP = kMaxJetPairs, bool EXACT = false>
SG_HD void jet_apply_backward(const JetSpec& js, T g1, T g2, T g3, const T* a, const T* dy, T* da) {
  const int d = D < 0 ? js.d : D;
  T d0 = dy[0] * g1;
  for (int i = 0; i < d; ++i) {
    d0 += dy[1 + i] * g2 * a[1 + i];
    da[1 + i] = dy[1 + i] * g1;
  }
  for (int p = 0; p < NP && (EXACT || p < js.npairs); ++p) {
    const T dyp = dy[1 + d + p];
    d0 += dyp * (g3 * pair_product<D>(js, p, a + 1) + g2 * a[1 + d + p]);
    pair_product_backward<D>(js, p, a + 1, dyp * g2, da + 1);
    da[1 + d + p] = dyp * g1;
  }
  da[0] = d0;
}

}  // namespace sg
