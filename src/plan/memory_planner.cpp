#include <algorithm>
#include <iterator>
#include <sstream>

#include "stepgraph/core.h"
#include "stepgraph/plan.h"

namespace sg {

namespace {

size_t align_up(size_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

// Free-list allocator over one growing region.
class FirstFit {
 public:
  size_t allocate(size_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      size_t off = it->first;
      it->first += bytes;
      it->second -= bytes;
      if (it->second == 0) free_.erase(it);
      return off;
    }
    // Extend the region; a free block touching the top grows instead of being skipped.
    if (!free_.empty() && free_.back().first + free_.back().second == top_) {
      size_t off = free_.back().first;
      free_.pop_back();
      top_ = off + bytes;
      peak_ = std::max(peak_, top_);
      return off;
    }
    size_t off = top_;
    top_ += bytes;
    peak_ = std::max(peak_, top_);
    return off;
  }
  void release(size_t off, size_t bytes) {
    auto it = std::lower_bound(free_.begin(), free_.end(), std::make_pair(off, size_t{0}));
    it = free_.insert(it, {off, bytes});
    // Merge with neighbours.
    if (std::next(it) != free_.end() && it->first + it->second == std::next(it)->first) {
      it->second += std::next(it)->second;
      free_.erase(std::next(it));
    }
    if (it != free_.begin() && std::prev(it)->first + std::prev(it)->second == it->first) {
      std::prev(it)->second += it->second;
      free_.erase(it);
    }
  }
  size_t peak() const { return peak_; }

 private:
  std::vector<std::pair<size_t, size_t>> free_;  // (offset, size), sorted by offset
  size_t top_ = 0, peak_ = 0;
};

}  // namespace

MemoryPlan plan_memory(const Program& p, const std::vector<LifetimeHint>& extend) {
  const int n_ops = static_cast<int>(p.ops().size());
  const int end = std::max(n_ops - 1, 0);
  MemoryPlan plan;
  plan.at.resize(p.num_tensors());

  // Lifetimes: from the first op touching the tensor to the last.
  std::vector<bool> used(p.num_tensors(), false);
  for (int i = 0; i < n_ops; ++i) {
    const Op& op = p.ops()[i];
    auto touch = [&](TensorId t) {
      if (t == kNone) return;
      Placement& pl = plan.at[t];
      if (!used[t]) pl.first = i;
      used[t] = true;
      pl.last = i;
    };
    for (TensorId t : op.in) touch(t);
    for (TensorId t : op.out) touch(t);
  }
  for (const LifetimeHint& h : extend) {
    SG_REQUIRE(h.tensor >= 0 && static_cast<size_t>(h.tensor) < p.num_tensors() && h.last >= 0 && h.last < n_ops,
               "memory plan: lifetime hint for tensor ", h.tensor, " until op ", h.last, " is outside the program (",
               p.num_tensors(), " tensors, ", n_ops, " ops)");
    if (used[h.tensor]) plan.at[h.tensor].last = std::max(plan.at[h.tensor].last, h.last);
  }

  // Persistent tensors in creation order, except gradients: they come last, in the order backward
  // finishes them (their last writer), so every all-reduce bucket of data-parallel training (a
  // run of consecutive gradients in that order, dist::plan_buckets) is one contiguous span.
  std::vector<int> last_write(p.num_tensors(), -1);
  for (int i = 0; i < n_ops; ++i)
    for (TensorId t : p.ops()[i].out)
      if (t != kNone) last_write[t] = i;
  std::vector<TensorId> persistent_order, grads;
  for (size_t t = 0; t < p.num_tensors(); ++t) {
    const Role r = p.tensor(static_cast<TensorId>(t)).role;
    if (r == Role::Gradient) grads.push_back(static_cast<TensorId>(t));
    else if (is_persistent(r)) persistent_order.push_back(static_cast<TensorId>(t));
  }
  std::stable_sort(grads.begin(), grads.end(), [&](TensorId a, TensorId b) { return last_write[a] < last_write[b]; });
  persistent_order.insert(persistent_order.end(), grads.begin(), grads.end());
  size_t persistent = 0;
  for (TensorId t : persistent_order) {
    const TensorInfo& info = p.tensor(t);
    Placement& pl = plan.at[t];
    pl.bytes = align_up(nbytes(info.shape, info.dtype));
    pl.region = Placement::Region::Persistent;
    pl.offset = persistent;
    SG_REQUIRE(!__builtin_add_overflow(persistent, pl.bytes, &persistent),
               "the step's parameters, gradients and state need more bytes than a 64-bit size can hold");
    pl.first = 0;
    pl.last = end;
  }
  for (size_t t = 0; t < p.num_tensors(); ++t) {
    const TensorInfo& info = p.tensor(static_cast<TensorId>(t));
    Placement& pl = plan.at[t];
    pl.bytes = align_up(nbytes(info.shape, info.dtype));
    if (is_persistent(info.role)) {
      continue;
    } else {
      SG_REQUIRE(!__builtin_add_overflow(plan.transient_unshared, pl.bytes, &plan.transient_unshared),
                 "the step's activations need more bytes than a 64-bit size can hold");
      if (info.role == Role::Input || info.live_out || !used[t]) {
        pl.first = 0;  // input slots and results are never reused within a step
        pl.last = end;
      }
    }
  }
  plan.persistent_bytes = persistent;
  // The step-invariant prefix's outputs (ir.h invariant_prefix) may be computed once and read in
  // every later step: like results, they are never reused within the step.
  std::vector<bool> kept(p.num_tensors(), false);
  const size_t fixed_ops = invariant_prefix(p);
  for (size_t i = 0; i < fixed_ops; ++i)
    for (TensorId t : p.ops()[i].out)
      if (t != kNone && plan.at[t].region != Placement::Region::Persistent) {
        kept[t] = true;
        plan.at[t].first = 0;
        plan.at[t].last = end;
      }

  // Walk the ops: place what starts here, then free what ends here.
  FirstFit alloc;
  std::vector<std::vector<TensorId>> starts(n_ops + 1), ends(n_ops + 1);
  for (size_t t = 0; t < p.num_tensors(); ++t) {
    if (plan.at[t].region == Placement::Region::Persistent) continue;
    starts[plan.at[t].first].push_back(static_cast<TensorId>(t));
    ends[plan.at[t].last].push_back(static_cast<TensorId>(t));
  }
  for (int i = 0; i <= n_ops; ++i) {
    for (TensorId t : starts[i]) plan.at[t].offset = alloc.allocate(plan.at[t].bytes);
    for (TensorId t : ends[i]) {
      const TensorInfo& info = p.tensor(t);
      if (info.role == Role::Input || info.live_out || kept[t]) continue;
      alloc.release(plan.at[t].offset, plan.at[t].bytes);
    }
  }
  plan.transient_bytes = alloc.peak();
  return plan;
}

std::string describe_plan(const Program& p, const MemoryPlan& plan) {
  std::ostringstream os;
  auto kib = [](size_t b) { return cat(b / 1024.0, " KiB"); };
  os << "  persistent: " << kib(plan.persistent_bytes)
     << " (parameters, gradients, optimizer state, step scalars)\n"
     << "  transient:  " << kib(plan.transient_bytes) << " peak (" << kib(plan.transient_unshared)
     << " without reuse)\n"
     << "  total peak: " << kib(plan.peak_bytes()) << "\n";
  os << "  tensors:\n";
  for (size_t t = 0; t < p.num_tensors(); ++t) {
    const TensorInfo& info = p.tensor(static_cast<TensorId>(t));
    const Placement& pl = plan.at[t];
    os << "    " << (pl.region == Placement::Region::Persistent ? "P" : "T") << " @"
       << pl.offset << " " << pl.bytes << "B ops[" << pl.first << "," << pl.last << "] "
       << info.name << " " << dtype_name(info.dtype) << shape_str(info.shape) << " ("
       << role_name(info.role) << ")\n";
  }
  return os.str();
}

}  // namespace sg
