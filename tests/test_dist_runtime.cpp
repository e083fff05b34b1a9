// Data-parallel runtime: the TCP rendezvous (threads on localhost), the launcher (processes of
// /bin/sh), the planner's gradient layout, and NCCL training on GPUs: world size 1 through the
// same NCCL path (one GPU), and 2 ranks against 1 rank on the doubled batch (two GPUs). The GPU
// tests skip, saying why, without a GPU, without NCCL, or with fewer than 2 GPUs.
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <sstream>
#include <thread>

#include "stepgraph/distributed.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"
#include "test_util.h"

namespace sg::test {
namespace {

dist::World rank_of(int rank, int size, int port) {
  dist::World w;
  w.rank = rank, w.size = size, w.local_rank = rank;
  w.master_addr = "127.0.0.1", w.master_port = port;
  w.launcher = "torchrun";
  return w;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Rendezvous, EveryRankGetsRankZerosPayload) {
  for (int size : {2, 4}) {
    const int port = dist::free_port();
    const std::string id(128, '\0');
    std::string payload = id;
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7 + size);  // zeros included
    std::vector<std::future<std::string>> got;
    // Rank 0 starts last: the others retry until it listens.
    for (int r = size - 1; r >= 0; --r)
      got.push_back(std::async(std::launch::async, [=] {
        if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return dist::rendezvous(rank_of(r, size, port), r == 0 ? payload : std::string("ignored"), 20);
      }));
    for (auto& f : got) EXPECT_EQ(f.get(), payload) << "world of " << size;
  }
  // Alone: no sockets, the payload comes straight back.
  dist::World one;
  EXPECT_EQ(dist::rendezvous(one, "abc", 1), "abc");
}

TEST(Rendezvous, TimesOutWithTheRankAndTheAddress) {
  const int port = dist::free_port();
  const auto t0 = std::chrono::steady_clock::now();
  // Rank 0 never comes.
  std::string e = error_of([&] { dist::rendezvous(rank_of(1, 2, port), "", 1.0); });
  EXPECT_NE(e.find("rank 1 could not reach rank 0 at 127.0.0.1:" + std::to_string(port)), std::string::npos) << e;
  EXPECT_NE(e.find("within 1 s"), std::string::npos) << e;
  // Rank 0 alone: it names the ranks that never connected.
  e = error_of([&] { dist::rendezvous(rank_of(0, 3, port), "x", 1.0); });
  EXPECT_NE(e.find("ranks 1, 2 never connected"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST(Rendezvous, RefusesInconsistentWorlds) {
  const int port = dist::free_port();
  auto peer = std::async(std::launch::async, [=] {
    return error_of([&] { dist::rendezvous(rank_of(1, 3, port), "", 3.0); });
  });
  const std::string e = error_of([&] { dist::rendezvous(rank_of(0, 2, port), "id", 3.0); });
  EXPECT_NE(e.find("rank 1 says the world has 3 ranks, rank 0 says 2"), std::string::npos) << e;
  EXPECT_NE(peer.get().find("rank 1"), std::string::npos);
  EXPECT_NE(error_of([] { dist::rendezvous(rank_of(0, 2, 0), "", 1); }).find("needs MASTER_ADDR and MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(error_of([] { dist::rendezvous(rank_of(0, 2, 1), "", 0); }).find("timeout must be positive"),
            std::string::npos);
}

TEST(Distributed, TimeoutAndMpirunDefaults) {
  using Env = std::map<std::string, std::string>;
  auto getter = [](const Env& env) {
    return [env](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    };
  };
  EXPECT_EQ(dist::timeout_from_env(getter({})), dist::kDefaultTimeoutS);
  EXPECT_EQ(dist::timeout_from_env(getter({{"SG_DIST_TIMEOUT", "2.5"}})), 2.5);
  EXPECT_THROW(dist::timeout_from_env(getter({{"SG_DIST_TIMEOUT", "0"}})), Error);
  EXPECT_THROW(dist::timeout_from_env(getter({{"SG_DIST_TIMEOUT", "soon"}})), Error);
  // Under mpirun the rendezvous defaults to one host; MASTER_ADDR/PORT override.
  dist::World w = dist::world_from_env(getter({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(w.master_addr, "127.0.0.1");
  EXPECT_EQ(w.master_port, 29500);
  w = dist::world_from_env(getter({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                   {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(w.master_addr, "node7");
  EXPECT_EQ(w.master_port, 1234);
}

TEST(Launch, RankEnvironment) {
  dist::LaunchOptions o;
  o.nprocs = 4;
  auto env = dist::rank_environment(o, 2, 29511);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m["RANK"], "2");
  EXPECT_EQ(m["LOCAL_RANK"], "2");
  EXPECT_EQ(m["WORLD_SIZE"], "4");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(m["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(m["MASTER_PORT"], "29511");
  EXPECT_EQ(m["NCCL_NVLS_ENABLE"], "0");  // NVLink multicast off unless the user set it
  env = dist::rank_environment(o, 0, 29511, "1");
  m = std::map<std::string, std::string>(env.begin(), env.end());
  EXPECT_EQ(m["NCCL_NVLS_ENABLE"], "1");
  // What a launched rank sees is exactly what world_from_env reads.
  const dist::World w = dist::world_from_env([&](const char* n) -> const char* {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second.c_str();
  });
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.master_port, 29511);
  EXPECT_THROW(dist::rank_environment(o, 4, 29511), Error);
  EXPECT_THROW(dist::rank_environment(o, 0, 0), Error);
  o.nprocs = 0;
  EXPECT_THROW(dist::rank_environment(o, 0, 1), Error);
  const int p = dist::free_port();
  EXPECT_GT(p, 0);
  EXPECT_LT(p, 65536);
}

TEST(Launch, RunsEveryRankAndPrefixesTheirOutput) {
  dist::LaunchOptions o;
  o.nprocs = 3;
  std::ostringstream out, err;
  const int rc = dist::launch_local(
      o, {"/bin/sh", "-c", "echo \"r=$RANK of $WORLD_SIZE local $LOCAL_RANK nvls $NCCL_NVLS_ENABLE at $MASTER_ADDR\"; echo oops >&2"},
      out, err);
  EXPECT_EQ(rc, 0) << err.str();
  const std::string o_ = out.str(), e_ = err.str();
  EXPECT_NE(o_.find("r=0 of 3 local 0 nvls"), std::string::npos) << o_;
  EXPECT_EQ(o_.find("[rank 0]"), std::string::npos) << "rank 0's lines stay plain: " << o_;
  EXPECT_NE(o_.find("[rank 1] r=1 of 3 local 1"), std::string::npos) << o_;
  EXPECT_NE(o_.find("[rank 2] r=2 of 3 local 2"), std::string::npos) << o_;
  EXPECT_NE(o_.find("at 127.0.0.1\n"), std::string::npos) << o_;
  EXPECT_NE(e_.find("[rank 2] oops"), std::string::npos) << e_;
}

TEST(Launch, OneFailingRankStopsTheOthers) {
  dist::LaunchOptions o;
  o.nprocs = 3;
  o.kill_grace_s = 2;
  std::ostringstream out, err;
  const auto t0 = std::chrono::steady_clock::now();
  // Rank 1 fails at once; ranks 0 and 2 would run for a minute (they ignore nothing: SIGTERM ends them).
  const int rc = dist::launch_local(o, {"/bin/sh", "-c", "if [ $RANK = 1 ]; then echo bad config >&2; exit 3; fi; sleep 60"},
                                    out, err);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(rc, 3);
  EXPECT_LT(took, 30.0);
  EXPECT_NE(err.str().find("[rank 1] bad config"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("launch: rank 1 exited with status 3; stopping the other ranks"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("launch: failed: rank 1 (status 3) of 3"), std::string::npos) << err.str();
  // A command that cannot start is a failure too.
  std::ostringstream out2, err2;
  o.nprocs = 2;
  EXPECT_EQ(dist::launch_local(o, {"/nonexistent/stepgraph"}, out2, err2), 127);
  EXPECT_NE(err2.str().find("cannot execute"), std::string::npos) << err2.str();
  EXPECT_THROW(dist::launch_local(o, {}, out2, err2), Error);
}

// Every bucket of plan_buckets is one contiguous span of the persistent arena (the all-reduce
// then needs one NCCL call per bucket).
TEST(Distributed, GradientsLieInBackwardOrder) {
  auto shared = dense(16, Activation::Tanh);
  auto model = sequential({dense(16, Activation::ReLU), shared, shared, dense(5)});
  Built b = build(*model, SoftmaxCrossEntropy(), {8, 12}, true);
  const MemoryPlan plan = plan_memory(b.p);
  const auto order = dist::plan_buckets(b.p, 1);  // one gradient per bucket, in readiness order
  ASSERT_GE(order.size(), 6u);
  for (size_t i = 1; i < order.size(); ++i) {
    const Placement& prev = plan.at[order[i - 1].grads[0]];
    const Placement& cur = plan.at[order[i].grads[0]];
    EXPECT_EQ(prev.region, Placement::Region::Persistent);
    EXPECT_EQ(cur.offset, prev.offset + prev.bytes) << b.p.tensor(order[i].grads[0]).name;
  }
  // ... and nothing else lies between the first and the last gradient.
  const size_t lo = plan.at[order.front().grads[0]].offset;
  const size_t hi = plan.at[order.back().grads[0]].offset + plan.at[order.back().grads[0]].bytes;
  for (size_t t = 0; t < b.p.num_tensors(); ++t) {
    const TensorInfo& ti = b.p.tensor(static_cast<TensorId>(t));
    if (ti.role == Role::Gradient || plan.at[t].region != Placement::Region::Persistent) continue;
    EXPECT_TRUE(plan.at[t].offset + plan.at[t].bytes <= lo || plan.at[t].offset >= hi) << ti.name;
  }
}

TEST(Distributed, ConfigKeysAreChecked) {
  auto error_for = [](const char* key, nlohmann::json v) {
    nlohmann::json j = default_config();
    j["train"][key] = v;
    return error_of([&] { parse_config(j); });
  };
  EXPECT_NE(error_for("distributed", "mpi").find("train.distributed"), std::string::npos);
  EXPECT_NE(error_for("bucket_mb", 0).find("train.bucket_mb"), std::string::npos);
  EXPECT_NE(error_for("check_params", -1).find("train.check_params"), std::string::npos);
  nlohmann::json j = default_config();
  j["train"]["distributed"] = "nccl";
  j["train"]["bucket_mb"] = 4;
  j["train"]["check_params"] = 50;
  const RunConfig c = parse_config(j);
  EXPECT_EQ(c.train.distributed, "nccl");
  EXPECT_EQ(c.train.bucket_mb, 4);
  EXPECT_EQ(c.train.check_params, 50);
}

TEST(Distributed, NcclAvailabilityIsExplained) {
  std::string why;
  if (!dist::nccl_available(&why)) {
    EXPECT_FALSE(why.empty());
    EXPECT_TRUE(why.find("NCCL") != std::string::npos || why.find("libnccl") != std::string::npos) << why;
    std::printf("NCCL: not available: %s\n", why.c_str());
  } else {
    std::printf("NCCL: libnccl.so.2 loaded\n");
  }
}

// ---- GPU and NCCL ----

#define REQUIRE_NCCL_GPUS(n)                                                                      \
  do {                                                                                            \
    std::string why_;                                                                             \
    if (!cuda_available(&why_)) GTEST_SKIP() << "no GPU: " << why_;                               \
    if (!dist::nccl_available(&why_)) GTEST_SKIP() << "no NCCL: " << why_;                        \
    if (dist::device_count() < (n))                                                               \
      GTEST_SKIP() << "needs " << (n) << " GPUs, this machine has " << dist::device_count();      \
  } while (0)

struct Batches {
  std::vector<HostArray> X, y;
};
Batches make_batches(int steps, int64_t rows, int64_t D, int64_t C, uint64_t seed) {
  Batches b;
  for (int s = 0; s < steps; ++s) {
    b.X.push_back(random_f32({rows, D}, seed + 2 * s));
    b.y.push_back(random_labels(rows, C, seed + 2 * s + 1));
  }
  return b;
}
HostArray rows_of(const HostArray& a, int64_t first, int64_t n) {
  Shape s = a.shape();
  const int64_t per = a.numel() / s[0];
  s[0] = n;
  HostArray out(a.dtype(), s);
  std::memcpy(out.raw(), static_cast<const char*>(a.raw()) + first * per * dtype_size(a.dtype()), out.nbytes());
  return out;
}

LayerPtr mlp(int64_t C) {
  return sequential({dense(64, Activation::ReLU), dense(48, Activation::GELU), dense(32, Activation::Tanh), dense(C)});
}

// World size 1 through the whole NCCL path (rendezvous skipped, communicator, buckets forked on
// the side stream and joined before Adam, in a captured graph) trains exactly like no NCCL.
TEST(Nccl, WorldOfOneEqualsSingleProcess) {
  REQUIRE_NCCL_GPUS(1);
  dist::use_device(0);
  auto comm = dist::Communicator::create(dist::World{}, 60);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->all_gather(0x1234abcdull, "test"), std::vector<uint64_t>{0x1234abcdull});
  const int64_t B = 32, D = 20, C = 7;
  const int steps = 30;
  const Batches data = make_batches(steps, B, D, C, 500);
  for (ExecMode mode : {ExecMode::Graph, ExecMode::Eager}) {
    for (int64_t bucket : {int64_t{1}, int64_t{4096}, dist::kDefaultBucketBytes}) {
      auto model = mlp(C);
      auto loss = std::make_shared<SoftmaxCrossEntropy>();
      auto opt = std::make_shared<AdamW>(3e-3, 1e-4);
      TrainerOptions plain;
      plain.mode = mode;
      TrainerOptions dp = plain;
      dp.lower.comm = comm;
      dp.lower.bucket_bytes = bucket;
      Trainer a(model, loss, opt, Device::CUDA, 11, plain), b(model, loss, opt, Device::CUDA, 11, dp);
      a.compile({B, D});
      b.compile({B, D});
      ASSERT_NE(b.explain().find("data-parallel: gradients averaged over 1 rank"), std::string::npos) << b.explain();
      for (int s = 0; s < steps; ++s) {
        const float la = a.one_step(data.X[s], data.y[s]), lb = b.one_step(data.X[s], data.y[s]);
        ASSERT_EQ(la, lb) << "step " << s << " mode " << exec_mode_name(mode) << " bucket " << bucket;
      }
      if (mode == ExecMode::Graph) EXPECT_GT(b.graph_nodes(), a.graph_nodes()) << "the all-reduces are in the graph";
      EXPECT_EQ(b.step(), steps);
      const auto pa = a.params(), pb = b.params();
      for (const auto& [name, x] : pa) {
        ASSERT_EQ(x.nbytes(), pb.at(name).nbytes());
        EXPECT_EQ(std::memcmp(x.raw(), pb.at(name).raw(), x.nbytes()), 0)
            << name << " differs (mode " << exec_mode_name(mode) << ", bucket " << bucket << " bytes)";
      }
      // Evaluation programs have no gradients and no collectives.
      EXPECT_NEAR(a.evaluate(data.X[0], data.y[0]).loss, b.evaluate(data.X[0], data.y[0]).loss, 1e-6);
    }
  }
}

// The whole training run (`stepgraph train` with train.distributed "nccl"): communicator on
// device 0, checksums, loss averaged over ranks, shards of world 1, host-fed and device-resident,
// gives the plain run's losses exactly.
TEST(Nccl, TrainRunThroughNcclEqualsThePlainRun) {
  REQUIRE_NCCL_GPUS(1);
  for (bool resident : {false, true}) {
    nlohmann::json j = default_config();
    j["train"]["steps"] = 120;
    j["train"]["device"] = "cuda";
    j["train"]["log_every"] = 40;
    j["data"]["device_resident"] = resident;
    const RunConfig plain = parse_config(j);
    j["train"]["distributed"] = "nccl";
    j["train"]["check_params"] = 30;
    j["train"]["bucket_mb"] = 0.05;  // several buckets
    const RunConfig dp = parse_config(j);
    std::ostringstream out_plain, out_dp;
    RunOptions o;
    o.out = &out_plain;
    const RunSummary a = train_run(plain, o);
    o.out = &out_dp;
    const RunSummary b = train_run(dp, o);
    EXPECT_NE(out_dp.str().find("data-parallel: 1 rank (NCCL"), std::string::npos) << out_dp.str();
    EXPECT_EQ(a.steps, b.steps);
    EXPECT_EQ(a.final_loss, b.final_loss) << (resident ? "resident" : "host-fed");
    EXPECT_EQ(a.val_loss, b.val_loss);
    EXPECT_EQ(a.val_accuracy, b.val_accuracy);
  }
}

// A data-parallel run's heartbeat (RunOptions::progress_seconds, here every step) is rank 0's
// screen line without the loss: it reads nothing from the other ranks, so it cannot leave them
// waiting in a collective, and the run trains as one without heartbeats does.
TEST(Nccl, ADataParallelHeartbeatIsTheLeadersLineWithoutTheLoss) {
  REQUIRE_NCCL_GPUS(1);
  nlohmann::json j = default_config();
  j["train"]["steps"] = 30;
  j["train"]["device"] = "cuda";
  j["train"]["log_every"] = 1000;
  j["train"]["distributed"] = "nccl";
  const RunConfig dp = parse_config(j);
  std::ostringstream beats, quiet;
  RunOptions o;
  o.out = &beats;
  o.progress_seconds = 1e-9;
  const RunSummary a = train_run(dp, o);
  o.out = &quiet;
  o.progress_seconds = 0;
  const RunSummary b = train_run(dp, o);
  const std::string screen = beats.str();
  for (int s = 1; s < 30; ++s)
    EXPECT_NE(screen.find(cat("step ", s, "/30  ")), std::string::npos) << screen;
  EXPECT_EQ(screen.find("step 1/30  loss"), std::string::npos) << screen;
  EXPECT_NE(screen.find("step 30/30  loss "), std::string::npos) << "the last step is a log point\n" << screen;
  EXPECT_EQ(quiet.str().find("step 1/30"), std::string::npos) << quiet.str();
  EXPECT_EQ(a.final_loss, b.final_loss);
  EXPECT_EQ(a.val_loss, b.val_loss);
}

// Two ranks (threads, one GPU each) on their halves of each batch end with the parameters of one
// process trained on the whole batch, after 100 steps; both ranks agree bitwise. The tolerance is
// fp32 rounding (the two sum the batch in different orders) grown over 100 steps: tight for SGD
// with momentum; for Adam about one step's size (lr), since Adam's normalized update can turn a
// rounding-level difference of a near-zero gradient into a full step.
TEST(Nccl, TwoRanksEqualOneRankOnTheDoubledBatch) {
  REQUIRE_NCCL_GPUS(2);
  const int64_t B = 24, D = 16, C = 5;
  const int steps = 100;
  const Batches data = make_batches(steps, 2 * B, D, C, 900);
  auto model = mlp(C);
  auto loss = std::make_shared<SoftmaxCrossEntropy>();
  struct Case {
    const char* name;
    OptimizerPtr opt;
    double abs, rel;
  };
  const Case cases[] = {{"sgd momentum", std::make_shared<SGD>(0.05, 0.9), 1e-5, 1e-4},
                        {"adamw", std::make_shared<AdamW>(1e-3, 1e-4), 2e-3, 1e-2}};
  for (const Case& c : cases) {
    const int port = dist::free_port();
    std::map<std::string, HostArray> ranks[2];
    std::string errors[2];
    std::vector<std::thread> th;
    for (int r = 0; r < 2; ++r)
      th.emplace_back([&, r] {
        try {
          dist::use_device(r);
          const dist::World w = rank_of(r, 2, port);
          TrainerOptions o;
          o.lower.comm = dist::Communicator::create(w, 120);
          o.lower.bucket_bytes = 8192;  // several buckets
          Trainer t(model, loss, c.opt, Device::CUDA, 5, o);
          t.compile({B, D});
          const dist::Shard sh = dist::shard_of(B, w);
          for (int s = 0; s < steps; ++s) t.one_step(rows_of(data.X[s], sh.begin, B), rows_of(data.y[s], sh.begin, B));
          ranks[r] = t.params();
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : th) t.join();
    ASSERT_EQ(errors[0], "") << c.name;
    ASSERT_EQ(errors[1], "") << c.name;
    dist::use_device(0);
    Trainer one(model, loss, c.opt, Device::CUDA, 5);
    one.compile({2 * B, D});
    for (int s = 0; s < steps; ++s) one.one_step(data.X[s], data.y[s]);
    double worst = 0;
    for (const auto& [name, x] : one.params()) {
      const auto ref = to_double(x), r0 = to_double(ranks[0].at(name)), r1 = to_double(ranks[1].at(name));
      for (size_t k = 0; k < ref.size(); ++k) {
        ASSERT_EQ(r0[k], r1[k]) << c.name << " " << name << "[" << k << "]: the ranks drifted apart";
        worst = std::max(worst, std::abs(r0[k] - ref[k]));
        ASSERT_TRUE(near(r0[k], ref[k], c.abs, c.rel)) << c.name << " " << name << "[" << k << "]";
      }
    }
    std::printf("%s: 2 ranks vs 1 rank on the doubled batch, %d steps: largest difference %.3g\n", c.name, steps, worst);
  }
}

// A rank that stops launching: the other one's step cannot finish, and after the timeout it fails
// with its rank and the all-reduce that did not finish, instead of hanging; its process then tears
// down and exits with an error, and the launcher stops the stopped rank. The ranks are processes
// (this test binary again, running NcclRank.HangScenario under `launch_local`), as in real use.
// NCCL's abort waits for the host's other ranks to abort too, which the stopped rank never does:
// the failing rank gives its abort Communicator::kAbortWaitS and then goes on to exit.
TEST(Nccl, AHungRankIsReportedNotWaitedForForever) {
  REQUIRE_NCCL_GPUS(2);
  dist::LaunchOptions o;
  o.nprocs = 2;
  o.kill_grace_s = 5;
  setenv("SG_TEST_HANG_SCENARIO", "1", 1);
  std::ostringstream out, err;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = dist::launch_local(o, {"/proc/self/exe", "--gtest_filter=NcclRank.HangScenario"}, out, err);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("SG_TEST_HANG_SCENARIO");
  const std::string log = out.str() + err.str();
  EXPECT_EQ(rc, 3) << log;  // rank 0's exit status after its error
  EXPECT_NE(err.str().find("launch: failed: rank 0"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 0 error: data-parallel: rank 0 of 2"), std::string::npos) << log;
  EXPECT_NE(log.find("all-reduce of gradient bucket"), std::string::npos) << log;
  EXPECT_NE(log.find("did not finish within 5 s"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 0: torn down"), std::string::npos) << "rank 0's teardown after the abort hung: " << log;
  EXPECT_EQ(log.find("rank 1: nobody stopped me"), std::string::npos) << "the launcher did not stop rank 1: " << log;
  EXPECT_LT(took, 60.0) << log;  // start-up + 5 s timeout + 10 s abort wait + 5 s grace, not rank 1's 90 s
  std::printf("hung rank: reported and stopped in %.1f s\n", took);
}

// One rank of the test above, in a process of its own (skipped unless that test started it). Rank
// 1 stops after 5 steps and sleeps (alive, its communicator open); rank 0 keeps stepping until its
// all-reduce times out, tears down like the CLI does, and exits with status 3.
TEST(NcclRank, HangScenario) {
  if (!std::getenv("SG_TEST_HANG_SCENARIO"))
    GTEST_SKIP() << "one rank of Nccl.AHungRankIsReportedNotWaitedForForever; runs only in the processes that test starts";
  const dist::World w = dist::world_from_env();
  ASSERT_EQ(w.size, 2);
  dist::use_device(w.local_rank);
  const int64_t B = 16, D = 8, C = 3;
  std::string error;
  {
    TrainerOptions o;
    o.lower.comm = dist::Communicator::create(w, 5.0);
    Trainer t(mlp(C), std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<SGD>(0.01), Device::CUDA, 1, o);
    t.compile({B, D});
    const HostArray X = random_f32({B, D}, 3 + w.rank), y = random_labels(B, C, 4 + w.rank);
    const int my_steps = w.rank == 0 ? 100000 : 5;
    try {
      for (int s = 0; s < my_steps; ++s) t.one_step(X, y);
    } catch (const Error& e) {
      error = e.what();
    }
    std::fprintf(stderr, "rank %d error: %s\n", w.rank, error.empty() ? "(none)" : error.c_str());
    if (w.rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(90));  // the launcher stops this process
      std::fprintf(stderr, "rank 1: nobody stopped me\n");
    }
  }
  std::fprintf(stderr, "rank %d: torn down\n", w.rank);
  std::fflush(stdout), std::fflush(stderr);
  if (error.empty()) return;
  // As the CLI ends after an error: at once while NCCL's abort still runs, else normally.
  if (dist::aborts_left_running() > 0) std::_Exit(3);
  std::exit(3);
}

}  // namespace
}  // namespace sg::test
