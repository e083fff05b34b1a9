#include "core/host_memory.h"

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "stepgraph/core.h"

namespace sg {

namespace {

constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

// A "Key:   123 kB" line of a /proc file, in bytes.
uint64_t proc_kib_field(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str() + key.size() + 1, "%llu", &kib) == 1) return static_cast<uint64_t>(kib) << 10;
  }
  return kUnknown;
}

// A file holding one number ("max" or absent: unknown).
uint64_t file_number(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return kUnknown;
  unsigned long long v = 0;
  return std::sscanf(s.c_str(), "%llu", &v) == 1 ? static_cast<uint64_t>(v) : kUnknown;
}

// cgroup v2 (the unified hierarchy): limit and usage of this process's group.
uint64_t cgroup_available() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, group;
  while (std::getline(in, line))
    if (line.compare(0, 3, "0::") == 0) group = line.substr(3);
  if (group.empty()) return kUnknown;
  const std::string dir = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
  const uint64_t limit = file_number(dir + "/memory.max");
  if (limit == kUnknown) return kUnknown;
  const uint64_t used = file_number(dir + "/memory.current");
  return used == kUnknown || used >= limit ? (used == kUnknown ? limit : 0) : limit - used;
}

uint64_t address_space_available() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kUnknown;
  const uint64_t used = proc_kib_field("/proc/self/status", "VmSize");
  const uint64_t cap = static_cast<uint64_t>(lim.rlim_cur);
  return used == kUnknown ? cap : used >= cap ? 0 : cap - used;
}

}  // namespace

uint64_t host_memory_available() {
  uint64_t a = proc_kib_field("/proc/meminfo", "MemAvailable");
  a = std::min(a, cgroup_available());
  a = std::min(a, address_space_available());
  return a;
}

void require_host_memory(uint64_t bytes, const std::string& what) {
  if (bytes < kHostMemoryCheckFrom) return;
  const uint64_t available = host_memory_available();
  SG_REQUIRE(bytes <= available, what, " needs ", human_bytes(bytes), " of host memory, but this machine has ",
             human_bytes(available), " available");
}

std::string human_bytes(uint64_t bytes) {
  if (bytes < 1024) return cat(bytes, " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace sg
