#include "stepgraph/backend.h"

#ifdef STEPGRAPH_HAVE_CUDA
#include "backend/cuda/runtime/cuda_backend.h"
#endif

namespace sg {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::CPU;
  if (s == "cuda") return Device::CUDA;
  throw Error(cat("unknown device '", s, "': expected cpu or cuda"));
}

const char* autotune_name(Autotune a) {
  switch (a) {
    case Autotune::Off: return "off";
    case Autotune::Heuristic: return "heuristic";
    case Autotune::Exhaustive: return "exhaustive";
  }
  return "?";
}

Autotune parse_autotune(const std::string& s) {
  for (Autotune a : {Autotune::Off, Autotune::Heuristic, Autotune::Exhaustive})
    if (s == autotune_name(a)) return a;
  throw Error(cat("unknown autotune mode '", s, "': expected off, heuristic or exhaustive"));
}

const char* precision_name(Precision p) {
  return p == Precision::FP32 ? "fp32" : p == Precision::TF32 ? "tf32" : "tf32x3";
}

Precision parse_precision(const std::string& s) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::TF32X3})
    if (s == precision_name(p)) return p;
  throw Error(cat("unknown precision '", s, "': expected fp32, tf32 or tf32x3"));
}

const char* attention_mode_name(AttentionMode a) { return a == AttentionMode::FP32 ? "fp32" : "cudnn_bf16"; }

AttentionMode parse_attention_mode(const std::string& s) {
  if (s == "fp32") return AttentionMode::FP32;
  if (s == "cudnn_bf16") return AttentionMode::CudnnBF16;
  throw Error(cat("unknown attention mode '", s, "': expected fp32 or cudnn_bf16"));
}

bool cuda_available(std::string* why) {
#ifdef STEPGRAPH_HAVE_CUDA
  return cuda::available(why);
#else
  if (why) *why = "this build of stepgraph has no CUDA backend (CPU reference backend only)";
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(Device d) {
  if (d == Device::CPU) return make_cpu_backend();
  std::string why;
  if (!cuda_available(&why)) throw Error(cat("device cuda is not available: ", why));
#ifdef STEPGRAPH_HAVE_CUDA
  return cuda::make_backend();
#else
  return nullptr;
#endif
}

}  // namespace sg
