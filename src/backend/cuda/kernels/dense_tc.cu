// 3xTF32 products on tensor cores (precision tf32x3): stepgraph's dense products (the same
// epilogue, split-k partials and row sums as dense_kernels.cu) with mma.sync TF32.
#include <cstdint>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/dense_common.cuh"
#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

using namespace detail;

namespace {

// The same products (and the same epilogue, split-k partials and row sums) with the arithmetic on
// tensor cores: each fp32 operand is split into a TF32 part and a TF32 remainder, and big*small +
// small*big + big*big are accumulated in fp32 (the dropped small*small is ~2^-22 of a product),
// so the error stays at fp32's level. A 64 x 64 output tile per block of 4 warps, each warp
// 32 x 32 as 2 x 4 mma.m16n8k8 tiles; k-slabs of 32 through a cp.async pipeline. Each operand
// tile is kept in shared memory as it lies in global memory: [k][m] when m is the unit stride (a
// weight gradient's dZ and X), [m][k] when k is (activations, W as [out][in] in the forward). The
// row pads (+8 and +4 floats) make the fragment reads (8 rows x 4 columns per warp) hit 32 banks.
namespace tc {
// kStages slabs in flight per block (cp.async): a split weight gradient's block runs only ~10-20
// slabs, where double buffering left the loads exposed (Fourier 4x128's 128 x 64 x 67584 at
// 1.5 TB/s and ~30% of the tensor cores' rate).
constexpr int kT = kTcTile, kBK = 32, kThreads = 128, kStages = 4;
template <bool MFAST>
struct Tile {  // one operand's 64 x 32 slab in shared memory
  static constexpr int LD = MFAST ? kT + 8 : kBK + 4;
  static constexpr int kFloats = MFAST ? kBK * LD : kT * LD;  // 2304 either way
  __device__ static int at(int mn, int k) { return MFAST ? k * LD + mn : mn * LD + k; }
};

// x = big + small with big x rounded to TF32's 10 mantissa bits: half an ulp added and the low
// 13 bits cleared, two integer operations at full rate (cvt.rna.tf32 runs at the conversion
// units' quarter rate, and at 32 conversions per 24 mma it held the kernel to about half the
// tensor cores' rate). small = x - big is exact; the tensor cores read its top 19 bits.
__device__ __forceinline__ void split(float x, uint32_t& big, uint32_t& small) {
  big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(x - __uint_as_float(big));
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Loads rows [k0, k0 + kBK) x [mn0, mn0 + kT) of an operand (element (mn, k) at p[mn*smn + k*sk],
// one of the strides 1) into `dst`, 16 bytes per cp.async; outside [0, MN) x [k0, k_end) zeros.
template <bool MFAST>
__device__ __forceinline__ void load_slab(float* dst, const float* p, int64_t smn, int64_t sk, int64_t mn0,
                                          int64_t MN, int64_t k0, int64_t k_end, int tid) {
  constexpr int kChunks = kT * kBK / 4 / kThreads;  // 4 per thread
#pragma unroll
  for (int r = 0; r < kChunks; ++r) {
    const int e = tid + r * kThreads;
    // MFAST: 16 chunks along m per k row; else 8 chunks along k per m row.
    const int mn = MFAST ? (e % (kT / 4)) * 4 : e / (kBK / 4), k = MFAST ? e / (kT / 4) : (e % (kBK / 4)) * 4;
    const bool in = mn0 + mn < MN && k0 + k < k_end;
    const float* src = in ? p + (mn0 + mn) * smn + (k0 + k) * sk : p;
    cp_async16(dst + Tile<MFAST>::at(mn, k), src, in);
  }
}

template <bool AM, bool BN>
__global__ void __launch_bounds__(kThreads) gemm_kernel(DenseGemm g) {
  PDL_PROLOGUE();
  using TA = Tile<AM>;
  using TB = Tile<BN>;
  extern __shared__ __align__(16) float smem[];  // kStages A slabs, then kStages B slabs
  float* As = smem;
  float* Bs = smem + kStages * TA::kFloats;
  const int64_t n_tiles = (g.N + kT - 1) / kT;
  const int64_t m0 = blockIdx.x / n_tiles * kT, n0 = blockIdx.x % n_tiles * kT;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gq = lane / 4, tq = lane % 4;              // the fragment's row group and column
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;  // the warp's 32 x 32 within the tile
  int64_t k_begin = 0, k_end = g.K;
  if (g.splits > 1) split_range<kBK>(g, blockIdx.y, &k_begin, &k_end);
  const bool do_rowsum = g.rowsum != nullptr && n0 == 0 && tid < kT;
  float rs = 0.0f;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  // Slab n of the block's k-range goes to stage n % kStages. Every iteration commits one group
  // (empty past the range), so waiting for all but the newest kStages - 2 groups means the
  // current slab has landed.
  auto load = [&](int64_t n) {
    const int64_t k0 = k_begin + n * kBK;
    if (k0 < k_end) {
      const int st = static_cast<int>(n % kStages);
      load_slab<AM>(As + st * TA::kFloats, g.A, g.sam, g.sak, m0, g.M, k0, k_end, tid);
      load_slab<BN>(Bs + st * TB::kFloats, g.B, g.sbn, g.sbk, n0, g.N, k0, k_end, tid);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) load(i);
  int64_t slab = 0;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK, ++slab) {
    cp_async_wait<kStages - 2>();
    // This slab is visible to every thread, and every thread is done with the one before, whose
    // stage the next load refills.
    __syncthreads();
    load(slab + kStages - 1);
    const float* a = As + (slab % kStages) * TA::kFloats;
    const float* b = Bs + (slab % kStages) * TB::kFloats;
    if (do_rowsum) {  // the bias gradient: A summed over its first rowsum_k values of k
      const int64_t left = g.rowsum_k - k0;
      const int depth = left < 0 ? 0 : left < kBK ? static_cast<int>(left) : kBK;
      for (int k = 0; k < depth; ++k) rs += a[TA::at(tid, k)];
    }
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t ab[2][4], as[2][4], bb[4][2], bs[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int m = wm + i * 16 + gq;
        split(a[TA::at(m, kk + tq)], ab[i][0], as[i][0]);
        split(a[TA::at(m + 8, kk + tq)], ab[i][1], as[i][1]);
        split(a[TA::at(m, kk + tq + 4)], ab[i][2], as[i][2]);
        split(a[TA::at(m + 8, kk + tq + 4)], ab[i][3], as[i][3]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + j * 8 + gq;
        split(b[TB::at(n, kk + tq)], bb[j][0], bs[j][0]);
        split(b[TB::at(n, kk + tq + 4)], bb[j][1], bs[j][1]);
      }
      // Small terms first; each pass is 8 independent products (a dependent chain would stall).
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma(acc[i][j], as[i], bb[j]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma(acc[i][j], ab[i], bs[j]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma(acc[i][j], ab[i], bb[j]);
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)

  // acc[i][j]: rows wm + 16i + gq (+8), columns wn + 8j + 2tq (+1).
  float* P = g.splits > 1 ? g.partial + blockIdx.y * g.M * g.N : nullptr;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = m0 + wm + i * 16 + gq + h * 8;
      if (m >= g.M) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t n = n0 + wn + j * 8 + 2 * tq + c;
          if (n >= g.N) continue;
          if (P) P[m * g.N + n] = acc[i][j][2 * h + c];
          else store_output(g, m, n, acc[i][j][2 * h + c]);
        }
    }
  if (do_rowsum && m0 + tid < g.M) {
    if (P) g.partial[g.splits * g.M * g.N + blockIdx.y * g.M + m0 + tid] = rs;
    else store_rowsum(g, m0 + tid, rs);
  }
}
}  // namespace tc

template <bool AM, bool BN>
void launch_tc_kernel(const DenseGemm& g, dim3 grid, cudaStream_t s) {
  constexpr size_t smem = tc::kStages * (tc::Tile<AM>::kFloats + tc::Tile<BN>::kFloats) * sizeof(float);
  static const cudaError_t opt_in =  // past the 48 KiB default: once per kernel, before any launch
      cudaFuncSetAttribute(tc::gemm_kernel<AM, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  CUDA_CHECK(opt_in);
  launch_pdl(tc::gemm_kernel<AM, BN>, grid, tc::kThreads, smem, s, g);
}

// Whether the tensor-core kernel takes this product: each operand's slabs load as 16-byte
// chunks along its unit stride (the extent there and the other stride multiples of 4).
bool tc_operand(const void* p, int64_t s_mn, int64_t s_k, int64_t MN, int64_t K) {
  if (!aligned16(p)) return false;
  if (s_mn == 1) return MN % 4 == 0 && s_k % 4 == 0;
  return s_k == 1 && K % 4 == 0 && s_mn % 4 == 0;
}

}  // namespace

bool detail::tc_operands(const DenseGemm& g) {
  return tc_operand(g.A, g.sam, g.sak, g.M, g.K) && tc_operand(g.B, g.sbn, g.sbk, g.N, g.K);
}

void detail::launch_tc(const DenseGemm& g, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(tiles(g.M, g.N, tc::kT)), static_cast<unsigned>(g.splits));
  const bool am = g.sam == 1, bn = g.sbn == 1;
  if (am && bn) launch_tc_kernel<true, true>(g, grid, s);
  else if (am) launch_tc_kernel<true, false>(g, grid, s);
  else if (bn) launch_tc_kernel<false, true>(g, grid, s);
  else launch_tc_kernel<false, false>(g, grid, s);
  KERNEL_LAUNCH_CHECK();
}

bool tf32_tensor_cores() {
  static const bool on = [] {
    int dev = 0, major = 0;
    cudaFuncAttributes fa{};
    const bool ok = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaFuncGetAttributes(&fa, tc::gemm_kernel<true, true>) == cudaSuccess;
    if (!ok) cudaGetLastError();
    return ok && major >= 8 && fa.binaryVersion >= 80;  // mma.sync on TF32: sm_80 and newer code
  }();
  return on;
}

}  // namespace sg::cuda
