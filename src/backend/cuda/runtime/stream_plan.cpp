#include "backend/cuda/runtime/stream_plan.h"

#include <string>

#include "stepgraph/core.h"

namespace sg::cuda {

namespace {

struct Range {
  uintptr_t b, e;
  bool write;
};

}  // namespace

bool plan_streams(const Program& p, const std::vector<void*>& ptrs, std::vector<Step>& steps,
                  const std::vector<std::pair<int, int>>& links, const std::set<int>& workspace_users,
                  std::ostream& notes) {
  const auto& ops = p.ops();
  const size_t n = ops.size();
  std::vector<int> first_step(n, -1), last_step(n, -1);
  std::vector<bool> once(n, false);  // ran before the step (Step::once): no part of it
  for (size_t k = 0; k < steps.size(); ++k) {
    const int o = steps[k].op;
    if (o < 0) return false;  // a step outside any op: leave the step serial
    if (steps[k].once) {
      once[o] = true;
      continue;
    }
    if (first_step[o] < 0) first_step[o] = static_cast<int>(k);
    last_step[o] = static_cast<int>(k);
  }
  std::vector<std::vector<Range>> own_fp(n);
  for (size_t i = 0; i < n; ++i) {
    auto add = [&](TensorId t, bool write) {
      if (t == kNone || !ptrs[t]) return;
      const TensorInfo& ti = p.tensor(t);
      const uintptr_t b = reinterpret_cast<uintptr_t>(ptrs[t]);
      own_fp[i].push_back({b, b + static_cast<uintptr_t>(numel(ti.shape)) * dtype_size(ti.dtype), write});
    };
    for (TensorId t : ops[i].in) add(t, t != kNone && p.tensor(t).role == Role::Temporary);
    for (TensorId t : ops[i].out) add(t, true);
    if (workspace_users.count(static_cast<int>(i))) own_fp[i].push_back({1, 2, true});  // the workspace
  }
  std::vector<std::set<int>> partners(n);
  auto link = [&](int a, int b) {
    if (a < 0 || b < 0 || a == b) return;
    partners[a].insert(b);
    partners[b].insert(a);
  };
  for (const auto& [a, b] : links) link(a, b);
  // An op whose work another launch does without a recorded fusion (the schedule inside the
  // optimizer launch) belongs with the next op that launches anything.
  for (size_t i = 0; i < n; ++i) {
    if (first_step[i] >= 0 || once[i] || !partners[i].empty()) continue;
    size_t j = i + 1;
    while (j < n && first_step[j] < 0) ++j;
    if (j < n) link(static_cast<int>(i), static_cast<int>(j));
  }
  std::vector<std::vector<Range>> fp = own_fp;
  for (size_t i = 0; i < n; ++i)
    for (int q : partners[i]) fp[i].insert(fp[i].end(), own_fp[q].begin(), own_fp[q].end());
  auto conflict = [&](size_t a, size_t b) {
    for (const Range& x : fp[a])
      for (const Range& y : fp[b])
        if ((x.write || y.write) && x.b < y.e && y.b < x.e) return true;
    return false;
  };
  std::vector<int> stream(n, 0);
  int waited[2] = {-1, -1};  // per stream: the latest op of the other stream already waited for
  int prev = -1, waits = 0;
  std::vector<std::string> side;
  std::vector<int> deps;
  for (size_t j = 0; j < n; ++j) {
    if (first_step[j] < 0) continue;  // no work of its own (fused into another op)
    deps.clear();
    bool on[2] = {false, false};
    for (size_t i = 0; i < j; ++i)
      if (first_step[i] >= 0 && conflict(i, j)) deps.push_back(static_cast<int>(i)), on[stream[i]] = true;
    stream[j] = on[0] ? 0 : on[1] ? 1 : prev >= 0 ? 1 - stream[prev] : 0;
    int latest_other = -1;
    for (int i : deps)
      if (stream[i] != stream[j]) latest_other = i;
    for (int k = first_step[j]; k <= last_step[j]; ++k) steps[k].stream = stream[j];
    if (latest_other > waited[stream[j]]) {
      steps[first_step[j]].wait_for = last_step[latest_other];
      steps[last_step[latest_other]].record = true;
      waited[stream[j]] = latest_other;
      ++waits;
    }
    if (stream[j] == 1) side.push_back(cat(j, " '", ops[j].name, "'"));
    prev = static_cast<int>(j);
  }
  if (side.empty()) {
    for (Step& s : steps) s.stream = 0, s.wait_for = -1, s.record = false;
    return false;
  }
  notes << "concurrent branches: " << side.size() << " ops on a second stream (";
  for (size_t k = 0; k < side.size(); ++k) notes << (k ? ", " : "") << side[k];
  notes << "), " << waits << " cross-stream waits; joined at the end of the step\n";
  return true;
}

}  // namespace sg::cuda
