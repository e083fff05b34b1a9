#include "stepgraph/graph.h"

#ifdef STEPGRAPH_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/runtime/cuda_check.h"
#endif

namespace sg {

#ifdef STEPGRAPH_HAVE_CUDA

bool cuda_enabled() { return true; }

StepGraph::StepGraph(void* stream) : stream_(stream) {
  if (!stream_) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_ = s;
    own_stream_ = true;
  }
}

StepGraph::~StepGraph() {
  invalidate();
  if (own_stream_) CUDA_CHECK_WARN(cudaStreamDestroy(static_cast<cudaStream_t>(stream_)));
}

void StepGraph::invalidate() {
  if (exec_) CUDA_CHECK_WARN(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_)));
  if (graph_) CUDA_CHECK_WARN(cudaGraphDestroy(static_cast<cudaGraph_t>(graph_)));
  exec_ = graph_ = nullptr;
  nodes_ = 0;
  key_.clear();
}

void StepGraph::capture(const Shape& key, const std::function<void(void*)>& fn) {
  if (exec_ && key == key_) return;
  invalidate();
  auto s = static_cast<cudaStream_t>(stream_);
  SG_REQUIRE(s != nullptr && s != cudaStreamLegacy && s != cudaStreamPerThread,
             "StepGraph: capture needs a non-default stream");
  // Everything queued before (uploads, warm-up) finishes first.
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  // Whatever fn throws (a Python callback's own exception too), the stream leaves capture mode
  // first, so that it stays usable; the partial graph is discarded.
  auto end_capture = [s] {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(s, &broken);
    if (broken) cudaGraphDestroy(broken);
    cudaGetLastError();
  };
  try {
    fn(stream_);
  } catch (const Error& e) {
    end_capture();
    throw Error(cat("graph capture failed: ", e.what()));
  } catch (...) {
    end_capture();
    throw;  // its own type: a Python exception reaches Python as itself
  }
  cudaGraph_t g = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
  if (n == 0) {
    cudaGraphDestroy(g);
    throw Error("graph capture recorded no work: the captured function enqueued nothing on the stream");
  }
  cudaGraphExec_t exec = nullptr;
  // Kernel nodes keep the priority of the stream they were captured on (a concurrent branch's
  // lower one), not that of the stream the graph is launched into.
  cudaError_t e = cudaGraphInstantiate(&exec, g, cudaGraphInstantiateFlagUseNodePriority);
  if (e != cudaSuccess) {
    cudaGraphDestroy(g);
    cuda::fail_cuda(e, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  graph_ = g;
  exec_ = exec;
  nodes_ = n;
  key_ = key;
}

void StepGraph::launch() {
  SG_REQUIRE(exec_, "StepGraph::launch: nothing captured (call capture first)");
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream_)));
  ++launches_;
}

Timer::Timer(void* stream) : stream_(stream) {
  if (stream_) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    start_ = a;
    stop_ = b;
  }
  restart();
}

Timer::~Timer() {
  if (start_) CUDA_CHECK_WARN(cudaEventDestroy(static_cast<cudaEvent_t>(start_)));
  if (stop_) CUDA_CHECK_WARN(cudaEventDestroy(static_cast<cudaEvent_t>(stop_)));
}

void Timer::restart() {
  if (stream_) CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream_)));
  else t0_ = std::chrono::steady_clock::now();
}

double Timer::ms() {
  if (!stream_) return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream_)));
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)));
  return ms;
}

#else  // no CUDA in this build

namespace {
[[noreturn]] void no_cuda() {
  throw Error("CUDA feature not enabled: this build of stepgraph has no CUDA backend");
}
}  // namespace

bool cuda_enabled() { return false; }
StepGraph::StepGraph(void*) { no_cuda(); }
StepGraph::~StepGraph() = default;
void StepGraph::invalidate() {}
void StepGraph::capture(const Shape&, const std::function<void(void*)>&) { no_cuda(); }
void StepGraph::launch() { no_cuda(); }
Timer::Timer(void* stream) : stream_(stream) {
  if (stream_) no_cuda();
  restart();
}
Timer::~Timer() = default;
void Timer::restart() { t0_ = std::chrono::steady_clock::now(); }
double Timer::ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(); }

#endif

}  // namespace sg
