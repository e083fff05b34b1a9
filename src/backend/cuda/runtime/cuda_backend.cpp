#include "backend/cuda/runtime/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/kernels/dense_dispatch.h"
#include "backend/cuda/runtime/cuda_check.h"

namespace sg::cuda {

bool available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = cat("no usable CUDA driver or device (", cudaGetErrorString(e), ")");
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

std::unique_ptr<Backend> make_backend() { return std::make_unique<CudaBackend>(); }

CudaBackend::CudaBackend() {
  std::string why;
  SG_REQUIRE(available(&why), "device cuda is not available: ", why);
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  // The step's stream at the device's highest priority, so a concurrent branch (a side stream at
  // the default, lowest, priority: CudaExecutable) fills the SMs it leaves idle instead of
  // delaying the critical path's blocks.
  int lowest = 0, highest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, highest));
  CUBLAS_CHECK(cublasLtCreate(&lt_));
  CUDA_CHECK(cudaEventCreateWithFlags(&up_done_, cudaEventDisableTiming));
  description_ = cat("cuda: ", prop.name, " (sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount,
                     " SMs), cuBLASLt ", cublasLtGetVersion());
}

CudaBackend::~CudaBackend() {
  CUDA_CHECK_WARN(cudaStreamSynchronize(stream_));
  cudnn_.reset();  // before the stream it was last set to
  if (pinned_up_) CUDA_CHECK_WARN(cudaFreeHost(pinned_up_));
  if (pinned_down_) CUDA_CHECK_WARN(cudaFreeHost(pinned_down_));
  if (up_done_) CUDA_CHECK_WARN(cudaEventDestroy(up_done_));
  if (workspace_) release(workspace_);
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) CUDA_CHECK_WARN(cudaStreamDestroy(stream_));
}

void* CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error(cat("cuda: cannot allocate ", bytes, " bytes (", cudaGetErrorString(e), "; ", free_b >> 20,
                    " MiB free of ", total_b >> 20, " MiB)"));
  }
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 256, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  sizes_[p] = bytes;
  allocated_ += bytes;
  peak_ = std::max(peak_, allocated_);
  return p;
}

void CudaBackend::release(void* p) noexcept {
  CUDA_CHECK_WARN(cudaStreamSynchronize(stream_));
  CUDA_CHECK_WARN(cudaFree(p));
  auto it = sizes_.find(p);
  if (it != sizes_.end()) {
    allocated_ -= it->second;
    sizes_.erase(it);
  }
}

void* CudaBackend::workspace(size_t largest_product_elements) {
  if (!workspace_) {
    // 16 MiB covers the split-K and stream-K workspaces of the large products we measured
    // (bench/RESULTS.md) without raising the peak above PyTorch's for the same model.
    workspace_bytes_ = largest_product_elements < (size_t{1} << 22) ? (size_t{4} << 20) : (size_t{16} << 20);
    workspace_ = allocate(workspace_bytes_);
  }
  return workspace_;
}

void CudaBackend::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const size_t need = (bytes + 255) / 256 * 256;
  if (need > pinned_up_cap_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (pinned_up_) CUDA_CHECK(cudaFreeHost(pinned_up_));
    pinned_up_cap_ = std::max<size_t>(4 * need, 1u << 20);
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned_up_), pinned_up_cap_, cudaHostAllocDefault));
    pinned_up_off_ = 0;
  }
  if (pinned_up_off_ + need > pinned_up_cap_) {
    // Every copy out of the ring was queued before the last event: once it fires, reuse it all.
    CUDA_CHECK(cudaEventSynchronize(up_done_));
    pinned_up_off_ = 0;
  }
  char* stage = pinned_up_ + pinned_up_off_;
  std::memcpy(stage, src, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaEventRecord(up_done_, stream_));
  pinned_up_off_ += need;
}

void CudaBackend::download(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (bytes > pinned_down_cap_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (pinned_down_) CUDA_CHECK(cudaFreeHost(pinned_down_));
    pinned_down_cap_ = std::max<size_t>(bytes, 1u << 16);
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned_down_), pinned_down_cap_, cudaHostAllocDefault));
  }
  CUDA_CHECK(cudaMemcpyAsync(pinned_down_, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::memcpy(dst, pinned_down_, bytes);
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::unique_ptr<Executable> CudaBackend::lower(const Program& p, const std::vector<void*>& ptrs,
                                               const LowerOptions& opt) {
  return lower_program(*this, p, ptrs, opt);
}

std::vector<LifetimeHint> CudaBackend::lifetime_hints(const Program& p, const LowerOptions& opt) const {
  std::vector<LifetimeHint> hints;
  for (const std::vector<int>& run : wgrad_groups(p, opt, DenseDevice::current()))
    for (int i : run) {
      const Op& op = p.ops()[i];
      hints.push_back({op.in[0], run.back()});  // dY, dZ once the op's activation backward is done
      hints.push_back({op.in[1], run.back()});  // X
    }
  return hints;
}

}  // namespace sg::cuda
