// Splitting CPU reference work across hardware threads without changing its results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace sg::cpu {
// Runs fn(begin, end) over [0, n) split into contiguous chunks, one per hardware thread, when
// the work (n * work_per_item multiply-adds) is large enough to pay for the threads. Each item's
// output is computed by one thread in the same order as alone, so results do not depend on the
// thread count.
template <class Fn>
inline void parallel_for(int64_t n, int64_t work_per_item, Fn fn) {
  if (n * work_per_item < (int64_t{1} << 20)) {
    fn(int64_t{0}, n);
    return;
  }
  // Asked once: glibc reads /sys/devices/system/cpu/online on every call.
  static const int64_t hw = std::max<int64_t>(1, std::min<int64_t>(8, std::thread::hardware_concurrency()));
  const int64_t threads = std::min(hw, n);
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end) pool.emplace_back([=] { fn(begin, end); });
  }
  fn(int64_t{0}, std::min(n, chunk));
  for (std::thread& th : pool) th.join();
}

}  // namespace sg::cpu
