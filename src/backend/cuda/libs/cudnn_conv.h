// Convolutions through cuDNN frontend graphs (cudnn_conv.cpp: loading, graphs; cudnn_plans.cpp:
// choosing, timing and caching plans; compiled only when CMake finds the frontend headers:
// STEPGRAPH_HAVE_CUDNN). This header keeps the frontend out of every other translation unit:
// plans are built (or loaded from the on-disk plan cache) and autotuned at lowering time, and
// run() is all a step calls.
//
// libcudnn.so.9 is loaded at run time (the frontend's dynamic loading), the first time a program
// with a convolution is lowered for the GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stepgraph/backend.h"
#include "stepgraph/ir.h"

namespace sg::plan_cache {
class PlanCache;
}

namespace sg::cuda {

// The element type of a convolution's tensors (X, W, b, Y; its sums are fp32 either way). The
// network's convolutions are F32; BF16 is the forward graph alone, as `stepgraph bench-op conv`
// times it (the dgrad and wgrad plans refuse it).
enum class ConvIO : uint8_t { F32, BF16 };
const char* conv_io_name(ConvIO t);  // "float32", "bfloat16"

// One convolution: image X [N,H,W,C] (NHWC), filters [K,R,S,C] (KRSC), output [N,P,Q,K].
struct ConvGeometry {
  int64_t N = 0, H = 0, W = 0, C = 0;
  int64_t K = 0, R = 0, S = 0;
  int64_t P = 0, Q = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  ConvIO io = ConvIO::F32;
};

// The cuDNN handle of one CudaBackend (created on first use, destroyed with the backend).
class CudnnContext;
// Loads libcudnn.so.9 (once per process) and creates a handle. Throws naming what is missing:
// "cuDNN 9 not found (libcudnn.so.9): install nvidia-cudnn-cu13 or set LD_LIBRARY_PATH".
std::shared_ptr<CudnnContext> make_cudnn_context();
// Whether libcudnn.so.9 loads here (no GPU needed); `why` says why not. Also its version.
bool cudnn_loadable(std::string* why, size_t* version = nullptr);

// How the plans of one program are chosen.
//   autotune off:        the heuristics' first buildable plan (heuristic A, then FALLBACK)
//            heuristic:  build up to 8 of heuristic A's plans, time each on scratch buffers, keep
//                        the fastest (FALLBACK's too when A has none that builds)
//            exhaustive: the same over every plan of heuristic A and FALLBACK
// Every candidate passes the same filters (deterministic; no TF32 at fp32; at bf16 tensor cores are
// allowed, their products being exact and summed in fp32: the precision setting does not apply,
// only reduced-precision sums and down-converted inputs stay barred). With a plan cache, a
// built (and tuned) plan is serialized to disk and the next process loads it instead.
struct ConvPlanOptions {
  Precision precision = Precision::FP32;
  Autotune autotune = Autotune::Off;
  bool deterministic = true;                     // false: NONDETERMINISTIC engines allowed too
  cudaStream_t stream = nullptr;                 // where candidates are timed (before capture)
  const plan_cache::PlanCache* cache = nullptr;  // null or disabled: no disk cache
};

// What building or loading one plan took and chose (summed by lowering for explain).
struct ConvPlanStats {
  bool loaded = false;          // from the on-disk plan cache
  bool rejected = false;        // a cache entry existed but was unusable (warned; rebuilt)
  bool stored = false;          // written to the plan cache after building
  double compile_ms = 0;        // the whole load or build, timing included
  double tune_ms = 0;           // of which timing candidates
  int timed = 0;                // candidates timed
  double fastest_us = 0, slowest_us = 0;
  bool dynamic = false;         // built with dynamic shapes and a shared kernel cache
  bool kernel_cache_warm = false;  // that kernel cache was made by an earlier shape of this op
  std::string engine;           // the chosen engine's name ("" when a loaded plan's note lacks it)
};

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
  // The engine chosen, what the graph fused, which engine notes were excluded, and how the
  // plan was chosen (tuning table) or loaded.
  virtual std::string describe() const = 0;
  virtual const ConvPlanStats& stats() const = 0;
};

// Gives every plan one workspace, as large as the largest needs (a program's steps run one after
// another on one stream), from `own` (memory the executable keeps). Returns its size; 0: none
// needed, nothing allocated.
inline size_t share_workspace(const std::vector<std::shared_ptr<ConvPlan>>& plans,
                              const std::function<char*(size_t)>& own) {
  size_t most = 0;
  for (const auto& p : plans) most = most > p->workspace_bytes() ? most : p->workspace_bytes();
  if (most == 0) return 0;
  void* ws = own(most);
  for (const auto& p : plans) p->set_workspace(ws);
  return most;
}

// Whether plans are built with dynamic shapes and a kernel cache shared by the shape variants of
// one op (cuDNN >= 9.5 loaded); `why` says why not.
bool dynamic_shapes_enabled(const CudnnContext& ctx, std::string* why = nullptr);
// Records one program's cuDNN compile (its first convolution's batch size, its plans' stats) in
// the context and returns the context's history, one line per compile, for explain: the first
// shape's build time against later shapes' (which reuse the kernel caches).
std::string record_compile(CudnnContext& ctx, int64_t batch, const std::vector<ConvPlanStats>& plans);

// Y = act(conv(X, W) + b) (b null: no bias; act None or ReLU). With `fuse` the bias and ReLU
// are pointwise nodes of the same cuDNN graph; returns null (and `why`) when no deterministic
// engine of the requested precision supports the graph, so the caller can fall back to a plain
// convolution and its own bias/activation kernel. X, W, b and Y hold g.io elements (float, or
// bf16 bits); the sums, the bias and the ReLU are fp32, rounded to g.io once at the end.
std::unique_ptr<ConvPlan> conv_forward_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                            const void* X, const void* W, const void* b, void* Y,
                                            Activation act, bool fuse, const ConvPlanOptions& opt, std::string* why);
// dX = dgrad(dZ, W): the gradient of the convolution (no activation) with respect to its input.
// fp32 only (g.io F32), as the next one.
std::unique_ptr<ConvPlan> conv_data_grad_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                              const float* dZ, const float* W, float* dX, const ConvPlanOptions& opt,
                                              std::string* why);
// dW = wgrad(dZ, X): the gradient with respect to the filters.
std::unique_ptr<ConvPlan> conv_weight_grad_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                                const float* dZ, const float* X, float* dW,
                                                const ConvPlanOptions& opt, std::string* why);

// Builds the forward (fused and plain), dgrad and wgrad graph definitions for `g` and runs the
// frontend's validation and shape inference, without a GPU (libcudnn.so.9 must load). Returns
// "" when every graph validates and infers the output shapes of `g`, else what failed. With
// g.io BF16 only the forward graphs (the ones bf16 plans are built for).
std::string check_conv_graphs(const ConvGeometry& g, bool bias, Activation act);

}  // namespace sg::cuda
