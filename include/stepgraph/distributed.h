// Data-parallel training: which process is which (from the launch environment), which rows of
// each global batch a rank trains on, how the gradients are grouped into all-reduce buckets, the
// TCP rendezvous that hands out NCCL's unique id, the NCCL communicator (libnccl.so.2 loaded at
// run time) and the one-host launcher. The CUDA step graph all-reduces each bucket as soon as
// backward has finished it (LowerOptions::comm); a world of size 1 is the single-process default.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/ir.h"

namespace sg::dist {

// One process of a data-parallel job.
struct World {
  int rank = 0, size = 1, local_rank = 0;
  std::string master_addr;  // rank 0's host for the rendezvous (empty alone)
  int master_port = 0;
  std::string launcher = "single";  // "single", "torchrun" or "mpirun"
};

// Reads the launch environment: torchrun-style RANK, WORLD_SIZE, LOCAL_RANK (default: RANK),
// MASTER_ADDR, MASTER_PORT (required when WORLD_SIZE > 1); else Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK; the rendezvous then
// uses MASTER_ADDR / MASTER_PORT when set, else 127.0.0.1:29500, which suits one host); else a
// single process. Malformed or inconsistent values throw sg::Error naming the variable and value.
// `get` looks a variable up (default: the process environment); tests pass their own.
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

// SG_DIST_TIMEOUT (seconds, default 300): how long a rank waits for the rendezvous and for a step
// that contains collectives before it gives up with an error (instead of hanging forever).
double timeout_from_env(const std::function<const char*(const char*)>& get = {});
constexpr double kDefaultTimeoutS = 300;

// The bootstrap of a world of size > 1: rank 0 listens on MASTER_PORT (every interface) until
// every other rank has connected to MASTER_ADDR:MASTER_PORT, then sends each its `payload` (the
// NCCL unique id); every rank returns rank 0's payload. A world of size 1 returns `payload`.
// Everything is bounded by timeout_s: the Error names the rank, the address and what failed
// (rank 0 names the ranks that never came).
std::string rendezvous(const World& w, const std::string& payload, double timeout_s);
// Which way rendezvous() hands the payload out for `w`: "mpi" under Open MPI's mpirun when
// libmpi.so.40 loads (and SG_MPI_BOOTSTRAP is not 0), "tcp" for other worlds of size > 1, "none"
// alone.
std::string rendezvous_method(const World& w);

// The MPI bootstrap (mpi_bootstrap.cpp): whether Open MPI's libmpi.so.40 loads (loaded at run
// time; stepgraph links no MPI) and SG_MPI_BOOTSTRAP is not 0; *why says which not.
bool mpi_bootstrap_available(std::string* why = nullptr);
// Rank 0's payload on every rank of MPI_COMM_WORLD (MPI_Bcast), MPI initialized for the call
// unless the program already had it, finalized after. MPI's rank and size must be w's.
std::string mpi_broadcast(const World& w, const std::string& payload);

// NCCL. Whether this build has NCCL (its header was found) and libnccl.so.2 loads; if not, *why
// says which.
bool nccl_available(std::string* why);

// One rank's NCCL communicator over the world, on the current CUDA device (select it first with
// use_device). Owns a small stream and scratch for host-side collectives.
class Communicator {
 public:
  // Rank 0 makes the unique id, the rendezvous hands it out, then ncclCommInitRank. Sets
  // NCCL_NVLS_ENABLE=0 (NVLink multicast off) unless the environment sets it. timeout_s bounds the
  // rendezvous and every wait() below.
  static std::shared_ptr<Communicator> create(const World& w, double timeout_s = kDefaultTimeoutS);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return world_.rank; }
  int size() const { return world_.size; }
  const World& world() const { return world_; }
  double timeout_s() const { return timeout_s_; }
  std::string describe() const;  // "NCCL 2.28.3, rank 0 of 2 on cuda:0"

  // Enqueues, on `stream` (a cudaStream_t of this device), the in-place average over all ranks of
  // each f32 span, as one NCCL group. Capturable in a CUDA graph; no synchronization.
  void all_reduce_avg(const std::vector<std::pair<float*, int64_t>>& spans, void* stream);
  // Every rank's value, in rank order (through NCCL, bounded by the timeout). All ranks must call it.
  std::vector<uint64_t> all_gather(uint64_t value, const std::string& what);

  // Waits until done() is true, polling NCCL for asynchronous errors. On an error or after
  // timeout_s the communicator is aborted (so this rank's collectives stop) and an Error names
  // this rank and what_() (the op that did not finish).
  void wait(const std::function<bool()>& done, const std::function<std::string()>& what_);
  // Throws (after aborting) when NCCL has reported an asynchronous error.
  void check(const std::string& what);
  // Stops this rank's collectives (NCCL's abort flag) and frees the communicator. NCCL's abort
  // also waits for the other ranks of this host to abort, which a hung peer never does: the
  // abort runs on a thread of its own and this returns after at most kAbortWaitS; an abort that
  // has not finished by then is left to the process's end (abort_note() says so).
  void abort() noexcept;
  bool aborted() const { return aborted_; }
  // Empty, or a sentence for error messages: the abort did not finish in time.
  const std::string& abort_note() const { return abort_note_; }
  static constexpr double kAbortWaitS = 10;

 private:
  Communicator() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  World world_;
  double timeout_s_ = kDefaultTimeoutS;
  bool aborted_ = false;
  std::string abort_note_;
};

// Communicator aborts still running in this process (see Communicator::abort). While one runs,
// the process's normal exit (static destructors, the CUDA runtime's teardown) can crash under
// it: a program that ends after such an error flushes its output and leaves with std::_Exit.
int aborts_left_running();

// Makes `local_rank` this thread's CUDA device (the devices of one host are shared out by
// LOCAL_RANK); an Error when there are not that many devices or the build has no CUDA.
void use_device(int local_rank);
// CUDA devices visible to this process (0 without CUDA).
int device_count();

// 64-bit FNV-1a of bytes, continuing from `h`: ranks compare their parameters' checksums (the
// tensors in name order) to find a rank that drifted.
constexpr uint64_t kChecksumStart = 14695981039346656037ull;
uint64_t checksum(const void* data, size_t bytes, uint64_t h = kChecksumStart);

// `stepgraph launch`: one process per GPU of this host.
struct LaunchOptions {
  int nprocs = 1;
  int master_port = 0;                  // 0: a free port
  std::string master_addr = "127.0.0.1";
  double kill_grace_s = 5;              // after one rank fails: SIGTERM the others, SIGKILL after this
};
// The variables rank `rank` starts with: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, and NCCL_NVLS_ENABLE=0 unless `inherited_nvls` is set.
std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& o, int rank, int port,
                                                                  const char* inherited_nvls = nullptr);
// A TCP port that is free now on this host.
int free_port();
// Runs argv (argv[0]: an executable path) once per rank with its environment. Output lines of rank
// r > 0 are prefixed "[rank r] " (rank 0's are passed through as they are, so --json stays JSON).
// When a rank exits with an error (or a signal) the others are stopped; returns 0 when all
// succeeded, else the first failing rank's exit status (128 + signal for a signal), and reports
// which rank failed on `err`.
int launch_local(const LaunchOptions& o, const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace sg::dist
