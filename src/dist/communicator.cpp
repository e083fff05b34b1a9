// The NCCL communicator (when the build found nccl.h; otherwise every entry point says the build
// has no NCCL) and the CUDA device choice per rank.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "stepgraph/distributed.h"

#include "core/environment.h"

#ifdef STEPGRAPH_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef STEPGRAPH_HAVE_NCCL
#include "dist/nccl_api.h"
#endif

namespace sg::dist {

uint64_t checksum(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

double timeout_from_env(const std::function<const char*(const char*)>& get_in) {
  const char* v = get_in ? get_in("SG_DIST_TIMEOUT") : env::get("SG_DIST_TIMEOUT");
  if (!v) return kDefaultTimeoutS;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  SG_REQUIRE(*v && end && *end == '\0' && t > 0 && t < 1e7, "environment: SG_DIST_TIMEOUT='", v,
             "' is not a positive number of seconds");
  return t;
}

#ifdef STEPGRAPH_HAVE_CUDA
int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void use_device(int local_rank) {
  const int n = device_count();
  SG_REQUIRE(local_rank >= 0 && local_rank < n, "data-parallel: LOCAL_RANK ", local_rank, " needs a CUDA device ",
             local_rank, " but this process sees ", n, " device", n == 1 ? "" : "s",
             " (start at most one rank per GPU of a host; check CUDA_VISIBLE_DEVICES)");
  const cudaError_t e = cudaSetDevice(local_rank);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(cat("data-parallel: cudaSetDevice(", local_rank, "): ", cudaGetErrorString(e)));
  }
}
#else
int device_count() { return 0; }
void use_device(int local_rank) {
  throw Error(cat("data-parallel: LOCAL_RANK ", local_rank, " needs a CUDA device, but this build has no CUDA backend"));
}
#endif

#if defined(STEPGRAPH_HAVE_NCCL) && defined(STEPGRAPH_HAVE_CUDA)

namespace {
std::string cuda_error(cudaError_t e) {
  cudaGetLastError();
  return cat(cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}
#define DIST_CUDA(expr)                                                                   \
  do {                                                                                    \
    cudaError_t sg_e_ = (expr);                                                           \
    if (sg_e_ != cudaSuccess) throw Error(cat("data-parallel: ", #expr, ": ", cuda_error(sg_e_))); \
  } while (0)
}  // namespace

struct Communicator::Impl {
  ncclComm_t comm = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;  // host-side collectives (all_gather)
  uint64_t* scratch = nullptr;    // [size + 1]: the value, then every rank's
  uint64_t* host = nullptr;       // pinned [size + 1]: copies never block the host (bounded waits)
};

bool nccl_available(std::string* why) { return nccl_api(why) != nullptr; }

namespace {
std::atomic<int> g_aborts_running{0};
}
int aborts_left_running() { return g_aborts_running.load(); }

std::shared_ptr<Communicator> Communicator::create(const World& w, double timeout_s) {
  SG_REQUIRE(timeout_s > 0, "Communicator: the timeout must be positive, got ", timeout_s, " s");
  const NcclApi& api = nccl();
  // NVLink multicast (NVLS) off unless the user chose: the shared GPU machines need it off. Once
  // per process, before any NCCL call reads the environment (ranks may be threads).
  static std::once_flag nvls_once;
  std::call_once(nvls_once, [] { env::set_default("NCCL_NVLS_ENABLE", "0"); });
  std::shared_ptr<Communicator> c(new Communicator());
  c->world_ = w;
  c->timeout_s_ = timeout_s;
  c->impl_ = std::make_unique<Impl>();
  DIST_CUDA(cudaGetDevice(&c->impl_->device));
  ncclUniqueId id{};
  std::string mine;
  if (w.rank == 0) {
    NCCL_CHECK(GetUniqueId, &id);
    mine.assign(id.internal, sizeof(id.internal));
  }
  const std::string got = rendezvous(w, mine, timeout_s);
  SG_REQUIRE(got.size() == sizeof(id.internal), "rendezvous: rank ", w.rank, " got a ", got.size(),
             "-byte NCCL id, expected ", sizeof(id.internal));
  std::memcpy(id.internal, got.data(), got.size());
  ncclComm_t comm = nullptr;
  const ncclResult_t r = api.CommInitRank(&comm, w.size, id, w.rank);
  if (r != ncclSuccess)
    throw Error(cat("data-parallel: rank ", w.rank, " of ", w.size, ": ", nccl_error("ncclCommInitRank", r)));
  c->impl_->comm = comm;
  DIST_CUDA(cudaStreamCreateWithFlags(&c->impl_->stream, cudaStreamNonBlocking));
  DIST_CUDA(cudaMalloc(&c->impl_->scratch, sizeof(uint64_t) * static_cast<size_t>(w.size + 1)));
  DIST_CUDA(cudaMallocHost(&c->impl_->host, sizeof(uint64_t) * static_cast<size_t>(w.size + 1)));
  return c;
}

Communicator::~Communicator() {
  if (!impl_) return;
  // After an abort, work of this communicator may never finish, and cudaFree waits for the whole
  // device: the few bytes of scratch are left to the process's end instead.
  if (!aborted_) {
    if (impl_->stream) cudaStreamSynchronize(impl_->stream);
    if (impl_->scratch) cudaFree(impl_->scratch);
    if (impl_->host) cudaFreeHost(impl_->host);
  }
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
  cudaGetLastError();
  if (impl_->comm) {
    // An aborted communicator is already gone; a healthy one is destroyed (destroy waits for
    // outstanding work, so a communicator with a failed peer is aborted instead).
    ncclResult_t async = ncclSuccess;
    const NcclApi& api = nccl();
    if (!aborted_) {
      api.CommGetAsyncError(impl_->comm, &async);
      if (async == ncclSuccess) api.CommDestroy(impl_->comm);
      else api.CommAbort(impl_->comm);
    }
  }
}

std::string Communicator::describe() const {
  const int v = nccl().version;
  return cat("NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100, ", rank ", world_.rank, " of ", world_.size,
             " on cuda:", impl_->device, world_.size > 1 ? cat(", unique id by ", rendezvous_method(world_)) : "");
}

void Communicator::all_reduce_avg(const std::vector<std::pair<float*, int64_t>>& spans, void* stream) {
  SG_REQUIRE(!aborted_, "data-parallel: rank ", world_.rank, ": the communicator was aborted after an earlier error");
  const NcclApi& api = nccl();
  const auto s = static_cast<cudaStream_t>(stream);
  if (spans.size() > 1) NCCL_CHECK(GroupStart);
  for (const auto& [p, n] : spans) {
    const ncclResult_t r = api.AllReduce(p, p, static_cast<size_t>(n), ncclFloat32, ncclAvg, impl_->comm, s);
    if (r != ncclSuccess) {
      if (spans.size() > 1) api.GroupEnd();
      throw Error(cat("rank ", world_.rank, ": ", nccl_error("ncclAllReduce", r, impl_->comm)));
    }
  }
  if (spans.size() > 1) {
    const ncclResult_t r = api.GroupEnd();
    if (r != ncclSuccess) throw Error(cat("rank ", world_.rank, ": ", nccl_error("ncclGroupEnd", r, impl_->comm)));
  }
}

std::vector<uint64_t> Communicator::all_gather(uint64_t value, const std::string& what) {
  SG_REQUIRE(!aborted_, "data-parallel: rank ", world_.rank, ": the communicator was aborted after an earlier error");
  const NcclApi& api = nccl();
  uint64_t *d = impl_->scratch, *h = impl_->host;
  h[0] = value;
  DIST_CUDA(cudaMemcpyAsync(d, h, sizeof(value), cudaMemcpyHostToDevice, impl_->stream));
  const ncclResult_t r = api.AllGather(d, d + 1, 1, ncclUint64, impl_->comm, impl_->stream);
  if (r != ncclSuccess) throw Error(cat("rank ", world_.rank, ": ", what, ": ", nccl_error("ncclAllGather", r, impl_->comm)));
  // Pinned memory: the copy is queued, and only the bounded wait below blocks.
  DIST_CUDA(cudaMemcpyAsync(h + 1, d + 1, sizeof(uint64_t) * static_cast<size_t>(world_.size), cudaMemcpyDeviceToHost,
                            impl_->stream));
  cudaStream_t s = impl_->stream;
  wait([s] { return cudaStreamQuery(s) != cudaErrorNotReady; }, [&] { return what; });
  DIST_CUDA(cudaStreamSynchronize(s));  // done by now: reports an error of the copy, if any
  std::vector<uint64_t> all(h + 1, h + 1 + world_.size);
  return all;
}

namespace {
// NCCL's asynchronous error on `comm`, as a message; empty when there is none.
std::string async_error(ncclComm_t comm) {
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = nccl().CommGetAsyncError(comm, &async);
  if (r == ncclSuccess && async == ncclSuccess) return "";
  return nccl_error("NCCL", r != ncclSuccess ? r : async, comm);
}
}  // namespace

void Communicator::check(const std::string& what) {
  if (aborted_) return;
  const std::string msg = async_error(impl_->comm);
  if (msg.empty()) return;
  abort();
  throw Error(cat("data-parallel: rank ", world_.rank, " of ", world_.size, ": ", what, " failed: ", msg,
                  "; this rank stops (the other ranks stop when their collectives fail or time out)"));
}

void Communicator::wait(const std::function<bool()>& done, const std::function<std::string()>& what_) {
  using Clock = std::chrono::steady_clock;
  SG_REQUIRE(!aborted_, "data-parallel: rank ", world_.rank, ": the communicator was aborted after an earlier error");
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  // Spin (yielding) for the first 200 us, as a small step ends within that; then sleep, doubling
  // up to 1 ms, so a long wait costs no CPU.
  const auto spin_until = Clock::now() + std::chrono::microseconds(200);
  auto pause = std::chrono::microseconds(5);
  int polls = 0;
  while (!done()) {
    if (++polls % 256 == 0) check(what_());  // NCCL's error state, now and then
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    if (Clock::now() >= deadline) {
      check(what_());
      const std::string what = what_();
      abort();
      throw Error(cat("data-parallel: rank ", world_.rank, " of ", world_.size, ": ", what, " did not finish within ",
                      timeout_s_, " s (SG_DIST_TIMEOUT); another rank has probably failed or hangs. This rank aborted "
                      "its NCCL communicator and stops", abort_note_.empty() ? "" : " (", abort_note_,
                      abort_note_.empty() ? "" : ")"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void Communicator::abort() noexcept {
  if (aborted_ || !impl_ || !impl_->comm) return;
  aborted_ = true;
  std::string why;
  const NcclApi* api = nccl_api(&why);
  ncclComm_t comm = impl_->comm;
  impl_->comm = nullptr;
  if (!api) return;
  // NCCL sets its abort flag first (this rank's kernels stop), then joins its proxy threads,
  // which within a host wait for the peers to abort too: bounded here, the rest left running.
  std::future<void> f;
  try {
    auto finished = std::make_shared<std::promise<void>>();
    f = finished->get_future();
    ++g_aborts_running;
    try {
      std::thread([api, comm, finished] {
        api->CommAbort(comm);
        --g_aborts_running;
        finished->set_value();
      }).detach();
    } catch (...) {
      --g_aborts_running;
      throw;
    }
  } catch (...) {  // no thread to be had: abort here, unbounded
    api->CommAbort(comm);
    return;
  }
  if (f.wait_for(std::chrono::duration<double>(kAbortWaitS)) != std::future_status::ready)
    abort_note_ = cat("NCCL's abort did not return within ", kAbortWaitS,
                      " s (it waits for this host's other ranks to abort as well) and is left to the process's end");
}

#else  // no NCCL in this build

struct Communicator::Impl {};

bool nccl_available(std::string* why) {
  if (why) {
#ifdef STEPGRAPH_HAVE_CUDA
    *why = "this stepgraph was built without NCCL (CMake found no nccl.h: run scripts/setup.sh, or pass -DNCCL_INCLUDE_DIR=)";
#else
    *why = "this stepgraph was built without CUDA, so without NCCL";
#endif
  }
  return false;
}

[[noreturn]] static void no_nccl() {
  std::string why;
  nccl_available(&why);
  throw Error(cat("data-parallel training: ", why));
}

std::shared_ptr<Communicator> Communicator::create(const World&, double) { no_nccl(); }
Communicator::~Communicator() = default;
std::string Communicator::describe() const { return "no NCCL"; }
void Communicator::all_reduce_avg(const std::vector<std::pair<float*, int64_t>>&, void*) { no_nccl(); }
std::vector<uint64_t> Communicator::all_gather(uint64_t, const std::string&) { no_nccl(); }
void Communicator::wait(const std::function<bool()>&, const std::function<std::string()>&) { no_nccl(); }
void Communicator::check(const std::string&) {}
void Communicator::abort() noexcept { aborted_ = true; }
int aborts_left_running() { return 0; }

#endif

}  // namespace sg::dist
