// Memory planner invariants.
#include "test_util.h"
#include "stepgraph/optim.h"

namespace sg::test {
namespace {

void check_invariants(const Program& p, const MemoryPlan& plan) {
  for (size_t a = 0; a < p.num_tensors(); ++a) {
    const Placement& pa = plan.at[a];
    EXPECT_EQ(pa.offset % kArenaAlign, 0u) << p.tensor(a).name;
    EXPECT_GE(pa.bytes, numel(p.tensor(a).shape) * dtype_size(p.tensor(a).dtype));
    const size_t limit = pa.region == Placement::Region::Persistent ? plan.persistent_bytes : plan.transient_bytes;
    EXPECT_LE(pa.offset + pa.bytes, limit) << p.tensor(a).name;
    EXPECT_EQ(pa.region == Placement::Region::Persistent, is_persistent(p.tensor(a).role));
    for (size_t b = a + 1; b < p.num_tensors(); ++b) {
      const Placement& pb = plan.at[b];
      if (pa.region != pb.region) continue;
      bool live_together = pa.region == Placement::Region::Persistent ||
                           (pa.first <= pb.last && pb.first <= pa.last);
      bool overlap = pa.offset < pb.offset + pb.bytes && pb.offset < pa.offset + pa.bytes;
      EXPECT_FALSE(live_together && overlap)
          << p.tensor(a).name << " and " << p.tensor(b).name << " overlap while both live";
    }
  }
  // Every op's outputs are disjoint from its inputs (no kernel sees aliasing), unless in place.
  for (size_t i = 0; i < p.ops().size(); ++i) {
    const Op& op = p.ops()[i];
    for (TensorId o : op.out) {
      if (o == kNone) continue;
      EXPECT_LE(plan.at[o].first, static_cast<int>(i));
      EXPECT_GE(plan.at[o].last, static_cast<int>(i));
    }
    for (TensorId t : op.in) {
      if (t == kNone) continue;
      EXPECT_LE(plan.at[t].first, static_cast<int>(i)) << p.tensor(t).name << " read before placed";
      EXPECT_GE(plan.at[t].last, static_cast<int>(i)) << p.tensor(t).name << " freed before read";
    }
  }
}

Program step_program(Layer& model, Shape in) {
  Built b = build(model, SoftmaxCrossEntropy(), in, true);
  GraphBuilder g(b.p);
  AdamW(1e-3).build(g, b.grads);
  return std::move(b.p);
}

TEST(Planner, SeedMlpInvariants) {
  auto model = sequential({dense(256, Activation::ReLU), dense(11)});
  Program p = step_program(*model, {64, 128});
  MemoryPlan plan = plan_memory(p);
  check_invariants(p, plan);
  // params (128*256 + 256 + 256*11 + 11 floats) x 4 (param, grad, m, v), 256-aligned each.
  EXPECT_GE(plan.persistent_bytes, 4u * 4 * (128 * 256 + 256 + 256 * 11 + 11));
  EXPECT_LE(plan.transient_bytes, plan.transient_unshared);
}

TEST(Planner, DeepMlpReusesMemory) {
  std::vector<LayerPtr> layers;
  for (int i = 0; i < 8; ++i) layers.push_back(dense(64, Activation::Tanh));
  layers.push_back(dense(10));
  auto model = sequential(layers);
  Program p = step_program(*model, {32, 64});
  MemoryPlan plan = plan_memory(p);
  check_invariants(p, plan);
  // Backward frees activation gradients as it goes: strictly less than no reuse.
  EXPECT_LT(plan.transient_bytes, plan.transient_unshared);
}

TEST(Planner, ResidualDagInvariantsAndLiveOut) {
  auto model = sequential({dense(32, Activation::GELU), residual(sequential({dense(32, Activation::ReLU), dense(32)})), dense(5)});
  Program p = step_program(*model, {16, 8});
  MemoryPlan plan = plan_memory(p);
  check_invariants(p, plan);
  const int end = static_cast<int>(p.ops().size()) - 1;
  for (size_t t = 0; t < p.num_tensors(); ++t) {
    const TensorInfo& info = p.tensor(static_cast<TensorId>(t));
    if (info.live_out || info.role == Role::Input) {
      EXPECT_EQ(plan.at[t].first, 0) << info.name;
      EXPECT_EQ(plan.at[t].last, end) << info.name;
    }
  }
}

TEST(Planner, PersistentLayoutDoesNotDependOnBatch) {
  auto model = sequential({dense(16, Activation::ReLU), dense(3)});
  Program a = step_program(*model, {8, 4});
  Program b = step_program(*model, {100, 4});
  MemoryPlan pa = plan_memory(a), pb = plan_memory(b);
  EXPECT_EQ(pa.persistent_bytes, pb.persistent_bytes);
  for (size_t t = 0; t < a.num_tensors(); ++t) {
    const TensorInfo& info = a.tensor(static_cast<TensorId>(t));
    if (!is_persistent(info.role)) continue;
    TensorId u = b.find(info.name);
    ASSERT_NE(u, kNone) << info.name;
    EXPECT_EQ(pa.at[t].offset, pb.at[u].offset) << info.name;
  }
}

// A backend's lifetime hints (Backend::lifetime_hints: CUDA's batched weight gradients read each
// layer's dZ and X after its op): the hinted tensors stay live, and placed apart from everything
// written meanwhile, until the op named; a hint outside the program is an error.
TEST(Planner, LifetimeHintsKeepTensorsLive) {
  std::vector<LayerPtr> layers;
  for (int i = 0; i < 4; ++i) layers.push_back(dense(64, Activation::ReLU));
  layers.push_back(dense(10));
  auto model = sequential(layers);
  Program p = step_program(*model, {32, 64});
  std::vector<int> backward;
  for (size_t i = 0; i < p.ops().size(); ++i)
    if (p.ops()[i].kind == OpKind::DenseBackward) backward.push_back(static_cast<int>(i));
  ASSERT_GE(backward.size(), 3u);
  const int last = backward.back();
  std::vector<LifetimeHint> hints;
  for (int i : backward) hints.push_back({p.ops()[i].in[0], last}), hints.push_back({p.ops()[i].in[1], last});
  const MemoryPlan plain = plan_memory(p), kept = plan_memory(p, hints);
  check_invariants(p, kept);
  for (const LifetimeHint& h : hints) {
    EXPECT_GE(kept.at[h.tensor].last, last) << p.tensor(h.tensor).name;
    EXPECT_GE(kept.at[h.tensor].last, plain.at[h.tensor].last) << p.tensor(h.tensor).name;
  }
  // Without the hints the first backward op's dY dies there and its memory is reused.
  const TensorId dy = p.ops()[backward[0]].in[0];
  EXPECT_LT(plain.at[dy].last, last);
  EXPECT_GE(kept.transient_bytes, plain.transient_bytes);
  // A hint past the last op, or for a tensor that does not exist, names what is wrong.
  const int n_ops = static_cast<int>(p.ops().size());
  for (const LifetimeHint& bad : {LifetimeHint{dy, n_ops}, LifetimeHint{static_cast<TensorId>(p.num_tensors()), 0}}) {
    try {
      plan_memory(p, {bad});
      ADD_FAILURE() << "hint accepted: tensor " << bad.tensor << " until op " << bad.last;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is outside the program"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sg::test
