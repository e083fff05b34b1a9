// Running a lowered step (lower/lowering.cpp makes the steps): eager, as one captured CUDA graph, with
// the step-invariant prefix once, concurrent branches on a side stream, and data-parallel
// gradient all-reduces forked onto their own stream.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/libs/cublaslt_gemm.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "stepgraph/distributed.h"

namespace sg::cuda {

// Data-parallel training: the step's gradient all-reduces. Each bucket forks from the step's
// stream onto one side stream right after the op that finishes it (an event), so NCCL overlaps
// the rest of backward; the step's stream joins the side stream before the first op that reads a
// reduced gradient (the optimizer). Events and the stream are made here, before any capture.
struct Collectives {
  struct Bucket {
    std::vector<std::pair<float*, int64_t>> spans;  // contiguous f32 runs of the bucket's gradients
    cudaEvent_t ready = nullptr, done = nullptr;     // forked after / finished on the side stream
    std::string what;                                // for errors: which all-reduce
  };
  std::shared_ptr<dist::Communicator> comm;
  cudaStream_t side = nullptr;
  std::vector<Bucket> buckets;
  cudaEvent_t joined = nullptr;
  // The ends of the last two launches: launch k waits (bounded) for launch k-2, so a hung rank
  // is found within the timeout while the host still queues one step ahead.
  cudaEvent_t launched[2] = {nullptr, nullptr};
  bool pending[2] = {false, false};
  int next = 0;

  Collectives() {
    CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
    for (cudaEvent_t& e : launched) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~Collectives() {
    // After an abort the side stream may hold work that never ends: do not wait for it.
    if (!comm || !comm->aborted()) CUDA_CHECK_WARN(cudaStreamSynchronize(side));
    for (Bucket& b : buckets) {
      if (b.ready) CUDA_CHECK_WARN(cudaEventDestroy(b.ready));
      if (b.done) CUDA_CHECK_WARN(cudaEventDestroy(b.done));
    }
    for (cudaEvent_t e : launched) CUDA_CHECK_WARN(cudaEventDestroy(e));
    CUDA_CHECK_WARN(cudaEventDestroy(joined));
    CUDA_CHECK_WARN(cudaStreamDestroy(side));
  }
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  void fork(size_t b, cudaStream_t s) {
    Bucket& bk = buckets[b];
    CUDA_CHECK(cudaEventRecord(bk.ready, s));
    CUDA_CHECK(cudaStreamWaitEvent(side, bk.ready, 0));
    comm->all_reduce_avg(bk.spans, side);
    // Inside a capture the event becomes a node of the graph that the host can still query
    // (external), so a timeout names the first all-reduce that did not finish.
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(side, &st));
    if (st == cudaStreamCaptureStatusActive) CUDA_CHECK(cudaEventRecordWithFlags(bk.done, side, cudaEventRecordExternal));
    else CUDA_CHECK(cudaEventRecord(bk.done, side));
  }
  void join(cudaStream_t s) {
    CUDA_CHECK(cudaEventRecord(joined, side));
    CUDA_CHECK(cudaStreamWaitEvent(s, joined, 0));
  }
  std::string unfinished() const {
    for (const Bucket& b : buckets)
      if (cudaEventQuery(b.done) == cudaErrorNotReady) return b.what;
    return cat("a step with ", buckets.size(), " gradient all-reduce", buckets.size() == 1 ? "" : "s");
  }
  void wait(cudaEvent_t e) {
    comm->wait([e] { return cudaEventQuery(e) != cudaErrorNotReady; }, [this] { return unfinished(); });
    CUDA_CHECK(cudaEventSynchronize(e));  // finished: reports a failed step's CUDA error, if any
  }
  // Before a launch: the one two launches back has finished (or this throws).
  void before_launch() {
    if (pending[next]) {
      wait(launched[next]);
      pending[next] = false;
    }
  }
  void after_launch(cudaStream_t s) {
    CUDA_CHECK(cudaEventRecord(launched[next], s));
    pending[next] = true;
    next ^= 1;
  }
  void wait_all() {
    for (int k = 0; k < 2; ++k) {  // the older launch first
      const int slot = (next + k) % 2;
      if (pending[slot]) {
        wait(launched[slot]);
        pending[slot] = false;
      }
    }
  }
};

// The executable of a lowered program: `steps` in order (Step::stream, wait_for and record as
// plan_streams set them when `concurrent`), the buffers and library plans they use, explain's
// notes, the graph's shape key and the collectives (null without data parallelism).
std::unique_ptr<Executable> make_executable(CudaBackend& be, std::vector<Step> steps, std::vector<DeviceBuffer> owned,
                                            std::vector<std::unique_ptr<GemmPlan>> gemms, std::string notes, Shape key,
                                            std::unique_ptr<Collectives> coll, bool concurrent);

}  // namespace sg::cuda
