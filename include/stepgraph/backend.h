// Backends own device memory and lower a planned Program into something that runs: per op a
// kernel or library call with its pointers bound once. The CPU backend is the reference.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stepgraph/ir.h"
#include "stepgraph/plan.h"

namespace sg {

namespace dist {
class Communicator;  // distributed.h
}

enum class Device : uint8_t { CPU, CUDA };
const char* device_name(Device d);
Device parse_device(const std::string& s);  // "cpu" | "cuda"

// How library plans are chosen and computed (CUDA; the CPU ignores all of these).
//   autotune off:        the library heuristic's first algorithm (cuBLASLt) or plan (cuDNN)
//            heuristic:  time the heuristic's top candidates on scratch buffers (cuBLASLt 4,
//                        cuDNN up to 8 of heuristic A's), keep the fastest
//            exhaustive: time every candidate (cuBLASLt up to 32; cuDNN heuristic A's and
//                        FALLBACK's, up to 64)
//   precision fp32:      full fp32 products (default)
//            tf32:       tensor-core TF32 products for dense layers (10-bit mantissa inputs,
//                        fp32 accumulation: relative error ~1e-3 instead of ~1e-6)
//            tf32x3:     fp32 accuracy on tensor cores: plain dense products (a PINN's jet
//                        layers, layers without a fused epilogue) may run as 3xTF32 (CUTLASS:
//                        each operand split into two TF32 parts, three products, fp32
//                        accumulation; ~1e-7 relative like fp32) where that is faster than
//                        cuBLASLt's fp32 kernels; everything else computes as at fp32
//   attention fp32:      self-attention with the project's own fp32 kernels (default; the CPU
//                        reference's results to ~1e-6)
//            cudnn_bf16: cuDNN's fused SDPA (flash attention) forward and deterministic backward:
//                        Q, K, V, O and dO rounded to bf16 (8 significant bits) around it, fp32
//                        accumulation inside, so outputs and gradients carry relative errors of
//                        ~1e-2. Needs cuDNN, and a head size that is a multiple of 8 (at
//                        most 256) for which the loaded cuDNN has an engine; the CPU always
//                        computes attention in fp32 (with double sums)
enum class Autotune : uint8_t { Off, Heuristic, Exhaustive };
enum class Precision : uint8_t { FP32, TF32, TF32X3 };
enum class AttentionMode : uint8_t { FP32, CudnnBF16 };
const char* autotune_name(Autotune a);
Autotune parse_autotune(const std::string& s);
const char* precision_name(Precision p);
Precision parse_precision(const std::string& s);
const char* attention_mode_name(AttentionMode a);
AttentionMode parse_attention_mode(const std::string& s);

// Autotuning picks algorithms by timing, so two processes can pick different ones and round
// differently: it is off by default, which keeps runs (and resumed runs) bitwise reproducible.
// plan_cache: the folder of the on-disk cache of built cuDNN plans; "" = $SG_PLAN_CACHE, else
// $XDG_CACHE_HOME/stepgraph/cudnn or ~/.cache/stepgraph/cudnn; "off" = no cache.
struct LowerOptions {
  Autotune autotune = Autotune::Off;
  Precision precision = Precision::FP32;
  AttentionMode attention = AttentionMode::FP32;
  // false: cuDNN may choose NONDETERMINISTIC engines (convolution gradients and the SDPA backward
  // summing with atomics), as PyTorch does by default (cudnn.deterministic = False): often
  // faster, but two runs, and graph replay against eager, may then differ in the last bits.
  // true (default): every kernel and plan sums in a fixed order.
  bool deterministic = true;
  // false: every op computes on its own, in the launches it would take alone: no cuBLASLt
  // epilogues, no op doing another's work (the output layer inside the loss kernel, an input
  // gradient applying the previous layer's activation derivative, the jet dense kernel and the
  // other PINN fusions, one launch for a run of layers' weight gradients), convolutions without
  // their bias and relu in the cuDNN graph, amax layers without their cuDNN graph. For debugging
  // numerics (a fused path rounds differently); slower. true (default): those fusions where
  // they apply. The CPU reference has none either way.
  bool fusion = true;
  // true (default): ops of independent branches (a PINN condition with a network pass of its
  // own) run on a second, lower-priority stream inside the step's graph, where their memory and
  // workspaces allow; results are bitwise those of one stream. false: one stream.
  bool concurrent = true;
  std::string plan_cache;
  // Data-parallel training (CUDA backend): a step with gradients averages them over the
  // communicator's ranks inside the step, in buckets of about bucket_bytes (dist::plan_buckets),
  // each all-reduced on a side stream as soon as backward has finished it; the optimizer waits
  // for all of them. Null: no collectives.
  std::shared_ptr<dist::Communicator> comm;
  int64_t bucket_bytes = int64_t{25} << 20;
};

// A lowered program: every op's pointers and library plans are fixed.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual void run() = 0;  // one whole step, op by op (eager)
  virtual size_t num_ops() const = 0;
  // Graph replay (CUDA): capture() records run() once; replay() launches the recording.
  virtual bool can_capture() const { return false; }
  virtual void capture() { throw Error("this backend has no graph capture"); }
  virtual bool is_captured() const { return false; }
  virtual void replay() { run(); }
  virtual size_t graph_nodes() const { return 0; }
  // Waits until every launched step has finished. Steps with collectives are waited on under the
  // communicator's deadline: a rank that fails or hangs becomes an Error naming this rank and the
  // collective, never a hang. Without collectives: nothing (host reads synchronize anyway).
  virtual void wait_collectives() {}
  // The step-invariant prefix (ir.h invariant_prefix): backends that run it once (CUDA) run it
  // again before the next step after this call. Call it when a constant it reads was rewritten.
  virtual void recompute_invariants() {}
  // Per-op notes from lowering: kernels, fused epilogues, chosen algorithms and timings.
  virtual std::string describe() const { return ""; }
  // Times each op alone (`reps` runs between device events, after a warm-up): (op name, us).
  // Ops run repeatedly out of order, so values change; use it for timing only.
  virtual std::vector<std::pair<std::string, double>> profile(int reps) {
    (void)reps;
    return {};
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string describe() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // zero-filled, 256-byte aligned
  virtual void release(void* p) noexcept = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  // A copy between two buffers of this backend (device to device), queued like a step.
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  // Waits for all queued work (downloads already do).
  virtual void synchronize() {}
  // Bytes this backend holds now / at most so far (every allocation: arenas, workspaces,
  // library scratch). 0 where not tracked.
  virtual size_t allocated_bytes() const { return 0; }
  virtual size_t peak_allocated_bytes() const { return 0; }
  // Tensors this backend's lowering of `p` will read after their last op in the program (the
  // memory plan keeps them live that long; plan.h). Lowering checks what it gets, so a plan
  // made without them is still run correctly, only without what needed them.
  virtual std::vector<LifetimeHint> lifetime_hints(const Program& p, const LowerOptions& opt) const {
    (void)p, (void)opt;
    return {};
  }
  // `ptrs[t]` is the address of tensor t (from the memory plan).
  virtual std::unique_ptr<Executable> lower(const Program& p, const std::vector<void*>& ptrs,
                                            const LowerOptions& opt = {}) = 0;
};

// An owned allocation on a backend.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& b, size_t bytes) : b_(&b), bytes_(bytes), p_(bytes ? b.allocate(bytes) : nullptr) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(b_, o.b_);
    std::swap(bytes_, o.bytes_);
    std::swap(p_, o.p_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_) b_->release(p_);
  }
  char* data() const { return static_cast<char*>(p_); }
  size_t size() const { return bytes_; }

 private:
  Backend* b_ = nullptr;
  size_t bytes_ = 0;
  void* p_ = nullptr;
};

std::unique_ptr<Backend> make_cpu_backend();
// The CUDA backend when this build has it and a device is present; otherwise an Error that says
// which of the two is missing.
std::unique_ptr<Backend> make_backend(Device d);
// Whether make_backend(Device::CUDA) would succeed; if not, *why says why.
bool cuda_available(std::string* why);

}  // namespace sg
