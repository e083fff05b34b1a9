// Private to the cuDNN translation units (cudnn_conv.cpp, cudnn_plans.cpp, cudnn_sdpa.cpp, cudnn_dense.cpp): the frontend's
// headers, the graph definitions and the context. Nothing else may include this header.
#pragma once

// The frontend's JSON library (graph serialization, for the plan cache) is its own bundled
// nlohmann-json 3.11.3, which specializes nlohmann::adl_serializer<float> (floats as hex text).
// The rest of the project uses the system's nlohmann-json: the same version on some systems, so
// the two would share one ABI namespace and that specialization would break the ODR. The
// frontend's copy lives in a namespace of its own here.
#define NLOHMANN_JSON_NAMESPACE nlohmann::sg_cudnn_frontend_json
#define NLOHMANN_JSON_NAMESPACE_BEGIN \
  namespace nlohmann {                \
  inline namespace sg_cudnn_frontend_json {
#define NLOHMANN_JSON_NAMESPACE_END \
  }                                 \
  }

#include <cudnn_frontend.h>

#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/libs/cudnn_conv.h"

namespace sg::cuda {

namespace fe = cudnn_frontend;

inline std::string fe_error(const char* what, fe::error_t e) {
  std::ostringstream os;
  os << what << ": " << e.get_code() << " " << e.get_message();
  return os.str();
}

// Evaluates a frontend call; on failure returns its message from the enclosing function.
#define SG_FE_TRY(expr)                                                              \
  do {                                                                               \
    if (auto sg_fe_e_ = (expr); sg_fe_e_.is_bad()) return fe_error(#expr, sg_fe_e_); \
  } while (0)

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// Z (a pre-activation) and Amax (max |Y|, fp32 [1]) are the dense graph's (cudnn_dense.cpp).
enum class Uid : int64_t { X = 1, W, B, Y, dZ, dX, dW, Z, Amax };

// One graph as defined, before building.
struct GraphDef {
  std::shared_ptr<fe::graph::Graph> graph;
  std::vector<std::pair<Uid, TensorPtr>> io;   // bound to pointers by uid
  TensorPtr out;                               // the output, for shape checks
  std::vector<int64_t> want_dim, want_stride;  // what it must have (NHWC)
  std::string what;                            // "conv_fprop + bias + relu", ...
  std::string attrs;                           // "padding 1x1 stride 1x1 dilation 1x1"
  ConvIO io_type = ConvIO::F32;                // the element type of every tensor in `io` (but Amax: fp32)
  // The op's shapes but the batch size (the variants that share one kernel cache with dynamic
  // shapes); "" for a convolution, whose key make_plan derives from its ConvGeometry.
  std::string structure;
};

GraphDef forward_def(const ConvGeometry& s, bool bias, bool relu, bool shape = true);
GraphDef data_grad_def(const ConvGeometry& s);
GraphDef weight_grad_def(const ConvGeometry& s);
// The frontend's validation and shape inference, then our layout check; "" when good.
std::string validate(GraphDef& d);

// The cuDNN handle of one CudaBackend, and what its plans share: the GPU's description (part of
// every plan cache key), the kernel caches of dynamic-shape graphs (one per op structure: all
// but the batch size), and the history of compiles for explain.
class CudnnContext {
 public:
  CudnnContext();
  ~CudnnContext();
  CudnnContext(const CudnnContext&) = delete;
  CudnnContext& operator=(const CudnnContext&) = delete;

  cudnnHandle_t handle = nullptr;
  size_t version = 0;  // cudnnGetVersion() of the loaded library
  std::string gpu;     // "NVIDIA H200, sm_90, 132 SMs"

  struct KernelCacheSlot {
    std::shared_ptr<fe::KernelCache> cache;
    std::shared_ptr<fe::graph::Graph> first;  // the graph it was finalized with, kept alive
    double first_ms = 0;                      // that graph's build time
    int graphs = 0;                           // graphs built with it
    std::string refused;                      // why cuDNN refused a dynamic-shape build ("" if not)
  };
  std::map<std::string, KernelCacheSlot> kernel_caches;
  std::vector<std::string> history;
};

// Makes `s` the stream the handle's next executions run on (the capture stream inside a step).
void set_stream(CudnnContext& ctx, cudaStream_t s);

// A built graph with its device pointers bound (a variant pack): run() executes plan `index`
// (-1: the one build_plans chose), on the caller's stream, with the workspace set before.
class GraphPlan : public ConvPlan {
 public:
  GraphPlan(std::shared_ptr<CudnnContext> ctx, std::shared_ptr<fe::graph::Graph> g, std::string what,
            std::unordered_map<int64_t, void*> pack, int64_t index, int64_t ws, std::string describe,
            ConvPlanStats stats)
      : ctx_(std::move(ctx)), graph_(std::move(g)), what_(std::move(what)), pack_(std::move(pack)), index_(index),
        ws_bytes_(ws), describe_(std::move(describe)), stats_(stats) {}

  void run(cudaStream_t s) const override;
  size_t workspace_bytes() const override { return static_cast<size_t>(ws_bytes_); }
  void set_workspace(void* ws) override { ws_ = ws; }
  std::string describe() const override { return describe_; }
  const ConvPlanStats& stats() const override { return stats_; }

 private:
  std::shared_ptr<CudnnContext> ctx_;
  std::shared_ptr<fe::graph::Graph> graph_;
  std::string what_;
  mutable std::unordered_map<int64_t, void*> pack_;  // execute takes it by non-const reference
  int64_t index_ = -1;
  int64_t ws_bytes_ = 0;
  void* ws_ = nullptr;
  std::string describe_;
  ConvPlanStats stats_;
};

// Builds (or loads from opt.cache) the plan for the graphs `make` defines (called again for a
// fresh definition when a first attempt must be redone), binds `ptrs` by uid.
using GraphFactory = std::function<GraphDef()>;
std::unique_ptr<ConvPlan> make_plan(const std::shared_ptr<CudnnContext>& ctx, const GraphFactory& make,
                                    const ConvGeometry& g, const std::vector<std::pair<Uid, const void*>>& ptrs,
                                    const ConvPlanOptions& opt, std::string* why);

}  // namespace sg::cuda
