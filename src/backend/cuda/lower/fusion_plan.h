// Which ops of a step share a launch, decided once before any op is lowered (after memory
// planning: some fusions need the planned addresses). Each entry lets one op do another's work,
// so the tensor between them is not written and read back, or not at all. The lowering of each
// family reads this record; explain prints its `decisions`, one line each with the reason.
// Where a library may still refuse (a cuBLASLt epilogue without an algorithm, a cuDNN graph
// without an engine), the lowering takes the unfused path and says so on the op's line.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/backend.h"

namespace sg::cuda {

struct DenseDevice;

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
  // Softmax cross-entropy -> the last dense layer right before it (no activation, at most 32
  // outputs) that its kernel computes too.
  std::map<int, int> loss_dense;
  // Dense backward ops right after such a loss whose input gradient that loss kernel writes
  // (with the previous layer's activation derivative when `into` has it).
  std::set<int> loss_dx;
  // Jet activation -> the dense op right before it whose bias it adds to the value rows (a
  // cuBLASLt jet layer: the product has no bias epilogue for some rows only).
  std::map<int, int> jet_bias;
  // Expression loss -> the loss right before it on the same network pass: one launch for both.
  std::map<int, int> merged_loss;
  // Add op summing a loss term onto the total -> the expression loss whose launch does it.
  std::map<int, int> loss_sum;
  // Schedule op -> the optimizer update right after it, whose launch computes the schedule.
  std::map<int, int> schedule_in_update;
  // Runs of dense backward ops whose weight gradients run in one launch at the run's last op
  // (wgrad_groups, where the memory plan keeps the run's inputs).
  std::vector<std::vector<int>> wgrad_runs;
  // Dense op -> the AbsMax op reading its output: tried as one cuDNN graph (cudnn_dense.h).
  std::map<int, int> amax_graph;
  // AbsMax op -> why its dense layer is not tried as one cuDNN graph.
  std::map<int, std::string> amax_refused;
  // Why the step stays on one stream (empty: ops that share no memory may run on a second one).
  // Which ops go there is worked out after lowering (runtime/stream_plan.h), from the launches
  // each op kept and the ops whose library plans share the cuBLASLt workspace: both known only
  // once the libraries have accepted or refused their plans.
  std::string one_stream;
  // Every decision above, for explain: "fuse: ops 7,8 -> dense+softmax_ce (...)".
  std::vector<std::string> decisions;

  // The pairs of ops one launch does the work of (each fusion above, each batched weight
  // gradient's run): the stream plan keeps them together.
  std::vector<std::pair<int, int>> links() const;
};

// The fusions above for `p` with tensors at `ptrs` (the planned addresses); none with
// opt.fusion false. jet_dense: whether the jet layers may take the fp32 fused kernel (not at
// precision tf32x3 on tensor cores, whose products run as 3xTF32); dev: the GPU the dense rules
// (dense_dispatch.h) read.
FusionPlan plan_fusions(const Program& p, const std::vector<void*>& ptrs, const LowerOptions& opt, bool jet_dense,
                        const DenseDevice& dev);

// Why a step of `p` stays on one stream (FusionPlan::one_stream), or empty (lower/streams.cpp).
std::string one_stream_reason(const Program& p, const LowerOptions& opt);

// Whether op i may write op j's first output early (a dense layer an AbsMax op's, a fused loss
// the next backward's dX): the memory planner placed it for op j, so its bytes must not be any
// of op i's tensors (whose last use may be op i) nor anything an op between them writes. Empty
// if it may; else why not.
std::string early_write_refusal(const Program& p, const std::vector<void*>& ptrs, int i, int j);

}  // namespace sg::cuda
