// The PINN losses' kernels: an expression loss (the residual of a PDE, a boundary or data term)
// over its points, and the points a step draws (resampled collocation points). The jets
// (pinn_kernels.cu) feed the first; declarations in pinn_kernels.cuh.
#include <algorithm>

#include "backend/cuda/kernels/grid.cuh"
#include "backend/cuda/kernels/pinn_kernels.cuh"
#include "backend/cuda/kernels/reduce.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "pinn/expr_tape.h"
#include "pinn/sample_math.h"

namespace sg::cuda {

namespace {

constexpr int kBlock = 256;

// Point sets reach millions of elements: a larger cap than grid.cuh's default.
unsigned pinn_grid(int64_t n) { return grid_for(n, kBlock, 65535 * 16); }

constexpr int kExprBlock = 128;

// Two terms share a launch: blocks [0, blocks0) take the first, the rest the second.
struct ExprLaunch {
  ExprTerm t[2];
  double scale[2];  // weight / M
  int n = 1, blocks0 = 0;
  unsigned* done = nullptr;
};

// One thread per point (grid-stride over its term's blocks), the tape and variable table staged
// in shared memory; the per-instruction scratch (CAP values and adjoints) lives in each thread's
// local memory, so CAP follows the longer tape (see expression_loss).

template <int CAP>
__global__ void __launch_bounds__(kExprBlock) expression_loss_kernel(ExprLaunch L) {
  const bool second = L.n == 2 && static_cast<int>(blockIdx.x) >= L.blocks0;
  const ExprTerm& t = second ? L.t[1] : L.t[0];
  const ExprLossDevice& e = t.e;
  const int block = static_cast<int>(blockIdx.x) - (second ? L.blocks0 : 0);
  const int nblocks = second ? static_cast<int>(gridDim.x) - L.blocks0 : L.blocks0;
  const double scale = L.scale[second];
  __shared__ alignas(8) unsigned char tape_bytes[kMaxTape * sizeof(pinn::TapeInstr)];
  __shared__ alignas(8) unsigned char var_bytes[64 * sizeof(ExprVar)];
  auto* tape = reinterpret_cast<pinn::TapeInstr*>(tape_bytes);
  auto* vars = reinterpret_cast<ExprVar*>(var_bytes);
  for (int i = threadIdx.x; i < e.n; i += blockDim.x) tape[i] = e.tape[i];
  for (int i = threadIdx.x; i < e.nvars; i += blockDim.x) vars[i] = e.vars[i];
  __syncthreads();
  double val[CAP], adj[CAP];
  double sum = 0.0;
  for (int64_t m = block * int64_t{kExprBlock} + threadIdx.x; m < t.M; m += int64_t{nblocks} * kExprBlock) {
    const double r =
        pinn::expression_point(tape, e.n, vars, t.U, t.X, t.dU, m, t.M, t.d, t.O, t.K, 2.0 * scale, val, adj);
    sum += r * r;
  }
  double all = 0.0;
  if (!sum_across_blocks(block_sum(sum), e.partials, e.counter, &all, block, nblocks) || threadIdx.x != 0) return;
  const double v = scale * all;
  *t.term = static_cast<float>(v);
  if (t.total) *t.total = t.accumulate_total ? static_cast<float>(*t.total + v) : static_cast<float>(v);
  if (L.n == 1) {
    if (e.sum) *e.sum = *e.sum_in + static_cast<float>(v);
    return;
  }
  __threadfence();
  if (atomicAdd(L.done, 1u) != 1u) return;  // the other term is still running
  __threadfence();
  for (int k = 0; k < 2; ++k) {
    const ExprLossDevice& ek = L.t[k].e;
    if (ek.sum)
      *ek.sum = *static_cast<const volatile float*>(ek.sum_in) + *static_cast<const volatile float*>(L.t[k].term);
  }
  *L.done = 0u;
}

__global__ void sample_points_kernel(const int32_t* step, float* X, int64_t M, int64_t d, SampleAttrs a) {
  const int64_t s = *step;
  SG_GRID_STRIDE(e, M * d) X[e] = static_cast<float>(pinn::sample_coordinate(a, s, e / d, static_cast<int>(e % d), static_cast<int>(d)));
}

}  // namespace

int expression_loss_blocks(int64_t M) {
  const int64_t b = (M + kExprBlock - 1) / kExprBlock;
  return static_cast<int>(b < 1 ? 1 : b < 1024 ? b : 1024);
}

void expression_loss(const ExprTerm& first, const ExprTerm* second, unsigned* done, cudaStream_t s) {
  ExprLaunch L;
  L.n = second ? 2 : 1;
  SG_REQUIRE(!second || done, "expression loss: two terms in one launch need a counter");
  L.done = done;
  int blocks = 0, tape = 0;
  for (int k = 0; k < L.n; ++k) {
    const ExprTerm& t = k ? *second : first;
    const ExprLossDevice& e = t.e;
    SG_REQUIRE(e.n >= 1 && e.n <= kMaxTape && e.nvars <= 64, "expression loss: a tape of ", e.n,
               " instructions over ", e.nvars, " variables (at most ", kMaxTape, " and 64)");
    const int b = expression_loss_blocks(t.M);
    SG_REQUIRE(b <= e.blocks, "expression loss: scratch for ", e.blocks, " blocks, ", b, " needed");
    L.t[k] = t;
    L.scale[k] = t.weight / static_cast<double>(t.M > 0 ? t.M : 1);
    if (k == 0) L.blocks0 = b;
    blocks += b;
    tape = std::max(tape, e.n);
  }
  // The smallest scratch that holds the tape: local memory per thread grows with it.
#define SG_EXPR_LAUNCH(CAP) expression_loss_kernel<CAP><<<blocks, kExprBlock, 0, s>>>(L)
  if (tape <= 16) SG_EXPR_LAUNCH(16);
  else if (tape <= 32) SG_EXPR_LAUNCH(32);
  else if (tape <= 64) SG_EXPR_LAUNCH(64);
  else SG_EXPR_LAUNCH(kMaxTape);
#undef SG_EXPR_LAUNCH
  KERNEL_LAUNCH_CHECK();
}

void sample_points(const int32_t* step, float* X, int64_t M, int64_t d, const SampleAttrs& a, cudaStream_t s) {
  sample_points_kernel<<<pinn_grid(M * d), kBlock, 0, s>>>(step, X, M, d, a);
  KERNEL_LAUNCH_CHECK();
}

}  // namespace sg::cuda
