// CPU reference kernels of the tensor ops (ir.h: Sub ... MeanBackward, and Add's broadcasting):
// plain loops, double accumulation, over the geometries of backend/tensor_math.h. Null outputs
// are skipped; acc adds into the output instead of overwriting it.
#pragma once

#include <cstdint>

#include "backend/tensor_math.h"
#include "stepgraph/ir.h"

namespace sg::cpu {

// Y = op(A, B), A and B read through the broadcast geometry g.
void binary(BinaryOp op, const float* A, const float* B, float* Y, const Broadcast& g);
// X (+)= scale * the sum over r of op's gradient term onto operand A (x_is_a) or B at the
// offsets of g: dY Y-shaped, A and B (read by Mul and Div only; may be null for Add and Sub).
// Sum and Mean are this with op Add and their input as dY.
void reduce_terms(BinaryOp op, bool x_is_a, const float* dY, const float* A, const float* B, float* X,
                  const BroadcastReduce& g, double scale, bool acc);
// Y (+)= scale * A over Y's elements, A read through g's first operand (Sum and Mean backward).
void expand(const float* A, float* Y, const Broadcast& g, double scale, bool acc);
// Y (+)= a X + b.
void scale_shift(const float* X, float* Y, int64_t n, double a, double b, bool acc);
// Y = act(X) with act's parameter p; dX (+)= dY act'(Y, X).
void activation(const float* X, float* Y, int64_t n, Activation act, double p);
// `batch` products Y (+)= op(A) op(B) of row-major matrices (op(A) [M, K], op(B) [K, N]), summed
// in double.
void matmul(const float* A, const float* B, float* Y, int64_t batch, int64_t M, int64_t N, int64_t K, bool trans_a,
            bool trans_b, bool acc);
// Y (+)= X with axes a and b swapped (X of shape xs, row-major).
void transpose(const float* X, float* Y, const Shape& xs, int a, int b, bool acc);
// Y (+)= X * mask / (1 - p), the mask of backend/dropout_math.h.
void dropout(const float* X, float* Y, int64_t n, double p, uint64_t key, int32_t step, bool acc);
void activation_backward(const float* dY, const float* X, const float* Y, float* dX, int64_t n, Activation act,
                         double p, bool acc);
// Every piece of a concat, split or slice.
void copy_pieces(const Pieces& pieces);

}  // namespace sg::cpu
