// Convolutions through cuDNN frontend graphs, part 2: plans. For one graph definition, at
// lowering time (before any capture):
//   1. the plan cache: load the plan serialized for this key, checked at every step (the file's
//      header, checksum and full key text: plan_cache.cpp; then the frontend's deserialization,
//      the tensors the plan binds against this graph's, and one run on scratch buffers). An entry
//      that fails any check is reported on stderr, rebuilt and rewritten.
//   2. otherwise build: validate -> build_operation_graph (with dynamic shapes and a kernel cache
//      shared by the shape variants of this op, on cuDNN >= 9.5) -> heuristics -> deselect
//      engines whose notes break our contract -> build candidates -> time them on scratch
//      buffers (autotune) -> select the fastest -> serialize it into the plan cache.
// Excluded: NONDETERMINISTIC engines (graph replay must equal eager bitwise, and two runs must
// agree) unless the options allow them (LowerOptions::deterministic false, as PyTorch's default);
// always DOWN_CONVERT_INPUTS and REDUCED_PRECISION_REDUCTION. With fp32 tensors and
// Precision::FP32 (or TF32X3, which changes dense products only) also TENSOR_CORE engines, which compute fp32 convolutions in TF32;
// Precision::TF32 allows them. bf16 tensors (bench-op conv) always allow them: a product of two
// bf16 values is exact, and the barred notes already keep the sums in fp32.
#include "backend/cuda/libs/cudnn_graphs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <set>
#include <unordered_map>

#include "backend/cuda/runtime/cuda_check.h"
#include "backend/plan_cache.h"

namespace sg::cuda {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
std::string fixed(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string dims_text(const std::vector<int64_t>& v, const char* sep = "x") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}
bool is_output(Uid u) { return u == Uid::Y || u == Uid::dX || u == Uid::dW || u == Uid::Z || u == Uid::Amax; }

// Candidates needing more workspace than this are not timed: a program's plans share one
// workspace, and the largest engine's (FFT, ...) would set everyone's memory.
constexpr int64_t kMaxTunedWorkspace = int64_t{256} << 20;
constexpr size_t kHeuristicCandidates = 8, kExhaustiveCandidates = 64;

// Whether TENSOR_CORE engines are barred: fp32 tensors unless Precision::TF32 (they would use TF32).
bool bar_tensor_cores(Precision p, ConvIO io) { return io == ConvIO::F32 && p != Precision::TF32; }

// Everything a stored plan depends on: the graph, its shapes and types, our engine filters, the
// tuning mode, dynamic shapes, the GPU and every library version. (fp32 keys read as they did
// before bf16 existed, so caches written then stay valid.)
std::string key_text(const GraphDef& d, const ConvPlanOptions& opt, bool dynamic, const CudnnContext& ctx) {
  const char* io = conv_io_name(d.io_type);
  std::ostringstream os;
  os << "stepgraph cuDNN plan\n"
     << "graph: " << d.what << "; " << d.attrs << "\n";
  for (const auto& [uid, t] : d.io)
    os << "tensor " << t->get_name() << " uid " << static_cast<int64_t>(uid) << ": dims " << dims_text(t->get_dim())
       << " strides " << dims_text(t->get_stride()) << " " << io << "\n";
  os << "types: io " << io << ", intermediate float32, compute float32\n"
     << "engines: " << (opt.deterministic ? "deterministic, " : "nondeterministic allowed, ")
     << (d.io_type == ConvIO::BF16 ? "tensor cores allowed (bf16)"
                                   : opt.precision != Precision::TF32 ? "no TF32" : "TF32 allowed")
     << "\n"
     << "autotune: " << autotune_name(opt.autotune) << "\n"
     << "dynamic shapes: " << (dynamic ? "on" : "off") << "\n"
     << "gpu: " << ctx.gpu << "\n"
     << "cudnn: runtime " << ctx.version << ", headers " << CUDNN_VERSION << ", frontend " << CUDNN_FRONTEND_VERSION
     << "\n";
  return os.str();
}

// The op's structure without its batch size: the shape variants that share one kernel cache.
std::string structure_key(const GraphDef& d, const ConvGeometry& g, const ConvPlanOptions& opt) {
  const char* det = opt.deterministic ? "" : "; nondeterministic allowed";
  if (!d.structure.empty())
    return cat(d.what, "; ", d.attrs, "; ", d.structure, "; ", precision_name(opt.precision), det);
  return cat(d.what, "; ", d.attrs, "; C", g.C, " H", g.H, " W", g.W, " K", g.K, " R", g.R, " S", g.S, " P", g.P,
             " Q", g.Q, "; ", precision_name(opt.precision), det);
}

// The bf16 nearest (ties to even) to a finite float: its upper 16 bits, rounded.
uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// Device buffers standing in for a graph's tensors while candidates are timed or a loaded plan is
// tried. For timing, inputs hold fixed pseudo-random values in [-1, 1) (never time on zeros: a
// block of 2^20 values, repeated; bf16 tensors get them rounded to bf16); for a trial run, zeros.
// Outputs and the workspace are scratch. Allocated and freed at lowering time, never inside a step.
class Scratch {
 public:
  Scratch(const GraphDef& d, int64_t ws_bytes, bool random_inputs) {
    const size_t elem = d.io_type == ConvIO::BF16 ? 2 : sizeof(float);
    for (const auto& [uid, t] : d.io) {
      int64_t n = 1;
      for (int64_t v : t->get_dim()) n *= v;
      const size_t bytes = static_cast<size_t>(n) * elem;
      char* p = static_cast<char*>(alloc(bytes));
      if (!is_output(uid) && random_inputs) {
        std::vector<float> host(std::min<size_t>(static_cast<size_t>(n), size_t{1} << 20));
        uint64_t s = 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(uid) + 1);
        for (float& x : host) {
          s = s * 6364136223846793005ull + 1442695040888963407ull;
          x = static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) / static_cast<float>(1 << 23);
        }
        std::vector<uint16_t> half;
        if (elem == 2)
          for (float x : host) half.push_back(bf16_bits(x));
        const void* src = elem == 2 ? static_cast<const void*>(half.data()) : static_cast<const void*>(host.data());
        const size_t block = host.size() * elem;
        for (size_t at = 0; at < bytes; at += block)
          CUDA_CHECK(cudaMemcpy(p + at, src, std::min(block, bytes - at), cudaMemcpyHostToDevice));
      } else {
        CUDA_CHECK(cudaMemset(p, 0, bytes));
      }
      pack[static_cast<int64_t>(uid)] = p;
    }
    if (ws_bytes > 0) ws = alloc(static_cast<size_t>(ws_bytes));
  }
  ~Scratch() {
    for (void* p : owned_) CUDA_CHECK_WARN(cudaFree(p));
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  std::unordered_map<int64_t, void*> pack;
  void* ws = nullptr;

 private:
  void* alloc(size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 256)));
    owned_.push_back(p);
    return p;
  }
  std::vector<void*> owned_;
};

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Events() {
    if (a) CUDA_CHECK_WARN(cudaEventDestroy(a));
    if (b) CUDA_CHECK_WARN(cudaEventDestroy(b));
  }
};


// Median time of one execution of plan `index` (us): 2 warm-up runs, then 5 samples of 3 runs
// between CUDA events. Negative (with *err) when the plan does not run.
double time_plan(fe::graph::Graph& g, CudnnContext& ctx, Scratch& s, int64_t index, cudaStream_t stream,
                 std::string* err) {
  constexpr int kWarmup = 2, kSamples = 5, kRuns = 3;
  for (int i = 0; i < kWarmup; ++i)
    if (auto e = g.execute_plan_at_index(ctx.handle, s.pack, s.ws, index); e.is_bad()) {
      *err = e.get_message();
      return -1;
    }
  Events ev;
  std::vector<float> us;
  for (int k = 0; k < kSamples; ++k) {
    CUDA_CHECK(cudaEventRecord(ev.a, stream));
    for (int r = 0; r < kRuns; ++r)
      if (auto e = g.execute_plan_at_index(ctx.handle, s.pack, s.ws, index); e.is_bad()) {
        *err = e.get_message();
        CUDA_CHECK(cudaStreamSynchronize(stream));
        return -1;
      }
    CUDA_CHECK(cudaEventRecord(ev.b, stream));
    CUDA_CHECK(cudaEventSynchronize(ev.b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b));
    us.push_back(1000.0f * ms / kRuns);
  }
  std::nth_element(us.begin(), us.begin() + kSamples / 2, us.end());
  return us[kSamples / 2];
}

struct Candidate {
  int64_t index = -1;
  std::string name;
  int64_t ws = 0;
  double us = -1;  // median time when timed
};

// What building chose.
struct Choice {
  std::vector<Candidate> built;
  size_t chosen = 0;
  std::string tuning;       // how it was chosen, for describe()
  double tune_ms = 0;
  int timed = 0;
  double fastest_us = 0, slowest_us = 0;
  std::string not_cacheable;  // why the graph cannot be serialized ("" when it can)
};

// The engine each tuned key chose, for the whole process: two trainers of one process (eager and
// graph, verify's three backends) must run the same plans even with the disk cache off, and a
// second timing could pick another engine (and round differently). Keyed by the plan cache key.
struct TunedChoice {
  std::string engine, tuning;
};
std::mutex& tuned_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, TunedChoice>& tuned_choices() {
  static std::map<std::string, TunedChoice> m;
  return m;
}

// Builds candidate plans for `d` under our engine filters and chooses one (timing them when
// tuning). `only` (an engine name) restricts the candidates to that engine when it builds.
// "" on success; the chosen plan is the graph's candidate (what serialize() writes).
std::string build_and_choose(CudnnContext& ctx, GraphDef& d, const ConvPlanOptions& opt, const std::string& only,
                             cudaStream_t stream, Choice* c) {
  if (std::string v = validate(d); !v.empty()) return v;
  fe::graph::Graph& g = *d.graph;
  SG_FE_TRY(g.build_operation_graph(ctx.handle));
  const bool tuning = opt.autotune != Autotune::Off && only.empty();
  const size_t cap = !tuning ? 1 : opt.autotune == Autotune::Heuristic ? kHeuristicCandidates : kExhaustiveCandidates;
  std::vector<fe::NumericalNote_t> barred = {fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                                             fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION};
  if (opt.deterministic) barred.push_back(fe::NumericalNote_t::NONDETERMINISTIC);
  if (bar_tensor_cores(opt.precision, d.io_type)) barred.push_back(fe::NumericalNote_t::TENSOR_CORE);
  // Heuristic tuning times heuristic A's plans, and FALLBACK's only when none of A's builds.
  std::vector<std::vector<fe::HeurMode_t>> rounds;
  if (opt.autotune == Autotune::Heuristic && only.empty()) rounds = {{fe::HeurMode_t::A}, {fe::HeurMode_t::FALLBACK}};
  else rounds = {{fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}};
  std::set<std::string> seen;
  std::string failures;
  int failed = 0;
  int64_t next = 0;
  for (const auto& modes : rounds) {
    if (auto e = g.create_execution_plans(modes); e.is_bad()) {
      failures += "\n  " + fe_error("create_execution_plans", e);
      continue;
    }
    g.deselect_numeric_notes(barred);
    if (auto e = g.check_support(); e.is_bad()) {
      failures += "\n  " + fe_error("check_support", e);
      next = g.get_execution_plan_count();
      continue;
    }
    const int64_t n = g.get_execution_plan_count();
    for (int64_t i = next; i < n && c->built.size() < cap; ++i) {
      std::string name;
      if (g.get_plan_name_at_index(i, name).is_bad() || !seen.insert(name).second) continue;
      if (!only.empty() && name != only) continue;
      if (auto e = g.build_plan_at_index(i); e.is_bad()) {
        if (++failed <= 4) failures += cat("\n  plan ", i, " (", name, "): ", e.get_message());
        continue;
      }
      int64_t ws = 0;
      if (g.get_workspace_size_plan_at_index(i, ws).is_bad()) continue;
      if (tuning && ws > kMaxTunedWorkspace && !c->built.empty()) continue;
      c->built.push_back({i, name, ws});
    }
    next = n;
    if (!c->built.empty()) break;
  }
  if (c->built.empty()) {
    if (!only.empty()) return cat("the engine chosen earlier in this process (", only, ") did not build:", failures);
    return cat("no plan builds:", failures.empty() ? std::string(" the heuristics returned none") : failures);
  }

  if (tuning && c->built.size() > 1) {
    const Clock::time_point t0 = Clock::now();
    int64_t most = 0;
    for (const Candidate& k : c->built) most = std::max(most, k.ws);
    std::string refused;
    try {
      Scratch s(d, most, /*random_inputs=*/true);
      set_stream(ctx, stream);
      for (Candidate& k : c->built) {
        std::string err;
        k.us = time_plan(g, ctx, s, k.index, stream, &err);
        if (k.us < 0 && refused.empty()) refused = cat("; ", k.name, " did not run: ", err);
      }
    } catch (const std::exception& e) {
      refused = cat("; timing stopped: ", e.what());
    }
    c->tune_ms = ms_since(t0);
    std::vector<size_t> order;
    for (size_t k = 0; k < c->built.size(); ++k)
      if (c->built[k].us >= 0) order.push_back(k);
    // Fastest first; among equal times, the heuristics' order.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c->built[a].us < c->built[b].us; });
    if (!order.empty()) {
      c->chosen = order.front();
      c->timed = static_cast<int>(order.size());
      c->fastest_us = c->built[order.front()].us;
      c->slowest_us = c->built[order.back()].us;
      std::string list;
      for (size_t k = 0; k < order.size() && k < 12; ++k)
        list += cat(k ? ", " : "", c->built[order[k]].name, " ", fixed(c->built[order[k]].us), " us");
      if (order.size() > 12) list += cat(", ... (", order.size() - 12, " more)");
      c->tuning = cat("autotune ", autotune_name(opt.autotune), ": ", order.size(), " plans timed (median of 5 x 3 runs) [",
                      list, "]: fastest ", fixed(c->fastest_us), " us, slowest ", fixed(c->slowest_us), " us, spread ",
                      fixed(c->slowest_us / std::max(c->fastest_us, 1e-3), 2), "x", refused);
    } else {
      c->tuning = cat("autotune ", autotune_name(opt.autotune), ": no candidate could be timed", refused,
                      "; the heuristics' first");
    }
  } else if (tuning) {
    c->tuning = cat("autotune ", autotune_name(opt.autotune), ": one candidate builds, nothing to time");
  } else if (!only.empty()) {
    c->tuning = "the engine tuned earlier in this process";
  } else {
    c->tuning = "the heuristics' first plan (autotune off)";
  }
  const Candidate& chosen = c->built[c->chosen];
  // Building an index that is built already only makes it the graph's candidate: the plan that
  // execute() and serialize() use.
  SG_FE_TRY(g.build_plan_at_index(chosen.index));
  std::string now;
  if (g.get_plan_name(now).is_bad() || now != chosen.name)
    c->not_cacheable = cat("the graph's selected plan is '", now, "', not the chosen '", chosen.name, "'");
  return "";
}

// Loads a cached plan into a fresh graph; "" on success. Checked beyond the file: the frontend
// must deserialize it, it must bind exactly this graph's tensors, and it must run once on scratch
// buffers without an error.
std::string load_plan(CudnnContext& ctx, const GraphDef& d, const std::vector<uint8_t>& payload, cudaStream_t stream,
                      std::shared_ptr<fe::graph::Graph>* out, int64_t* ws) {
  auto g = std::make_shared<fe::graph::Graph>();
  SG_FE_TRY(g->deserialize(ctx.handle, payload, /*enforce_precompiled=*/true, /*run_warmup=*/false));
  SG_FE_TRY(g->get_workspace_size(*ws));
  if (*ws < 0 || *ws > (int64_t{16} << 30)) return cat("implausible workspace size ", *ws);
  std::vector<int64_t> want, have = g->get_variant_pack_uids_sorted();
  for (const auto& io : d.io) want.push_back(static_cast<int64_t>(io.first));
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  if (want != have) return cat("the stored plan binds tensor uids {", dims_text(have, ", "), "}, this graph has {", dims_text(want, ", "),
               "}");
  Scratch s(d, *ws, /*random_inputs=*/false);
  set_stream(ctx, stream);
  SG_FE_TRY(g->execute(ctx.handle, s.pack, s.ws));
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    cudaGetLastError();
    return cat("the trial run failed: ", cudaGetErrorString(e));
  }
  *out = std::move(g);
  return "";
}


std::string filters_text(const ConvPlanOptions& opt, ConvIO io) {
  const char* det = opt.deterministic ? "deterministic" : "nondeterministic allowed";
  if (io == ConvIO::BF16) return cat(det, ", bf16 with fp32 sums");
  return bar_tensor_cores(opt.precision, io) ? cat(det, ", no TF32") : std::string(det);
}

// The engine named by a note make_plan wrote ("engine NAME, workspace ..."); "" if none.
std::string engine_of_note(const std::string& note) {
  const std::string head = "engine ";
  const size_t end = note.find(", workspace ");
  if (note.compare(0, head.size(), head) != 0 || end == std::string::npos) return "";
  return note.substr(head.size(), end - head.size());
}

}  // namespace

void set_stream(CudnnContext& ctx, cudaStream_t s) {
  const cudnnStatus_t st = fe::detail::set_stream(ctx.handle, s);
  SG_REQUIRE(st == CUDNN_STATUS_SUCCESS, "cudnnSetStream failed with status ", static_cast<int>(st));
}

void GraphPlan::run(cudaStream_t s) const {
  SG_REQUIRE(ws_bytes_ == 0 || ws_ != nullptr, what_, ": cuDNN workspace of ", ws_bytes_, " bytes not set");
  set_stream(*ctx_, s);
  auto e = index_ < 0 ? graph_->execute(ctx_->handle, pack_, ws_)
                      : graph_->execute_plan_at_index(ctx_->handle, pack_, ws_, index_);
  if (e.is_bad()) throw Error(cat("cuDNN ", fe_error(what_.c_str(), e)));
}

bool dynamic_shapes_enabled(const CudnnContext& ctx, std::string* why) {
  // The frontend binds a kernel cache to its first operation graph (CUDNN_ATTR_KERNEL_CACHE_
  // OPERATION_GRAPH), which cuDNN has from 9.5; dynamic shapes alone (9.4) gain nothing here.
  if (ctx.version < 90500) {
    if (why) *why = cat("cuDNN ", ctx.version, " is older than 9.5 (kernel caches need 9.5)");
    return false;
  }
  return true;
}

std::unique_ptr<ConvPlan> make_plan(const std::shared_ptr<CudnnContext>& ctx, const GraphFactory& make,
                                    const ConvGeometry& geo, const std::vector<std::pair<Uid, const void*>>& ptrs,
                                    const ConvPlanOptions& opt, std::string* why) {
  const Clock::time_point t0 = Clock::now();
  GraphDef d = make();
  const std::string what = d.what;
  std::unordered_map<int64_t, void*> pack;
  for (const auto& [uid, t] : d.io) {
    auto it = std::find_if(ptrs.begin(), ptrs.end(), [&](const auto& p) { return p.first == uid; });
    SG_REQUIRE(it != ptrs.end() && it->second, what, ": tensor '", t->get_name(), "' has no device pointer");
    pack[static_cast<int64_t>(uid)] = const_cast<void*>(it->second);
  }
  std::string dyn_why;
  bool dynamic = dynamic_shapes_enabled(*ctx, &dyn_why);
  CudnnContext::KernelCacheSlot& slot = ctx->kernel_caches[structure_key(d, geo, opt)];
  if (dynamic && !slot.refused.empty()) dynamic = false, dyn_why = slot.refused;
  const std::string key = key_text(d, opt, dynamic, *ctx);
  const std::string head = cat("cuDNN graph ", what);
  ConvPlanStats st;

  // 1. The plan cache.
  const plan_cache::PlanCache* cache = opt.cache && opt.cache->enabled() ? opt.cache : nullptr;
  if (cache) {
    plan_cache::PlanCache::Lookup l = cache->load(key);
    st.rejected = l.status == plan_cache::PlanCache::Status::Rejected;
    if (l.status == plan_cache::PlanCache::Status::Hit) {
      std::shared_ptr<fe::graph::Graph> g;
      int64_t ws = 0;
      std::string err;
      try {
        err = load_plan(*ctx, d, l.entry.payload, opt.stream, &g, &ws);
      } catch (const std::exception& e) {  // the frontend's JSON parser and loading shims throw
        err = e.what();
      }
      if (err.empty()) {
        st.loaded = true;
        st.engine = engine_of_note(l.entry.note);
        st.compile_ms = ms_since(t0);
        std::string desc = cat(head, ", loaded from the plan cache in ", fixed(st.compile_ms), " ms (", l.path, "): ",
                               l.entry.note);
        return std::make_unique<GraphPlan>(ctx, std::move(g), what, std::move(pack), 0, ws, std::move(desc), st);
      }
      plan_cache::PlanCache::warn_rejected(l.path, cat("cuDNN could not use it: ", err));
      st.rejected = true;
    }
  }

  // 2. Build (with the engine tuned earlier in this process, if any).
  TunedChoice earlier;
  if (opt.autotune != Autotune::Off) {
    std::lock_guard<std::mutex> lock(tuned_mutex());
    if (auto it = tuned_choices().find(key); it != tuned_choices().end()) earlier = it->second;
  }
  Choice c;
  std::string err, dyn_note;
  auto attempt = [&](GraphDef& def, bool dyn, const std::string& only) {
    c = Choice();
    if (dyn) {
      if (!slot.cache) slot.cache = std::make_shared<fe::KernelCache>();
      st.kernel_cache_warm = slot.graphs > 0;
      def.graph->set_dynamic_shape_enabled(true).set_kernel_cache(slot.cache);
    }
    try {
      return build_and_choose(*ctx, def, opt, only, opt.stream, &c);
    } catch (const std::exception& e) {  // the frontend throws from its dynamic-loading shims
      return cat(def.what, ": ", e.what());
    }
  };
  const Clock::time_point tb = Clock::now();
  err = attempt(d, dynamic, earlier.engine);
  if (!err.empty() && !earlier.engine.empty()) {
    d = make();
    err = attempt(d, dynamic, "");
  }
  if (!err.empty() && dynamic) {
    // cuDNN refused the dynamic-shape graph: this op's shapes are built static from now on.
    slot.refused = cat("cuDNN refused the dynamic-shape graph (", err, ")");
    dyn_note = slot.refused;
    dynamic = false;
    st.kernel_cache_warm = false;
    d = make();
    err = attempt(d, false, earlier.engine);
  }
  if (!err.empty()) {
    if (why)
      *why = cat("cuDNN has no ", filters_text(opt, d.io_type), " engine for ", what, ": ", err);
    return nullptr;
  }
  const double build_ms = ms_since(tb);
  const Candidate& chosen = c.built[c.chosen];
  if (opt.autotune != Autotune::Off && earlier.engine.empty() && c.timed > 0) {
    std::lock_guard<std::mutex> lock(tuned_mutex());
    tuned_choices()[key] = {chosen.name, c.tuning};
  }
  if (!earlier.engine.empty() && chosen.name == earlier.engine) c.tuning = cat("tuned earlier in this process: ", earlier.tuning);
  std::string dyn_text;
  if (dynamic) {
    dyn_text = st.kernel_cache_warm
                   ? cat("dynamic shapes, kernel cache of an earlier shape (that shape built in ", fixed(slot.first_ms),
                         " ms)")
                   : "dynamic shapes, new kernel cache (first shape of this op)";
    if (slot.graphs == 0) {
      slot.first = d.graph;
      slot.first_ms = build_ms;
    }
    ++slot.graphs;
  } else {
    dyn_text = cat("static shapes (", dyn_note.empty() ? dyn_why : dyn_note, ")");
  }
  st.dynamic = dynamic;
  st.tune_ms = c.tune_ms;
  st.timed = c.timed;
  st.fastest_us = c.fastest_us;
  st.slowest_us = c.slowest_us;
  st.engine = chosen.name;
  const std::string note = cat("engine ", chosen.name, ", workspace ", chosen.ws, " B (", filters_text(opt, d.io_type),
                               "); ", c.tuning, "; ", dyn_text);

  // 3. Into the plan cache.
  std::string cache_text;
  if (cache) {
    std::string not_stored = c.not_cacheable;
    if (not_stored.empty()) {
      try {
        std::vector<uint8_t> bytes;
        if (auto e = d.graph->serialize(bytes, /*serialize_structure=*/false); e.is_bad())
          not_stored = fe_error("serialize", e);
        else
          not_stored = cache->store({key, note, std::move(bytes)});
      } catch (const std::exception& e) {
        not_stored = cat("serialize: ", e.what());
      }
    }
    st.stored = not_stored.empty();
    cache_text = st.stored ? cat("; stored in the plan cache", st.rejected ? " (replacing a rejected entry)" : "")
                           : cat("; not cached: ", not_stored);
  }
  st.compile_ms = ms_since(t0);
  std::string desc = cat(head, ", ", note, "; built in ", fixed(build_ms), " ms", cache_text);
  return std::make_unique<GraphPlan>(ctx, d.graph, what, std::move(pack), chosen.index, chosen.ws,
                                            std::move(desc), st);
}

std::string record_compile(CudnnContext& ctx, int64_t batch, const std::vector<ConvPlanStats>& plans) {
  int loaded = 0, built = 0, dyn = 0, warm = 0, stored = 0, rejected = 0;
  double ms = 0, tune = 0;
  for (const ConvPlanStats& s : plans) {
    loaded += s.loaded, built += !s.loaded, dyn += s.dynamic, warm += s.kernel_cache_warm, stored += s.stored;
    rejected += s.rejected, ms += s.compile_ms, tune += s.tune_ms;
  }
  std::string line = cat("compile ", ctx.history.size() + 1, ": batch ", batch, ", ", plans.size(), " cuDNN plans in ",
                         fixed(ms), " ms: ", loaded, " loaded from the plan cache, ", built, " built");
  if (built) line += cat(" (", dyn, " with dynamic shapes, ", warm, " with an earlier shape's kernel cache; ", stored, " stored)");
  if (rejected) line += cat("; ", rejected, " cache entries rejected and rebuilt");
  if (tune > 0) line += cat("; timing candidates took ", fixed(tune), " ms");
  ctx.history.push_back(line);
  std::string out;
  for (const std::string& h : ctx.history) out += "    " + h + "\n";
  return out;
}

}  // namespace sg::cuda
