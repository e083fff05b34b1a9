// CUDA kernels for the image ops that are not library calls: max pooling, global average
// pooling and reshape copies, each with its launcher. Layouts as ir.h (NHWC). Every output
// element is computed by one thread in the CPU reference's order (conv_kernels.cpp), so results
// are deterministic and the pooling ones equal the CPU's bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sg::cuda {

// A pooling window over X [N,H,W,C] giving Y [N,P,Q,C].
struct PoolGeometry {
  int64_t N = 0, H = 0, W = 0, C = 0, P = 0, Q = 0;
  int64_t R = 0, S = 0;  // window height and width
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// Y = the max of each window (padding never wins; a NaN wins and propagates, as on the CPU).
void max_pool2d(const float* X, float* Y, const PoolGeometry& g, cudaStream_t s);
// dX (+)= the sum of the dY whose window's first maximum (scan order r, then s) is that element.
// A gather per input element: no atomics.
void max_pool2d_backward(const float* dY, const float* X, float* dX, const PoolGeometry& g, bool accumulate,
                         cudaStream_t s);
// X [N, HW, C] -> Y [N, C]: the mean over HW, summed in double in position order.
void global_avg_pool(const float* X, float* Y, int64_t N, int64_t HW, int64_t C, cudaStream_t s);
// dX [N, HW, C] (+)= dY [N, C] / HW.
void global_avg_pool_backward(const float* dY, float* dX, int64_t N, int64_t HW, int64_t C, bool accumulate,
                              cudaStream_t s);
// Y (+)= X over n elements (a reshape, or adding a gradient computed into scratch).
void copy_or_add(const float* X, float* Y, int64_t n, bool accumulate, cudaStream_t s);

}  // namespace sg::cuda
