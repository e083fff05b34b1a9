// Activation functions and their derivatives, shared by the CPU reference and (as __device__
// code) the CUDA kernels. GELU is the tanh approximation, as cuBLASLt's GELU epilogue and
// PyTorch's gelu(approximate="tanh"); GELUErf the exact erf form (PyTorch's default). leaky_relu and elu take a parameter p (the negative slope;
// alpha); the two-argument forms use its default (dense layers), the Activation op passes its
// attribute. NaN propagates through every one, as in PyTorch: relu(NaN) is NaN, and relu' passes
// the gradient where y is NaN (torch's threshold_backward zeroes it only where y <= 0).
#pragma once

#include <cmath>

#include "stepgraph/ir.h"

#include "core/host_device.h"

namespace sg {

// The parameter an activation uses when none is given: leaky_relu's slope 0.01, elu's alpha 1.
SG_HD constexpr double act_default_param(Activation a) {
  return a == Activation::LeakyReLU ? 0.01 : a == Activation::ELU ? 1.0 : 0.0;
}

template <class T>
SG_HD T act_forward(Activation a, T z, T p) {
  switch (a) {
    case Activation::None: return z;
    case Activation::ReLU: return z < T(0) ? T(0) : z;  // NaN stays NaN
    case Activation::GELU: {
      const T k = T(0.7978845608028654);  // sqrt(2 / pi)
      return T(0.5) * z * (T(1) + std::tanh(k * (z + T(0.044715) * z * z * z)));
    }
    case Activation::Tanh: return std::tanh(z);
    case Activation::Sigmoid: return T(1) / (T(1) + std::exp(-z));
    case Activation::Sin: return std::sin(z);
    case Activation::Softplus: return z > T(20) ? z : std::log1p(std::exp(z));  // log(1 + e^z)
    case Activation::SiLU: return z / (T(1) + std::exp(-z));                       // z sigmoid(z)
    case Activation::LeakyReLU: return z > T(0) ? z : p * z;
    case Activation::ELU: return z > T(0) ? z : p * std::expm1(z);
    case Activation::Exp: return std::exp(z);
    case Activation::Square: return z * z;
    case Activation::GELUErf: return T(0.5) * z * (T(1) + std::erf(z * T(0.7071067811865476)));
  }
  return z;
}
template <class T>
SG_HD T act_forward(Activation a, T z) {
  return act_forward<T>(a, z, T(act_default_param(a)));
}

// d act / d z, from the output y (relu, tanh, sigmoid, leaky_relu, elu, exp) or the
// pre-activation z (gelu, gelu_erf, sin, softplus, silu, square): activation_needs_preact. leaky_relu and
// elu read the sign of z from y, which holds for p >= 0 (the ops refuse p < 0).
template <class T>
SG_HD T act_derivative(Activation a, T y, T z, T p) {
  switch (a) {
    case Activation::None: return T(1);
    case Activation::ReLU: return y <= T(0) ? T(0) : T(1);
    case Activation::GELU: {
      const T k = T(0.7978845608028654);
      T t = std::tanh(k * (z + T(0.044715) * z * z * z));
      return T(0.5) * (T(1) + t) + T(0.5) * z * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * z * z);
    }
    case Activation::Tanh: return T(1) - y * y;
    case Activation::Sigmoid: return y * (T(1) - y);
    case Activation::Sin: return std::cos(z);
    case Activation::Softplus: return T(1) / (T(1) + std::exp(-z));
    case Activation::SiLU: {
      const T s = T(1) / (T(1) + std::exp(-z));
      return s * (T(1) + z * (T(1) - s));
    }
    case Activation::LeakyReLU: return y > T(0) ? T(1) : p;
    case Activation::ELU: return y > T(0) ? T(1) : y + p;  // alpha e^z
    case Activation::Exp: return y;
    case Activation::Square: return T(2) * z;
    case Activation::GELUErf:  // Phi(z) + z phi(z)
      return T(0.5) * (T(1) + std::erf(z * T(0.7071067811865476))) +
             z * T(0.3989422804014327) * std::exp(T(-0.5) * z * z);
  }
  return T(1);
}
template <class T>
SG_HD T act_derivative(Activation a, T y, T z) {
  return act_derivative<T>(a, y, z, T(act_default_param(a)));
}

}  // namespace sg
