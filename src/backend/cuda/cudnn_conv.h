// Convolutions through cuDNN frontend graphs (cudnn_conv.cpp, compiled only when CMake finds the
// frontend headers: STEPGRAPH_HAVE_CUDNN). This header keeps the frontend out of every other
// translation unit: plans are built at lowering time and run() is all a step calls.
//
// libcudnn.so.9 is loaded at run time (the frontend's dynamic loading), the first time a program
// with a convolution is lowered for the GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "stepgraph/backend.h"
#include "stepgraph/ir.h"

namespace sg::cuda {

// One convolution: image X [N,H,W,C] (NHWC), filters [K,R,S,C] (KRSC), output [N,P,Q,K].
struct ConvGeometry {
  int64_t N = 0, H = 0, W = 0, C = 0;
  int64_t K = 0, R = 0, S = 0;
  int64_t P = 0, Q = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
};

// The cuDNN handle of one CudaBackend (created on first use, destroyed with the backend).
class CudnnContext;
// Loads libcudnn.so.9 (once per process) and creates a handle. Throws naming what is missing:
// "cuDNN 9 not found (libcudnn.so.9): install nvidia-cudnn-cu13 or set LD_LIBRARY_PATH".
std::shared_ptr<CudnnContext> make_cudnn_context();
// The context's cudnnHandle_t (as void*: this header stays free of cudnn.h), for the other
// frontend translation units (cudnn_sdpa.cpp).
void* cudnn_raw_handle(const CudnnContext& ctx);
// Whether libcudnn.so.9 loads here (no GPU needed); `why` says why not. Also its version.
bool cudnn_loadable(std::string* why, size_t* version = nullptr);

// A built cuDNN graph with its device pointers bound. run() sets the handle's stream and
// executes: no allocation, no synchronization, so it can be captured into a CUDA graph.
class ConvPlan {
 public:
  virtual ~ConvPlan() = default;
  virtual void run(cudaStream_t s) const = 0;
  // Bytes of workspace the chosen plan needs; the caller provides them before the first run
  // (one buffer shared by every plan of a program: the steps run one after another).
  virtual size_t workspace_bytes() const = 0;
  virtual void set_workspace(void* ws) = 0;
  // The engine chosen, what the graph fused, and which engine notes were excluded.
  virtual std::string describe() const = 0;
};

// Y = act(conv(X, W) + b) (b null: no bias; act None or ReLU). With `fuse` the bias and ReLU
// are pointwise nodes of the same cuDNN graph; returns null (and `why`) when no deterministic
// engine of the requested precision supports the graph, so the caller can fall back to a plain
// convolution and its own bias/activation kernel.
std::unique_ptr<ConvPlan> conv_forward_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                            const float* X, const float* W, const float* b, float* Y,
                                            Activation act, bool fuse, Precision precision, std::string* why);
// dX = dgrad(dZ, W): the gradient of the convolution (no activation) with respect to its input.
std::unique_ptr<ConvPlan> conv_data_grad_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                              const float* dZ, const float* W, float* dX, Precision precision,
                                              std::string* why);
// dW = wgrad(dZ, X): the gradient with respect to the filters.
std::unique_ptr<ConvPlan> conv_weight_grad_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                                const float* dZ, const float* X, float* dW, Precision precision,
                                                std::string* why);

// Builds the forward (fused and plain), dgrad and wgrad graph definitions for `g` and runs the
// frontend's validation and shape inference, without a GPU (libcudnn.so.9 must load). Returns
// "" when every graph validates and infers the output shapes of `g`, else what failed.
std::string check_conv_graphs(const ConvGeometry& g, bool bias, Activation act);

}  // namespace sg::cuda
