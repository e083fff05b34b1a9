// Status checks for CUDA and cuBLASLt calls: a failure becomes an sg::Error naming the call,
// the file and line, and the code's description. KERNEL_LAUNCH_CHECK goes right after a launch.
#pragma once

#include <cublasLt.h>
#include <cstdio>
#include <cuda_runtime.h>

#include "stepgraph/core.h"

namespace sg::cuda {

[[noreturn]] inline void fail_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the next check does not report it again
  throw Error(cat("CUDA error: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ") in ", expr,
                  " at ", file, ":", line));
}
// cuBLASLt alone (without libcublas) has no status-to-string function.
inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

[[noreturn]] inline void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  throw Error(cat("cuBLASLt error: ", cublas_status_name(s), " in ", expr, " at ", file, ":", line));
}

}  // namespace sg::cuda

#define CUDA_CHECK(expr)                                                                  \
  do {                                                                                    \
    cudaError_t sg_e_ = (expr);                                                           \
    if (sg_e_ != cudaSuccess) ::sg::cuda::fail_cuda(sg_e_, #expr, __FILE__, __LINE__);    \
  } while (0)
#define CUBLAS_CHECK(expr)                                                                        \
  do {                                                                                            \
    cublasStatus_t sg_s_ = (expr);                                                                \
    if (sg_s_ != CUBLAS_STATUS_SUCCESS) ::sg::cuda::fail_cublas(sg_s_, #expr, __FILE__, __LINE__); \
  } while (0)
#define KERNEL_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())
// For destructors: report, never throw.
#define CUDA_CHECK_WARN(expr)                                                                   \
  do {                                                                                          \
    cudaError_t sg_e_ = (expr);                                                                 \
    if (sg_e_ != cudaSuccess)                                                                   \
      std::fprintf(stderr, "stepgraph: warning: %s failed: %s\n", #expr, cudaGetErrorString(sg_e_)); \
  } while (0)
