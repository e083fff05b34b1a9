// Programmatic dependent launch (compute capability 9.0 and newer). A step is a chain of small
// kernels, and between two of them the GPU normally idles for the launch latency (a few
// microseconds: the seed MLP's five kernels measured ~6 us each). A kernel launched with
// launch_pdl() may be scheduled while the kernel before it on the stream still runs; captured into
// a CUDA graph the dependency becomes a programmatic edge. Such a kernel must begin with
// PDL_PROLOGUE(): it lets the next kernel launch early in turn (griddepcontrol.launch_dependents)
// and then waits (griddepcontrol.wait) until every kernel it depends on has finished and its
// writes are visible, before it touches any memory. So results and their order are exactly those
// of plain launches; only the idle gaps shrink.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/runtime/cuda_check.h"

namespace sg::cuda {

__device__ __forceinline__ void pdl_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#define PDL_PROLOGUE() ::sg::cuda::pdl_prologue()

// Whether launches use the programmatic attribute: a GPU of compute capability 9.0 or newer
// (decided once per process, for the current device).
bool pdl_enabled();

template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...));
}

}  // namespace sg::cuda
