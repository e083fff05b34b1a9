// Lion's constants as both of its kernels take them (the CPU reference in lion.cpp and the CUDA
// one in lion_kernels.cu), so that both round the same numbers.
#pragma once

#include "stepgraph/custom_optimizer.h"

namespace sg {

struct LionConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
};

inline LionConstants lion_constants(const UpdateArgs& a) {
  const double b1 = a.constants.at(0), b2 = a.constants.at(1);
  return {static_cast<float>(b1), static_cast<float>(1.0 - b1), static_cast<float>(b2), static_cast<float>(1.0 - b2)};
}

namespace cuda {
void lion_update(const UpdateArgs& a);  // lion_kernels.cu (CUDA builds only)
}

}  // namespace sg
