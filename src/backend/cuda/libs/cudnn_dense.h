// A dense layer with its FP8 scaling statistic as ONE cuDNN frontend graph (cudnn_dense.cpp,
// compiled only with the frontend headers: STEPGRAPH_HAVE_CUDNN); the seed's matmul -> scale ->
// bias -> activation -> AMAX:
//   Z = scale * (X . W^T) + b      X [B, I], W [O, I] (row-major, as the Dense op stores them), b [O]
//   Y = act(Z)                     [B, O]
//   amax = max |Y|                 [1], fp32 (a reduction node of the same graph)
// Z is an output only when backward needs the pre-activation (the Dense op's optional out[1]).
// Like cudnn_conv.h this header keeps the frontend out of every other translation unit; plans
// are built, tuned and cached by the same machinery as the convolutions' (ConvPlanOptions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/libs/cudnn_conv.h"

namespace sg::cuda {

struct DenseAmaxGeometry {
  int64_t B = 0, I = 0, O = 0;   // rows, inputs, outputs
  bool bias = true;              // b present
  bool preact = false;           // Z written (a tensor of its own, not virtual)
  Activation act = Activation::None;
  float scale = 1.0f;            // a host scalar passed by value (the seed's scale node)
  ConvIO io = ConvIO::F32;       // X, W, b, Y, Z; the network's layers are F32 (BF16: probing)
};

// "" when the graph can express `act` (none, relu, gelu as its tanh approximation, tanh,
// sigmoid), else why not: sin and softplus have no exact cuDNN pointwise mode here.
std::string dense_amax_refusal(Activation act);

// The built (or loaded) plan; null with `why` when cuDNN has no engine for the graph under the
// options' filters (deterministic; no TF32 at Precision::FP32), or the activation is refused.
// Z may be null when !g.preact; b null when !g.bias.
std::unique_ptr<ConvPlan> dense_amax_plan(const std::shared_ptr<CudnnContext>& ctx, const DenseAmaxGeometry& g,
                                          const void* X, const void* W, const void* b, void* Y, void* Z, float* amax,
                                          const ConvPlanOptions& opt, std::string* why);

// The frontend's validation and shape inference of the graph for `g`, without a GPU
// (libcudnn.so.9 must load): "" when it validates and the inferred Y is [B, O] row-major.
std::string check_dense_amax_graph(const DenseAmaxGeometry& g);

}  // namespace sg::cuda
