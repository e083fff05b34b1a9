// MatMul: one strided-batched cuBLASLt product over every matrix of the leading axes.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

// Row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T: cuBLASLt's first operand is
// our B and its second our A; a stored-transposed operand is the untransposed one of that view.
void Lowering::matmul_op(const Op& op) {
  const Shape &as = p_.tensor(op.in[0]).shape, &bs = p_.tensor(op.in[1]).shape;
  const MatMulAttrs t = op.attr<MatMulAttrs>();
  const size_t r = as.size();
  const int64_t M = t.trans_a ? as[r - 1] : as[r - 2], K = t.trans_a ? as[r - 2] : as[r - 1];
  const int64_t N = t.trans_b ? bs[r - 2] : bs[r - 1];
  int64_t batch = 1;
  for (size_t k = 0; k + 2 < r; ++k) batch *= as[k];
  GemmShape s;
  s.trans_a = t.trans_b;
  s.trans_b = t.trans_a;
  s.m = N, s.n = M, s.k = K;
  s.lda = t.trans_b ? K : N;
  s.ldb = t.trans_a ? M : K;
  s.ldc = N;
  s.batch = batch, s.stride_a = K * N, s.stride_b = M * K, s.stride_c = M * N;
  GemmArgs a{f(op.in[1]), f(op.in[0]), f(op.out[0]), nullptr, nullptr, 0, op.accumulate[0] != 0};
  GemmPlan* g = gemm(s, CUBLASLT_EPILOGUE_DEFAULT, a);
  SG_REQUIRE(g, "matmul '", op.name, "': cuBLASLt has no algorithm for ", batch, " products of [", M, ", ", K,
             "] x [", K, ", ", N, "]");
  add_gemm(op, g, "batched product");
}

}  // namespace sg::cuda
