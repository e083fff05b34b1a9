// The dense product rules (dense_dispatch.h). Figures behind each threshold: bench/RESULTS.md.
#include "backend/cuda/kernels/dense_dispatch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <sstream>

#include "stepgraph/core.h"

namespace sg::cuda {

namespace {

constexpr int64_t kSmallMacs = int64_t{1} << 22, kSlicedMostMacs = int64_t{1} << 28;
// Waves of blocks (each a multiple of the SM count) the split rules aim for: the row-slab
// kernel's weight gradients two, other layouts' split products one, the 3xTF32 kernel three, and
// a split product onto at most 256 outputs four.
constexpr int64_t kRowsWaves = 2, kTilesWaves = 1, kTcWaves = 3, kSmallOutputWaves = 4;
// At most 16 k-sliced splits: a tile's last block adds them serially.
constexpr int64_t kSlicedMostSplits = 16;

bool medium_product(const DenseShape& s, const DenseDevice& d) { return sliced_gemm(s.M, s.N, s.K, d); }
bool small_product(const DenseShape& s, const DenseDevice&) {
  return s.M * s.N * s.K <= kSmallMacs && s.K <= 512 && s.M <= 16384;
}
bool long_reduction(const DenseShape& s, const DenseDevice& d) { return own_gemm_splits(s.M, s.N, s.K, s.rows, false, d) > 1; }
bool any_product(const DenseShape&, const DenseDevice&) { return true; }

constexpr DenseRule kRules[] = {
    {DenseKernel::Sliced, "medium",
     "2^22 to 2^28 multiply-adds, k >= 256, one wave of 32x64 tiles (k split at most 16 ways), the kernel's ~140 KB "
     "of shared memory",
     "each block stages k-ranges of 256 in shared memory: a single wave of blocks where the library's kernels take more",
     medium_product},
    {DenseKernel::Tiles, "small", "up to 2^22 multiply-adds, k <= 512, m <= 16384",
     "a library call's fixed cost and extra epilogue launches would outweigh the arithmetic", small_product},
    {DenseKernel::SplitK, "long-k",
     "k >= 1024 onto at most 256x256 outputs (128x128 below k = 2048; weight gradients past 2^28 multiply-adds too)",
     "few output tiles over a long reduction: k split over blocks fills the GPU, the partials added in a fixed order",
     long_reduction},
    {DenseKernel::CublasLt, "large", "every other product", "cuBLASLt's tuned kernels, with epilogues where they apply",
     any_product},
};

const char* kernel_name(DenseKernel k) {
  switch (k) {
    case DenseKernel::Sliced: return "our k-sliced kernel";
    case DenseKernel::Tiles: return "our tiled kernel";
    case DenseKernel::SplitK: return "our split-k kernel + ordered sum";
    case DenseKernel::CublasLt: return "cuBLASLt";
  }
  return "?";
}

int64_t sliced_splits(int64_t M, int64_t N, int64_t K, const DenseDevice& d) {
  return std::max<int64_t>(1, std::min(d.sms / sliced_tiles(M, N), K / kSlicedDepth));
}

DenseDevice read_device(int dev) {
  DenseDevice d;
  int sms = 0, smem = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess || sms <= 0) {
    cudaGetLastError();  // not sticky: clear it
    throw Error(cat("dense kernels: cannot read CUDA device ", dev, "'s multiprocessor count and shared memory"));
  }
  d.sms = sms, d.smem_optin = smem;
  d.tf32_mma = tf32_tensor_cores();
  d.fp64_mma = sliced_fp64_tensor_cores();
  return d;
}

}  // namespace

const DenseDevice& DenseDevice::current() {
  // Read when products are planned and by launches that size their grids (eager steps): after
  // the first read per device, one atomic load, no lock.
  constexpr int kDevices = 64;
  static std::atomic<const DenseDevice*> cache[kDevices];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    throw Error("dense kernels: no CUDA device to plan the products for");
  }
  if (dev < 0 || dev >= kDevices) throw Error(cat("dense kernels: CUDA device ", dev, " (at most ", kDevices, ")"));
  if (const DenseDevice* d = cache[dev].load(std::memory_order_acquire)) return *d;
  const DenseDevice* fresh = new DenseDevice(read_device(dev));  // one per device, kept
  const DenseDevice* expected = nullptr;
  if (!cache[dev].compare_exchange_strong(expected, fresh)) {
    delete fresh;
    return *expected;
  }
  return *fresh;
}

const DenseRule* dense_rules(int* count) {
  *count = static_cast<int>(sizeof(kRules) / sizeof(kRules[0]));
  return kRules;
}

const DenseRule& dense_rule(const DenseShape& s, const DenseDevice& d) {
  for (const DenseRule& r : kRules)
    if (r.applies(s, d)) return r;
  return kRules[sizeof(kRules) / sizeof(kRules[0]) - 1];
}

std::string dense_rules_text(const DenseDevice& d) {
  std::ostringstream o;
  o << "  dense products on this GPU (" << d.sms << " SMs, " << d.smem_optin / 1024 << " KB of shared memory a block"
    << (d.fp64_mma ? ", FP64 mma" : "") << (d.tf32_mma ? ", TF32 mma" : "")
    << "), the first rule that applies (dense_dispatch.cpp):\n";
  o << "    skinny layer -> the skinny kernels: " << kSkinnyRule.when << " (" << kSkinnyRule.why << ")\n";
  for (const DenseRule& r : kRules)
    o << "    " << r.name << " -> " << kernel_name(r.kernel) << ": " << r.when << " (" << r.why << ")\n";
  return o.str();
}

bool skinny_dense(int64_t R, int64_t O, int64_t I) { return O <= kSkinnyMax && R >= 4096 && O * I <= 1024; }

bool sliced_gemm(int64_t M, int64_t N, int64_t K, const DenseDevice& d) {
  // Shorter k or a second wave lose to cuBLASLt (a transformer's 4096 x 128 x 128), and more
  // splits than 16 to the row-slab kernel (a PINN's weight gradient over tens of thousands of
  // rows); sm_86/89 and consumer Blackwell (99 KB a block) lack the shared memory.
  const int64_t splits = sliced_splits(M, N, K, d), blocks = sliced_tiles(M, N) * splits;
  const int64_t macs = M * N * K;
  return d.smem_optin >= detail::sliced_smem_bytes() && macs > kSmallMacs && macs <= kSlicedMostMacs && K >= kSlicedDepth &&
         splits <= kSlicedMostSplits && 2 * blocks >= d.sms && blocks <= d.sms;
}

GemmTile rows_tile(int64_t M, int64_t N, int64_t K, const DenseDevice& d) {
  // 128 x 128 (8 x 8 outputs a thread) for outputs of at least that size; 128 x 64 onto fewer
  // than 128 columns, so that each slab row of A is read by one block; 64 x 64 below, and where k
  // is too short to give the larger tiles two waves of blocks.
  const GemmTile small{64, 64};
  if (M < 128) return small;
  const GemmTile t{128, N >= 128 ? 128 : 64};
  return K / 128 * tiles(M, N, t) >= kRowsWaves * d.sms ? t : small;
}

int own_gemm_splits(int64_t M, int64_t N, int64_t K, bool rows, bool tensor_cores, const DenseDevice& d) {
  if (sliced_gemm(M, N, K, d) && !tensor_cores) return static_cast<int>(sliced_splits(M, N, K, d));
  if (tensor_cores) {  // 64 x 64 tiles, three waves, each block over at least 256 values of k
    if (K < 1024) return 1;
    const int64_t t = tiles(M, N, detail::kTcTile), want = (kTcWaves * d.sms + t - 1) / t, most = K / 256;
    const int64_t s = want < most ? want : most;
    return s < 2 ? 1 : static_cast<int>(s);
  }
  // A small output (a few 64 x 64 tiles) over a long reduction: from k = 1024 for outputs up to
  // 128 x 128 (a PINN's boundary points), from 2048 up to 256 x 256 (cuBLASLt is faster for an
  // MLP's 256 x 256 x 1024 weight gradient).
  if (K < 1024 || M * N > 256 * 256 || (K < 2048 && M * N > 128 * 128)) return 1;
  // Past ~2^28 multiply-adds cuBLASLt, except for weight gradients (the row-slab kernel).
  if (!rows && M * N * K > kSlicedMostMacs) return 1;
  // At most 256 outputs (split_gemm_small_kernel): each block over at least 64 rows.
  if (small_output(M, N)) {
    const int64_t s = std::min<int64_t>(kSmallOutputWaves * d.sms, K / 64);
    return s < 2 ? 1 : static_cast<int>(s);
  }
  // Each block over at least 128 values of k; weight gradients on 64-tiles down to one 32-deep
  // slab, where a short k would leave most SMs idle.
  const int64_t waves = rows ? kRowsWaves : kTilesWaves;
  const GemmTile tile = rows ? rows_tile(M, N, K, d) : GemmTile{64, 64};
  const int64_t t = tiles(M, N, tile), want = (waves * d.sms + t - 1) / t, most = K / (rows && tile.rows == 64 ? 32 : 128);
  const int64_t s = want < most ? want : most;
  return s < 2 ? 1 : static_cast<int>(s);
}

bool own_gemm_tensor_cores(const DenseGemm& g, const DenseDevice& d) {
  // Fewer tiles than SMs would leave most tensor cores idle where the SIMT kernel's smaller
  // tiles spread out.
  return g.tf32x3 && !small_output(g.M, g.N) && tiles(g.M, g.N, detail::kTcTile) * g.splits >= d.sms && detail::tc_operands(g);
}

bool own_gemm_sliced(const DenseGemm& g, const DenseDevice& d) {
  return !own_gemm_tensor_cores(g, d) && detail::sliced_layout(g) && sliced_gemm(g.M, g.N, g.K, d);
}

void plan_own_gemm(DenseGemm& g, bool tf32x3, const DenseDevice& d) {
  const bool rows = rows_layout(g);
  g.tf32x3 = tf32x3 && d.tf32_mma;
  g.splits = own_gemm_splits(g.M, g.N, g.K, rows, g.tf32x3, d);
  if (g.tf32x3 && !own_gemm_tensor_cores(g, d)) {  // not on tensor cores: the SIMT kernel's splits
    g.tf32x3 = false;
    g.splits = own_gemm_splits(g.M, g.N, g.K, rows, false, d);
  }
  g.sliced = own_gemm_sliced(g, d);
  g.fp64_tc = g.sliced && d.fp64_mma;
}

bool sliced_pair(DenseGemm& w, DenseGemm& x, const DenseDevice& d) {
  if (!w.sliced || !x.sliced || w.tf32x3 || x.tf32x3 || !detail::sliced_pair_layout(w, x)) return false;
  // Two products of 32 x 64 tiles each fill the GPU for a few microseconds of arithmetic and about
  // as much fixed cost (loads, the warps' sum, the epilogue, the launch); on 64 x 64 tiles side by
  // side they pay it once.
  const int64_t half = d.sms / 2;
  auto splits = [half](const DenseGemm& g) {
    return std::max<int64_t>(1, std::min(half / sliced_tiles(g.M, g.N, kSlicedPairRows), g.K / kSlicedDepth));
  };
  const int64_t sw = splits(w), sx = splits(x);
  const int64_t blocks = sliced_tiles(w.M, w.N, kSlicedPairRows) * sw + sliced_tiles(x.M, x.N, kSlicedPairRows) * sx;
  if (blocks > d.sms || 2 * blocks < d.sms || sw > kSlicedMostSplits || sx > kSlicedMostSplits) return false;
  w.splits = static_cast<int>(sw), x.splits = static_cast<int>(sx);
  w.paired = x.paired = true;
  w.fp64_tc = x.fp64_tc = false;
  return true;
}

bool wgrad_batchable(int64_t M, int64_t N, int64_t K, const DenseDevice& d) {
  // The products a layer's backward would otherwise pair with its input gradient on the k-sliced
  // kernel.
  return M % 4 == 0 && N % 4 == 0 && sliced_gemm(M, N, K, d) && d.fp64_mma;
}

GemmTile own_gemm_tile(const DenseGemm& a, const DenseGemm* b, const DenseDevice& d) {
  if (own_gemm_tensor_cores(a, d)) return {detail::kTcTile, detail::kTcTile};
  if (a.paired) return {kSlicedPairRows, kSlicedCols};
  if (a.sliced) return {kSlicedRows, kSlicedCols};
  if (a.splits > 1) return small_output(a.M, a.N) ? GemmTile{} : rows_layout(a) ? rows_tile(a.M, a.N, a.K, d) : GemmTile{64, 64};
  // Unsplit: the largest square tile that still gives 128 blocks (both products' together).
  int64_t t64 = tiles(a.M, a.N, 64) + (b ? tiles(b->M, b->N, 64) : 0);
  int64_t t32 = tiles(a.M, a.N, 32) + (b ? tiles(b->M, b->N, 32) : 0);
  const int t = t64 >= 128 ? 64 : t32 >= 128 ? 32 : 16;
  return {t, t};
}

}  // namespace sg::cuda
