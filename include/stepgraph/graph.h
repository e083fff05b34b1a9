// The graph object of the seed: record work once, replay it with one launch.
//
//   sg::StepGraph g(stream);                       // a non-default CUDA stream (cudaStream_t)
//   g.capture({64, 128}, [&](void* s) { enqueue_step(s); });
//   for (...) g.launch();
//
// capture() skips when already captured for the same shape key; another key invalidates first.
// It synchronizes the device, then records in thread-local capture mode. launch() before a
// capture, a capture that records nothing, and a failure during capture are Errors. In a build
// without CUDA every method says "CUDA feature not enabled".
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "stepgraph/core.h"

namespace sg {

bool cuda_enabled();  // whether this build has the CUDA backend compiled in

class StepGraph {
 public:
  // `stream`: the cudaStream_t to capture on and launch into; nullptr creates a private
  // non-blocking stream.
  explicit StepGraph(void* stream = nullptr);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void capture(const Shape& key, const std::function<void(void* stream)>& fn);
  void launch();
  int64_t launch_count() const { return launches_; }
  bool is_captured() const { return exec_ != nullptr; }
  const Shape& input_shape() const { return key_; }
  size_t num_nodes() const { return nodes_; }
  void invalidate();
  void* stream() const { return stream_; }

 private:
  void* stream_ = nullptr;
  // [[maybe_unused]]: only the CUDA build's step_graph.cpp touches these.
  [[maybe_unused]] bool own_stream_ = false;
  [[maybe_unused]] void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  Shape key_;
  size_t nodes_ = 0;
  int64_t launches_ = 0;
};

// Times a region: CUDA events on `stream` when given (the seed's Timer(stream)), else the host
// clock. ms() ends the region (synchronizing on the stop event) and returns its length.
class Timer {
 public:
  explicit Timer(void* stream = nullptr);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void restart();
  double ms();

 private:
  void* stream_ = nullptr;
  [[maybe_unused]] void* start_ = nullptr;  // cudaEvent_t (CUDA build only)
  [[maybe_unused]] void* stop_ = nullptr;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace sg
