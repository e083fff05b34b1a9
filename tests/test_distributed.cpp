// Data-parallel planning without GPUs: the launch environment, the sharding rule (W ranks on
// their slices average to the gradient of the global batch) and the gradient buckets.
#include <cstring>
#include <map>

#include "stepgraph/distributed.h"
#include "stepgraph/trainer.h"
#include "test_util.h"

namespace sg::test {
namespace {

using Env = std::map<std::string, std::string>;
dist::World world(const Env& env) {
  return dist::world_from_env([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
void expect_error(const Env& env, const std::string& want) {
  try {
    world(env);
    ADD_FAILURE() << "no error; expected one containing: " << want;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(Distributed, WorldFromTheLaunchEnvironment) {
  dist::World w = world({});
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.launcher, "single");
  w = world({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(w.launcher, "torchrun");
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.master_addr, "10.0.0.1");
  EXPECT_EQ(w.master_port, 29500);
  w = world({{"RANK", "0"}, {"WORLD_SIZE", "1"}});  // one process needs no rendezvous
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.local_rank, 0);
  w = world({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(w.launcher, "mpirun");
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.local_rank, 1);

  expect_error({{"RANK", "1"}}, "RANK and WORLD_SIZE go together");
  expect_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 is outside [0, 1]");
  expect_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x' is not an integer");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 is outside");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "needs MASTER_ADDR");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}, "needs MASTER_PORT");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}},
               "MASTER_PORT=70000 is outside");
}

// The MPI bootstrap runs for real under mpirun: ctest's mpi_bootstrap_2_ranks starts this test
// binary as 2 Open MPI ranks with SG_EXPECT_MPI=1 (then it may not skip). Alone it skips.
TEST(Mpi, BootstrapBroadcastsRankZerosPayload) {
  const bool expected = std::getenv("SG_EXPECT_MPI") != nullptr;
  const dist::World w = dist::world_from_env();
  if (w.launcher != "mpirun") {
    ASSERT_FALSE(expected) << "SG_EXPECT_MPI is set but this process was not started by Open MPI's mpirun";
    GTEST_SKIP() << "not under mpirun (ctest runs it as mpi_bootstrap_2_ranks)";
  }
  std::string why;
  ASSERT_TRUE(dist::mpi_bootstrap_available(&why)) << why;
  ASSERT_EQ(w.size, 2);
  EXPECT_EQ(dist::rendezvous_method(w), "mpi");
  const std::string id("\0nccl id of rank 0\xff", 20);
  EXPECT_EQ(dist::rendezvous(w, w.rank == 0 ? id : std::string(), 60), id) << "rank " << w.rank;
}

TEST(Mpi, TheRendezvousMethodFollowsTheLauncher) {
  dist::World w;
  EXPECT_EQ(dist::rendezvous_method(w), "none");
  w.size = 2, w.launcher = "torchrun";
  EXPECT_EQ(dist::rendezvous_method(w), "tcp");
  w.launcher = "mpirun";
  setenv("SG_MPI_BOOTSTRAP", "0", 1);
  EXPECT_EQ(dist::rendezvous_method(w), "tcp");
  std::string why;
  EXPECT_FALSE(dist::mpi_bootstrap_available(&why));
  EXPECT_EQ(why, "SG_MPI_BOOTSTRAP=0");
  unsetenv("SG_MPI_BOOTSTRAP");
  EXPECT_EQ(dist::rendezvous_method(w), dist::mpi_bootstrap_available() ? "mpi" : "tcp");
}

TEST(Distributed, ShardsTileTheGlobalBatch) {
  for (int size : {1, 2, 3, 8}) {
    int64_t covered = 0;
    for (int r = 0; r < size; ++r) {
      dist::World w;
      w.size = size, w.rank = r;
      const dist::Shard s = dist::shard_of(16, w);
      EXPECT_EQ(s.global_batch, 16 * size);
      EXPECT_EQ(s.begin, covered);  // contiguous, in rank order, disjoint
      EXPECT_EQ(s.end - s.begin, 16);
      covered = s.end;
    }
    EXPECT_EQ(covered, 16 * size);
  }
  dist::World w;
  EXPECT_THROW(dist::shard_of(0, w), Error);
  w.size = 2, w.rank = 2;
  EXPECT_THROW(dist::shard_of(4, w), Error);
}

// What the rule promises: ranks that each train on their slice of the global batch, with their
// gradients averaged (the all-reduce), see the gradient of one process on the whole batch.
TEST(Distributed, AveragedShardGradientsEqualTheGlobalBatchGradient) {
  const int64_t per_rank = 8, D = 6, C = 3;
  auto model = sequential({dense(10, Activation::Tanh), dense(C)});
  auto loss = std::make_shared<SoftmaxCrossEntropy>();
  auto opt = std::make_shared<SGD>(0.01);  // gradients are read before anything else changes them
  HostArray X = random_f32({2 * per_rank, D}, 71), y = random_labels(2 * per_rank, C, 72);
  auto grads = [&](int64_t rows, int64_t first) {
    Trainer t(model, loss, opt, Device::CPU, 3);
    t.compile({rows, D});
    HostArray xs(DType::F32, {rows, D}), ys(DType::I32, {rows});
    std::memcpy(xs.raw(), X.data<float>() + first * D, xs.nbytes());
    std::memcpy(ys.raw(), y.data<int32_t>() + first, ys.nbytes());
    t.set_batch(xs, ys);
    t.launch();
    std::map<std::string, std::vector<double>> g;
    for (const TensorInfo& ti : t.program().tensors()) {
      if (ti.role != Role::Gradient) continue;
      HostArray a(DType::F32, ti.shape);
      t.backend().download(a.raw(), t.device_ptr(ti.name), a.nbytes());
      g[ti.name] = to_double(a);
    }
    return g;
  };
  auto whole = grads(2 * per_rank, 0);
  std::map<std::string, std::vector<double>> ranks[2];
  for (int r = 0; r < 2; ++r) {
    dist::World w;
    w.size = 2, w.rank = r;
    const dist::Shard s = dist::shard_of(per_rank, w);
    ranks[r] = grads(s.end - s.begin, s.begin);
  }
  ASSERT_FALSE(whole.empty());
  for (const auto& [name, g] : whole)
    for (size_t k = 0; k < g.size(); ++k)
      EXPECT_TRUE(near(0.5 * (ranks[0][name][k] + ranks[1][name][k]), g[k], 1e-6, 1e-5)) << name << "[" << k << "]";
}

TEST(Distributed, BucketsFollowBackwardOrder) {
  auto shared = dense(16, Activation::Tanh);
  auto model = sequential({dense(16, Activation::ReLU), shared, shared, dense(4)});
  Built b = build(*model, SoftmaxCrossEntropy(), {8, 12}, true);
  const Program& p = b.p;
  std::vector<TensorId> all;
  for (size_t t = 0; t < p.num_tensors(); ++t)
    if (p.tensor(static_cast<TensorId>(t)).role == Role::Gradient) all.push_back(static_cast<TensorId>(t));
  ASSERT_EQ(all.size(), 6u);  // three layers' weight and bias (the shared one once)

  // One byte per bucket: every gradient alone, in the order backward finishes them.
  auto single = dist::plan_buckets(p, 1);
  ASSERT_EQ(single.size(), all.size());
  for (size_t i = 1; i < single.size(); ++i) EXPECT_LE(single[i - 1].ready_after_op, single[i].ready_after_op);
  EXPECT_EQ(p.tensor(single.front().grads[0]).name.find("grad.3."), 0u) << "the last layer finishes first";
  // The shared layer's gradient is ready only after its second (accumulating) write.
  for (const dist::Bucket& bk : single) {
    int last = -1;
    for (size_t i = 0; i < p.ops().size(); ++i)
      for (TensorId o : p.ops()[i].out) last = o == bk.grads[0] ? static_cast<int>(i) : last;
    EXPECT_EQ(bk.ready_after_op, last) << p.tensor(bk.grads[0]).name;
  }
  // A large bucket takes everything, ready after the last gradient.
  auto one = dist::plan_buckets(p, dist::kDefaultBucketBytes);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].grads.size(), all.size());
  EXPECT_EQ(one[0].ready_after_op, single.back().ready_after_op);
  // In between: each gradient exactly once, every closed bucket at least the limit.
  const int64_t limit = 16 * 16 * 4;
  auto mid = dist::plan_buckets(p, limit);
  std::vector<TensorId> seen;
  for (size_t i = 0; i < mid.size(); ++i) {
    if (i + 1 < mid.size()) EXPECT_GE(mid[i].bytes, limit);
    seen.insert(seen.end(), mid[i].grads.begin(), mid[i].grads.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, all);
  EXPECT_THROW(dist::plan_buckets(p, 0), Error);
}

}  // namespace
}  // namespace sg::test
