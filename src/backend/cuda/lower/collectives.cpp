// Data parallel: the gradient buckets' all-reduces, forked on a side stream as backward
// finishes each bucket and joined before the first op that reads one.
#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

void Lowering::plan_collectives() {
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

void Lowering::fork_after(int i) {
  auto it = fork_at_.find(i);
  if (it == fork_at_.end()) return;
  Collectives* c = coll_.get();
  for (size_t k : it->second) {
    steps_.push_back({c->buckets[k].what, [c, k](cudaStream_t s) { c->fork(k, s); }});
    unjoined_.insert(k);
  }
}

void Lowering::join_before(int i, const Op& op) {
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

void Lowering::add_join(const std::string& before) {
  Collectives* c = coll_.get();
  notes_ << "  join: the step waits for the all-reduces before " << before << "\n";
  steps_.push_back({"join of the gradient all-reduces", [c](cudaStream_t s) { c->join(s); }});
  unjoined_.clear();
}

}  // namespace sg::cuda
