#include "backend/cuda/runtime/cuda_executable.h"

#include "stepgraph/graph.h"

namespace sg::cuda {

namespace {

class CudaExecutable : public Executable {
 public:
  CudaExecutable(CudaBackend& be, std::vector<Step> steps, std::vector<DeviceBuffer> owned,
                 std::vector<std::unique_ptr<GemmPlan>> gemms, std::string notes, Shape key,
                 std::unique_ptr<Collectives> coll, bool concurrent)
      : be_(be), steps_(std::move(steps)), owned_(std::move(owned)), gemms_(std::move(gemms)),
        notes_(std::move(notes)), key_(std::move(key)), coll_(std::move(coll)), graph_(be.stream()) {
    if (!concurrent) return;
    CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
    events_.assign(steps_.size(), nullptr);
    for (size_t k = 0; k < steps_.size(); ++k)
      if (steps_[k].record) CUDA_CHECK(cudaEventCreateWithFlags(&events_[k], cudaEventDisableTiming));
  }
  ~CudaExecutable() override {
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
    if (fork_) cudaEventDestroy(fork_);
    if (join_) cudaEventDestroy(join_);
    if (side_) cudaStreamDestroy(side_);
  }

  void run() override {
    run_invariants();
    if (coll_) coll_->before_launch();
    enqueue_all(be_.stream());
    if (coll_) coll_->after_launch(be_.stream());
  }
  size_t num_ops() const override { return steps_.size(); }
  bool can_capture() const override { return true; }
  void capture() override {
    if (coll_) coll_->wait_all();  // capture starts from an idle device
    run_invariants();  // before the capture: the graph holds only what changes from step to step
    graph_.capture(key_, [&](void* s) { enqueue_all(static_cast<cudaStream_t>(s)); });
  }
  bool is_captured() const override { return graph_.is_captured(); }
  void replay() override {
    run_invariants();
    if (coll_) coll_->before_launch();
    graph_.launch();
    if (coll_) coll_->after_launch(be_.stream());
  }
  void wait_collectives() override {
    if (coll_) coll_->wait_all();
  }
  void recompute_invariants() override { invariants_done_ = false; }
  size_t graph_nodes() const override { return graph_.num_nodes(); }
  std::string describe() const override { return notes_; }
  std::vector<std::pair<std::string, double>> profile(int reps) override {
    cudaStream_t s = be_.stream();
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<std::pair<std::string, double>> out;
    // Consecutive steps of one op (its kernels and library calls) are timed together.
    run_invariants();
    for (size_t i = 0; i < steps_.size();) {
      size_t j = i;
      while (j < steps_.size() && steps_[j].name == steps_[i].name) ++j;
      if (steps_[i].once) {  // not part of a step
        i = j;
        continue;
      }
      for (size_t k = i; k < j; ++k) steps_[k].enqueue(s);  // warm-up
      CUDA_CHECK(cudaEventRecord(e0, s));
      for (int r = 0; r < reps; ++r)
        for (size_t k = i; k < j; ++k) steps_[k].enqueue(s);
      CUDA_CHECK(cudaEventRecord(e1, s));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      out.emplace_back(cat(steps_[i].name, " (", j - i, " launch", j - i > 1 ? "es" : "", ")"), 1000.0 * ms / reps);
      i = j;
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    return out;
  }

 private:
  // The step-invariant prefix, in order on the step's stream (what follows on either stream is
  // ordered after it: the side stream forks from the step's stream).
  void run_invariants() {
    if (invariants_done_) return;
    for (const Step& st : steps_) {
      if (!st.once) continue;
      try {
        st.enqueue(be_.stream());
      } catch (const Error& e) {
        throw Error(cat("op '", st.name, "': ", e.what()));
      }
    }
    invariants_done_ = true;
  }
  void enqueue_all(cudaStream_t s) {
    // Concurrent branches: the side stream forks from s at the start (in a capture that makes it
    // part of the graph), waits and records as plan_streams decided, and s joins it at the end.
    if (side_) {
      CUDA_CHECK(cudaEventRecord(fork_, s));
      CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
    }
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& st = steps_[k];
      if (st.once) continue;
      const cudaStream_t x = side_ && st.stream == 1 ? side_ : s;
      try {
        if (side_ && st.wait_for >= 0 && !steps_[st.wait_for].once)
          CUDA_CHECK(cudaStreamWaitEvent(x, events_[st.wait_for], 0));
        st.enqueue(x);
        if (side_ && st.record) CUDA_CHECK(cudaEventRecord(events_[k], x));
      } catch (const Error& e) {
        throw Error(cat("op '", st.name, "': ", e.what()));
      }
    }
    if (side_) {
      CUDA_CHECK(cudaEventRecord(join_, side_));
      CUDA_CHECK(cudaStreamWaitEvent(s, join_, 0));
    }
  }
  CudaBackend& be_;
  std::vector<Step> steps_;
  std::vector<DeviceBuffer> owned_;
  std::vector<std::unique_ptr<GemmPlan>> gemms_;
  std::string notes_;
  Shape key_;
  std::unique_ptr<Collectives> coll_;  // before graph_: the graph refers to its events
  cudaStream_t side_ = nullptr;         // concurrent branches (Lowering::plan_streams)
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  std::vector<cudaEvent_t> events_;     // per step with Step::record
  bool invariants_done_ = false;        // the Step::once steps ran for the values now in memory
  StepGraph graph_;
};

}  // namespace

std::unique_ptr<Executable> make_executable(CudaBackend& be, std::vector<Step> steps, std::vector<DeviceBuffer> owned,
                                            std::vector<std::unique_ptr<GemmPlan>> gemms, std::string notes, Shape key,
                                            std::unique_ptr<Collectives> coll, bool concurrent) {
  return std::make_unique<CudaExecutable>(be, std::move(steps), std::move(owned), std::move(gemms), std::move(notes),
                                          std::move(key), std::move(coll), concurrent);
}

}  // namespace sg::cuda
