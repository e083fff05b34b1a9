// Activation functions and their derivatives, shared by the CPU reference and (as __device__
// code) the CUDA kernels. GELU is the tanh approximation, as cuBLASLt's GELU epilogue and
// PyTorch's gelu(approximate="tanh").
#pragma once

#include <cmath>

#include "stepgraph/ir.h"

#include "core/host_device.h"

namespace sg {

template <class T>
SG_HD T act_forward(Activation a, T z) {
  switch (a) {
    case Activation::None: return z;
    case Activation::ReLU: return z > T(0) ? z : T(0);
    case Activation::GELU: {
      const T k = T(0.7978845608028654);  // sqrt(2 / pi)
      return T(0.5) * z * (T(1) + std::tanh(k * (z + T(0.044715) * z * z * z)));
    }
    case Activation::Tanh: return std::tanh(z);
    case Activation::Sigmoid: return T(1) / (T(1) + std::exp(-z));
    case Activation::Sin: return std::sin(z);
    case Activation::Softplus: return z > T(20) ? z : std::log1p(std::exp(z));  // log(1 + e^z)
  }
  return z;
}

// d act / d z, from the output y (relu, tanh, sigmoid) or the pre-activation z (gelu, sin).
template <class T>
SG_HD T act_derivative(Activation a, T y, T z) {
  switch (a) {
    case Activation::None: return T(1);
    case Activation::ReLU: return y > T(0) ? T(1) : T(0);
    case Activation::GELU: {
      const T k = T(0.7978845608028654);
      T t = std::tanh(k * (z + T(0.044715) * z * z * z));
      return T(0.5) * (T(1) + t) + T(0.5) * z * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * z * z);
    }
    case Activation::Tanh: return T(1) - y * y;
    case Activation::Sigmoid: return y * (T(1) - y);
    case Activation::Sin: return std::cos(z);
    case Activation::Softplus: return T(1) / (T(1) + std::exp(-z));
  }
  return T(1);
}

}  // namespace sg
