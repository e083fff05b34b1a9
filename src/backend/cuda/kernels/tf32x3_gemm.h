// fp32 matrix products on tensor cores with 3xTF32 (CUTLASS's OpMultiplyAddFastF32): each fp32
// operand is split into a TF32 part and a TF32 remainder, and big*big + big*small + small*big
// are accumulated in fp32. The dropped small*small term is ~2^-22 of each product, so the error
// stays at fp32's level (measured against fp64 on the H200: 1-3e-7 of sum |a||b|, cuBLASLt's
// fp32 kernels 1.4-2e-7), while the arithmetic runs on tensor cores. `precision: tf32x3` offers
// these kernels to the autotuner next to cuBLASLt's fp32 algorithms for plain products.
//
// Shapes are cuBLASLt's column-major view (GemmShape): D[m, n] = op(A)[m, k] op(B)[k, n] (+ D).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backend/cuda/libs/cublaslt_gemm.h"

namespace sg::cuda {

class Tf32x3Gemm {
 public:
  virtual ~Tf32x3Gemm() = default;
  // Launches on `s` with the bound pointers, or writes D to `d_override` (autotune's scratch).
  virtual void run(cudaStream_t s, float* d_override = nullptr) = 0;
  virtual std::string name() const = 0;
};

// Tile configurations this build has (0 when it was built without CUTLASS).
int tf32x3_configs();
// Config c for this product with its pointers bound, or nullptr and *why (alignment: every
// leading dimension, the contiguous extents and the pointers must allow 16-byte loads).
std::unique_ptr<Tf32x3Gemm> make_tf32x3_gemm(const GemmShape& s, const GemmArgs& a, int config, std::string* why);

}  // namespace sg::cuda
