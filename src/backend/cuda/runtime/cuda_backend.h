// The CUDA backend: device memory, pinned staging for host batches, a cuBLASLt handle and
// workspace, and lowering of a Program into kernels and library plans that can be captured as
// one CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stepgraph/backend.h"

namespace sg::cuda {

class CudnnContext;  // cudnn_conv.h

bool available(std::string* why);
std::unique_ptr<Backend> make_backend();

// One lowered op: a name for errors and the closure that enqueues its work.
struct Step {
  std::string name;
  std::function<void(cudaStream_t)> enqueue;
  // Concurrent branches (Lowering::plan_streams): the op this step belongs to, its stream (0:
  // the step's stream, 1: a side stream), a step on the other stream to wait for first (-1:
  // none), and whether a later step waits for this one.
  int op = -1;
  int stream = 0;
  int wait_for = -1;
  bool record = false;
  // Part of the step-invariant prefix (ir.h invariant_prefix): enqueued on the step's stream
  // before the first run or capture (and after recompute_invariants), never in the step itself.
  bool once = false;
};

class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;
  Device device() const override { return Device::CUDA; }
  std::string describe() const override { return description_; }
  void* allocate(size_t bytes) override;
  void release(void* p) noexcept override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;
  size_t allocated_bytes() const override { return allocated_; }
  size_t peak_allocated_bytes() const override { return peak_; }
  std::unique_ptr<Executable> lower(const Program& p, const std::vector<void*>& ptrs,
                                    const LowerOptions& opt) override;
  // dZ and X of the layers whose weight gradients run batched (wgrad_groups), until the batch.
  std::vector<LifetimeHint> lifetime_hints(const Program& p, const LowerOptions& opt) const override;

  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t lt() const { return lt_; }
  // The cuBLASLt workspace, allocated on first use: 4 MiB when the largest product of the first
  // program lowered is small, 16 MiB otherwise.
  void* workspace(size_t largest_product_elements);
  size_t workspace_bytes() const { return workspace_bytes_; }
  // The cuDNN handle (cudnn_conv.h), made by the first program lowered with a convolution.
  std::shared_ptr<CudnnContext>& cudnn_context() { return cudnn_; }

 private:
  std::shared_ptr<CudnnContext> cudnn_;
  size_t workspace_bytes_ = 0;
  size_t allocated_ = 0, peak_ = 0;
  std::map<void*, size_t> sizes_;
  std::string description_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  // Host batches go through pinned memory so the copy is a real asynchronous DMA.
  char* pinned_up_ = nullptr;
  size_t pinned_up_cap_ = 0, pinned_up_off_ = 0;
  cudaEvent_t up_done_ = nullptr;
  char* pinned_down_ = nullptr;
  size_t pinned_down_cap_ = 0;
};

// Builds the per-op steps for `p` (lower/lowering.cpp).
std::unique_ptr<Executable> lower_program(CudaBackend& be, const Program& p,
                                          const std::vector<void*>& ptrs, const LowerOptions& opt);
// Runs of consecutive dense backward ops whose weight gradients (and bias gradients) run in one
// launch at the run's last op (wgrad_batch) instead of beside each layer's input gradient: the
// same M x N x K product for each (wgrad_batchable), written not accumulated, fp32 or tf32
// precision, no jets, no data parallelism (its buckets start as backward finishes each
// gradient). Each run has 2 to kWgradMaxBatch ops, in program order.
struct DenseDevice;
std::vector<std::vector<int>> wgrad_groups(const Program& p, const LowerOptions& opt, const DenseDevice& d);

}  // namespace sg::cuda
