// Data-parallel training, the parts that need no GPU: which process is which (from the launch
// environment), which rows of each global batch a rank trains on, and how the gradients are
// grouped into all-reduce buckets. The NCCL all-reduce inside the step graph builds on these
// (see the multi-GPU issue); a world of size 1 is the single-process default.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stepgraph/ir.h"

namespace sg::dist {

// One process of a data-parallel job.
struct World {
  int rank = 0, size = 1, local_rank = 0;
  std::string master_addr;  // torchrun-style rendezvous (empty under mpirun or alone)
  int master_port = 0;
  std::string launcher = "single";  // "single", "torchrun" or "mpirun"
};

// Reads the launch environment: torchrun-style RANK, WORLD_SIZE, LOCAL_RANK (default: RANK),
// MASTER_ADDR, MASTER_PORT (required when WORLD_SIZE > 1); else Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK); else a single
// process. Malformed or inconsistent values throw sg::Error naming the variable and value.
// `get` looks a variable up (default: std::getenv); tests pass their own.
World world_from_env(const std::function<const char*(const char*)>& get = {});

// The sharding rule. Every rank draws the same global batch of size * per_rank rows (same data
// seed, same per-epoch shuffle, the same batch index: GatherBatch's rule for the global batch)
// and trains on its contiguous slice [begin, end). With a mean loss the average of the ranks'
// gradients is the gradient of the global batch, so W ranks with per_rank rows each match one
// process with the W-times larger batch (up to rounding).
struct Shard {
  int64_t global_batch = 0, begin = 0, end = 0;
};
Shard shard_of(int64_t per_rank_batch, const World& w);

// A group of gradients all-reduced together, as soon as the op that finishes the last of them
// has run (so the reduction overlaps the rest of backward).
struct Bucket {
  std::vector<TensorId> grads;  // in the order backward finishes them
  int64_t bytes = 0;
  int ready_after_op = -1;      // index of the last op that writes any of them
};
// Gradients (Role::Gradient) in the order backward completes them, grouped greedily: a bucket is
// closed once it holds at least bucket_bytes (a larger gradient forms a bucket of its own).
// Every gradient lands in exactly one bucket; buckets are in readiness order.
std::vector<Bucket> plan_buckets(const Program& p, int64_t bucket_bytes);
constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;  // as PyTorch DDP

}  // namespace sg::dist
