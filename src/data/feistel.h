// A keyed pseudo-random permutation of [0, n), computed per index: a 4-round Feistel network on
// the smallest even bit width covering n, with cycle walking. Shuffling this way needs no sort
// and no state, so the CUDA step graph can shuffle each epoch by itself (key = seed, epoch), and
// the CPU reference computes exactly the same order.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace sg {

SG_HD uint64_t feistel_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// Element `i` of the permutation of [0, n) for (seed, epoch). n >= 1, i < n.
SG_HD uint64_t feistel_permute(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch) {
  int bits = 2;
  while ((uint64_t{1} << bits) < n) bits += 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  const uint64_t key = feistel_mix(seed ^ feistel_mix(epoch + 0x9E3779B97F4A7C15ull));
  uint64_t x = i;
  do {  // cycle walking: stay inside [0, n)
    uint64_t l = x >> half, r = x & mask;
    for (int round = 0; round < 4; ++round) {
      const uint64_t f = feistel_mix(r ^ (key + 0x632BE59BD9B4E019ull * (round + 1))) & mask;
      const uint64_t t = l ^ f;
      l = r;
      r = t;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

}  // namespace sg
