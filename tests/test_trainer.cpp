// The Trainer end to end on the CPU backend: training, parameters in and out, checkpoints,
// shape changes, and its error paths.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "stepgraph/config.h"
#include "stepgraph/run.h"
#include "stepgraph/safetensors.h"
#include "stepgraph/trainer.h"
#include "test_util.h"

namespace sg::test {
namespace {

std::string tmp(const std::string& name) {
  auto p = std::filesystem::path(SG_TEST_TMPDIR) / name;
  std::filesystem::remove_all(p);
  return p.string();
}

std::unique_ptr<Trainer> seed_trainer(uint64_t seed = 3) {
  auto t = std::make_unique<Trainer>(sequential({dense(32, Activation::ReLU), dense(5)}),
                                     std::make_shared<SoftmaxCrossEntropy>(),
                                     std::make_shared<AdamW>(1e-2, 0.9, 0.999, 1e-8, 1e-4), Device::CPU, seed);
  t->compile({16, 8});
  return t;
}

bool same_params(const std::map<std::string, HostArray>& a, const std::map<std::string, HostArray>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second.nbytes() != v.nbytes() ||
        std::memcmp(it->second.raw(), v.raw(), v.nbytes()) != 0)
      return false;
  }
  return true;
}

TEST(Trainer, LossFallsOnAFixedBatchAndStepCounts) {
  auto t = seed_trainer();
  HostArray X = random_f32({16, 8}, 1), y = random_labels(16, 5, 2);
  float first = t->one_step(X, y);
  float last = first;
  for (int i = 0; i < 50; ++i) last = t->one_step(X, y);
  EXPECT_LT(last, 0.2f * first);
  EXPECT_EQ(t->step(), 51);
  EXPECT_EQ(t->launch_count(), 51);
  EXPECT_EQ(t->compile_count(), 1);
  // logits() are the last step's predictions: its forward pass ran before the update.
  HostArray z = t->logits();
  EXPECT_EQ(z.shape(), (Shape{16, 5}));
}

TEST(Trainer, InitialisationIsSeededPerName) {
  auto a = seed_trainer(7), b = seed_trainer(7), c = seed_trainer(8);
  EXPECT_TRUE(same_params(a->params(), b->params()));
  EXPECT_FALSE(same_params(a->params(), c->params()));
  auto p = a->params();
  EXPECT_EQ(p.at("0.weight").shape(), (Shape{32, 8}));
  EXPECT_EQ(p.at("1.bias").shape(), (Shape{5}));
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(p.at("1.bias").data<float>()[i], 0.0f);
}

TEST(Trainer, ParamsRoundTripAndSetParamsIsAllOrNothing) {
  auto t = seed_trainer();
  auto p = t->params();
  p["0.bias"] = random_f32({32}, 9);
  t->set_params({{"0.bias", p["0.bias"]}});
  EXPECT_TRUE(same_params(t->params(), p));
  auto before = t->params();
  // One good and one bad entry: nothing is written.
  EXPECT_THROW(t->set_params({{"0.weight", random_f32({32, 8}, 4)}, {"1.weight", random_f32({5, 31}, 5)}}), Error);
  EXPECT_THROW(t->set_params({{"nope", random_f32({1}, 4)}}), Error);
  EXPECT_TRUE(same_params(t->params(), before));
}

TEST(Trainer, LearningRateChangeNeedsNoRecompile) {
  auto t = seed_trainer();
  HostArray X = random_f32({16, 8}, 1), y = random_labels(16, 5, 2);
  t->one_step(X, y);
  t->set_lr(0.5);
  EXPECT_NEAR(t->lr(), 0.5, 1e-7);
  auto before = t->params();
  t->one_step(X, y);
  EXPECT_EQ(t->compile_count(), 1);
  // A 50x larger Adam step moves the weights by about lr per element.
  double moved = 0;
  auto after = t->params();
  for (int64_t i = 0; i < 32 * 8; ++i)
    moved = std::max<double>(moved, std::fabs(after["0.weight"].data<float>()[i] - before["0.weight"].data<float>()[i]));
  EXPECT_GT(moved, 0.1);
  EXPECT_THROW(t->set_lr(-1), Error);
}

TEST(Trainer, BatchSizeChangeCompilesOnceAndKeepsParameters) {
  auto t = seed_trainer();
  HostArray X = random_f32({16, 8}, 1), y = random_labels(16, 5, 2);
  t->one_step(X, y);
  auto p = t->params();
  HostArray X2 = random_f32({4, 8}, 3), y2 = random_labels(4, 5, 4);
  t->one_step(X2, y2);
  EXPECT_EQ(t->compile_count(), 2);
  t->one_step(X, y);
  t->one_step(X2, y2);
  EXPECT_EQ(t->compile_count(), 2);  // both shapes cached
  EXPECT_EQ(t->step(), 4);
  t->invalidate();
  EXPECT_FALSE(t->is_compiled());
  EXPECT_THROW(t->launch(), Error);
  t->compile({16, 8});
  EXPECT_EQ(t->step(), 4);  // parameters and optimizer state survive invalidate()
}

TEST(Trainer, PredictAndEvaluateAgreeWithLogits) {
  auto t = seed_trainer();
  HostArray X = random_f32({16, 8}, 1), y = random_labels(16, 5, 2);
  for (int i = 0; i < 5; ++i) t->one_step(X, y);
  HostArray X3 = random_f32({37, 8}, 11), y3 = random_labels(37, 5, 12);
  HostArray pred = t->predict(X3);
  EXPECT_EQ(pred.shape(), (Shape{37, 5}));
  // Reference: the float64 forward of the current parameters.
  Built b = build(*t->model(), *t->loss_fn(), {37, 8}, false);
  std::map<std::string, std::vector<double>> v;
  for (auto& [k, a] : t->params()) v[k] = to_double(a);
  v["input"] = to_double(X3);
  v["target"] = to_double(y3);
  EvalResult r = t->evaluate(X3, y3);
  EXPECT_TRUE(near(r.loss, eval_double(b.p, v), 1e-5, 1e-5));
  int correct = 0;
  for (int i = 0; i < 37; ++i) {
    const float* z = pred.data<float>() + i * 5;
    correct += std::max_element(z, z + 5) - z == y3.data<int32_t>()[i];
  }
  EXPECT_NEAR(r.accuracy, correct / 37.0, 1e-12);
  EXPECT_EQ(r.count, 37);
}

TEST(Trainer, BadBatchesAreClearErrors) {
  Trainer fresh(sequential({dense(4)}), std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<SGD>(0.1));
  EXPECT_THROW(fresh.one_step(random_f32({2, 3}, 1), random_labels(2, 4, 1)), Error);
  auto t = seed_trainer();
  try {
    t->set_batch(random_f32({16, 9}, 1), random_labels(16, 5, 2));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[16, 9]"), std::string::npos) << e.what();
  }
  HostArray y = random_labels(16, 5, 2);
  y.data<int32_t>()[3] = 5;
  try {
    t->set_batch(random_f32({16, 8}, 1), y);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t->set_batch(random_f32({16, 8}, 1), random_f32({16}, 2)), Error);
}

TEST(Trainer, ExplainShowsProgramPlanAndGradientScale) {
  auto t = seed_trainer();
  std::string s = t->explain();
  for (const char* want : {"gradient scale 0.0625", "mean over 16 rows", "dense_backward", "adam_update",
                           "total peak", "persistent", "softmax_cross_entropy(mean)"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
}

TEST(Trainer, CheckpointRoundTripAndCorruptFilesChangeNothing) {
  auto t = seed_trainer();
  HostArray X = random_f32({16, 8}, 1), y = random_labels(16, 5, 2);
  for (int i = 0; i < 3; ++i) t->one_step(X, y);
  const std::string path = tmp("ckpt.safetensors");
  t->save(path);
  auto saved = t->params();
  for (int i = 0; i < 3; ++i) t->one_step(X, y);
  auto trained = t->params();

  // Truncated copies: load fails and the trainer keeps its state.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (size_t cut : {size_t{0}, size_t{7}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    std::ofstream(tmp("bad.safetensors"), std::ios::binary) << bytes.substr(0, cut);
    EXPECT_THROW(t->load((std::filesystem::path(SG_TEST_TMPDIR) / "bad.safetensors").string()), Error);
    EXPECT_TRUE(same_params(t->params(), trained));
    EXPECT_EQ(t->step(), 6);
  }
  // A checkpoint of another model is refused.
  Trainer other(sequential({dense(7), dense(5)}), std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>());
  other.compile({2, 8});
  const std::string other_path = tmp("other.safetensors");
  other.save(other_path);
  EXPECT_THROW(t->load(other_path), Error);
  EXPECT_TRUE(same_params(t->params(), trained));

  t->load(path);
  EXPECT_TRUE(same_params(t->params(), saved));
  EXPECT_EQ(t->step(), 3);
}

TEST(Trainer, ResumeIsBitwiseIdenticalToAnUninterruptedRun) {
  // Through train_run, so the data order after resuming is checked too: 2N steps in one run
  // equal N steps, a checkpoint, and N more steps in a new process-like run.
  RunConfig cfg = parse_config(nlohmann::json::parse(R"({
    "model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 10}]},
    "optimizer": {"type": "adamw", "lr": 0.003, "schedule": {"type": "cosine", "warmup_steps": 5, "total_steps": 40}},
    "data": {"source": "digits"},
    "train": {"steps": 40, "batch_size": 32, "log_every": 0}
  })"));
  std::ostringstream sink;
  RunOptions o;
  o.out = &sink;
  o.out_dir = tmp("full");
  train_run(cfg, o);
  o.out_dir = tmp("half");
  o.steps = 20;
  train_run(cfg, o);
  o.out_dir = tmp("resumed");
  o.steps = 40;
  o.resume = std::string(SG_TEST_TMPDIR) + "/half/checkpoint.safetensors";
  RunSummary s = train_run(cfg, o);
  EXPECT_EQ(s.steps, 40);
  SafetensorsFile full = read_safetensors(std::string(SG_TEST_TMPDIR) + "/full/checkpoint.safetensors");
  SafetensorsFile resumed = read_safetensors(std::string(SG_TEST_TMPDIR) + "/resumed/checkpoint.safetensors");
  ASSERT_EQ(full.tensors.size(), resumed.tensors.size());
  for (size_t i = 0; i < full.tensors.size(); ++i) {
    const HostArray& a = full.tensors[i].second;
    const HostArray& b = resumed.tensors[i].second;
    EXPECT_EQ(full.tensors[i].first, resumed.tensors[i].first);
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << full.tensors[i].first << " differs";
  }
  // And the half-way state really differs from the end (the test could fail).
  SafetensorsFile half = read_safetensors(std::string(SG_TEST_TMPDIR) + "/half/checkpoint.safetensors");
  EXPECT_NE(std::memcmp(half.find("0.weight")->raw(), full.find("0.weight")->raw(), full.find("0.weight")->nbytes()), 0);
}

TEST(Trainer, DefaultConfigReachesNinetyFivePercentOnDigits) {
  RunConfig cfg = parse_config(default_config());
  std::ostringstream sink;
  RunOptions o;
  o.out = &sink;
  RunSummary s = train_run(cfg, o);
  EXPECT_GE(s.val_accuracy, 0.95) << sink.str();
  EXPECT_EQ(s.val_size, 360);
  EXPECT_EQ(s.steps, 1500);
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

// A dense layer built with amax records max |output| of each step's forward pass and changes
// nothing else: the losses and parameters equal those of the same model without it.
TEST(Trainer, DenseAmaxRecordsTheOutputRangeAndChangesNothingElse) {
  const int64_t B = 12, D = 5, H = 7;
  auto make = [&](bool amax) {
    return std::make_unique<Trainer>(sequential({dense(H, Activation::GELU, std::nullopt, true, amax), dense(3)}),
                                     std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<Adam>(1e-2),
                                     Device::CPU, 4);
  };
  auto with = make(true), without = make(false);
  with->compile({B, D});
  without->compile({B, D});
  EXPECT_TRUE(without->amax().empty());
  for (int s = 0; s < 3; ++s) {
    HostArray X = random_f32({B, D}, 500 + s), y = random_labels(B, 3, 600 + s);
    // The first layer's output with the parameters this step starts from, in float64.
    auto p = with->params();
    double want = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        double z = p.at("0.bias").data<float>()[h];
        for (int64_t i = 0; i < D; ++i) z += double(X.data<float>()[b * D + i]) * p.at("0.weight").data<float>()[h * D + i];
        const double g = 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
        want = std::max(want, std::fabs(g));
      }
    const float lw = with->one_step(X, y), lo = without->one_step(X, y);
    EXPECT_EQ(lw, lo) << "step " << s;
    const auto m = with->amax();
    ASSERT_EQ(m.size(), 1u);
    ASSERT_EQ(m.count("0.amax"), 1u);
    EXPECT_TRUE(near(m.at("0.amax"), want, 1e-6, 1e-5)) << "step " << s;
  }
  auto a = with->params(), b = without->params();
  for (auto& [name, v] : a) EXPECT_EQ(std::memcmp(v.raw(), b.at(name).raw(), v.nbytes()), 0) << name;
  EXPECT_NE(with->model()->describe().find("amax"), std::string::npos);
}

}  // namespace
}  // namespace sg::test
