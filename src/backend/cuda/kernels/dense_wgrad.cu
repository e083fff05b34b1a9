// A run of MLP layers' weight gradients in one launch (wgrad_batch): dW = dZ^T X and db = the
// column sums of dZ, for up to kWgradMaxBatch layers of the same shape, on the FP64 tensor cores.
//
// In a layer's backward the weight gradient is off the critical path (nothing in the step reads
// it before the optimizer), but launched beside the input gradient it shares that launch's SMs
// and latency. Deferred to the end of the run (the lowering keeps dZ and X alive for it through
// Backend::lifetime_hints), the products fill the GPU together: mlp_8x256's seven 256 x 256 x 1024
// products are 112 blocks of 64 x 64 outputs, each over the whole k = 1024 of its layer.
//
// A block's 8 warps take the tile's four 32 x 32 quadrants, each quadrant's k split between two
// warps; both operands (dZ and X, [k][m] and [k][n] as they lie in memory) stream through
// kStages stages of 64 values of k (cp.async). Fragments are read as in the k-sliced kernel
// (dense_sliced.cu): fp32 converted exactly to fp64, mma.sync m16n8k8 .f64, fp64 sums; the two
// halves of k and the row sums' four parts are added in a fixed order, and each output is
// rounded to fp32 once: deterministic, at least fp32's accuracy.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/kernels/dense_common.cuh"
#include "backend/cuda/runtime/pdl.cuh"

namespace sg::cuda {

using namespace detail;

namespace {

constexpr int kT = kWgradTile, kKc = 64, kStages = 4, kThreads = 256;
constexpr int kLD = kT + 8;                 // [k][m] rows padded: conflict-free fragment reads
constexpr int kStageFloats = 2 * kKc * kLD;  // A's kKc x 64 then B's
constexpr int kLDR = 32 + 4;                 // the second k half's quadrant tiles (fp64)
constexpr size_t kSmem = sizeof(float) * kStages * kStageFloats;
static_assert(sizeof(double) * (4 * 32 * kLDR + 4 * kT) <= kSmem, "the sums fit over the stages");

// A thread's share of every stage: rows kk + kRowStep * r (r < kRows) of both operands at columns
// c .. c + 3, as 16-byte copies. Sources are worked out once; a stage moves them k0 rows on.
// Zeros outside [0, K) x the output.
struct Loader {
  static constexpr int kRowStep = kThreads / (kT / 4), kRows = kKc / kRowStep;
  const float *a, *x;      // row kk, column c of dZ (from m0) and X (from n0)
  const float *a0, *x0;    // where a copy of nothing points (zero bytes read)
  int kk, c;
  bool a_in, x_in;
  __device__ Loader(const WgradBatch& b, const WgradItem& it, int64_t m0, int64_t n0, int tid)
      : kk(tid / (kT / 4)), c((tid % (kT / 4)) * 4) {
    a_in = m0 + c < b.M, x_in = n0 + c < b.N;
    a = it.dz + kk * b.ldz + m0 + c, x = it.x + kk * b.ldx + n0 + c, a0 = it.dz, x0 = it.x;
  }
  __device__ void stage(float* st, const WgradBatch& b, int64_t k0) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = kk + kRowStep * r;
      const bool k_in = k0 + row < b.K;
      const int64_t at = k0 + kRowStep * r;
      cp_async16(st + row * kLD + c, a_in && k_in ? a + at * b.ldz : a0, a_in && k_in);
      cp_async16(st + kKc * kLD + row * kLD + c, x_in && k_in ? x + at * b.ldx : x0, x_in && k_in);
    }
  }
};

__global__ void __launch_bounds__(kThreads, 1) wgrad_batch_kernel(WgradBatch b) {
  extern __shared__ __align__(16) float smem[];
  const WgradItem it = b.item[blockIdx.y];
  const int n_tiles = static_cast<int>((b.N + kT - 1) / kT);
  const int64_t m0 = int64_t{blockIdx.x / n_tiles} * kT, n0 = int64_t{blockIdx.x % n_tiles} * kT;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wm = (warp & 3) / 2 * 32, wn = (warp & 1) * 32, half = warp / 4;  // quadrant, k half
  const int nk = static_cast<int>((b.K + kKc - 1) / kKc);
  // Row sums (db): thread tid adds row tid % 64's k in [16p, 16p + 16) of every stage, p = tid / 64.
  const bool rows = it.db != nullptr && n0 == 0;
  const int rr = tid % kT, rp = tid / kT;
  double d[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) d[i][j][0] = d[i][j][1] = d[i][j][2] = d[i][j][3] = 0.0;
  double rs = 0.0;
  const Loader load(b, it, m0, n0, tid);
  PDL_PROLOGUE();  // everything above reads only the arguments

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nk) load.stage(smem + s * kStageFloats, b, int64_t{s} * kKc);
    cp_async_commit();
  }
#pragma unroll 1
  for (int kc = 0; kc < nk; ++kc) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kc is in, and stage kc - 1 (refilled below) has no readers left
    const int next = kc + kStages - 1;
    if (next < nk) load.stage(smem + (next % kStages) * kStageFloats, b, int64_t{next} * kKc);
    cp_async_commit();
    const float* As = smem + (kc % kStages) * kStageFloats;
    const float* Bs = As + kKc * kLD;
#pragma unroll
    for (int k = half * (kKc / 2); k < (half + 1) * (kKc / 2); k += 8) {
      double a[2][4], x[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float* p = As + (k + t) * kLD + wm + 16 * i + g;
        a[i][0] = p[0], a[i][1] = p[8], a[i][2] = p[4 * kLD], a[i][3] = p[4 * kLD + 8];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float* p = Bs + (k + t) * kLD + wn + 8 * j + g;
        x[0] = p[0], x[1] = p[4 * kLD];
#pragma unroll
        for (int i = 0; i < 2; ++i) mma_f64_16x8x8(d[i][j], a[i], x);
      }
    }
    if (rows) {
      float part = 0.0f;  // 16 values in fp32, then fp64
#pragma unroll
      for (int k = kKc / 4 * rp; k < kKc / 4 * (rp + 1); ++k) part += As[k * kLD + rr];
      rs += part;
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every stage read: the sums go over them

  // The second k half's quadrants, then the row sums' parts, in shared memory; the first half's
  // warps add them (in that order) and store.
  double* red = reinterpret_cast<double*>(smem);  // [quadrant][32][kLDR]
  double* rsum = red + 4 * 32 * kLDR;             // [part][kT]
  double* mine = red + (warp & 3) * 32 * kLDR;
  if (half == 1)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        double* p = mine + (16 * i + g) * kLDR + 8 * j + 2 * t;
        p[0] = d[i][j][0], p[1] = d[i][j][1], p[8 * kLDR] = d[i][j][2], p[8 * kLDR + 1] = d[i][j][3];
      }
  if (rows) rsum[rp * kT + rr] = rs;
  __syncthreads();
  if (half == 0)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the fragment
          const int r = 16 * i + g + 8 * h, c = 8 * j + 2 * t;
          const int64_t m = m0 + wm + r, n = n0 + wn + c;
          const double* p = mine + r * kLDR + c;
          if (m < b.M && n < b.N)  // N % 4 == 0: the pair is in or out together
            *reinterpret_cast<float2*>(it.dw + m * b.ldw + n) =
                make_float2(static_cast<float>(d[i][j][2 * h] + p[0]), static_cast<float>(d[i][j][2 * h + 1] + p[1]));
        }
  if (rows && tid < kT && m0 + tid < b.M)
    it.db[m0 + tid] = static_cast<float>(((rsum[tid] + rsum[kT + tid]) + rsum[2 * kT + tid]) + rsum[3 * kT + tid]);
}

}  // namespace

void wgrad_batch(const WgradBatch& b, cudaStream_t s) {
  SG_REQUIRE(b.count >= 1 && b.count <= kWgradMaxBatch, "wgrad_batch: ", b.count, " products (1 to ", kWgradMaxBatch,
             " a launch)");
  SG_REQUIRE(b.M % 4 == 0 && b.N % 4 == 0 && b.ldz % 4 == 0 && b.ldx % 4 == 0 && b.ldw % 2 == 0,
             "wgrad_batch: ", b.M, "x", b.N, " outputs with strides ", b.ldz, "/", b.ldx, "/", b.ldw,
             " do not load as 16-byte chunks");
  for (int i = 0; i < b.count; ++i)
    SG_REQUIRE(aligned16(b.item[i].dz) && aligned16(b.item[i].x) && reinterpret_cast<uintptr_t>(b.item[i].dw) % 8 == 0,
               "wgrad_batch: product ", i, "'s operands are not 16-byte aligned");
  static const bool attr = [] {
    CUDA_CHECK(cudaFuncSetAttribute(wgrad_batch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
    return true;
  }();
  (void)attr;
  const dim3 grid(static_cast<unsigned>(tiles(b.M, b.N, kT)), static_cast<unsigned>(b.count));
  launch_pdl(wgrad_batch_kernel, grid, kThreads, kSmem, s, b);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
