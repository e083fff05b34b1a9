#include "backend/cuda/kernels/tf32x3_gemm.h"

#include <tuple>

#include "backend/cuda/runtime/cuda_check.h"
#include "stepgraph/core.h"

#ifdef STEPGRAPH_HAVE_CUTLASS
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm.h"
#endif

namespace sg::cuda {

#ifdef STEPGRAPH_HAVE_CUTLASS
namespace {

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;

// Two tiles, the fastest of those timed on the H200 for a PINN's tall products (41984 x 64 x 64:
// 10 us against cuBLASLt's 15; 81920 x 128 x 128: 52-54 us against 74-76): 64 x 64 x 32 with four
// 32 x 32 warps, and 128 x 64 x 32 with four 64 x 32 warps; three stages of cp.async each.
template <int TM, int TN, int WM, int WN>
struct Tile {
  using Block = cutlass::gemm::GemmShape<TM, TN, 32>;
  using Warp = cutlass::gemm::GemmShape<WM, WN, 32>;
  static constexpr const char* name() { return TM == 64 ? "64x64x32" : "128x64x32"; }
};
using Tiles = std::tuple<Tile<64, 64, 32, 32>, Tile<128, 64, 64, 32>>;

template <class LayoutA, class LayoutB, class T>
using CutlassGemm = cutlass::gemm::device::Gemm<
    float, LayoutA, float, LayoutB, float, ColumnMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    typename T::Block, typename T::Warp, cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3, 4, 4, false,
    cutlass::arch::OpMultiplyAddFastF32>;

const char* status_text(cutlass::Status st) { return cutlass::cutlassGetStatusString(st); }

template <class LayoutA, class LayoutB, class T>
class Impl final : public Tf32x3Gemm {
 public:
  using Op = CutlassGemm<LayoutA, LayoutB, T>;
  Impl(const GemmShape& s, const GemmArgs& a) : s_(s), a_(a) {}
  bool init(std::string* why) {
    const typename Op::Arguments args = arguments(a_.D);
    if (const cutlass::Status st = Op::can_implement(args); st != cutlass::Status::kSuccess) {
      *why = cat("CUTLASS 3xTF32 ", T::name(), " cannot run ", s_.m, "x", s_.n, "x", s_.k, ": ", status_text(st));
      return false;
    }
    SG_REQUIRE(Op::get_workspace_size(args) == 0, "CUTLASS 3xTF32: a serial split-k workspace was not planned");
    if (const cutlass::Status st = op_.initialize(args); st != cutlass::Status::kSuccess) {
      *why = cat("CUTLASS 3xTF32 ", T::name(), ": initialize failed: ", status_text(st));
      return false;
    }
    return true;
  }
  void run(cudaStream_t s, float* d_override) override {
    if (d_override) {  // autotune's scratch output: parameters for it, then back
      SG_REQUIRE(op_.update(arguments(d_override)) == cutlass::Status::kSuccess, "CUTLASS 3xTF32: update failed");
      launch(s);
      SG_REQUIRE(op_.update(arguments(a_.D)) == cutlass::Status::kSuccess, "CUTLASS 3xTF32: update failed");
      return;
    }
    launch(s);
  }
  std::string name() const override { return cat("CUTLASS 3xTF32 tile ", T::name()); }

 private:
  typename Op::Arguments arguments(float* D) const {
    const float beta = a_.accumulate ? 1.0f : 0.0f;
    return typename Op::Arguments({static_cast<int>(s_.m), static_cast<int>(s_.n), static_cast<int>(s_.k)},
                                  {a_.A, s_.lda}, {a_.B, s_.ldb}, {D, s_.ldc}, {D, s_.ldc}, {1.0f, beta});
  }
  void launch(cudaStream_t s) {
    const cutlass::Status st = op_.run(s);
    SG_REQUIRE(st == cutlass::Status::kSuccess, "CUTLASS 3xTF32 ", T::name(), " launch failed: ", status_text(st));
    KERNEL_LAUNCH_CHECK();
  }
  GemmShape s_;
  GemmArgs a_;
  Op op_;
};

template <class T>
std::unique_ptr<Tf32x3Gemm> make_for_tile(const GemmShape& s, const GemmArgs& a, std::string* why) {
  // A transposed column-major operand is a row-major one with the same leading dimension.
  auto build = [&](auto impl) -> std::unique_ptr<Tf32x3Gemm> {
    if (!impl->init(why)) return nullptr;
    return std::unique_ptr<Tf32x3Gemm>(impl.release());
  };
  if (!s.trans_a && !s.trans_b) return build(std::make_unique<Impl<ColumnMajor, ColumnMajor, T>>(s, a));
  if (!s.trans_a && s.trans_b) return build(std::make_unique<Impl<ColumnMajor, RowMajor, T>>(s, a));
  if (s.trans_a && !s.trans_b) return build(std::make_unique<Impl<RowMajor, ColumnMajor, T>>(s, a));
  return build(std::make_unique<Impl<RowMajor, RowMajor, T>>(s, a));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

int tf32x3_configs() { return static_cast<int>(std::tuple_size<Tiles>::value); }

std::unique_ptr<Tf32x3Gemm> make_tf32x3_gemm(const GemmShape& s, const GemmArgs& a, int config, std::string* why) {
  SG_REQUIRE(config >= 0 && config < tf32x3_configs(), "tf32x3: no tile configuration ", config);
  const int64_t most = int64_t{1} << 31;
  if (s.m >= most || s.n >= most || s.k >= most || s.lda >= most || s.ldb >= most || s.ldc >= most) {
    *why = cat("tf32x3: ", s.m, "x", s.n, "x", s.k, " exceeds 32-bit extents");
    return nullptr;
  }
  if (!aligned16(a.A) || !aligned16(a.B) || !aligned16(a.D) || s.lda % 4 || s.ldb % 4 || s.ldc % 4) {
    *why = cat("tf32x3: ", s.m, "x", s.n, "x", s.k, " needs 16-byte aligned operands and leading dimensions");
    return nullptr;
  }
  return config == 0 ? make_for_tile<std::tuple_element_t<0, Tiles>>(s, a, why)
                     : make_for_tile<std::tuple_element_t<1, Tiles>>(s, a, why);
}

#else  // built without CUTLASS

int tf32x3_configs() { return 0; }
std::unique_ptr<Tf32x3Gemm> make_tf32x3_gemm(const GemmShape&, const GemmArgs&, int, std::string* why) {
  *why = "this build has no CUTLASS headers (scripts/setup.sh installs them from PyPI nvidia-cutlass)";
  return nullptr;
}

#endif

}  // namespace sg::cuda
