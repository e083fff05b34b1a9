// A small, fully specified random generator so that results are identical on every platform
// and standard library (std::normal_distribution is implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace sg {

// splitmix64: 64-bit state, one multiply-xorshift per draw.
class Rng {
 public:
  constexpr explicit Rng(uint64_t seed) : state_(seed) {}

  // constexpr so that CUDA kernels can draw the same numbers (built with --expt-relaxed-constexpr).
  constexpr uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by Box-Muller (one value per call; no cached state).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Uniform integer in [0, n), unbiased (rejection).
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next_u64(); while (x >= limit);
    return x % n;
  }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// Mixes a seed with a stream id (a name or a counter) into an independent seed.
constexpr uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  Rng r(seed ^ (stream * 0xD1B54A32D192ED03ull));
  r.next_u64();
  return r.next_u64();
}
inline uint64_t mix_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return mix_seed(seed, h);
}

// Fisher-Yates permutation of [0, n).
inline std::vector<int64_t> random_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  Rng r(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[r.below(static_cast<uint64_t>(i + 1))]);
  return p;
}

}  // namespace sg
