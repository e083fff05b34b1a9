// Lowering a Program for the CUDA backend: per op a cuBLASLt plan or a kernel launch, with
// pointers bound once. Small and medium dense products (see prefer_own_gemm) use our fused
// kernel: forward with bias and activation, dW with the bias gradient, and dX with the previous
// layer's activation derivative (any activation) in one launch each. Larger ones use cuBLASLt
// with epilogues where they apply:
//   forward   BIAS, RELU_(AUX_)BIAS, GELU_AUX_BIAS (the aux keeps what backward needs)
//   backward  dW with BGRADB (bias gradient for free); dX with DRELU_BGRAD / DGELU_BGRAD, which
//             applies the *previous* layer's activation derivative and computes its bias
//             gradient in the same product, so that layer's backward skips both.
// Where cuBLASLt has no algorithm for an epilogue, the op falls back to a plain product and the
// project's own kernels (noted in explain). A last dense layer with at most 32 outputs runs
// inside the softmax cross-entropy kernel that reads it. LowerOptions::fusion false turns these
// fusions off everywhere.
// A dense layer whose output an AbsMax op reads ("amax": true) is, where cuDNN has an engine for
// it, one cuDNN graph (cudnn_dense.h): product, scale, bias, activation and the max |Y|
// reduction, and the AbsMax op is then empty; otherwise the paths above and our abs_max kernel,
// with the reason in explain. LowerOptions::fusion false forces the latter.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_executable.h"
#include "backend/cuda/dense_kernels.cuh"
#include "backend/cuda/fusion_plan.h"
#include "backend/cuda/image_lowering.h"
#include "backend/cuda/jet_dense.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/pinn_kernels.cuh"
#include "stepgraph/distributed.h"
#include "backend/cuda/sequence_lowering.h"
#include "backend/cuda/stream_plan.h"
#include "stepgraph/graph.h"
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/cudnn_dense.h"
#include "backend/plan_cache.h"
#endif

namespace sg::cuda {

namespace {

// The M x N x K weight gradient (dW = dZ^T X) a dense backward op would join a batch with, or
// nothing (wgrad_groups' rules).
std::optional<std::array<int64_t, 3>> wgrad_shape(const Program& p, const Op& op) {
  if (op.kind != OpKind::DenseBackward) return std::nullopt;
  const TensorId dY = op.in[0], X = op.in[1], W = op.in[2], dW = op.out[1], db = op.out[2];
  if (dW == kNone || op.accumulate[1] || (db != kNone && op.accumulate[2])) return std::nullopt;
  if (p.tensor(X).dtype != DType::F32 || p.tensor(dY).dtype != DType::F32) return std::nullopt;
  const int64_t I = p.tensor(X).shape.back(), B = numel(p.tensor(X).shape) / I, O = p.tensor(W).shape[0];
  const int64_t br = op.attr<DenseAttrs>().bias_rows;
  if ((br > 0 && br < B) || skinny_dense(B, O, I) || !wgrad_batchable(O, I, B)) return std::nullopt;
  return std::array<int64_t, 3>{O, I, B};
}

}  // namespace

std::vector<std::vector<int>> wgrad_groups(const Program& p, const LowerOptions& opt) {
  std::vector<std::vector<int>> runs;
  if (!opt.fusion || opt.comm || opt.precision == Precision::TF32X3) return runs;
  for (const Op& op : p.ops())
    if (op.kind == OpKind::JetInput) return runs;  // the jet fusions take a PINN's dense backward ops
  std::vector<int> run;
  std::array<int64_t, 3> shape{};
  auto close = [&] {
    if (run.size() >= 2) runs.push_back(run);
    run.clear();
  };
  for (size_t i = 0; i < p.ops().size(); ++i) {
    const auto s = wgrad_shape(p, p.ops()[i]);
    const bool joins = s && !run.empty() && run.back() + 1 == static_cast<int>(i) && *s == shape &&
                       run.size() < static_cast<size_t>(kWgradMaxBatch);
    if (!joins) close();
    if (!s) continue;
    run.push_back(static_cast<int>(i));
    shape = *s;
  }
  close();
  return runs;
}

namespace {

class Lowering {
 public:
  Lowering(CudaBackend& be, const Program& p, const std::vector<void*>& ptrs, const LowerOptions& opt)
      : be_(be), p_(p), ptrs_(ptrs), opt_(opt), fuse_(opt.fusion),
        tc_(opt.precision == Precision::TF32X3 && tf32_tensor_cores()) {}

  // Data parallel: the gradient buckets, each as few contiguous f32 spans as the memory plan
  // allows (the planner keeps a bucket's gradients together; a gap is crossed only when no other
  // tensor lies in it, so the all-reduce touches nothing but padding).
  void plan_collectives() {
    if (!opt_.comm) return;
    const std::vector<dist::Bucket> plan = dist::plan_buckets(p_, opt_.bucket_bytes);
    if (plan.empty()) return;  // no gradients (an evaluation step): nothing to reduce
    coll_ = std::make_unique<Collectives>();
    coll_->comm = opt_.comm;
    std::vector<std::pair<uintptr_t, uintptr_t>> all;  // every tensor's [begin, end)
    for (size_t t = 0; t < p_.num_tensors(); ++t) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(ptrs_[t]);
      const TensorInfo& ti = p_.tensor(static_cast<TensorId>(t));
      if (b) all.emplace_back(b, b + static_cast<uintptr_t>(numel(ti.shape)) * dtype_size(ti.dtype));
    }
    notes_ << "data-parallel: gradients averaged over " << opt_.comm->size() << " rank"
           << (opt_.comm->size() == 1 ? "" : "s") << " (" << opt_.comm->describe() << ") in " << plan.size()
           << " bucket" << (plan.size() == 1 ? "" : "s") << " of up to " << opt_.bucket_bytes << " bytes, "
           << "each all-reduced (ncclAvg) on a side stream as soon as backward has finished it\n";
    for (size_t k = 0; k < plan.size(); ++k) {
      const dist::Bucket& b = plan[k];
      std::vector<std::pair<uintptr_t, uintptr_t>> mine;
      for (TensorId g : b.grads) {
        const TensorInfo& ti = p_.tensor(g);
        SG_REQUIRE(ti.dtype == DType::F32, "data-parallel: gradient '", ti.name, "' is ", dtype_name(ti.dtype),
                   "; the all-reduce takes f32 gradients");
        const uintptr_t a = reinterpret_cast<uintptr_t>(ptrs_[g]);
        mine.emplace_back(a, a + static_cast<uintptr_t>(numel(ti.shape)) * sizeof(float));
      }
      std::sort(mine.begin(), mine.end());
      Collectives::Bucket cb;
      uintptr_t lo = mine[0].first, hi = mine[0].second;
      auto flush = [&] {
        cb.spans.emplace_back(reinterpret_cast<float*>(lo), static_cast<int64_t>((hi - lo) / sizeof(float)));
      };
      // [from, to) holds nothing but padding (no tensor other than the bucket's own overlaps it).
      auto gap_free = [&](uintptr_t from, uintptr_t to) {
        if (to < from || (to - from) % sizeof(float) != 0) return false;
        for (const auto& iv : all)
          if (iv.first < to && iv.second > from && !std::binary_search(mine.begin(), mine.end(), iv)) return false;
        return true;
      };
      for (size_t j = 1; j < mine.size(); ++j) {
        if (gap_free(hi, mine[j].first)) {
          hi = mine[j].second;
        } else {
          flush();
          lo = mine[j].first, hi = mine[j].second;
        }
      }
      flush();
      SG_REQUIRE(b.ready_after_op >= 0, "data-parallel: bucket ", k, " has no finishing op");
      cb.what = cat("the all-reduce of gradient bucket ", k + 1, " of ", plan.size(), " (", b.grads.size(),
                    " tensor", b.grads.size() == 1 ? "" : "s", ", ", b.bytes, " bytes, first '",
                    p_.tensor(b.grads[0]).name, "'), started after op '", p_.ops()[b.ready_after_op].name, "'");
      CUDA_CHECK(cudaEventCreateWithFlags(&cb.ready, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&cb.done, cudaEventDisableTiming));
      notes_ << "  bucket " << k + 1 << ": " << b.grads.size() << " gradients, " << b.bytes << " bytes in "
             << cb.spans.size() << " contiguous span" << (cb.spans.size() == 1 ? "" : "s") << ", after op "
             << b.ready_after_op << " '" << p_.ops()[b.ready_after_op].name << "'\n";
      coll_->buckets.push_back(std::move(cb));
      fork_at_[b.ready_after_op].push_back(k);
      for (TensorId g : b.grads) bucket_of_[g] = k;
    }
  }
  void fork_after(int i) {
    auto it = fork_at_.find(i);
    if (it == fork_at_.end()) return;
    Collectives* c = coll_.get();
    for (size_t k : it->second) {
      steps_.push_back({c->buckets[k].what, [c, k](cudaStream_t s) { c->fork(k, s); }});
      unjoined_.insert(k);
    }
  }
  // Before an op that reads a gradient whose all-reduce is still in flight: join the side stream.
  void join_before(int i, const Op& op) {
    if (unjoined_.empty()) return;
    bool reads = false;
    for (TensorId t : op.in) {
      auto it = t == kNone ? bucket_of_.end() : bucket_of_.find(t);
      reads = reads || (it != bucket_of_.end() && unjoined_.count(it->second));
    }
    for (TensorId t : op.out) {  // a write to a gradient in flight would race too
      auto it = t == kNone ? bucket_of_.end() : bucket_of_.find(t);
      reads = reads || (it != bucket_of_.end() && unjoined_.count(it->second));
    }
    if (reads) add_join(cat("op ", i, " '", op.name, "'"));
  }
  void add_join(const std::string& before) {
    Collectives* c = coll_.get();
    notes_ << "  join: the step waits for the all-reduces before " << before << "\n";
    steps_.push_back({"join of the gradient all-reduces", [c](cudaStream_t s) { c->join(s); }});
    unjoined_.clear();
  }

  // Concurrent branches (stream_plan.h). Off with collectives, cuDNN plans (their shared
  // workspaces) and LowerOptions::concurrent false.
  void plan_streams() {
    if (!opt_.concurrent || coll_ || image_ || sequence_ || !amax_in_graph_.empty()) return;
    std::vector<std::pair<int, int>> links;  // ops one launch does the work of
    for (const auto& [b, q] : fusions_.into) links.emplace_back(b, q);
    for (const auto& [loss, dense] : fused_loss_) links.emplace_back(loss, dense);
    for (int bw : loss_dx_) links.emplace_back(bw - 1, bw);  // the loss kernel writes its dX
    for (const auto& kv : jet_bias_) links.emplace_back(kv.first, kv.first - 1);
    for (const auto& [jet, dense] : fusions_.jet_dy) links.emplace_back(jet, dense);
    for (const auto& [ff, pr] : fusions_.fourier_seeded) links.emplace_back(ff, pr);
    for (const auto& [ff, seed] : fusions_.seed_into_fourier) links.emplace_back(ff, seed);
    for (const auto& [jet, d] : fusions_.jet_dense_forward) links.emplace_back(jet, d);
    for (const auto& [jet, h] : fusions_.jet_dense_head) links.emplace_back(h, jet - 1);
    for (const auto& [jet, d] : fusions_.jet_dense_backward) links.emplace_back(jet, d);
    for (const auto& [add, loss] : loss_sum_) links.emplace_back(add, loss);
    for (const auto& [b, a] : merged_loss_) links.emplace_back(b, a);
    for (const WgradRun& r : wgrad_runs_)  // the last op's launch does the others' weight gradients
      for (int i : r.ops) links.emplace_back(i, r.ops.back());
    concurrent_ = cuda::plan_streams(p_, ptrs_, steps_, links, workspace_users_, notes_);
  }

  // Ops (and forms of ops) with only a CPU reference so far, and shapes beyond what the CUDA
  // kernels support: refused before anything is planned.
  [[noreturn]] static void refuse(const Op& op) {
    throw Error(cat("op '", op.name, "' (", op_kind_name(op.kind),
                    "): convolutions in a build without cuDNN (CMake did not find its headers) run on the CPU "
                    "backend in this version; use --device cpu"));
  }
  void refuse_cpu_only_ops() const {
    for (const Op& op : p_.ops()) {
      switch (op.kind) {
        case OpKind::Conv2d:
        case OpKind::Conv2dBackward: if (!ImageLowering::available(op.kind)) refuse(op); break;
        default:
          if (SequenceLowering::handles(op.kind)) SequenceLowering::check_supported(p_, op, opt_.attention);
          break;
      }
    }
  }

  std::unique_ptr<Executable> run() {
    refuse_cpu_only_ops();
    if (fuse_) fusions_ = plan_fusions(p_, ptrs_, /*jet_dense=*/!tc_);
    plan_collectives();
    plan_wgrad_runs();
    const size_t fixed_ops = invariant_prefix(p_);
    for (size_t i = 0; i < p_.ops().size(); ++i) {
      const Op& op = p_.ops()[i];
      join_before(static_cast<int>(i), op);
      notes_ << "  " << i << " " << op_kind_name(op.kind) << " '" << op.name << "': ";
      current_op_ = static_cast<int>(i);
      const size_t before = steps_.size();
      lower(static_cast<int>(i), op);
      if (i < fixed_ops && steps_.size() > before) {
        for (size_t k = before; k < steps_.size(); ++k) steps_[k].once = true;
        notes_ << " [once: its output is the same every step, so it runs before the first step and "
                  "stays out of the graph]";
      }
      notes_ << "\n";
      fork_after(static_cast<int>(i));
    }
    if (!unjoined_.empty()) add_join("end of step");
    finish_cudnn_dense();
    if (image_) image_->finish();
    if (sequence_) sequence_->finish();
    plan_streams();
    Shape key;
    for (const TensorInfo& t : p_.tensors())
      if (t.role == Role::Input && key.empty()) key = t.shape;
    return make_executable(be_, std::move(steps_), std::move(owned_), std::move(gemms_), notes_.str(), key,
                           std::move(coll_), concurrent_);
  }

 private:
  float* f(TensorId t) const { return t == kNone ? nullptr : static_cast<float*>(ptrs_[t]); }
  int32_t* i32(TensorId t) const { return t == kNone ? nullptr : static_cast<int32_t*>(ptrs_[t]); }
  int64_t dim(TensorId t, size_t k) const { return p_.tensor(t).shape[k]; }
  int64_t count(TensorId t) const { return numel(p_.tensor(t).shape); }
  // Dense ops act on the last dimension: X [..., I] is a [rows, I] matrix (a sequence's tokens
  // are rows like a batch's samples), as on the CPU backend.
  int64_t width(TensorId t) const { return p_.tensor(t).shape.back(); }
  int64_t rows(TensorId t) const { return count(t) / width(t); }

  void add_step(const Op& op, std::function<void(cudaStream_t)> fn) {
    steps_.push_back({op.name, std::move(fn)});
    steps_.back().op = current_op_;
  }
  char* own(size_t bytes) {
    owned_.emplace_back(be_, bytes);
    return owned_.back().data();
  }

  // A plan for the product, or nullptr if cuBLASLt has none for this epilogue.
  GemmPlan* gemm(const GemmShape& s, cublasLtEpilogue_t epi, const GemmArgs& a) {
    std::string why;
    void* ws = be_.workspace(largest_product());
    workspace_users_.insert(current_op_);  // the library workspace is shared by every plan
    auto g = GemmPlan::create(be_.lt(), s, epi, a, opt_.precision, ws, be_.workspace_bytes(), &why);
    if (!g) {
      notes_ << "[" << why << "] ";
      return nullptr;
    }
    g->autotune(opt_.autotune, be_.stream());
    gemms_.push_back(std::move(g));
    return gemms_.back().get();
  }
  void add_gemm(const Op& op, GemmPlan* g, const char* what) {
    notes_ << what << " " << g->describe() << "; ";
    add_step(op, [g](cudaStream_t s) { g->run(s); });
  }

  // Convolution, pooling and reshape ops (image_lowering.h).
  ImageLowering& image() {
    if (!image_) {
      image_ = std::make_unique<ImageLowering>(LoweringHooks{
          be_, p_, ptrs_, opt_, [this](const Op& op, std::function<void(cudaStream_t)> fn) { add_step(op, std::move(fn)); },
          [this](size_t bytes) { return own(bytes); }, notes_});
    }
    return *image_;
  }

  // Layer norm, embedding and attention ops (sequence_lowering.h).
  SequenceLowering& sequence() {
    if (!sequence_) {
      sequence_ = std::make_unique<SequenceLowering>(LoweringHooks{
          be_, p_, ptrs_, opt_, [this](const Op& op, std::function<void(cudaStream_t)> fn) { add_step(op, std::move(fn)); },
          [this](size_t bytes) { return own(bytes); }, notes_});
    }
    return *sequence_;
  }

  size_t largest_product() const {
    size_t most = 0;
    for (const Op& op : p_.ops())
      if (op.kind == OpKind::Dense)
        most = std::max<size_t>(most, static_cast<size_t>(rows(op.in[0]) * std::max(width(op.in[0]), dim(op.in[1], 0))));
    return most;
  }

  void lower(int i, const Op& op) {
    const auto& in = op.in;
    const auto& out = op.out;
    switch (op.kind) {
      case OpKind::AbsMax: {  // the FP8 scaling statistic of a dense layer's output
        if (auto it = amax_in_graph_.find(i); it != amax_in_graph_.end()) {
          notes_ << "computed by the dense layer's cuDNN graph (op " << it->second << " '" << p_.ops()[it->second].name << "')";
          return;
        }
        if (auto it = amax_not_in_graph_.find(i); it != amax_not_in_graph_.end())
          notes_ << "[not in a cuDNN graph: " << it->second << "] ";
        const float* x = f(in[0]);
        float* m = f(out[0]);
        const int64_t n = count(in[0]);
        float* partials = reinterpret_cast<float*>(own(abs_max_blocks(n) * sizeof(float)));
        notes_ << "max |x| kernel (" << abs_max_blocks(n) << " blocks, then one)";
        return add_step(op, [=](cudaStream_t s) { abs_max(x, n, partials, m, s); });
      }
      case OpKind::GatherBatch: {
        const float* dX = f(in[0]);
        const void* dY = ptrs_[in[1]];
        const int32_t* step = i32(in[2]);
        float* X = f(out[0]);
        void* y = ptrs_[out[1]];
        int32_t* valid = i32(out[2]);
        const int64_t N = dim(in[0], 0), D = dim(in[0], 1), B = dim(out[0], 0);
        const size_t row = static_cast<size_t>(count(in[1]) / N) * dtype_size(p_.tensor(in[1]).dtype);
        const GatherAttrs a = op.attr<GatherAttrs>();
        notes_ << "in-graph batch gather from the device-resident data set (Feistel shuffle per epoch)";
        return add_step(op, [=](cudaStream_t s) { gather_batch(dX, dY, step, X, y, valid, N, D, B, row, a, s); });
      }
      case OpKind::JetInput: {
        for (const auto& [ff, seed] : fusions_.seed_into_fourier)
          if (seed == i) {
            notes_ << "done by '" << p_.ops()[ff].name << "' (its Fourier jet kernel reads the points and writes the jet)";
            return;
          }
        const float* X = f(in[0]);
        float* J = f(out[0]);
        const JetAttrs a = op.attr<JetAttrs>();
        const int64_t B = dim(in[0], 0);
        std::vector<JetHead> heads;
        for (size_t k = 1; k < in.size(); ++k) heads.push_back({f(in[k]), dim(in[k], 0)});
        notes_ << "jet seed kernel (" << a.jet.K() << " components)";
        if (!heads.empty()) notes_ << ", after the coordinates of " << a.head << " value-only points";
        return add_step(op, [=](cudaStream_t s) { jet_input(X, J, B, a.jet, heads, s); });
      }
      case OpKind::JetActivation:
      case OpKind::FourierFeatures: {
        float* A = f(in[0]);
        float* Y = f(out[0]);
        const JetAttrs a = op.attr<JetAttrs>();
        const int64_t B = (dim(in[0], 0) - a.head) / a.jet.K(), H = dim(in[0], 1);
        const std::string head = a.head ? cat(", after ", a.head, " value-only rows") : std::string();
        if (const auto it = fusions_.fourier_seeded.find(i); it != fusions_.fourier_seeded.end()) {
          const Op& pr = p_.ops()[it->second];
          const float *X = f(pr.in[0]), *Xh = nullptr, *Bm = f(pr.in[1]);
          float *P = f(pr.out[0]), *J = nullptr;
          const int64_t m = dim(pr.in[1], 0), d = dim(pr.in[1], 1);
          notes_ << "Fourier jet kernel (sincospi" << head << ", with '" << pr.name << "': the projected jet from "
                 << "the inputs' value rows";
          if (const auto sd = fusions_.seed_into_fourier.find(i); sd != fusions_.seed_into_fourier.end()) {
            const Op& seed = p_.ops()[sd->second];  // the points, and the head's points before them
            X = f(seed.in[0]), Xh = seed.in.size() > 1 ? f(seed.in[1]) : nullptr, J = f(seed.out[0]);
            notes_ << "; with '" << seed.name << "': read from the points, the seed jet written on the side";
          }
          notes_ << ")";
          return add_step(op, [=](cudaStream_t s) { fourier_features_seeded(X, Xh, J, Bm, P, Y, a.head, B, m, d, a.jet, s); });
        }
        if (const auto it = fusions_.jet_dense_forward.find(i); it != fusions_.jet_dense_forward.end()) {
          notes_ << "done by '" << p_.ops()[it->second].name << "' (its jet dense kernel applies the activation)";
          return;
        }
        if (op.kind == OpKind::FourierFeatures) {
          notes_ << "Fourier jet kernel (sinpi/cospi" << head << ")";
          return add_step(op, [=](cudaStream_t s) { fourier_features(A, Y, a.head, B, H, a.jet, s); });
        }
        const auto fused = jet_bias_.find(i);
        const float* bias = fused == jet_bias_.end() ? nullptr : fused->second;
        notes_ << activation_name(a.act) << " jet kernel (" << a.jet.K() << " components" << head
               << (bias ? ", adds the dense layer's bias to the value rows" : "") << ")";
        return add_step(op, [=](cudaStream_t s) { jet_activation(A, bias, Y, a.head, B, H, a.jet, a.act, s); });
      }
      case OpKind::JetActivationBackward:
      case OpKind::FourierFeaturesBackward: {
        const float *dY = f(in[0]), *A = f(in[1]);
        float* dA = f(out[0]);
        const JetAttrs a = op.attr<JetAttrs>();
        const int64_t B = (dim(in[1], 0) - a.head) / a.jet.K(), H = dim(in[1], 1);
        const bool acc = op.accumulate[0];
        if (const auto it = fusions_.jet_dense_backward.find(i); it != fusions_.jet_dense_backward.end()) {
          notes_ << "done by '" << p_.ops()[it->second].name << "' (its input-gradient kernel applies the jet derivative)";
          return;
        }
        if (op.kind == OpKind::FourierFeaturesBackward) {
          notes_ << "Fourier jet backward kernel";
          return add_step(op, [=](cudaStream_t s) { fourier_features_backward(dY, A, dA, a.head, B, H, a.jet, acc, s); });
        }
        JetDY from;
        if (const auto it = fusions_.jet_dy.find(i); it != fusions_.jet_dy.end()) {
          const Op& d = p_.ops()[it->second];
          from.dZ = f(d.in[0]), from.W = f(d.in[2]);  // a one-output layer (fusion_plan.h)
          notes_ << activation_name(a.act) << " jet backward kernel (its dY = dZ W of '" << d.name
                 << "' computed here, not stored";
          if (const auto g = skinny_grads_.find(it->second); g != skinny_grads_.end()) {
            from.dW = g->second.dW, from.dW_accumulate = g->second.dW_accumulate;
            from.db = g->second.db, from.db_accumulate = g->second.db_accumulate;
            from.partial = reinterpret_cast<float*>(own(jet_dy_weight_partial_floats(a.head, B, H) * sizeof(float)));
            notes_ << "; its dW" << (from.db ? " and db" : "") << " from the activation's jet recomputed here"
                   << " in per-block partial sums + ordered sum";
          }
          notes_ << ")";
        } else {
          notes_ << activation_name(a.act) << " jet backward kernel";
        }
        return add_step(op, [=](cudaStream_t s) { jet_activation_backward(dY, from, A, dA, a.head, B, H, a.jet, a.act, acc, s); });
      }
      case OpKind::ExpressionLoss: return expression_loss_op(i, op);
      case OpKind::SamplePoints: {
        const int32_t* step = i32(in[0]);
        float* X = f(out[0]);
        const SampleAttrs a = op.attr<SampleAttrs>();
        const int64_t M = dim(out[0], 0), d = dim(out[0], 1);
        notes_ << "counter-based sampling kernel (the CPU's draws, bit for bit)";
        return add_step(op, [=](cudaStream_t s) { sample_points(step, X, M, d, a, s); });
      }
      case OpKind::Dense:
        for (const auto& [ff, pr] : fusions_.fourier_seeded)
          if (pr == i) {
            notes_ << "done by '" << p_.ops()[ff].name << "' (its Fourier jet kernel projects the inputs itself)";
            return;
          }
        for (const auto& [jet, h] : fusions_.jet_dense_head)
          if (h == i) {
            notes_ << "done by '" << p_.ops()[jet - 1].name << "' (its jet dense kernel forms this one output from Y in registers)";
            return;
          }
        return dense_forward(i, op);
      case OpKind::DenseBackward: return dense_backward(i, op);
      case OpKind::Add: {
        if (const auto it = loss_sum_.find(i); it != loss_sum_.end()) {
          notes_ << "done by '" << p_.ops()[it->second].name << "' (its expression loss launch adds the sum)";
          return;
        }
        const float *a = f(in[0]), *b = f(in[1]);
        float* y = f(out[0]);
        const int64_t n = count(out[0]);
        notes_ << "add kernel";
        return add_step(op, [=](cudaStream_t s) { add(a, b, y, n, s); });
      }
      case OpKind::AddBackward: {
        const float* dy = f(in[0]);
        float *da = f(out[0]), *db = f(out[1]);
        const int64_t n = count(in[0]);
        const bool aa = op.accumulate[0], ab = op.accumulate[1];
        notes_ << "add_backward kernel";
        return add_step(op, [=](cudaStream_t s) { add_backward(dy, da, db, n, aa, ab, s); });
      }
      case OpKind::SoftmaxCrossEntropy:
      case OpKind::MeanSquaredError: {
        const bool ce = op.kind == OpKind::SoftmaxCrossEntropy;
        // Cross-entropy: logits [B, ..., C] with per_row labels per batch row (tokens of a
        // sequence); MSE: T values per batch row.
        const int64_t B = dim(in[0], 0), T = count(in[0]) / B;
        const int64_t C = p_.tensor(in[0]).shape.back(), per_row = ce ? count(in[1]) / B : 1;
        const bool ignore = ce && op.attr<LossAttrs>().ignore_negative;
        const int blocks = ce ? softmax_ce_blocks(B * per_row) : mse_blocks(B * T);
        ReduceScratch sc{reinterpret_cast<float*>(own(blocks * sizeof(float))),
                         reinterpret_cast<unsigned*>(own(sizeof(unsigned))), blocks};
        const bool count_first = ignore && !softmax_ce_counts_in_block(B * per_row);
        if (count_first) sc.count = reinterpret_cast<int32_t*>(own(sizeof(int32_t)));
        const float* pred = f(in[0]);
        const int32_t* valid = i32(in[2]);
        float *loss = f(out[0]), *dpred = f(out[1]);
        const Reduction r = op.attr<LossAttrs>().reduction;
        if (count_first) notes_ << "target-count kernel (labels < 0 have none) + ";
        else if (ignore) notes_ << "labels < 0 have no target (counted in each block); ";
        notes_ << "fused loss + gradient kernel, " << blocks << " blocks, deterministic reduction";
        if (ce) {
          const int32_t* labels = i32(in[1]);
          if (auto fd = fused_loss_.find(i); fd != fused_loss_.end()) {
            const Op& d = p_.ops()[fd->second];
            const float *X = f(d.in[0]), *W = f(d.in[1]), *bias = f(d.in[2]);
            float* logits = f(d.out[0]);
            const int64_t I = width(d.in[0]);
            notes_ << "; computes '" << d.name << "' (" << B * per_row << "x" << I << "x" << C
                   << ") in the same launch, a warp per row";
            const FusedInputGrad dx = loss_input_gradient(i, op, d);
            return add_step(op, [=](cudaStream_t s) {
              dense_softmax_cross_entropy(X, W, bias, logits, labels, valid, loss, dpred, B, I, C, r, sc, s, per_row,
                                          ignore, dx);
            });
          }
          return add_step(op, [=](cudaStream_t s) {
            softmax_cross_entropy(pred, labels, valid, loss, dpred, B, C, r, sc, s, per_row, ignore);
          });
        }
        const float* target = f(in[1]);
        return add_step(op, [=](cudaStream_t s) { mean_squared_error(pred, target, valid, loss, dpred, B, T, r, sc, s); });
      }
      case OpKind::Schedule: {
        // Followed by the update op that reads it: computed inside that launch instead.
        const auto& ops = p_.ops();
        if (fuse_ && static_cast<size_t>(i) + 1 < ops.size() &&
            (ops[i + 1].kind == OpKind::SgdUpdate || ops[i + 1].kind == OpKind::AdamUpdate) &&
            ops[i + 1].in[1] == out[1]) {
          fused_schedule_ = FusedSchedule{i32(out[0]), f(out[1]), reinterpret_cast<unsigned*>(own(sizeof(unsigned))),
                                          op.attr<ScheduleAttrs>()};
          notes_ << "fused into the optimizer launch (its last block advances the step)";
          return;
        }
        int32_t* step = i32(out[0]);
        const float* hyper = f(in[1]);
        float* sched = f(out[1]);
        const ScheduleAttrs a = op.attr<ScheduleAttrs>();
        notes_ << "1-thread kernel: step += 1, lr and bias corrections from the device step";
        return add_step(op, [=](cudaStream_t s) { schedule(step, hyper, sched, a, s); });
      }
      case OpKind::SgdUpdate:
      case OpKind::AdamUpdate: return optimizer(op);
      case OpKind::Conv2d:
      case OpKind::Conv2dBackward:
      case OpKind::MaxPool2d:
      case OpKind::MaxPool2dBackward:
      case OpKind::GlobalAvgPool:
      case OpKind::GlobalAvgPoolBackward:
      case OpKind::Reshape: return image().lower(op);
      case OpKind::LayerNorm:
      case OpKind::LayerNormBackward:
      case OpKind::Embedding:
      case OpKind::EmbeddingBackward:
      case OpKind::Attention:
      case OpKind::AttentionBackward: return sequence().lower(op);
    }
    throw Error(cat("cuda backend: no lowering for op '", op.name, "'"));
  }

  // The tape and variable table go to the device once; the kernel stages them in shared memory.
  // Term op i, launched by op `launcher`'s step (i itself, or the term before it).
  ExprTerm expression_term(int i, const Op& op, int launcher) {
    const ExprLossAttrs& a = op.attr<ExprLossAttrs>();
    const std::vector<pinn::TapeInstr> tape = a.expr->tape();
    SG_REQUIRE(a.vars.size() <= 64, "op '", op.name, "': ", a.vars.size(), " expression variables (at most 64)");
    ExprTerm t;
    t.M = dim(op.in[1], 0), t.d = dim(op.in[1], 1), t.O = dim(op.in[0], 1);
    ExprLossDevice& e = t.e;
    e.n = static_cast<int>(tape.size());
    e.nvars = static_cast<int>(a.vars.size());
    e.blocks = expression_loss_blocks(t.M);
    auto* dtape = reinterpret_cast<pinn::TapeInstr*>(own(tape.size() * sizeof(pinn::TapeInstr)));
    auto* dvars = reinterpret_cast<ExprVar*>(own(std::max<size_t>(1, a.vars.size()) * sizeof(ExprVar)));
    be_.upload(dtape, tape.data(), tape.size() * sizeof(pinn::TapeInstr));
    if (!a.vars.empty()) be_.upload(dvars, a.vars.data(), a.vars.size() * sizeof(ExprVar));
    e.partials = reinterpret_cast<double*>(own(e.blocks * sizeof(double)));
    e.counter = reinterpret_cast<unsigned*>(own(sizeof(unsigned)));
    be_.synchronize();
    e.tape = dtape;
    e.vars = dvars;
    // This term's rows of U (and dU): a network pass may be shared by several terms.
    t.U = f(op.in[0]) + a.row0 * t.O, t.X = f(op.in[1]);
    t.total = f(op.out[0]), t.term = f(op.out[1]), t.dU = f(op.out[2]) + a.row0 * t.O;
    t.K = a.K;
    t.weight = a.weight;
    t.accumulate_total = op.accumulate[0];
    notes_ << e.n << "-instruction tape in fp64, " << e.blocks << " blocks";
    // The next op sums this term onto the earlier ones (the loss total): a one-element Add that
    // this kernel's last block does.
    const auto& ops = p_.ops();
    if (fuse_ && static_cast<size_t>(i) + 1 < ops.size()) {
      const Op& add = ops[i + 1];
      if (add.kind == OpKind::Add && add.in[1] == op.out[1] && add.in[0] != op.out[1] && count(add.out[0]) == 1 &&
          !add.accumulate[0]) {
        e.sum_in = f(add.in[0]), e.sum = f(add.out[0]);
        loss_sum_[i + 1] = launcher;
        notes_ << ", also the sum '" << add.name << "'";
      }
    }
    return t;
  }
  void expression_loss_op(int i, const Op& op) {
    if (const auto it = merged_loss_.find(i); it != merged_loss_.end()) {
      notes_ << "done by '" << p_.ops()[it->second].name << "' (one launch for both terms)";
      return;
    }
    notes_ << "expression loss kernel: ";
    const ExprTerm first = expression_term(i, op, i);
    // The next op another term of the same network pass (a boundary term riding in the
    // residual's pass): both in one launch, their blocks side by side.
    const auto& ops = p_.ops();
    const Op* next = static_cast<size_t>(i) + 1 < ops.size() ? &ops[i + 1] : nullptr;
    if (fuse_ && next && next->kind == OpKind::ExpressionLoss && next->in[0] == op.in[0] && next->out[0] == kNone &&
        op.out[0] == kNone) {
      notes_ << "; and '" << next->name << "': ";
      auto second = std::make_shared<ExprTerm>(expression_term(i + 1, *next, i));
      merged_loss_[i + 1] = i;
      unsigned* done = reinterpret_cast<unsigned*>(own(sizeof(unsigned)));
      notes_ << "; one launch, deterministic reductions";
      return add_step(op, [=](cudaStream_t s) { expression_loss(first, second.get(), done, s); });
    }
    notes_ << ", deterministic reduction";
    add_step(op, [=](cudaStream_t s) { expression_loss(first, nullptr, nullptr, s); });
  }

  ColumnSumScratch column_sum_scratch(int64_t rows, int64_t cols) {
    ColumnSumScratch sc;
    const int chunks = column_sum_chunks(rows, cols);
    if (chunks > 1) {
      sc.partials = reinterpret_cast<float*>(own(static_cast<size_t>(chunks * cols) * sizeof(float)));
      sc.counters = reinterpret_cast<unsigned*>(own(static_cast<size_t>((cols + 31) / 32) * sizeof(unsigned)));
    }
    return sc;
  }

  // Rows that get the bias: all, or a jet's value rows.
  int64_t bias_rows(const Op& op, int64_t B) const {
    const int64_t br = op.attr<DenseAttrs>().bias_rows;
    return br > 0 && br < B ? br : B;
  }

  // The fused loss kernel of op i (which computes dense op d) also writes the input gradient of
  // the dense backward right after it, with the previous layer's activation derivative, where
  // that backward would launch dX on its own: its dW split over k or on cuBLASLt (mlp_8x256's
  // 1024 x 256 x 10). Not where dW and dX share one launch (the seed MLP), for skinny layers
  // (their kernel does all three), an accumulating dX, or where dX's memory may not be written
  // at op i (early_write_refusal).
  FusedInputGrad loss_input_gradient(int i, const Op& loss, const Op& d) {
    const auto& ops = p_.ops();
    const size_t j = static_cast<size_t>(i) + 1;
    if (!fuse_ || j >= ops.size()) return {};
    const Op& bw = ops[j];
    if (bw.kind != OpKind::DenseBackward || bw.in[0] != loss.out[1] || bw.in[1] != d.in[0] || bw.in[2] != d.in[1] ||
        bw.out[0] == kNone || bw.accumulate[0] != 0)
      return {};
    const int64_t B = rows(d.in[0]), I = width(d.in[0]), O = dim(d.in[1], 0);
    const bool one_launch =
        prefer_own_gemm(O, I, B, true) && own_gemm_splits(O, I, B, true) == 1 && prefer_own_gemm(B, I, O);
    if (one_launch || skinny_dense(B, O, I) || !early_write_refusal(i, static_cast<int>(j)).empty()) return {};
    FusedInputGrad g;
    g.dX = f(bw.out[0]);
    std::string also;
    if (auto fuse = fusions_.into.find(static_cast<int>(j)); fuse != fusions_.into.end()) {
      const Op& q = ops[fuse->second];
      g.dact = q.attr<DenseAttrs>().act, g.y = f(q.in[3]), g.z = f(q.in[4]);
      dz_ready_.insert(fuse->second);
      also = cat(", times the ", activation_name(g.dact), "' of '", q.name, "'");
    }
    loss_dx_.insert(static_cast<int>(j));
    notes_ << ", and '" << bw.name << "''s dX (" << B << "x" << I << "x" << O << also << ")";
    return g;
  }
  // A last dense layer (no activation, at most 32 outputs) read by the softmax cross-entropy
  // that follows: both in one kernel (the product is tiny; the launch was not).
  bool fuse_with_loss(int i, const Op& op) const {
    const auto& ops = p_.ops();
    if (!fuse_ || static_cast<size_t>(i) + 1 >= ops.size()) return false;
    const Op& next = ops[i + 1];
    const DenseAttrs& a = op.attr<DenseAttrs>();
    // Token rows too ([B, S, I] inputs, labels per position with -1 for none).
    return a.act == Activation::None && a.bias_rows == 0 && op.out[1] == kNone &&
           next.kind == OpKind::SoftmaxCrossEntropy && next.in[0] == op.out[0] &&
           fused_loss_fits(dim(op.in[1], 0), dim(op.in[1], 1));
  }

  void dense_forward(int i, const Op& op) {
    const TensorId X = op.in[0], W = op.in[1], b = op.in[2], Y = op.out[0], Z = op.out[1];
    const int64_t B = rows(X), I = width(X), O = dim(W, 0);
    const Activation act = op.attr<DenseAttrs>().act;
    if (fuse_with_loss(i, op)) {
      fused_loss_[i + 1] = i;
      notes_ << "fused into the next op's loss kernel";
      return;
    }
    if (dense_with_amax(i, op)) return;
    if (fused_jet(fusions_.jet_dense_forward, i) >= 0) return jet_dense_forward(i, op);
    if (skinny_dense(B, O, I)) {
      SkinnyDense g;
      g.R = B, g.I = I, g.O = O;
      g.X = f(X), g.W = f(W), g.bias = f(b), g.bias_rows = bias_rows(op, B);
      g.Y = f(Y), g.Z = f(Z), g.act = act;
      notes_ << "skinny dense kernel (" << O << " output" << (O > 1 ? "s" : "")
             << ": a warp per row, W in shared memory, bias" << (g.bias_rows < B ? cat(" on the first ", g.bias_rows, " rows") : "")
             << " fused)";
      return add_step(op, [g](cudaStream_t s) { skinny_forward(g, s); });
    }
    GemmShape s{true, false, O, B, I, I, I, O};
    GemmArgs a{f(W), f(X), nullptr, f(b), nullptr, 0, false};
    const bool bias = b != kNone;
    const cublasLtEpilogue_t bias_epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    float *y = f(Y), *z = f(Z);
    const float* bp = f(b);

    if (prefer_own_gemm(B, O, I)) {
      DenseGemm d;
      d.M = B, d.N = O, d.K = I;
      d.A = f(X), d.sam = I, d.sak = 1;
      d.B = f(W), d.sbk = 1, d.sbn = I;
      d.C = y, d.ldc = O;
      d.bias = bp, d.Z = z, d.act = act;
      d.bias_rows = bias_rows(op, B);
      return own_gemm(op, d, nullptr, "fused dense kernel (product + bias + activation)");
    }
    if (const int64_t br = bias_rows(op, B); br < B) {
      // A jet layer: a plain product, then the bias on the value rows only.
      float* pre = z ? z : y;
      GemmArgs ap = a;
      ap.D = pre;
      GemmPlan* g = gemm(s, CUBLASLT_EPILOGUE_DEFAULT, ap);
      SG_REQUIRE(g, "cuBLASLt has no algorithm for a plain fp32 product of ", B, "x", I, " by ", I, "x", O);
      add_gemm(op, g, "gemm");
      // The jet activation reading this output adds the bias itself (Y is read by nothing else
      // before it).
      const auto& ops = p_.ops();
      if (fuse_ && bp && act == Activation::None && !z && static_cast<size_t>(i) + 1 < ops.size() &&
          ops[i + 1].kind == OpKind::JetActivation && ops[i + 1].in[0] == Y) {
        jet_bias_[i + 1] = bp;
        notes_ << "bias added by the next op's jet kernel";
        return;
      }
      notes_ << "bias on the first " << br << " rows" << (act != Activation::None || z ? " + activation" : "") << " kernel";
      return add_step(op, [=](cudaStream_t st) {
        bias_act_forward(pre, bp, z, y, br, O, act, st);
        if (act != Activation::None || z != nullptr)
          bias_act_forward(pre + br * O, nullptr, z ? z + br * O : nullptr, y + br * O, B - br, O, act, st);
      });
    }

    if (fuse_ && act == Activation::ReLU) {
      if (fusions_.relu_mask.count(i)) {
        const int64_t ld = (O + 127) / 128 * 128;  // in bits
        GemmArgs am = a;
        am.D = y;
        am.aux = own(static_cast<size_t>(ld / 8 * B));
        am.aux_ld = ld;
        if (GemmPlan* g = gemm(s, bias ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_AUX, am)) {
          relu_mask_[i] = {am.aux, ld};
          return add_gemm(op, g, "gemm");
        }
      }
      GemmArgs ar = a;
      ar.D = y;
      if (GemmPlan* g = gemm(s, bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU, ar))
        return add_gemm(op, g, "gemm");
    }
    if (fuse_ && act == Activation::GELU && O % 8 == 0) {
      GemmArgs ag = a;
      ag.D = y;
      ag.aux = z;
      ag.aux_ld = O;
      if (GemmPlan* g = gemm(s, bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX, ag))
        return add_gemm(op, g, "gemm");
    }
    if (act == Activation::None) {
      GemmArgs an = a;
      an.D = y;
      if (GemmPlan* g = gemm(s, fuse_ ? bias_epi : CUBLASLT_EPILOGUE_DEFAULT, an)) {
        add_gemm(op, g, "gemm");
        if (!fuse_ && bias) add_step(op, [=](cudaStream_t st) { bias_act_forward(y, bp, nullptr, y, B, O, act, st); });
        return;
      }
    }
    // Product (with the bias epilogue when possible) into z (or y), then our activation kernel.
    float* pre = z ? z : y;
    GemmArgs ap = a;
    ap.D = pre;
    GemmPlan* g = fuse_ ? gemm(s, bias_epi, ap) : nullptr;
    const bool bias_done = g != nullptr && bias;
    if (!g) g = gemm(s, CUBLASLT_EPILOGUE_DEFAULT, ap);
    SG_REQUIRE(g, "cuBLASLt has no algorithm for a plain fp32 product of ", B, "x", I, " by ", I, "x", O);
    add_gemm(op, g, "gemm");
    const float* badd = bias_done ? nullptr : bp;
    notes_ << "bias+" << activation_name(act) << " kernel";
    add_step(op, [=](cudaStream_t st) { bias_act_forward(pre, badd, z, y, B, O, act, st); });
  }

  // The AbsMax op reading this dense layer's output, or -1.
  int amax_reader(int i, const Op& op) const {
    const auto& ops = p_.ops();
    for (size_t j = static_cast<size_t>(i) + 1; j < ops.size(); ++j)
      if (ops[j].kind == OpKind::AbsMax && ops[j].in[0] == op.out[0]) return static_cast<int>(j);
    return -1;
  }
  // Whether op `i` may write op `j`'s first output early (the dense layer an AbsMax op's, the
  // fused loss the next backward's dX): the memory planner placed it for op j, so its bytes must
  // not be any of op i's tensors (whose last use may be op i) nor anything an op between them
  // writes. Empty if it may; else why not.
  std::string early_write_refusal(int i, int j) const {
    const TensorId m = p_.ops()[j].out[0];
    const char* mp = static_cast<const char*>(ptrs_[m]);
    const size_t mb = static_cast<size_t>(count(m)) * sizeof(float);
    auto overlaps = [&](TensorId t) {
      if (t == kNone || t == m) return false;
      const char* tp = static_cast<const char*>(ptrs_[t]);
      const size_t tb = static_cast<size_t>(count(t)) * sizeof(float);
      return tp < mp + mb && mp < tp + tb;
    };
    auto why = [&](TensorId t) { return cat("'", p_.tensor(m).name, "' shares memory with '", p_.tensor(t).name, "'"); };
    const auto& ops = p_.ops();
    for (int k = i; k < j; ++k) {
      for (TensorId t : ops[k].out)
        if (overlaps(t)) return why(t);
      if (k == i)
        for (TensorId t : ops[k].in)
          if (overlaps(t)) return why(t);
    }
    return "";
  }

  // A dense layer read by an AbsMax op, as one cuDNN graph computing both; false (noted) when
  // that is not possible, and the usual paths follow.
  bool dense_with_amax(int i, const Op& op) {
    const int j = amax_reader(i, op);
    if (j < 0) return false;
    std::string why;
    try {
      why = try_dense_amax(i, j, op);
    } catch (const std::exception& e) {  // building or trying the plan failed: keep today's path
      why = e.what();
    }
    if (why.empty()) return true;
    std::replace(why.begin(), why.end(), '\n', ' ');  // one line per op in explain
    amax_not_in_graph_[j] = why;                       // said on the AbsMax op's line
    return false;
  }

#ifdef STEPGRAPH_HAVE_CUDNN
  std::string try_dense_amax(int i, int j, const Op& op) {
    if (!fuse_) return "fusion off";
    const TensorId X = op.in[0], W = op.in[1], b = op.in[2], Y = op.out[0], Z = op.out[1];
    const Activation act = op.attr<DenseAttrs>().act;
    if (std::string r = dense_amax_refusal(act); !r.empty()) return r;
    const int64_t B = rows(X), I = width(X), O = dim(W, 0);
    if (bias_rows(op, B) < B) return "a jet layer (the bias on the value rows only)";
    if (Z != kNone && act == Activation::None) return "a pre-activation of a layer without activation";
    if (std::string r = early_write_refusal(i, j); !r.empty()) return r;
    auto& slot = be_.cudnn_context();
    if (!slot) slot = make_cudnn_context();  // throws naming what is missing (libcudnn.so.9)
    if (!dense_cache_) dense_cache_ = std::make_unique<plan_cache::PlanCache>(plan_cache::resolve_dir(opt_.plan_cache));
    ConvPlanOptions o;
    o.precision = opt_.precision;
    o.autotune = opt_.autotune;
    o.deterministic = opt_.deterministic;
    o.stream = be_.stream();
    o.cache = dense_cache_.get();
    DenseAmaxGeometry g;
    g.B = B, g.I = I, g.O = O, g.bias = b != kNone, g.preact = Z != kNone, g.act = act, g.scale = 1.0f;
    std::string why;
    std::shared_ptr<ConvPlan> plan =
        dense_amax_plan(slot, g, f(X), f(W), f(b), f(Y), f(Z), f(p_.ops()[j].out[0]), o, &why);
    if (!plan) return why;
    dense_plans_.push_back(plan);
    amax_in_graph_[j] = i;
    notes_ << plan->describe() << " (computes '" << p_.ops()[j].name << "')";
    add_step(op, [plan](cudaStream_t s) { plan->run(s); });
    return "";
  }
  // The dense graphs' shared workspace (their steps run one after another on one stream).
  void finish_cudnn_dense() {
    if (dense_plans_.empty()) return;
    const size_t most = share_workspace(dense_plans_, [this](size_t bytes) { return own(bytes); });
    notes_ << "  cuDNN dense+amax graphs: " << dense_plans_.size() << ", workspace " << most << " bytes; plan cache "
           << (dense_cache_ && dense_cache_->enabled() ? dense_cache_->dir() : std::string("off")) << "\n";
  }
#else
  std::string try_dense_amax(int, int, const Op&) { return "this build has no cuDNN (CMake did not find its headers)"; }
  void finish_cudnn_dense() {}
#endif

  // Batched weight gradients (wgrad_groups): a run's batch is filled as its ops are lowered and
  // launched at its last op. The run's dZ and X must outlive their ops: the trainer's memory plan
  // keeps them (CudaBackend::lifetime_hints); a plan made without that is checked here.
  struct WgradRun {
    std::vector<int> ops;
    WgradBatch batch;
  };
  void plan_wgrad_runs() {
    for (std::vector<int>& run : wgrad_groups(p_, opt_)) {
      if (!wgrad_inputs_kept(run)) {
        notes_ << "weight gradients of ops " << run.front() << "-" << run.back()
               << " not batched: the memory plan reuses a layer's dZ or X before op " << run.back()
               << " (planned without the backend's lifetime hints)\n";
        continue;
      }
      for (int i : run) wgrad_run_of_[i] = wgrad_runs_.size();
      wgrad_runs_.push_back({std::move(run), {}});
    }
  }
  // Whether no op after a run member and up to the run's last writes where its dY (dZ) or X lie.
  bool wgrad_inputs_kept(const std::vector<int>& run) const {
    auto span = [&](TensorId t) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(ptrs_[t]);
      return std::make_pair(b, b + static_cast<uintptr_t>(count(t)) * dtype_size(p_.tensor(t).dtype));
    };
    auto overlaps = [&](TensorId t, std::pair<uintptr_t, uintptr_t> r) {
      if (t == kNone || !ptrs_[t]) return false;
      const auto s = span(t);
      return s.first < r.second && r.first < s.second;
    };
    for (size_t a = 0; a + 1 < run.size(); ++a) {
      const Op& op = p_.ops()[run[a]];
      const auto dz = span(op.in[0]), x = span(op.in[1]);
      for (int j = run[a] + 1; j <= run.back(); ++j) {
        const Op& later = p_.ops()[j];
        std::vector<TensorId> written = later.out;
        if (later.kind == OpKind::DenseBackward) written.push_back(later.in[0]);  // dY becomes dZ in place
        for (TensorId t : written)
          if (overlaps(t, dz) || overlaps(t, x)) return false;
      }
    }
    return true;
  }
  // Op i's weight gradient (and bias gradient) into its run's batch; the batch launched at the
  // run's last op.
  void add_to_wgrad_batch(int i, const Op& op, float* dz, bool need_db) {
    WgradRun& r = wgrad_runs_[wgrad_run_of_.at(i)];
    const int64_t B = rows(op.in[1]), I = width(op.in[1]), O = dim(op.in[2], 0);
    WgradBatch& b = r.batch;
    b.M = O, b.N = I, b.K = B, b.ldz = O, b.ldx = I, b.ldw = I;
    b.item[b.count++] = WgradItem{dz, f(op.in[1]), f(op.out[1]), need_db ? f(op.out[2]) : nullptr};
    if (i != r.ops.back()) {
      notes_ << "dW" << (need_db ? " + db" : "") << " in the batched weight-gradient launch at op " << r.ops.back() << "; ";
      return;
    }
    notes_ << "dW" << (need_db ? " + db" : "") << " of ops " << r.ops.front() << "-" << r.ops.back() << " in one launch ("
           << b.count << " x " << O << "x" << I << "x" << B << ", " << kWgradTile << "x" << kWgradTile
           << " tiles over the whole k, on the FP64 tensor cores); ";
    add_step(op, [b](cudaStream_t s) { wgrad_batch(b, s); });
  }

  void dense_backward(int i, const Op& op) {
    const TensorId dY = op.in[0], X = op.in[1], W = op.in[2], Y = op.in[3], Z = op.in[4];
    const TensorId dX = op.out[0], dW = op.out[1], db = op.out[2];
    const int64_t B = rows(X), I = width(X), O = dim(W, 0);
    const Activation act = op.attr<DenseAttrs>().act;
    float* dz = f(dY);  // dY becomes dZ in place: nothing else reads it
    if (act != Activation::None && !dz_ready_.count(i)) {
      const float *y = f(Y), *z = f(Z);
      notes_ << activation_name(act) << "' kernel (in place); ";
      add_step(op, [=](cudaStream_t s) { act_backward_inplace(dz, y, z, B * O, act, s); });
    } else if (dz_ready_.count(i)) {
      notes_ << "dZ from the next layer's fused epilogue; ";
    }

    const bool need_db = db != kNone && !db_done_.count(i);
    if (skinny_dense(B, O, I) && dW != kNone && !fusions_.into.count(i)) {
      SkinnyDense g;
      g.R = B, g.I = I, g.O = O;
      g.X = f(X), g.W = f(W), g.dZ = dz, g.bias_rows = bias_rows(op, B);
      const auto later = std::find_if(fusions_.jet_dy.begin(), fusions_.jet_dy.end(), [&](const auto& kv) { return kv.second == i; });
      const bool dx_later = later != fusions_.jet_dy.end();
      if (dx_later && fusions_.jet_dy_weight.count(later->first)) {
        JetDY& w = skinny_grads_[i];
        w.dW = f(dW), w.dW_accumulate = op.accumulate[1] != 0;
        w.db = need_db ? f(db) : nullptr, w.db_accumulate = op.accumulate[2] != 0;
        notes_ << "done by '" << p_.ops()[later->first].name << "' (its jet backward forms dX, dW"
               << (w.db ? " and db" : "") << ")";
        return;
      }
      g.dX = dX != kNone && !dx_later ? f(dX) : nullptr, g.dX_accumulate = op.accumulate[0] != 0;
      g.dW = f(dW), g.dW_accumulate = op.accumulate[1] != 0;
      g.db = need_db ? f(db) : nullptr, g.db_accumulate = op.accumulate[2] != 0;
      float* partial = reinterpret_cast<float*>(own(skinny_backward_partial_floats(g) * sizeof(float)));
      notes_ << "skinny backward kernel (" << (g.dX ? "dX, " : "") << "dW" << (g.db ? " + db" : "")
             << " partial sums per block) + ordered sum" << (dx_later ? " (dX: in the next jet backward)" : "") << "; ";
      add_step(op, [g, partial](cudaStream_t s) { skinny_backward(g, partial, s); });
      return;
    }
    std::optional<DenseGemm> own_dw, own_dx;
    const bool batched = wgrad_run_of_.count(i) != 0;  // dW and db: add_to_wgrad_batch, after dX
    if (!batched && prefer_own_gemm(O, I, B, /*rows=*/true)) {
      DenseGemm d;  // dW[o, i] = sum_b dZ[b, o] X[b, i]; db[o] = sum_b dZ[b, o] on the side
      d.M = O, d.N = I, d.K = B;
      d.A = dz, d.sam = 1, d.sak = O;
      d.B = f(X), d.sbk = I, d.sbn = 1;
      d.C = f(dW), d.ldc = I, d.accumulate = op.accumulate[1] != 0;
      if (need_db) d.rowsum = f(db), d.rowsum_accumulate = op.accumulate[2] != 0, d.rowsum_k = bias_rows(op, B);
      own_dw = d;
    } else if (!batched) {
      cublas_weight_gradient(i, op, need_db);
    }
    std::string dx_what = "dX";
    const int jet = fused_jet(fusions_.jet_dense_backward, i);
    const bool dx_done = loss_dx_.count(i) != 0 || jet >= 0;
    if (loss_dx_.count(i)) notes_ << "dX from the loss kernel; ";
    if (dX != kNone && !dx_done && prefer_own_gemm(B, I, O)) {
      DenseGemm d;  // dX[b, i] = sum_o dZ[b, o] W[o, i], times the previous activation's derivative
      d.M = B, d.N = I, d.K = O;
      d.A = dz, d.sam = O, d.sak = 1;
      d.B = f(W), d.sbk = I, d.sbn = 1;
      d.C = f(dX), d.ldc = I, d.accumulate = op.accumulate[0] != 0;
      auto fuse = fusions_.into.find(i);
      if (fuse != fusions_.into.end()) {
        const Op& qop = p_.ops()[fuse->second];
        d.dact = qop.attr<DenseAttrs>().act;
        d.dact_y = f(qop.in[3]);
        d.dact_z = f(qop.in[4]);
        dz_ready_.insert(fuse->second);
        dx_what = cat("dX (fusing the ", activation_name(d.dact), "' of '", qop.name, "')");
      }
      own_dx = d;
    }
    // Both products of the layer in one launch when both are ours.
    if (own_dw && own_dx) {
      own_gemm(op, *own_dw, &*own_dx, cat(need_db ? "dW + db and " : "dW and ", dx_what, " in one kernel"));
    } else {
      if (own_dw) own_gemm(op, *own_dw, nullptr, need_db ? "dW + db kernel" : "dW kernel");
      if (own_dx) own_gemm(op, *own_dx, nullptr, dx_what + " kernel");
    }
    if (dX != kNone && !own_dx && !dx_done) cublas_input_gradient(i, op);
    if (batched) add_to_wgrad_batch(i, op, dz, need_db);
    if (jet >= 0) jet_dense_backward(op, p_.ops()[jet]);  // after dW: dA may take X's memory
  }

  // The jet op fused with dense op i in `plan` (FusionPlan::jet_dense_*), or -1.
  static int fused_jet(const std::map<int, int>& plan, int i) {
    for (const auto& [jet, d] : plan)
      if (d == i) return jet;
    return -1;
  }
  // A jet layer and its activation (FusionPlan::jet_dense_forward) in one launch.
  void jet_dense_forward(int i, const Op& op) {
    const Op& jet = p_.ops()[i + 1];
    const JetAttrs a = jet.attr<JetAttrs>();
    JetDense g;
    g.K = width(op.in[0]), g.N = dim(op.in[1], 0);
    g.head = a.head, g.B = (rows(op.in[0]) - a.head) / a.jet.K(), g.js = a.jet, g.act = a.act;
    g.X = f(op.in[0]), g.W = f(op.in[1]), g.bias = f(op.in[2]);
    g.Z = f(op.out[0]), g.Y = f(jet.out[0]);
    std::string head;
    if (const auto it = fusions_.jet_dense_head.find(i + 1); it != fusions_.jet_dense_head.end()) {
      const Op& h = p_.ops()[it->second];
      g.W2 = f(h.in[1]), g.bias2 = f(h.in[2]), g.U = f(h.out[0]);
      head = cat(" + the one-output layer '", h.name, "' from Y in registers");
    }
    jet_dense_step(op, g, cat("jet dense kernel: ", rows(op.in[0]), "x", g.N, "x", g.K, " product + bias + ",
                              activation_name(a.act), " jet of '", jet.name, "'", head));
  }
  // A jet layer's input gradient and the activation backward below it (jet_dense_backward).
  void jet_dense_backward(const Op& op, const Op& jet) {
    const JetAttrs a = jet.attr<JetAttrs>();
    JetDense g;
    g.backward = true;
    g.K = dim(op.in[2], 0), g.N = width(op.in[1]);
    g.head = a.head, g.B = (rows(op.in[1]) - a.head) / a.jet.K(), g.js = a.jet, g.act = a.act;
    g.X = f(op.in[0]), g.W = f(op.in[2]), g.A = f(jet.in[1]), g.dA = f(jet.out[0]);
    jet_dense_step(op, g, cat("dX + ", activation_name(a.act), " jet backward of '", jet.name, "' in the jet dense kernel ",
                              rows(op.in[1]), "x", g.N, "x", g.K));
  }
  void jet_dense_step(const Op& op, const JetDense& g, const std::string& what) {
    SG_REQUIRE(jet_dense_aligned(g), "op '", op.name, "': the jet dense kernel needs 16-byte aligned tensors");
    notes_ << what << " (fp32, W in shared memory)" << (g.backward ? "; " : "");
    add_step(op, [g](cudaStream_t s) { jet_dense(g, s); });
  }

  // A long reduction onto a small output is split over k, with its partial sums in scratch.
  void plan_split(DenseGemm& d) {
    if (d.partial) return;  // planned already
    choose_kernel(d);
    own_scratch(d);
  }
  // Which of our kernels runs the product, and its k splits.
  void choose_kernel(DenseGemm& d) {
    const bool rows = d.sam == 1 && d.sbn == 1;
    d.tf32x3 = tc_;
    d.splits = own_gemm_splits(d.M, d.N, d.K, rows, d.tf32x3);
    if (d.tf32x3 && !own_gemm_tensor_cores(d)) {  // not on tensor cores: the SIMT kernel's splits
      d.tf32x3 = false;
      d.splits = own_gemm_splits(d.M, d.N, d.K, rows);
    }
    d.sliced = own_gemm_sliced(d);  // the kernel is chosen here, once, not at each launch
    d.fp64_tc = d.sliced && sliced_fp64_tensor_cores();
  }
  // The split partial sums and per-tile counters the chosen kernel needs, owned by the executable.
  void own_scratch(DenseGemm& d) {
    if (d.splits > 1)
      d.partial = reinterpret_cast<float*>(own(own_gemm_partial_floats(d.M, d.N, d.splits) * sizeof(float)));
    if (const int64_t c = own_gemm_counters(d); c > 0)  // zeroed when owned
      d.counters = reinterpret_cast<unsigned*>(own(static_cast<size_t>(c) * sizeof(unsigned)));
  }
  void own_gemm(const Op& op, DenseGemm d, const DenseGemm* second, const std::string& what) {
    std::optional<DenseGemm> s2;
    if (second) s2 = *second;
    if (s2) {  // both products fresh: each kernel chosen once, then maybe one launch (sliced_pair)
      choose_kernel(d), choose_kernel(*s2);
      const bool paired = sliced_pair(d, *s2);
      own_scratch(d), own_scratch(*s2);
      if (paired) {
        notes_ << what << " " << d.M << "x" << d.N << "x" << d.K << " + " << s2->M << "x" << s2->N << "x" << s2->K
               << " on " << kSlicedPairRows << "x" << kSlicedCols << " tiles side by side (k-ranges of " << kSlicedDepth
               << " in shared memory, each row half's k over " << kSlicedPairWarps << " warps";
        for (const DenseGemm* g : {&d, &*s2})
          if (g->splits > 1) notes_ << "; " << g->M << "x" << g->N << "x" << g->K << " k split " << g->splits << " ways + ordered sum by each tile's last block";
        notes_ << "); ";
        add_step(op, [d, s2](cudaStream_t s) { dense_gemm(d, &*s2, s); });
        return;
      }
    } else {
      plan_split(d);  // planned already when a split pair comes back here one product at a time
    }
    if (s2 && (d.splits > 1 || s2->splits > 1)) {  // a split product runs in its own launches
      own_gemm(op, d, nullptr, what + " (1/2)");
      return own_gemm(op, *s2, nullptr, what + " (2/2)");
    }
    notes_ << what << " " << d.M << "x" << d.N << "x" << d.K;
    if (s2) notes_ << " + " << s2->M << "x" << s2->N << "x" << s2->K;
    const GemmTile tile = own_gemm_tile(d, s2 ? &*s2 : nullptr);
    notes_ << (!tile.rows ? std::string(", one thread per output")
               : tile.rows == tile.cols ? cat(" tile ", tile.rows) : cat(" tile ", tile.rows, "x", tile.cols));
    if (own_gemm_tensor_cores(d)) notes_ << ", 3xTF32 tensor cores";
    if (d.sliced)
      notes_ << ", k-ranges of " << kSlicedDepth << " in shared memory, "
             << (d.fp64_tc ? cat("on the FP64 tensor cores, 32x32 halves, k in ", kSlicedTcSlices, " slices")
                           : cat("k over ", sliced_warps(d.sak == 1, d.sbk == 1), " warps"));
    if (d.splits > 1) notes_ << ", k split " << d.splits << " ways + ordered sum" << (d.counters ? " by each tile's last block" : "");
    notes_ << "; ";
    add_step(op, [d, s2](cudaStream_t s) { dense_gemm(d, s2 ? &*s2 : nullptr, s); });
  }

  // dW through cuBLASLt: X^T dZ, with BGRADB summing dZ over the batch into db.
  void cublas_weight_gradient(int i, const Op& op, bool need_db) {
    const TensorId dY = op.in[0], X = op.in[1], W = op.in[2];
    const TensorId dW = op.out[1], db = op.out[2];
    const int64_t B = rows(X), I = width(X), O = dim(W, 0);
    float* dz = f(dY);
    // dW[O, I] (column-major [I, O]) = X^T dZ; BGRADB sums dZ over the batch into db.
    GemmShape sw{false, true, I, O, B, I, O, I};
    GemmArgs aw{f(X), dz, f(dW), nullptr, nullptr, 0, op.accumulate[1] != 0};
    bool db_fused = false;
    GemmPlan* gw = nullptr;
    const int64_t br = bias_rows(op, B);
    if (fuse_ && need_db && !op.accumulate[2] && br == B) {
      GemmArgs ab = aw;
      ab.bias = f(db);
      gw = gemm(sw, CUBLASLT_EPILOGUE_BGRADB, ab);
      db_fused = gw != nullptr;
    }
    if (!gw) gw = gemm(sw, CUBLASLT_EPILOGUE_DEFAULT, aw);
    SG_REQUIRE(gw, "cuBLASLt has no algorithm for the weight gradient of '", op.name, "'");
    add_gemm(op, gw, "dW gemm");
    if (need_db && !db_fused) {
      float* dbp = f(db);
      const bool acc = op.accumulate[2];
      notes_ << "bias-gradient kernel; ";
      const ColumnSumScratch sc = column_sum_scratch(br, O);
      add_step(op, [=](cudaStream_t s) { column_sum(dz, dbp, br, O, acc, sc, s); });
    } else if (db != kNone && db_done_.count(i)) {
      notes_ << "db from the next layer's fused epilogue; ";
    }
  }

  // dX through cuBLASLt, with DRELU/DGELU(_BGRAD) absorbing the previous layer's activation.
  void cublas_input_gradient(int i, const Op& op) {
    const TensorId dY = op.in[0], X = op.in[1], W = op.in[2], dX = op.out[0];
    const int64_t B = rows(X), I = width(X), O = dim(W, 0);
    float* dz = f(dY);
    // dX[B, I] (column-major [I, B]) = W^T-view times dZ.
    GemmShape sx{false, false, I, B, O, I, O, I};
    GemmArgs ax{f(W), dz, f(dX), nullptr, nullptr, 0, op.accumulate[0] != 0};
    auto fuse = fusions_.into.find(i);
    if (fuse != fusions_.into.end()) {
      const int q = fuse->second;
      const Op& qop = p_.ops()[q];
      const Activation qa = qop.attr<DenseAttrs>().act;
      const bool bgrad = qop.out[2] != kNone && !qop.accumulate[2];
      GemmArgs af = ax;
      if (bgrad) af.bias = f(qop.out[2]);
      cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
      if (qa == Activation::ReLU) {
        auto m = relu_mask_.find(p_.producer(qop.in[3]));
        if (m != relu_mask_.end()) {
          af.aux = m->second.first;
          af.aux_ld = m->second.second;
          epi = bgrad ? CUBLASLT_EPILOGUE_DRELU_BGRAD : CUBLASLT_EPILOGUE_DRELU;
        }
      } else {
        af.aux = f(qop.in[4]);
        af.aux_ld = I;
        epi = bgrad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
      }
      if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
        if (GemmPlan* g = gemm(sx, epi, af)) {
          dz_ready_.insert(q);
          if (bgrad) db_done_.insert(q);
          return add_gemm(op, g, cat("dX gemm (fuses '", qop.name, "')").c_str());
        }
      }
    }
    GemmPlan* gx = gemm(sx, CUBLASLT_EPILOGUE_DEFAULT, ax);
    SG_REQUIRE(gx, "cuBLASLt has no algorithm for the input gradient of '", op.name, "'");
    add_gemm(op, gx, "dX gemm");
  }

  void optimizer(const Op& op) {
    const bool adam = op.kind == OpKind::AdamUpdate;
    const int64_t n = adam ? op.attr<AdamAttrs>().num_params : op.attr<SgdAttrs>().num_params;
    const bool has_m = adam || op.attr<SgdAttrs>().momentum != 0.0;
    std::vector<ChunkRef> chunks;
    for (int64_t k = 0; k < n; ++k) {
      ParamDesc d{};
      d.p = f(op.in[2 + k]);
      d.g = f(op.in[2 + n + k]);
      d.m = has_m ? f(op.in[2 + 2 * n + k]) : nullptr;
      d.v = adam ? f(op.in[2 + 3 * n + k]) : nullptr;
      d.n = count(op.in[2 + k]);
      for (int64_t start = 0; start < d.n; start += kOptimChunk) chunks.push_back({d, start});
    }
    auto* dchunk = reinterpret_cast<ChunkRef*>(own(chunks.size() * sizeof(ChunkRef)));
    be_.upload(dchunk, chunks.data(), chunks.size() * sizeof(ChunkRef));
    be_.synchronize();
    const int nchunks = static_cast<int>(chunks.size());
    const float *hyper = f(op.in[0]), *sched = f(op.in[1]);
    notes_ << "one multi-tensor launch: " << n << " tensors, " << nchunks << " blocks"
           << (fused_schedule_ ? ", schedule fused" : "");
    const std::optional<FusedSchedule> fs = fused_schedule_;
    fused_schedule_.reset();
    if (adam) {
      const AdamAttrs a = op.attr<AdamAttrs>();
      return add_step(op, [=](cudaStream_t s) { adam_update(dchunk, nchunks, hyper, sched, a, fs ? &*fs : nullptr, s); });
    }
    const SgdAttrs a = op.attr<SgdAttrs>();
    add_step(op, [=](cudaStream_t s) { sgd_update(dchunk, nchunks, hyper, sched, a, fs ? &*fs : nullptr, s); });
  }

  CudaBackend& be_;
  const Program& p_;
  const std::vector<void*>& ptrs_;
  LowerOptions opt_;
  bool fuse_;
  bool tc_;  // tf32x3 on a device with TF32 tensor cores: our products run 3xTF32 (own_gemm_tensor_cores)
  std::vector<Step> steps_;
  std::vector<DeviceBuffer> owned_;
  std::vector<std::unique_ptr<GemmPlan>> gemms_;
  std::ostringstream notes_;
  std::set<int> dz_ready_, db_done_;
  std::set<int> loss_dx_;  // dense backward ops whose dX the fused loss kernel before them writes
  FusionPlan fusions_;  // which ops share a launch (fusion_plan.h); empty with fusions off
  std::map<int, std::pair<void*, int64_t>> relu_mask_;
  std::map<int, const float*> jet_bias_;  // jet activation op -> the bias it adds (fused)
  std::map<int, JetDY> skinny_grads_;     // skinny dense backward -> its dW/db, formed by a jet backward
  std::map<int, int> fused_loss_;         // loss op -> the dense op it computes (fused)
  std::map<int, int> loss_sum_;           // Add op -> the expression loss op whose kernel does it
  std::map<int, int> merged_loss_;        // expression loss op -> the one whose launch does it too
  std::optional<FusedSchedule> fused_schedule_;
  std::unique_ptr<ImageLowering> image_;
  std::unique_ptr<Collectives> coll_;               // data parallel (opt_.comm)
  std::map<int, std::vector<size_t>> fork_at_;      // op -> buckets to all-reduce after it
  std::map<TensorId, size_t> bucket_of_;            // gradient -> its bucket
  std::set<size_t> unjoined_;                       // buckets forked and not joined yet
  std::unique_ptr<SequenceLowering> sequence_;
  std::map<int, int> amax_in_graph_;              // AbsMax op -> the dense op whose cuDNN graph computes it
  int current_op_ = -1;                           // the op being lowered
  std::set<int> workspace_users_;                 // ops with cuBLASLt plans (one shared workspace)
  bool concurrent_ = false;                       // plan_streams put ops on a second stream
  std::map<int, std::string> amax_not_in_graph_;  // AbsMax op -> why its dense layer's graph could not
  std::vector<WgradRun> wgrad_runs_;              // batched weight gradients (plan_wgrad_runs)
  std::map<int, size_t> wgrad_run_of_;            // dense backward op -> its run in wgrad_runs_
#ifdef STEPGRAPH_HAVE_CUDNN
  std::vector<std::shared_ptr<ConvPlan>> dense_plans_;
  std::unique_ptr<plan_cache::PlanCache> dense_cache_;
#endif
};

}  // namespace

std::unique_ptr<Executable> lower_program(CudaBackend& be, const Program& p, const std::vector<void*>& ptrs,
                                          const LowerOptions& opt) {
  return Lowering(be, p, ptrs, opt).run();
}

}  // namespace sg::cuda
