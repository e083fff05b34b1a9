// The CPU reference backend: host memory, and per op the closure its row of the op table binds
// (OpDef::cpu) over the op's pointers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "core/host_memory.h"
#include "ir/op_table.h"
#include "stepgraph/backend.h"

namespace sg {

namespace {

// The first `once` steps are the step-invariant prefix (ir.h invariant_prefix): run before the
// first step and after recompute_invariants, not in every step (their outputs' memory is never
// reused, so the values stay).
class CpuExecutable : public Executable {
 public:
  CpuExecutable(std::vector<std::function<void()>> steps, size_t once) : steps_(std::move(steps)), once_(once) {}
  void run() override {
    for (size_t i = invariants_done_ ? once_ : 0; i < steps_.size(); ++i) steps_[i]();
    invariants_done_ = true;
  }
  void recompute_invariants() override { invariants_done_ = false; }
  size_t num_ops() const override { return steps_.size(); }

 private:
  std::vector<std::function<void()>> steps_;
  size_t once_;
  bool invariants_done_ = false;
};

class CpuBackend : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::string describe() const override { return "cpu (reference kernels, double accumulation)"; }

  void* allocate(size_t bytes) override {
    size_t rounded = (bytes + 255) / 256 * 256;
    require_host_memory(rounded, "cpu backend: the step plan");
    void* p = std::aligned_alloc(256, rounded ? rounded : 256);
    SG_REQUIRE(p, "cpu backend: out of memory allocating ", bytes, " bytes");
    std::memset(p, 0, rounded);
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  // An empty buffer has no address (DeviceBuffer of 0 bytes): copying nothing must not reach
  // memcpy with a null pointer.
  static void copy(void* dst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void upload(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }

  std::unique_ptr<Executable> lower(const Program& p, const std::vector<void*>& ptrs,
                                    const LowerOptions& opt) override {
    if (opt.comm)
      for (const TensorInfo& t : p.tensors())
        SG_REQUIRE(t.role != Role::Gradient, "data-parallel training (NCCL all-reduce) runs on the CUDA backend only");
    std::vector<std::function<void()>> steps;
    for (const Op& op : p.ops()) steps.push_back(op_def(op.kind).cpu(CpuBind(p, op, ptrs)));
    return std::make_unique<CpuExecutable>(std::move(steps), invariant_prefix(p));
  }

};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace sg
