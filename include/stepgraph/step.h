// A training step built by the caller instead of from a model and a loss: the forward pass and
// the loss terms; the Trainer adds backward and the optimizer (trainer.h).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/nn.h"

namespace sg {

// A step whose forward pass and loss terms are built by the caller (physics-informed training:
// several point sets, jets, expression losses). The Trainer adds backward and the optimizer.
struct CustomStep {
  TensorId loss = kNone;                              // the total loss, f32 [1]
  std::vector<std::pair<TensorId, TensorId>> seeds;   // (tensor, d loss / d tensor) per term
  size_t num_forward_ops = 0;                         // ops [0, n) are the forward pass
  std::vector<std::pair<std::string, TensorId>> terms;  // named loss terms, f32 [1] each
  int64_t input_dim = 0;                              // the model's input width (for predict)
  // Parameters the step adds beside the model's, reported by name (Trainer::coefficients):
  // a physics problem's trainable coefficients.
  std::vector<std::pair<std::string, TensorId>> coefficients;
};
using StepBuilder = std::function<CustomStep(GraphBuilder& g, Layer& model)>;

}  // namespace sg
