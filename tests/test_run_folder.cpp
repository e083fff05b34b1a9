// Run folders (src/train/run_folder.h) and checkpoints that know their setup: a failing or a
// second run never damages another run's files.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "run_test_util.h"

namespace sg::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json mlp(const std::string& act = "relu") {
  json j = json::parse(R"({
    "model": {"layers": [{"type": "dense", "units": 16}, {"type": "dense", "units": 10}]},
    "train": {"steps": 6, "batch_size": 16, "log_every": 1, "device": "cpu"}
  })");
  j["model"]["layers"][0]["activation"] = act;
  return j;
}

std::vector<int64_t> logged_steps(const std::string& metrics) {
  std::vector<int64_t> steps;
  std::istringstream in(read_bytes(metrics));
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.value("event", "") == "progress") steps.push_back(j["step"].get<int64_t>());
  }
  return steps;
}

TEST(RunFolder, AnotherRunIsRefusedContinuedOrReplacedOnRequest) {
  const std::string out = fresh_dir("run_folder", "refuse") + "/run";
  Training first(out);
  first.train(mlp());
  const std::string ckpt = out + "/checkpoint.safetensors", metrics = out + "/metrics.jsonl";
  const std::string saved = read_bytes(ckpt), saved_metrics = read_bytes(metrics);
  write_file(out, "loss.png", "a plot of this run");
  write_file(out, "notes.txt", "the user's own file");

  Training second(out);
  EXPECT_ERROR(second.train(mlp()), "output folder '" + out + "' holds an earlier run (config.json, metrics.jsonl, "
                                    "checkpoint.safetensors); continue it with --resume " + ckpt,
               "--overwrite");
  EXPECT_EQ(read_bytes(ckpt), saved);
  EXPECT_EQ(read_bytes(metrics), saved_metrics);

  second.o.overwrite = true;
  second.train(mlp("tanh"));
  EXPECT_NE(read_bytes(ckpt), saved);
  EXPECT_EQ(logged_steps(metrics), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));  // the new run's only
  EXPECT_FALSE(fs::exists(out + "/loss.png"));   // the old run's picture went with it
  EXPECT_TRUE(fs::exists(out + "/notes.txt"));   // what stepgraph did not write stays
  EXPECT_EQ(json::parse(read_bytes(out + "/config.json"))["model"]["layers"][0]["activation"], "tanh");
}

TEST(RunFolder, AFolderAnotherRunHoldsIsRefusedWithoutWritingAnything) {
  const std::string out = fresh_dir("run_folder", "locked");
  const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // as a running stepgraph holds it
  Training r(out);
  EXPECT_ERROR(r.train(mlp()), "output folder '" + out + "' is in use by another stepgraph run");
  EXPECT_TRUE(fs::is_empty(out));
  ::close(fd);
  EXPECT_EQ(r.train(mlp()).steps, 6);  // released: the folder is free again
}

TEST(RunFolder, ResumeRemovesStaleTemporariesAndRecordsPastTheCheckpoint) {
  const std::string out = fresh_dir("run_folder", "resume") + "/run";
  Training r(out);
  r.train(mlp());
  const std::string metrics = out + "/metrics.jsonl";
  // As if a run continued past its step-6 checkpoint and was killed, mid-line and mid-write.
  {
    std::ofstream m(metrics, std::ios::app);
    m << R"({"event":"progress","step":7,"loss":1.0})" << "\n" << R"({"event":"progress","step":8,"lo)";
  }
  const std::string dead = out + "/checkpoint.safetensors.tmp-999999999";  // beyond any pid
  const std::string live = out + "/checkpoint.safetensors.tmp-1";         // init is running
  write_file(out, fs::path(dead).filename().string(), "half a checkpoint");
  write_file(out, fs::path(live).filename().string(), "another process's");

  r.o.resume = out + "/checkpoint.safetensors";
  r.o.steps = 9;
  // Its weights alone would start a new run at step 0 in this folder: refused like any other.
  r.o.weights_only = true;
  EXPECT_ERROR(r.train(mlp()), "holds an earlier run", "a weights-only start is a new run");
  EXPECT_TRUE(fs::exists(dead));  // refused before anything in the folder changed
  r.o.weights_only = false;
  EXPECT_EQ(r.train(mlp()).steps, 9);
  EXPECT_EQ(logged_steps(metrics), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
}

TEST(RunFolder, AMetricsFileThatCannotBeWrittenIsAnError) {
  const std::string out = fresh_dir("run_folder", "full") + "/run";
  Training r(out);
  r.train(mlp());
  fs::remove(out + "/metrics.jsonl");
  fs::create_symlink("/dev/full", out + "/metrics.jsonl");
  r.o.resume = out + "/checkpoint.safetensors";
  r.o.steps = 8;
  EXPECT_ERROR(r.train(mlp()), "cannot write metrics file '" + out + "/metrics.jsonl': No space left on device");
}

TEST(RunFolder, BadDataIsRefusedBeforeTheFolderExists) {
  const std::string out = fresh_dir("run_folder", "bad_data") + "/run";
  json j = json::parse(R"({
    "model": {"layers": [{"type": "embedding", "vocab": 8, "dim": 16, "positions": 8},
                         {"type": "dense", "units": 11}]},
    "data": {"source": "sequence_task", "kind": "copy", "length": 4, "symbols": 10, "samples": 64},
    "train": {"device": "cpu", "batch_size": 16, "steps": 3}
  })");
  Training r(out);
  EXPECT_ERROR(r.train(j), "embedding: token id ", "is not an integer in [0, 8), the embedding's vocabulary");
  EXPECT_FALSE(fs::exists(out));
}

// ---------------------------------------------------------------------------------------------
// Checkpoints record the setup they come from.

// A compiled trainer of softmax cross-entropy on [8, 4] inputs.
std::unique_ptr<Trainer> compiled(std::vector<LayerPtr> layers, OptimizerPtr opt) {
  auto t = std::make_unique<Trainer>(sequential(std::move(layers)), std::make_shared<SoftmaxCrossEntropy>(), std::move(opt));
  t->compile({8, 4});
  return t;
}

TEST(Checkpoint, AnotherSetupIsRefusedListingTheDifferences) {
  const std::string dir = fresh_dir("run_folder", "setup");
  const std::string path = dir + "/relu.safetensors";
  auto relu_t = compiled({dense(16, Activation::ReLU), dense(10)}, std::make_shared<AdamW>(1e-3));
  Trainer& relu = *relu_t;
  relu.save(path);

  auto tanh_t = compiled({dense(16, Activation::Tanh), dense(10)}, std::make_shared<Adam>(1e-2));
  Trainer& tanh = *tanh_t;
  const auto before = tanh.params();
  EXPECT_ERROR(tanh.load(path), "checkpoint '" + path + "' was saved from another setup:\n  model: dense(16, relu, ",
               " in the checkpoint, dense(16, tanh, ", " here (item 0 of sequential(...))\n  optimizer: adamw(lr=0.001",
               " in the checkpoint, adam(lr=0.01", "weights-only");
  EXPECT_EQ(tanh.params().at("0.weight").numel(), before.at("0.weight").numel());
  EXPECT_EQ(std::memcmp(tanh.params().at("0.weight").raw(), before.at("0.weight").raw(), 16 * 4 * 4), 0);
  // The parameters alone, on purpose.
  tanh.load(path, LoadMode::WeightsOnly);
  EXPECT_EQ(std::memcmp(tanh.params().at("0.weight").raw(), relu.params().at("0.weight").raw(), 16 * 4 * 4), 0);
  EXPECT_EQ(tanh.step(), 0);
}

TEST(Checkpoint, EvaluateNeedsTheModelNotTheOptimizer) {
  const std::string path = fresh_dir("run_folder", "evaluate") + "/c.safetensors";
  auto a_t = compiled({dense(16, Activation::ReLU), dense(10)}, std::make_shared<AdamW>(1e-3));
  Trainer& a = *a_t;
  a.launch();
  a.save(path);
  auto b_t = compiled({dense(16, Activation::ReLU), dense(10)}, std::make_shared<SGD>(0.1));
  Trainer& b = *b_t;
  EXPECT_ERROR(b.load(path), "optimizer: adamw(");
  b.load(path, LoadMode::Evaluate);
  EXPECT_EQ(b.step(), 1);
  EXPECT_EQ(std::memcmp(b.params().at("1.weight").raw(), a.params().at("1.weight").raw(), 10 * 16 * 4), 0);
}

TEST(Checkpoint, WeightsOnlyNamesEveryMissingMismatchedAndExtraTensor) {
  const std::string path = fresh_dir("run_folder", "weights") + "/c.safetensors";
  auto three_t = compiled({dense(16, Activation::ReLU), dense(12), dense(10)}, std::make_shared<AdamW>(1e-3));
  Trainer& three = *three_t;
  three.save(path);
  auto two_t = compiled({dense(16, Activation::ReLU), dense(10)}, std::make_shared<AdamW>(1e-3));
  Trainer& two = *two_t;
  EXPECT_ERROR(two.load(path, LoadMode::WeightsOnly), "weights file '" + path + "' does not fit this model's parameters",
               "other shapes: '1.weight' is f32 [12, 16] there but f32 [10, 16] here",
               "'1.bias' is f32 [12] there but f32 [10] here", "not in this model: '2.weight', '2.bias'");
  // A weight of another shape is reported as that, not as missing too.
  EXPECT_EQ(error_of([&] { two.load(path, LoadMode::WeightsOnly); }).find("missing"), std::string::npos);
}


// A small physics-informed setup (the built-in heat equation), 3 steps on the CPU.
json heat() {
  return json::parse(R"({
    "model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]},
    "problem": {"type": "heat1d", "interior_points": 64, "boundary_points": 16, "eval_points": 64},
    "train": {"steps": 3, "device": "cpu"}
  })");
}

// Steps fewer than log_every: progress still reaches the screen, each line a heartbeat
// (RunOptions::progress_seconds, here every step) with its ETA, while metrics.jsonl keeps only
// the log_every lines (the last step's). Off (0): only the last step's line.
TEST(RunProgress, HeartbeatsReachTheScreenNotTheMetrics) {
  json sup = mlp();
  sup["train"]["log_every"] = 1000;
  json pinn = heat();
  pinn["train"] = {{"steps", 4}, {"log_every", 1000}, {"device", "cpu"}};
  for (const auto& [name, cfg] : {std::pair<const char*, json>{"supervised", sup}, {"physics-informed", pinn}}) {
    const int64_t steps = cfg["train"]["steps"].get<int64_t>();
    const std::string out = fresh_dir("run_progress", name) + "/run";
    Training t(out);
    t.o.progress_seconds = 1e-9;
    t.train(cfg);
    EXPECT_EQ(logged_steps(out + "/metrics.jsonl"), std::vector<int64_t>{steps}) << name;
    const std::string screen = t.sink.str();
    for (int64_t s = 1; s <= steps; ++s)
      EXPECT_NE(screen.find(cat("step ", s, "/", steps, "  loss ")), std::string::npos) << name << "\n" << screen;
    EXPECT_NE(screen.find(" steps/s  ETA "), std::string::npos) << name << "\n" << screen;

    Training quiet(out + "_quiet");
    quiet.o.progress_seconds = 0;
    quiet.train(cfg);
    EXPECT_EQ(quiet.sink.str().find(cat("step 1/", steps, " ")), std::string::npos) << name << "\n" << quiet.sink.str();
    EXPECT_NE(quiet.sink.str().find(cat("step ", steps, "/", steps)), std::string::npos) << name;
  }
}


// The Trainer behind a run (RunOptions::keep_trainer) and the one a configuration describes.
TEST(RunTrainer, ARunHandsOverItsTrainerAndAConfigMakesOne) {
  std::unique_ptr<Trainer> kept;
  RunOptions o;
  std::ostringstream sink;
  o.out = &sink;
  o.keep_trainer = &kept;
  const RunConfig cfg = parse_config(mlp());
  const RunSummary sum = train_run(cfg, o);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->step(), sum.steps);
  const HostArray p = kept->predict(load_digits().X);
  EXPECT_EQ(p.shape(), (Shape{1797, 10}));

  std::unique_ptr<Trainer> made = trainer_from_config(cfg);
  EXPECT_FALSE(made->is_compiled());  // supervised: the caller compiles for its batch
  made->compile({16, 64});
  EXPECT_EQ(made->step(), 0);
  EXPECT_EQ(made->params().at("0.weight").shape(), (Shape{16, 64}));

  const RunConfig pinn = parse_config(heat());
  std::unique_ptr<Trainer> solver = trainer_from_config(pinn, "cpu", 7);
  EXPECT_TRUE(solver->is_compiled());  // physics-informed: the step makes its own inputs
  EXPECT_EQ(solver->seed(), 7u);
  EXPECT_ERROR(trainer_from_config(cfg, "gpu"), "unknown device 'gpu'");
}


// stepgraph predict: a checkpoint's predictions for an .npy file's rows, with the training
// split's standardization applied as in training; an existing output and a wrong width refused.
TEST(RunPredict, PredictionsOfACheckpointForAnNpyFile) {
  json j = mlp();
  j["train"]["steps"] = 300;
  j["train"]["log_every"] = 0;
  j["data"] = {{"standardize", true}};
  const RunConfig cfg = parse_config(j);
  const std::string dir = fresh_dir("run_predict", "digits");
  Training run(dir + "/run");
  std::unique_ptr<Trainer> kept;
  run.o.keep_trainer = &kept;
  run.train(j);
  const std::string ckpt = dir + "/run/checkpoint.safetensors", input = dir + "/x.npy", output = dir + "/y.npy";
  const Dataset digits = load_digits();
  write_npy(input, digits.X);

  std::ostringstream sink;
  RunOptions o;
  o.out = &sink;
  const Shape shape = predict_run(cfg, ckpt, input, output, o);
  EXPECT_EQ(shape, (Shape{1797, 10}));
  const HostArray y = read_npy(output);
  ASSERT_EQ(y.shape(), shape);
  int64_t right = 0;  // raw features in, standardized before the model: most digits right
  for (int64_t i = 0; i < 1797; ++i) {
    const float* row = y.data<float>() + i * 10;
    right += std::max_element(row, row + 10) - row == digits.y.data<int32_t>()[i];
  }
  EXPECT_GT(right, 1797 * 8 / 10) << sink.str();
  EXPECT_NE(sink.str().find("predicted [1797, 10]"), std::string::npos) << sink.str();

  EXPECT_ERROR(predict_run(cfg, ckpt, input, output, o), "predict: the output '" + output + "' exists",
               "--overwrite");
  o.overwrite = true;
  EXPECT_NO_THROW(predict_run(cfg, ckpt, input, output, o));
  write_npy(input, HostArray::f32({2, 3}, {1, 2, 3, 4, 5, 6}));
  EXPECT_ERROR(predict_run(cfg, ckpt, input, output, o), "has 3 features per row; the model was trained on 64");
  write_npy(input, digits.y);  // an .npy file of integers, whatever their width, is read as i32
  EXPECT_ERROR(predict_run(cfg, ckpt, input, output, o), "must hold f32 or f64 [rows, features] (rows > 0), got "
               "integers or booleans of shape [1797]; convert them with X.astype(np.float32)");
  write_npy(input, HostArray::f32({3}, {1, 2, 3}));
  EXPECT_ERROR(predict_run(cfg, ckpt, input, output, o), "got floats of shape [3]");
}

}  // namespace
}  // namespace sg::test
