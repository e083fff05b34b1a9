// The elementwise losses (PointwiseLoss) and their derivatives in the prediction, shared by the
// CPU reference and (as __device__ code) the CUDA kernel. PyTorch's semantics:
//   l1:              |p - t|, d = sign(p - t) (0 at 0)                       (torch.nn.L1Loss)
//   huber(delta):    0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta)  (torch.nn.HuberLoss)
//   bce_with_logits: max(z, 0) - z t + log1p(exp(-|z|)), d = sigmoid(z) - t
//                    (torch.nn.BCEWithLogitsLoss; stable for large |z|)
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "stepgraph/ir.h"

namespace sg {

template <class T>
SG_HD T pointwise_loss(PointwiseForm form, T delta, T p, T t, T* grad) {
  switch (form) {
    case PointwiseForm::L1: {
      const T d = p - t;
      *grad = d > T(0) ? T(1) : d < T(0) ? T(-1) : T(0);
      return std::fabs(d);
    }
    case PointwiseForm::Huber: {
      const T d = p - t, a = std::fabs(d);
      if (a <= delta) {
        *grad = d;
        return T(0.5) * d * d;
      }
      *grad = d > T(0) ? delta : -delta;
      return delta * (a - T(0.5) * delta);
    }
    case PointwiseForm::BceWithLogits: {
      const T e = std::exp(-std::fabs(p));
      *grad = (p >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e)) - t;
      return (p > T(0) ? p : T(0)) - p * t + std::log1p(e);
    }
  }
  *grad = T(0);
  return T(0);
}

}  // namespace sg
