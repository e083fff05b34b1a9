// What this process can still allocate on the host, so a request too large for the machine is
// refused with a message instead of being killed by the kernel later (Linux overcommits: a
// malloc of 16 GiB succeeds on an 8 GiB machine and the process dies when it touches the pages).
#pragma once

#include <cstdint>
#include <string>

namespace sg {

// The smallest of: the kernel's MemAvailable, the cgroup's memory limit minus its usage, and the
// address-space limit (ulimit -v) minus the address space in use. UINT64_MAX when none is known.
uint64_t host_memory_available();

// Throws "<what> needs <bytes> of host memory, but this machine has <available> available".
void require_host_memory(uint64_t bytes, const std::string& what);

// Requests below this are not checked (reading /proc costs ~20 us; small ones cannot matter).
constexpr uint64_t kHostMemoryCheckFrom = uint64_t{64} << 20;

// "16.0 GiB", "512.0 MiB", "17 bytes".
std::string human_bytes(uint64_t bytes);

}  // namespace sg
