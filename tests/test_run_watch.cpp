// Runs that watch themselves: the non-finite watch of the schedule op (train.on_nan stop | skip |
// continue) on the CPU and CUDA, NaN through activations, and the run's records: metrics.csv, the
// callback that stops a run, and early stopping with the best parameters restored.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "stepgraph/custom_optimizer.h"
#include "stepgraph/safetensors.h"
#include "run_test_util.h"
#include "test_util.h"

namespace sg::test {
namespace {

using nlohmann::json;

LayerPtr small_mlp() { return sequential({dense(8, Activation::ReLU), dense(2)}); }

TrainerOptions with(NanPolicy p, ExecMode mode = ExecMode::Graph) {
  TrainerOptions o;
  o.on_nan = p;
  o.mode = mode;
  return o;
}

// A NaN target at step 3 of 5: the watch records it, and each policy does its part to the update.
struct Poisoned {
  std::unique_ptr<Trainer> t;
  std::map<std::string, HostArray> before, after;  // the parameters around step 3
  Poisoned(OptimizerPtr opt, NanPolicy p, Device d = Device::CPU, ExecMode mode = ExecMode::Graph, double clip = 0) {
    if (clip > 0) opt->set_clip_norm(clip);
    t = std::make_unique<Trainer>(small_mlp(), std::make_shared<MeanSquaredError>(), opt, d, 7, with(p, mode));
    t->compile({4, 3});
    const HostArray X = random_f32({4, 3}, 1), y = random_f32({4, 2}, 2);
    HostArray bad = y;
    bad.data<float>()[5] = NAN;
    for (int s = 1; s <= 5; ++s) {
      if (s == 3) before = t->params();
      t->one_step(X, s == 3 ? bad : y);
      if (s == 3) after = t->params();
    }
  }
};

bool all_finite(const std::map<std::string, HostArray>& ps) {
  for (const auto& [name, a] : ps)
    for (int64_t i = 0; i < a.numel(); ++i)
      if (!std::isfinite(a.data<float>()[i])) return false;
  return true;
}

bool same(const std::map<std::string, HostArray>& a, const std::map<std::string, HostArray>& b) {
  for (const auto& [name, x] : a)
    if (std::memcmp(x.raw(), b.at(name).raw(), x.nbytes()) != 0) return false;
  return true;
}

TEST(NanWatch, RecordsTheFirstNonFiniteStepAndSkipLeavesItsUpdateOut) {
  for (auto make : std::vector<std::function<OptimizerPtr()>>{[] { return std::make_shared<Adam>(1e-2); },
                                                              [] { return std::make_shared<SGD>(1e-2, 0.9); },
                                                              [] { return std::make_shared<Lion>(1e-3); }}) {
    const std::string name = make()->describe();
    Poisoned skip(make(), NanPolicy::Skip);
    EXPECT_EQ(skip.t->nonfinite_steps().first, 3) << name;
    EXPECT_EQ(skip.t->nonfinite_steps().count, 1) << name;
    EXPECT_TRUE(same(skip.before, skip.after)) << name << ": a skipped step changed the parameters";
    EXPECT_TRUE(all_finite(skip.t->params())) << name;
    EXPECT_EQ(skip.t->step(), 5) << name << ": a skipped step still counts";

    Poisoned cont(make(), NanPolicy::Continue);
    EXPECT_EQ(cont.t->nonfinite_steps().first, 3) << name;
    // Lion's sign of a NaN is 0, so its parameters stay finite; the others take the NaN.
    if (name.rfind("lion", 0) != 0) EXPECT_FALSE(all_finite(cont.after)) << name << ": continue applies the NaN update";
  }
}

TEST(NanWatch, AClippedGradientNormThatIsNotFiniteIsWatchedToo) {
  Poisoned p(std::make_shared<Adam>(1e-2), NanPolicy::Skip, Device::CPU, ExecMode::Graph, 1.0);
  EXPECT_EQ(p.t->nonfinite_steps().first, 3);
  EXPECT_TRUE(same(p.before, p.after));
}

TEST(NanWatch, CheckpointsLeaveTheWatchOutAndStillLoad) {
  Poisoned p(std::make_shared<Adam>(1e-2), NanPolicy::Skip);
  const std::string path = fresh_dir("run_watch", "ckpt") + "/c.safetensors";
  p.t->save(path);
  const SafetensorsFile f = read_safetensors(path);
  for (const auto& [name, a] : f.tensors) EXPECT_FALSE(is_step_status(name)) << name;
  Trainer q(small_mlp(), std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CPU, 7);
  q.compile({4, 3});
  q.load(path);
  EXPECT_EQ(q.step(), 5);
  EXPECT_EQ(q.nonfinite_steps().count, 0);  // the watch is this trainer's own
}

TEST(NanWatch, CudaGraphAndEagerMatchTheCpu) {
  REQUIRE_GPU();
  for (double clip : {0.0, 1.0})
    for (auto make : std::vector<std::function<OptimizerPtr()>>{[] { return std::make_shared<Adam>(1e-2); },
                                                                [] { return std::make_shared<SGD>(1e-2, 0.9); },
                                                                [] { return std::make_shared<Lion>(1e-3); }}) {
      const std::string name = cat(make()->describe(), " clip ", clip);
      Poisoned cpu(make(), NanPolicy::Skip, Device::CPU, ExecMode::Eager, clip);
      for (ExecMode mode : {ExecMode::Graph, ExecMode::Eager}) {
        Poisoned gpu(make(), NanPolicy::Skip, Device::CUDA, mode, clip);
        EXPECT_EQ(gpu.t->nonfinite_steps().first, 3) << name;
        EXPECT_EQ(gpu.t->nonfinite_steps().count, 1) << name;
        EXPECT_TRUE(same(gpu.before, gpu.after)) << name << ": a skipped step changed the parameters on CUDA";
        for (const auto& [n, a] : cpu.t->params()) {
          const HostArray b = gpu.t->params().at(n);
          for (int64_t i = 0; i < a.numel(); ++i)
            ASSERT_TRUE(near(b.data<float>()[i], a.data<float>()[i], 1e-5, 1e-4)) << name << " " << n << "[" << i << "]";
        }
      }
    }
}

TEST(NanWatch, ReluPropagatesNaNAsPyTorchDoes) {
  Trainer t(sequential({dense(3, Activation::ReLU)}), std::make_shared<MeanSquaredError>(),
            std::make_shared<SGD>(0.1), Device::CPU, 1);
  t.compile({2, 2});
  HostArray X = HostArray::f32({2, 2}, {NAN, 1.0f, 0.5f, -0.25f});
  const HostArray y = t.predict(X);
  for (int j = 0; j < 3; ++j) {
    EXPECT_TRUE(std::isnan(y.data<float>()[j])) << "row 0 column " << j;
    EXPECT_FALSE(std::isnan(y.data<float>()[3 + j])) << "row 1 column " << j;
  }
}

// On CUDA the relu runs in library epilogues (cuBLASLt RELU_BIAS, the relu mask for backward):
// a NaN row must still come out NaN through two relu layers, as on the CPU.
TEST(NanWatch, ReluPropagatesNaNOnCuda) {
  REQUIRE_GPU();
  for (ExecMode mode : {ExecMode::Graph, ExecMode::Eager}) {
    TrainerOptions o;
    o.mode = mode;
    Trainer t(sequential({dense(64, Activation::ReLU), dense(64, Activation::ReLU), dense(3)}),
              std::make_shared<MeanSquaredError>(), std::make_shared<SGD>(0.1), Device::CUDA, 1, o);
    t.compile({64, 16});
    HostArray X = random_f32({64, 16}, 3);
    X.data<float>()[5 * 16 + 2] = NAN;  // row 5
    const HostArray y = t.predict(X);
    for (int64_t r = 0; r < 64; ++r)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(std::isnan(y.data<float>()[r * 3 + j]), r == 5) << "row " << r << " column " << j;
  }
}

// ---- Runs ----

json regression(double lr, const std::string& on_nan) {
  json j = json::parse(R"({
    "model": {"layers": [{"type": "dense", "units": 16, "activation": "tanh"}, {"type": "dense", "units": 1}]},
    "loss": {"type": "mse"},
    "optimizer": {"type": "sgd"},
    "data": {"source": "synthetic_regression", "samples": 256, "features": 4, "seed": 3},
    "train": {"steps": 40, "batch_size": 32, "log_every": 10, "device": "cpu"}
  })");
  j["optimizer"]["lr"] = lr;
  j["train"]["on_nan"] = on_nan;
  if (lr > 1e3) {  // one that diverges within a few steps: linear layers, momentum
    j["model"]["layers"] = json::parse(R"([{"type": "dense", "units": 64}, {"type": "dense", "units": 64},
                                           {"type": "dense", "units": 1}])");
    j["optimizer"]["momentum"] = 0.9;
  }
  return j;
}

TEST(RunWatch, StopNamesTheFirstNonFiniteStepAndKeepsTheLastGoodCheckpoint) {
  json j = regression(1e6, "stop");
  j["train"]["checkpoint_every"] = 1;
  const std::string out = fresh_dir("run_watch", "stop") + "/run";
  Training r(out);
  const std::string e = error_of([&] { r.train(j); });
  EXPECT_TRUE(contains_all(e, {"the loss or gradient norm became NaN or inf at step ", "training diverged",
                               "train.on_nan \"skip\"", "the last checkpoint, '" + out + "/checkpoint.safetensors'"}))
      << e;
}

TEST(RunWatch, SkipAndContinueFinishAndReportTheNonFiniteSteps) {
  Training skip;
  const RunSummary s = skip.train(regression(1e6, "skip"));
  EXPECT_EQ(s.steps, 40);
  EXPECT_GT(s.nonfinite.count, 0);
  EXPECT_GE(s.nonfinite.first, 1);
  EXPECT_NE(skip.sink.str().find("non-finite step"), std::string::npos) << skip.sink.str();
  EXPECT_EQ(s.to_json()["nonfinite_steps"], s.nonfinite.count);

  Training cont;
  const RunSummary c = cont.train(regression(1e6, "continue"));
  EXPECT_EQ(c.steps, 40);
  EXPECT_GT(c.nonfinite.count, 0);
  EXPECT_ERROR(parse_config(regression(0.1, "later")), "train.on_nan: unknown value \"later\"; allowed: stop, skip, continue");
}

TEST(RunRecords, MetricsCsvHoldsARowPerProgressAndEvalRecord) {
  json j = regression(0.05, "stop");
  j["train"]["eval_every"] = 20;
  const std::string out = fresh_dir("run_watch", "csv") + "/run";
  Training r(out);
  r.train(j);
  std::istringstream csv(read_bytes(out + "/metrics.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("event,step,", 0), 0u) << header;
  EXPECT_NE(header.find(",loss"), std::string::npos) << header;
  EXPECT_NE(header.find(",val_loss"), std::string::npos) << header;
  int progress = 0, eval = 0;
  for (std::string line; std::getline(csv, line);) {
    progress += line.rfind("progress,", 0) == 0;
    eval += line.rfind("eval,", 0) == 0;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), std::count(header.begin(), header.end(), ',')) << line;
  }
  EXPECT_EQ(progress, 4);  // steps 10, 20, 30, 40
  EXPECT_EQ(eval, 2);      // step 20, and the final one at 40
}

TEST(RunRecords, ACallbackReturningFalseStopsTheRunAsAFinishedOne) {
  const std::string out = fresh_dir("run_watch", "callback") + "/run";
  Training r(out);
  std::vector<int64_t> seen;
  r.o.callback = [&](const json& rec) {
    if (rec["event"] == "progress") seen.push_back(rec["step"].get<int64_t>());
    return rec["step"].get<int64_t>() < 20;
  };
  const RunSummary s = r.train(regression(0.05, "stop"));
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.stopped_by, "callback");
  EXPECT_EQ(seen, (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(s.checkpoint, out + "/checkpoint.safetensors");
}

TEST(RunRecords, EarlyStoppingStopsAfterPatienceAndRestoresTheBest) {
  json j = regression(0.05, "stop");
  j["train"]["steps"] = 200;
  j["train"]["eval_every"] = 10;
  // No later evaluation can improve by 1e9: the run stops after the first plus `patience`.
  j["train"]["early_stopping"] = {{"patience", 2}, {"min_delta", 1e9}};
  Training r;
  const RunSummary s = r.train(j);
  EXPECT_EQ(s.stopped_by, "early_stopping");
  EXPECT_EQ(s.steps, 30);
  EXPECT_EQ(s.best_step, 10);
  EXPECT_NE(r.sink.str().find("early stopping at step 30: val_loss has not improved"), std::string::npos) << r.sink.str();

  // The summary's val_loss is the best evaluation's: its parameters were restored.
  json once = regression(0.05, "stop");
  once["train"]["steps"] = 10;
  Training ten;
  EXPECT_DOUBLE_EQ(ten.train(once).val_loss, s.val_loss);

  // A run that reaches its last step: the state it ends with is a candidate too. With this lr
  // every evaluation improves, so the last one (step 45, not a multiple of eval_every) is the
  // best and the run keeps it: the same figures as a run without early stopping.
  json full = regression(0.01, "stop");
  full["train"]["steps"] = 45;
  full["train"]["eval_every"] = 10;
  const RunSummary plain = Training().train(full);
  full["train"]["early_stopping"] = {{"patience", 100}};
  Training kept;
  const RunSummary k = kept.train(full);
  EXPECT_EQ(k.stopped_by, "");
  EXPECT_EQ(k.best_step, 45);
  EXPECT_DOUBLE_EQ(k.val_loss, plain.val_loss);
  EXPECT_EQ(kept.sink.str().find("restored the parameters"), std::string::npos) << kept.sink.str();
  // Where an earlier evaluation stays best, its parameters come back and the run says so.
  EXPECT_NE(r.sink.str().find("restored the parameters of step 10, the best val_loss"), std::string::npos)
      << r.sink.str();

  json bad = j;
  bad["train"]["eval_every"] = 0;
  EXPECT_ERROR(Training().train(bad), "train.early_stopping: needs train.eval_every > 0");
  bad = j;
  bad["train"]["early_stopping"]["metric"] = "val_accuracy";
  EXPECT_ERROR(Training().train(bad), "train.early_stopping.metric: \"val_accuracy\" is not a metric of this run; it has: val_loss");
  bad = j;
  bad["train"]["early_stopping"]["wait"] = 3;
  EXPECT_ERROR(parse_config(bad), "train.early_stopping.wait: unknown key");
}

}  // namespace
}  // namespace sg::test
