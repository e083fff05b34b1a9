// A physics-informed network's hidden dense layer over jet rows, fused with the jet activation
// next to it, so the tensor between them is neither written nor read back:
//   forward:  Z = X W^T + bias (on the value rows), Y = act(Z) as jets;
//   backward: dA = (act(A) as jets)'^T (dZ W): the input gradient of a dense layer times the jet
//             derivative of the activation below it.
// Jet rows lie as in ir.h (JetAttrs): `head` value-only rows, then the K components' blocks of B
// rows. Each 128-row tile holds 128 / K points with all their components, so one thread holds
// every component of its points' outputs and applies the jet rule in registers. The product is
// fp32 FFMA (no tensor cores): this kernel serves the fp32 precision.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stepgraph/ir.h"

namespace sg::cuda {

struct JetDense {
  int64_t head = 0, B = 0;  // rows: head value-only rows, then js.K() blocks of B rows
  int64_t K = 0, N = 0;     // the product's depth and width: X [rows, K], outputs [rows, N]
  JetSpec js;
  Activation act = Activation::None;
  bool backward = false;
  const float* X = nullptr;  // forward: the layer's input; backward: dZ of the layer above
  const float* W = nullptr;  // forward: W [N, K] (Y = X W^T); backward: W [K, N] (dY = dZ W)
  // Forward: Z (the pre-activation, which the backward reads) and Y.
  const float* bias = nullptr;  // [N], on the value rows (nullable)
  float* Z = nullptr;
  float* Y = nullptr;
  // Backward: dA = the jet rule's transpose at A (the pre-activation below) applied to dZ W.
  const float* A = nullptr;
  float* dA = nullptr;
  // Forward, optionally: the one-output layer after the activation (FusionPlan::jet_dense_head),
  // U [rows, 1] = Y W2^T + bias2 (a scalar, nullable) on the value rows.
  const float* W2 = nullptr;  // [N]
  const float* bias2 = nullptr;
  float* U = nullptr;
};

// Whether a layer of this jet, depth K and width N takes the fused kernel: jets of four
// components (value, two first derivatives and one second-order component: 2D Poisson's
// Laplacian, Burgers' and heat's (t, x) with u_xx; or three first derivatives), N = 64 or 128,
// K a multiple of 32 up to 128, a device that gives a block its shared memory (100 KB at
// K = N = 128: A100, H100/H200). Only with LowerOptions::fusion (plan_fusions). Pointers must be 16-byte aligned
// (jet_dense_aligned).
bool jet_dense_fits(const JetSpec& js, int64_t K, int64_t N);
bool jet_dense_aligned(const JetDense& g);
void jet_dense(const JetDense& g, cudaStream_t s);

}  // namespace sg::cuda
