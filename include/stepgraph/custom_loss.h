// User-defined losses: a kernel written outside stepgraph that, given the predictions and the
// targets, writes the loss value and its gradient dY (the seed of backward), as the built-in
// losses' fused ops do; registered at run time and captured in the step graph. A loss can also
// be composed of ops in a model graph (model.h).
//
//   sg::CustomLossDef d;
//   d.name = "log_cosh";                       // mean over every element of log(cosh(p - t))
//   d.cpu = [](const sg::LossArgs& a) {
//     const int64_t rows = a.valid_rows ? *a.valid_rows : a.pred_shape[0], per = sg::numel(a.pred_shape) / a.pred_shape[0];
//     double sum = 0;
//     for (int64_t i = 0; i < sg::numel(a.pred_shape); ++i) {
//       const double e = a.pred[i] - a.target[i];
//       const bool pad = i / per >= rows;
//       sum += pad ? 0 : std::log(std::cosh(e));
//       a.dpred[i] = pad ? 0.0f : static_cast<float>(std::tanh(e) / (rows * per));
//     }
//     *a.loss = static_cast<float>(sum / (rows * per));
//   };
//   d.cuda = [](const sg::LossArgs& a) { launch_log_cosh(a, (cudaStream_t)a.stream); };
//   sg::register_loss(d);
//   auto loss = std::make_shared<sg::CustomLoss>("log_cosh");
//
// The engine infers the loss's gradient scale (how it reduces over the batch) from its CPU kernel,
// as the framework it grew from does (infer_grad_scale below); explain reports it.
#pragma once

#include <functional>
#include <string>

#include "stepgraph/loss.h"

namespace sg {

struct LossArgs {
  const float* pred = nullptr;          // pred_shape, row-major, the batch axis first
  const float* target = nullptr;        // target_shape
  // Rows at or beyond *valid_rows are padding (a padded last batch): no loss, dY 0, not counted
  // by a mean. Null: every row counts. Device memory on CUDA (read it in the kernel).
  const int32_t* valid_rows = nullptr;
  float* loss = nullptr;   // [1]
  float* dpred = nullptr;  // pred_shape: d loss / d pred, every element written
  Shape pred_shape, target_shape;
  void* stream = nullptr;  // CUDA: the cudaStream_t to launch on; CPU: null
};
using LossKernel = std::function<void(const LossArgs&)>;

struct CustomLossDef {
  std::string name;  // letters, digits, '_' and '-'
  LossKernel cpu;    // required: the reference (and what infer_grad_scale probes)
  LossKernel cuda;   // optional: without it, CUDA trainers refuse the loss
  // The target's shape for a prediction's (with the batch axis); default: the same. Targets are f32.
  std::function<Shape(const Shape& pred)> target_shape;
};

// Registers the loss for this process; an Error when the name is taken or the CPU kernel is missing.
void register_loss(CustomLossDef def);
bool is_registered_loss(const std::string& name);

// The seed's infer_grad_scale: the factor a loss puts on each element's gradient for predictions
// of shape `pred`, and the reduction it means. A built-in loss knows both (1/B for a mean
// cross-entropy, 1/(B*T) for a mean squared error, 1 for a sum); a user loss's are found by
// running its CPU reference on B copies of one row and on that row alone (a mean over the batch
// gives 1/B, a sum 1).
struct GradScale {
  double scale = 1.0;
  Reduction reduction = Reduction::Mean;
};
GradScale infer_grad_scale(const Loss& loss, const Shape& pred);

// A registered loss as a Loss: one CustomLoss op writing the loss and dY. `label` (default: the
// registered name) is what describe() says, so that two registrations of one loss (a Python
// class registered per object) read each other's checkpoints.
class CustomLoss : public Loss {
 public:
  explicit CustomLoss(std::string name, std::string label = "");
  LossOutputs build(GraphBuilder& g, TensorId pred, TensorId target, TensorId valid) const override;
  Shape target_shape(const Shape& pred) const override;
  DType target_dtype() const override { return DType::F32; }
  Task task() const override { return Task::Regression; }
  std::string describe() const override;  // "user loss 'log_cosh'" (the label)
  double grad_scale(const Shape& pred) const override;  // infer_grad_scale (also sets reduction())
  const std::string& name() const { return name_; }

 private:
  std::string name_, label_;
};

}  // namespace sg
