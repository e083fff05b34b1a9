// The dropout mask, shared by the CPU reference and (as __device__ code) the CUDA kernel: element
// i of a Dropout op is kept at step s when a hash of (the op's key, s, i) is at least p. The mask
// is recomputed, never stored: the backward op (a Dropout of dY with the same key) and every
// replay of the step see the same one, so graph replay equals eager bitwise, and row i of a batch
// gets the same mask whatever the batch size (a padded batch trains as the exact one).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace sg {

// p in [0, 1) as a threshold on 24 random bits.
inline uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(p * 16777216.0 + 0.5); }

SG_HD bool dropout_keep(uint64_t key, int32_t step, int64_t i, uint32_t threshold) {
  // splitmix64's finalizer on a mix of the three (the counter-based generator of Salmon et al.'s
  // Random123 family in spirit: no state, any element in any order).
  uint64_t z = key ^ (static_cast<uint64_t>(static_cast<uint32_t>(step)) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 40) >= threshold;
}

}  // namespace sg
