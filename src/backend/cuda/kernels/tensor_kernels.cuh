// CUDA kernels of the tensor ops (ir.h: Sub ... MeanBackward, and Add's broadcasting), each with
// its launcher, over the geometries of backend/tensor_math.h. Every output element is computed
// by one thread (a row sum's by one warp, reading coalesced) in a fixed order, and long
// reductions are split into chunks summed in chunk order by a second kernel: deterministic, no
// atomics. Nothing allocates or synchronizes, so
// every launch is capturable; reduction scratch is the lowering's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/tensor_math.h"

namespace sg::cuda {

// Y = op(A, B) over Y's elements, A and B read through g.
void binary(BinaryOp op, const float* A, const float* B, float* Y, const Broadcast& g, cudaStream_t s);

// X (+)= scale * the sum of op's gradient terms onto operand A (x_is_a) or B (see
// cpu::reduce_terms; A and B may be null for Add and Sub). With more than one chunk
// (reduce_chunks) the partial sums go to scratch [chunks * g.count] first.
int reduce_chunks(const BroadcastReduce& g);
void reduce_terms(BinaryOp op, bool x_is_a, const float* dY, const float* A, const float* B, float* X,
                  const BroadcastReduce& g, float scale, bool acc, float* scratch, cudaStream_t s);

// Y (+)= scale * A over Y's elements, A read through g's first operand.
void expand(const float* A, float* Y, const Broadcast& g, float scale, bool acc, cudaStream_t s);

// Y (+)= a X + b.
void scale_shift(const float* X, float* Y, int64_t n, float a, float b, bool acc, cudaStream_t s);

// Y = act(X) (parameter p); dX (+)= dY act'(Y, X).
void activation(const float* X, float* Y, int64_t n, Activation act, float p, cudaStream_t s);
void activation_backward(const float* dY, const float* X, const float* Y, float* dX, int64_t n, Activation act,
                         float p, bool acc, cudaStream_t s);

// Y (+)= X * mask / (1 - p), the mask of backend/dropout_math.h (threshold: dropout_threshold(p)).
void dropout(const float* X, float* Y, int64_t n, uint32_t threshold, float scale, uint64_t key, const int32_t* step,
             bool acc, cudaStream_t s);

// Every piece of a concat, split or slice: kPiecesPerLaunch pieces a launch.
void copy_pieces(const Pieces& pieces, cudaStream_t s);

}  // namespace sg::cuda
