// User-defined ops: kernels written outside stepgraph, registered at run time and captured in
// the step graph like the built-in ones.
//
//   sg::CustomOpDef cube;
//   cube.name = "cube";
//   cube.output_shapes = [](const std::vector<sg::Shape>& in) { return std::vector<sg::Shape>{in[0]}; };
//   cube.cpu = [](const sg::CustomOpArgs& a) { ... a.out[0][i] = a.in[0][i] * a.in[0][i] * a.in[0][i]; };
//   cube.cuda = [](const sg::CustomOpArgs& a) { launch_cube(a.in[0], a.out[0], n, (cudaStream_t)a.stream); };
//   cube.cpu_backward = ...;   // dX from (dY..., X..., Y...); cuda_backward the same on the device
//   sg::register_op(cube);
//   auto model = sg::sequential({sg::dense(16), sg::custom_layer("cube"), sg::dense(1)});
//   auto y = sg::custom("cube", {x})[0];   // in a model graph
//
// Every tensor is f32 and row-major with the batch axis first. A kernel reads `in` and writes
// every element of each non-null `out`; the CUDA ones launch on `stream` only, without
// synchronizing or allocating (they are recorded into the step's CUDA graph once, at capture,
// and replayed every step without calling the function again). The engine adds a backward's
// dX into an input's gradient when other ops contribute to it too.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "stepgraph/model.h"

namespace sg {

struct CustomOpArgs {
  // Forward: the inputs, and the outputs to write. Backward: dY of every output, then the
  // forward's inputs, then its outputs; dX of every input (null where none is needed).
  std::vector<const float*> in;
  std::vector<float*> out;
  std::vector<Shape> in_shapes, out_shapes;  // with the batch axis
  void* stream = nullptr;                    // CUDA: the cudaStream_t to launch on; CPU: null
};
using CustomKernel = std::function<void(const CustomOpArgs&)>;

struct CustomOpDef {
  std::string name;  // letters, digits, '_' and '-'
  // Per-sample output shapes from per-sample input shapes (no batch axis); throw sg::Error for
  // inputs the op does not take.
  std::function<std::vector<Shape>(const std::vector<Shape>&)> output_shapes;
  CustomKernel cpu;            // required: the reference
  CustomKernel cuda;           // optional: without it, CUDA trainers refuse the op
  CustomKernel cpu_backward;   // optional pair: without them the op is not differentiable
  CustomKernel cuda_backward;
};

// Registers the op for this process; an Error when the name is taken or a required part is missing.
void register_op(CustomOpDef def);
bool is_registered_op(const std::string& name);
const CustomOpDef& registered_op(const std::string& name);  // an Error naming the registered ones

// The op as a layer of one input and one output (Sequential, call() in model graphs).
LayerPtr custom_layer(const std::string& op, std::string name = "");
// The op applied to model-graph tensors: one symbolic tensor per output.
std::vector<SymbolicTensor> custom(const std::string& op, const std::vector<SymbolicTensor>& inputs,
                                   std::string name = "");

}  // namespace sg
