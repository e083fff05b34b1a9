// The torch.nn.Sequential that matches a stepgraph Sequential parameter for parameter, and the
// names its state_dict gives them: for Trainer::export_weights (format torch), torch_module and
// load_weights (which reads such a state_dict back).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/ir.h"
#include "stepgraph/nn.h"

namespace sg {

struct TorchLayout {
  std::vector<std::pair<std::string, std::string>> names;  // (ours, torch's), in model order
  std::string module;                                       // Python source of the Sequential
};

// The weights' (parameters' and constants') shapes by name, from a trainer's persistent tensors.
std::map<std::string, Shape> weight_shapes(const std::vector<TensorInfo>& tensors);

// `weights`: the model's weight shapes by name (the compiled trainer's). An Error names the first
// layer without a torch module of the same parameters and layout, and says what to do instead.
TorchLayout torch_layout(const Layer& model, const std::map<std::string, Shape>& weights);

}  // namespace sg
