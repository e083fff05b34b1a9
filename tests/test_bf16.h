// bf16 test helpers shared by the cuDNN bf16 tests (test_cudnn_sdpa.cpp, test_cudnn_conv_bf16.cpp):
// bit conversions, a device tensor of bf16-exact random values with those values on the host,
// relative L2 error, and the skip for machines without a GPU or cuDNN. cuDNN builds only.
#pragma once

#ifdef STEPGRAPH_HAVE_CUDNN

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/libs/cudnn_conv.h"
#include "test_util.h"

namespace sg::test {

// Round to nearest even (finite values), as cuDNN and PyTorch convert.
inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A bf16 device tensor and its exact float values on the host.
struct Bf16 {
  std::vector<uint16_t> bits;
  std::vector<float> values;
  void* dev = nullptr;
  Bf16(int64_t n, uint64_t seed) : bits(static_cast<size_t>(n)), values(static_cast<size_t>(n)) {
    HostArray r = random_f32({n}, seed, 1.0);
    for (int64_t i = 0; i < n; ++i) bits[i] = bf16_bits(r.data<float>()[i]), values[i] = bf16_value(bits[i]);
    CUDA_CHECK(cudaMalloc(&dev, bits.size() * 2));
    CUDA_CHECK(cudaMemcpy(dev, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  }
  explicit Bf16(int64_t n) : bits(static_cast<size_t>(n)), values(static_cast<size_t>(n)) {
    CUDA_CHECK(cudaMalloc(&dev, bits.size() * 2));
    poison();
  }
  ~Bf16() { CUDA_CHECK_WARN(cudaFree(dev)); }
  Bf16(const Bf16&) = delete;
  Bf16& operator=(const Bf16&) = delete;
  // NaN everywhere: every element must be written. Synchronized: cudaMemset may return early, and
  // work on a non-blocking stream would not wait for it.
  void poison() {
    CUDA_CHECK(cudaMemset(dev, 0xff, bits.size() * 2));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<float> download() {
    CUDA_CHECK(cudaMemcpy(bits.data(), dev, bits.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bits.size(); ++i) values[i] = bf16_value(bits[i]);
    return values;
  }
};

inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d, den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

#define REQUIRE_GPU_AND_CUDNN()                                                     \
  do {                                                                             \
    std::string why_;                                                              \
    if (!cuda_available(&why_)) GTEST_SKIP() << "no GPU: " << why_;                \
    if (!cuda::cudnn_loadable(&why_)) GTEST_SKIP() << "no cuDNN: " << why_;        \
  } while (0)

}  // namespace sg::test

#endif  // STEPGRAPH_HAVE_CUDNN
