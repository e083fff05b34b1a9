// Lowering of the image ops for the CUDA backend: Conv2d and Conv2dBackward through cuDNN
// frontend graphs (cudnn_conv.h), max pooling, global average pooling and reshape with our own
// kernels (image_kernels.cuh). Called through the CUDA kind table (lowerings.cpp) for those op kinds.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <vector>

#include "backend/cuda/runtime/cuda_backend.h"
#include "stepgraph/ir.h"

namespace sg::plan_cache {
class PlanCache;
}

namespace sg::cuda {

class ConvPlan;
struct ConvPlanOptions;

// What lowering an op needs from the Lowering pass.
struct LoweringHooks {
  CudaBackend& be;
  const Program& p;
  const std::vector<void*>& ptrs;
  LowerOptions opt;
  std::function<void(const Op&, std::function<void(cudaStream_t)>)> add_step;
  std::function<char*(size_t)> own;  // device memory owned by the executable
  std::ostream& notes;               // the op's line in explain
};

class ImageLowering {
 public:
  explicit ImageLowering(LoweringHooks h);
  ~ImageLowering();

  // Whether this build runs convolutions on the GPU (it needs cuDNN's headers): the Lowering
  // pass refuses conv ops before planning anything when it does not.
  static bool have_convolutions();

  // One per op kind (or forward and backward pair).
  void conv_forward(const Op& op);
  void conv_backward(const Op& op);
  void max_pool(const Op& op);
  void global_avg_pool(const Op& op);
  void reshape(const Op& op);
  // After every op: the cuDNN plans' shared workspace (they run one after another on one stream),
  // and the summary of how the plans were made (loaded or built, tuned, compile times).
  void finish();

 private:
  void add_plan(const Op& op, std::shared_ptr<ConvPlan> plan, const char* what);
  // Autotune mode, precision, timing stream and plan cache for this program's cuDNN plans.
  ConvPlanOptions conv_options();
  float* f(TensorId t) const { return t == kNone ? nullptr : static_cast<float*>(h_.ptrs[t]); }
  int64_t dim(TensorId t, size_t k) const { return h_.p.tensor(t).shape[k]; }

  LoweringHooks h_;
  std::vector<std::shared_ptr<ConvPlan>> plans_;
  std::unique_ptr<plan_cache::PlanCache> cache_;  // made with the first convolution
  int64_t batch_ = 0;                             // the first convolution's batch size
};

}  // namespace sg::cuda
