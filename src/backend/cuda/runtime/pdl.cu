// Whether launches use programmatic dependent launch (pdl.cuh): decided once per process.
#include <cuda_runtime.h>

#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

bool pdl_enabled() {
  static const bool on = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return on;
}

}  // namespace sg::cuda
