// Which ops of a step share a launch, decided once before any op is lowered (after memory
// planning: one fusion needs the planned addresses). Each entry lets one op do another's work,
// so the tensor between them is not written and read back, or not at all.
#pragma once

#include <map>
#include <set>
#include <vector>

#include "stepgraph/ir.h"

namespace sg::cuda {

struct FusionPlan {
  // Dense backward b -> the dense backward q that reads its dX: b's input-gradient product
  // applies q's activation derivative in its epilogue (cuBLASLt DRELU/DGELU or our kernel).
  std::map<int, int> into;
  // Dense forward ops whose ReLU keeps its mask (RELU_AUX) for such a fused backward.
  std::set<int> relu_mask;
  // Jet activation backward -> the one-output skinny dense backward whose dX it forms in
  // registers (dZ W): the skinny backward computes dW and db only.
  std::map<int, int> jet_dy;
  // Of those jet activation backwards, the ones that also form the skinny layer's weight and
  // bias gradients (its input Y is that activation's output: Y is recomputed from A in
  // registers, so the skinny backward launches nothing and Y is not read back).
  std::set<int> jet_dy_weight;
  // Fourier features op -> the projection (dense, no bias) it computes itself from a seed jet or
  // plain rows (fourier_features_seeded).
  std::map<int, int> fourier_seeded;
  // Of those, Fourier op -> the jet seed op (JetInput: the points, at most one head set) whose
  // jet only the projection reads: the features kernel reads the points themselves, and the
  // seed launches nothing.
  std::map<int, int> seed_into_fourier;
  // Jet activation -> the dense layer right before it whose product it shares a launch with
  // (jet_dense.cuh): the layer writes the pre-activation and the activation's jet.
  std::map<int, int> jet_dense_forward;
  // Of those jet activations, activation -> the one-output dense layer right after it that reads
  // its output (a PINN's output layer, no activation): the jet dense kernel's epilogue also forms
  // that layer's output U = Y w^T (+ b on the value rows) from Y in registers, so the layer
  // launches nothing and Y is not read back (Y is still written).
  std::map<int, int> jet_dense_head;
  // Jet activation backward -> the dense backward right before it whose input-gradient product
  // applies the activation's jet derivative in its epilogue: dY is never written.
  std::map<int, int> jet_dense_backward;
};

// The fusions above for `p` with tensors at `ptrs` (the planned addresses). jet_dense: whether
// the jet layers may take the fp32 fused kernel (not at precision tf32x3, whose products run on
// tensor cores).
FusionPlan plan_fusions(const Program& p, const std::vector<void*>& ptrs, bool jet_dense);

}  // namespace sg::cuda
