#include "stepgraph/backend.h"

namespace sg {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::CPU;
  if (s == "cuda") return Device::CUDA;
  throw Error(cat("unknown device '", s, "': expected cpu or cuda"));
}

bool cuda_available(std::string* why) {
  // The CUDA backend is a separate capability; this build has only the CPU reference backend.
  if (why) *why = "this build of stepgraph has no CUDA backend (CPU reference backend only)";
  return false;
}

std::unique_ptr<Backend> make_backend(Device d) {
  if (d == Device::CPU) return make_cpu_backend();
  std::string why;
  if (!cuda_available(&why)) throw Error(cat("device cuda is not available: ", why));
  return nullptr;
}

}  // namespace sg
