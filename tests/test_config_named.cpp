// Graph models with several inputs and outputs from configuration files: data by name (npz
// members, CSV column groups, the antiderivative generator), losses by output, and the terms by
// name in progress lines, metrics.jsonl and the summary.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "npy_builders.h"
#include "run_test_util.h"
#include "test_util.h"

namespace sg::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string tmp_dir(const std::string& name) { return fresh_dir("config_named", name); }

json deeponet() {
  std::ifstream f(std::string(SG_SOURCE_DIR) + "/configs/deeponet.json");
  json j = json::parse(f);
  j["data"]["functions"] = 100;
  j["train"]["device"] = "cpu";
  j["train"]["log_every"] = 50;
  return j;
}

RunSummary run(const json& j, const std::string& out_dir = "", int64_t steps = 0) {
  Training t(out_dir);
  if (steps) t.o.steps = steps;
  return t.train(j);
}

// The generator's G is the integral of its u: trapezoids over many sensors up to y agree.
TEST(ConfigNamed, AntiderivativeTargetsAreTheIntegralOfTheSensorValues) {
  const int64_t m = 4001;
  const NamedArrays a = make_antiderivative(3, m, 4, 7);
  ASSERT_EQ(a.at("u").shape(), (Shape{12, m}));
  ASSERT_EQ(a.at("y").shape(), (Shape{12, 1}));
  for (int64_t r = 0; r < 12; ++r) {
    const float* u = a.at("u").data<float>() + r * m;
    const double y = a.at("y").data<float>()[r], h = 1.0 / static_cast<double>(m - 1);
    double integral = 0;
    int64_t j = 0;
    for (; (j + 1) * h <= y; ++j) integral += 0.5 * h * (u[j] + u[j + 1]);
    const double rest = y - j * h;  // the part of the last interval, linearly interpolated
    integral += rest * (u[j] + 0.5 * rest / h * (u[j + 1] - u[j]));
    EXPECT_NEAR(a.at("G").data<float>()[r], integral, 2e-4) << "row " << r << ", y " << y;
  }
  // Rows of one function share its sensor values; another function's differ.
  EXPECT_EQ(a.at("u").data<float>()[0], a.at("u").data<float>()[3 * m]);
  EXPECT_NE(a.at("u").data<float>()[0], a.at("u").data<float>()[4 * m]);
}

// The DeepONet example learns from the CLI path, and reports its term by name everywhere.
TEST(ConfigNamed, DeepOnetTrainsAndReportsTermsByName) {
  const std::string dir = tmp_dir("deeponet");
  const RunSummary untrained = run(deeponet(), "", 1);
  const RunSummary s = run(deeponet(), dir + "/run", 400);
  EXPECT_EQ(s.task, "graph");
  EXPECT_EQ(s.val_size, 400);  // 100 functions x 20 points, 20 %
  ASSERT_EQ(s.val_terms.count("G"), 1u);
  ASSERT_EQ(s.loss_terms.count("G"), 1u);
  EXPECT_DOUBLE_EQ(s.val_terms.at("G"), s.val_loss);  // one term of weight 1
  EXPECT_LT(s.val_loss, 0.25 * untrained.val_loss) << "untrained " << untrained.val_loss;
  // metrics.jsonl: every progress record and the summary carry the terms.
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  int progress = 0;
  for (std::string line; std::getline(metrics, line);) {
    const json r = json::parse(line);
    if (r["event"] == "progress") {
      ++progress;
      EXPECT_TRUE(r["loss_terms"].contains("G")) << line;
    }
    if (r["event"] == "summary") EXPECT_TRUE(r["val_terms"].contains("G")) << line;
  }
  EXPECT_EQ(progress, 8);
  // eval of the checkpoint gives the run's validation loss.
  std::ostringstream sink;
  RunOptions o;
  o.out = &sink;
  const RunSummary e = eval_run(parse_config(deeponet()), dir + "/run/checkpoint.safetensors", o);
  EXPECT_DOUBLE_EQ(e.val_loss, s.val_loss);
  EXPECT_EQ(e.val_terms, s.val_terms);
  // predict: an npz of the inputs by name gives an npz of the outputs by name.
  NamedArrays in = make_antiderivative(3, 50, 4, 9);
  const HostArray G = in.at("G");
  in.erase("G");
  write_npz(dir + "/in.npz", in);
  const Shape rows = predict_run(parse_config(deeponet()), dir + "/run/checkpoint.safetensors", dir + "/in.npz",
                                 dir + "/out.npz", o);
  EXPECT_EQ(rows, (Shape{12}));
  const NamedArrays out = read_npz(dir + "/out.npz");
  ASSERT_EQ(out.count("G"), 1u);
  ASSERT_EQ(out.at("G").shape(), (Shape{12, 1}));
  double se = 0;
  for (int64_t i = 0; i < 12; ++i) se += std::pow(out.at("G").data<float>()[i] - G.data<float>()[i], 2);
  EXPECT_LT(se / 12, 4 * s.val_loss + 1e-3) << "the predictions are the trained model's";
  in.erase("y");
  write_npz(dir + "/in2.npz", in);
  EXPECT_ERROR(predict_run(parse_config(deeponet()), dir + "/run/checkpoint.safetensors", dir + "/in2.npz",
                           dir + "/out2.npz", o),
               "has no array 'y' for the model's input 'y'", "(it has: u; the model's inputs: u, y)");
  EXPECT_FALSE(fs::exists(dir + "/out2.npz"));
}

TEST(ConfigNamed, NpzWrittenIsReadBack) {
  const std::string dir = tmp_dir("npz_write");
  const NamedArrays a = {{"a", random_f32({3, 4}, 1)}, {"b", HostArray::i32({2}, {7, -1})}};
  write_npz(dir + "/x.npz", a);
  const NamedArrays b = read_npz(dir + "/x.npz");
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b.at("a").shape(), (Shape{3, 4}));
  EXPECT_EQ(std::memcmp(a.at("a").raw(), b.at("a").raw(), a.at("a").nbytes()), 0);
  EXPECT_EQ(b.at("b").data<int32_t>()[1], -1);
}

// Two inputs and two outputs from an npz file: members by name (one by default name), a mean
// squared error and a weighted cross-entropy whose labels are stored as floats.
struct NpzSet {
  std::string dir, json_path;
  json config;
};

NpzSet two_by_two(const std::string& name, int64_t rows = 40) {
  NpzSet s;
  s.dir = tmp_dir(name);
  HostArray x1 = random_f32({rows, 3}, 1), t = random_f32({rows, 2}, 2), u(DType::F32, {rows, 1}),
            v(DType::F32, {rows});
  for (int64_t i = 0; i < rows; ++i) {
    u.data<float>()[i] = x1.data<float>()[3 * i] * t.data<float>()[2 * i + 1];
    v.data<float>()[i] = x1.data<float>()[3 * i + 1] > 0 ? 1.0f : 0.0f;
  }
  std::vector<Member> members;
  for (const auto& [m, a] : std::map<std::string, HostArray>{{"X1", x1}, {"T", t}, {"U", u}, {"v", v}}) {
    const std::string f = s.dir + "/" + m + ".npy";
    write_npy(f, a);
    members.push_back({m + ".npy", read_bytes(f)});
  }
  write_file(s.dir, "set.npz", build_zip(members));
  s.config = json::parse(R"({
    "model": {"type": "graph", "inputs": {"x1": 3, "t": 2},
      "nodes": [{"name": "h", "type": "dense", "units": 16, "activation": "tanh", "input": "both"},
                {"name": "both", "type": "concat", "inputs": ["x1", "t"]},
                {"name": "u_head", "type": "dense", "units": 1, "input": "h"},
                {"name": "v_head", "type": "dense", "units": 2, "input": "h"}],
      "outputs": {"u": "u_head", "v": "v_head"}},
    "loss": {"u": {"type": "mse"}, "v": {"type": "softmax_cross_entropy", "weight": 0.5}},
    "optimizer": {"type": "adam", "lr": 0.01},
    "data": {"source": "npz", "path": "set.npz", "inputs": {"x1": "X1", "t": "T"}, "targets": {"u": "U"},
             "validation_split": 0.25},
    "train": {"steps": 30, "batch_size": 10, "log_every": 0, "device": "cpu"}
  })");
  s.json_path = write_file(s.dir, "config.json", s.config.dump());
  return s;
}

TEST(ConfigNamed, TwoInputsAndTwoOutputsFromNpzTrainAsTheTrainerDoes) {
  const NpzSet s = two_by_two("two_by_two");
  const RunConfig cfg = load_config(s.json_path);
  ASSERT_TRUE(cfg.named());
  ASSERT_EQ(cfg.loss_terms.size(), 2u);
  EXPECT_EQ(cfg.loss_terms[1].output, "v");
  EXPECT_EQ(cfg.loss_terms[1].weight, 0.5);
  std::ostringstream sink;
  std::unique_ptr<Trainer> kept;
  RunOptions o;
  o.out = &sink;
  o.keep_trainer = &kept;
  const RunSummary sum = train_run(cfg, o);
  EXPECT_EQ(sum.val_size, 10);
  EXPECT_EQ(sum.val_terms.size(), 2u);
  EXPECT_NEAR(sum.val_loss, sum.val_terms.at("u") + 0.5 * sum.val_terms.at("v"), 1e-6);
  EXPECT_NE(sink.str().find("  u "), std::string::npos) << sink.str();

  // The same steps by hand: the arrays by name, split and sampled as the run does, give the same
  // parameters bit for bit (the run fed each array to its own input).
  NamedDataset all;
  all.name = "set.npz";
  const auto members = read_npz(s.dir + "/set.npz");
  all.inputs = {{"x1", members.at("X1")}, {"t", members.at("T")}};
  HostArray labels(DType::I32, {40});
  for (int64_t i = 0; i < 40; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(members.at("v").data<float>()[i]);
  all.targets = {{"u", members.at("U")}, {"v", labels}};
  const NamedDataset train = train_val_split(all, 0.25, 0).first;
  std::unique_ptr<Trainer> t = trainer_from_config(cfg, "cpu");
  t->compile({10});
  BatchSampler sampler(train.size(), 10, true, mix_seed(t->seed(), "data"));
  for (int64_t step = 0; step < 30; ++step) {
    const NamedDataset b = gather(train, sampler.indices(step));
    t->one_step(b.inputs, b.targets);
  }
  const auto want = kept->params();
  for (const auto& [name, a] : t->params()) EXPECT_EQ(array_diff(want.at(name), a).relmax, 0.0) << name;
}

TEST(ConfigNamed, BadArraysByNameAreErrorsNamingThem) {
  NpzSet s = two_by_two("bad");
  auto error = [&](const std::function<void(json&)>& edit) {
    json j = s.config;
    edit(j);
    return error_of([&] { run(json::parse(j.dump()), ""); });
  };
  // Paths are relative to the config file: run from its folder.
  const auto cwd = fs::current_path();
  fs::current_path(s.dir);
  EXPECT_TRUE(contains_all(error([](json& j) { j["data"]["inputs"]["x1"] = "X9"; }),
                           {"has no array 'X9' for the input 'x1'", "(it has: T, U, X1, v)", "data.inputs.x1"}));
  EXPECT_TRUE(contains_all(error([](json& j) { j["data"].erase("targets"); }),
                           {"has no array 'u' for the target of output 'u'", "set data.targets.u"}));
  EXPECT_TRUE(contains_all(error([](json& j) { j["data"]["inputs"]["z"] = "T"; }),
                           {"data.inputs.z: the model has no input 'z'", "inputs: t, x1"}));
  EXPECT_TRUE(contains_all(error([](json& j) { j["data"]["inputs"]["t"] = "X1"; }),
                           {"input 't' has shape [40, 3] but the model takes [40, 2]"}));
  EXPECT_TRUE(contains_all(error([](json& j) { j["data"]["targets"]["v"] = "T"; }),
                           {"the target of output 'v' holds", "not a class label"}));
  EXPECT_TRUE(contains_all(error([](json& j) { j["loss"]["w"] = {{"type", "mse"}}; }),
                           {"loss.w: the model has no output 'w'", "(its outputs: u, v)"}));
  fs::current_path(cwd);
  // Arrays by name need a source that has names, and a graph model.
  json digits = s.config;
  digits["data"] = {{"source", "digits"}, {"inputs", {{"x1", "X"}}}};
  EXPECT_ERROR(parse_config(digits), "data.inputs.x1: source \"digits\" has no header", "by index, got 'X'");
  // A graph of two outputs parses; one-array data is refused when loaded: its one y cannot feed both.
  digits["data"] = {{"source", "synthetic_regression"}, {"targets", {{"u", "U"}}}};
  EXPECT_ERROR(parse_config(digits), "data.targets: targets by name come from sources", "its one y is the target");
  digits["data"] = {{"source", "synthetic_regression"}, {"targets", 2}};
  const RunConfig two = parse_config(digits);
  EXPECT_TRUE(two.named());
  EXPECT_ERROR(quiet_run(two), "data.source \"synthetic_regression\" holds one y",
               "the model has 2 outputs with a loss (u, v)");
  json seq = json::parse(R"({"model": {"layers": [{"type": "dense", "units": 1}]},
                              "loss": {"y": {"type": "mse"}}, "data": {"source": "synthetic_regression"}})");
  EXPECT_ERROR(parse_config(seq), "loss: losses by output are for a graph model");
  seq["loss"] = {{"type", "mse"}};
  seq["data"] = {{"source", "antiderivative"}};
  EXPECT_ERROR(parse_config(seq), "\"antiderivative\" holds arrays by name (u, y, G)");
}

// CSV column groups by index and by header name; one loss object applies to every output.
TEST(ConfigNamed, CsvColumnGroupsFeedInputsAndTargets) {
  const std::string dir = tmp_dir("csv");
  std::string text = "a,b,time,u\n";
  for (int i = 0; i < 24; ++i) text += cat(0.1 * i, ",", 0.2 - 0.05 * i, ",", 0.01 * i, ",", 0.3 * i - 1, "\n");
  write_file(dir, "d.csv", text);
  json j = json::parse(R"({
    "model": {"type": "graph", "inputs": {"x": 2, "t": 1},
      "nodes": [{"name": "c", "type": "concat", "inputs": ["x", "t"]},
                {"name": "u", "type": "dense", "units": 1, "input": "c"}],
      "outputs": {"u": "u"}},
    "loss": {"type": "mse"},
    "data": {"source": "csv", "path": "d.csv", "task": "regression", "inputs": {"x": [0, "b"], "t": "time"},
             "targets": {"u": -1}, "validation_split": 0},
    "train": {"steps": 20, "batch_size": 8, "log_every": 0, "device": "cpu"}
  })");
  const RunConfig cfg = load_config(write_file(dir, "c.json", j.dump()));
  ASSERT_TRUE(cfg.named());
  const NamedDataset d = load_named_data(cfg.data, {"t", "x"}, {"u"});
  ASSERT_EQ(d.inputs.at("x").shape(), (Shape{24, 2}));
  EXPECT_FLOAT_EQ(d.inputs.at("x").data<float>()[2 * 5 + 1], 0.2f - 0.05f * 5);
  EXPECT_FLOAT_EQ(d.inputs.at("t").data<float>()[5], 0.05f);
  EXPECT_FLOAT_EQ(d.targets.at("u").data<float>()[5], 0.5f);
  EXPECT_TRUE(std::isfinite(quiet_run(cfg).final_loss));
  j["data"]["inputs"]["t"] = "when";
  EXPECT_ERROR(load_named_data(load_config(write_file(dir, "c2.json", j.dump())).data, {"t", "x"}, {"u"}),
               "the column group 'data.inputs.t' names the column 'when', which the header does not have",
               "(it has: a, b, time, u)");
  j["data"]["inputs"].erase("t");
  EXPECT_ERROR(load_named_data(load_config(write_file(dir, "c3.json", j.dump())).data, {"t", "x"}, {"u"}),
               "data.inputs.t: missing; a CSV file needs the columns of every model input");
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

// matmul, transpose and reshape nodes from JSON: an attention-like mix of tokens.
TEST(ConfigNamed, MatmulTransposeReshapeNodes) {
  json j = json::parse(R"({
    "model": {"type": "graph", "inputs": {"x": [4, 6]},
      "nodes": [{"name": "q", "type": "dense", "units": 8, "input": "x"},
                {"name": "k", "type": "dense", "units": 8, "input": "x"},
                {"name": "kt", "type": "transpose", "input": "k", "axes": [-2, -1]},
                {"name": "s", "type": "matmul", "inputs": ["q", "kt"]},
                {"name": "m", "type": "matmul", "inputs": ["s", "q"]},
                {"name": "flat", "type": "reshape", "input": "m", "shape": [-1]},
                {"name": "y", "type": "dense", "units": 2, "input": "flat"}],
      "outputs": {"y": "y"}},
    "loss": {"type": "mse"},
    "data": {"source": "synthetic_regression", "samples": 64, "features": 24, "targets": 2},
    "train": {"steps": 5, "batch_size": 8, "log_every": 0, "device": "cpu"}
  })");
  const RunConfig cfg = parse_config(j);
  EXPECT_NE(cfg.model->describe().find("s = matmul(q, kt)"), std::string::npos) << cfg.model->describe();
  EXPECT_NE(cfg.model->describe().find("flat = reshape(m; to [32])"), std::string::npos) << cfg.model->describe();
  EXPECT_TRUE(std::isfinite(quiet_run(cfg).final_loss));
  j["model"]["nodes"][3]["inputs"] = {"q", "k"};
  EXPECT_ERROR(parse_config(j), "model.nodes[3]", "do not chain: 8 columns against 4 rows");
  j["model"]["nodes"][3]["transpose_b"] = true;
  EXPECT_NO_THROW(parse_config(j));
  j["model"]["nodes"][5]["shape"] = {5, -1};
  EXPECT_ERROR(parse_config(j), "holds 32 values per sample, not a multiple of 5");
  j["model"]["nodes"][5]["shape"] = {32};
  j["model"]["nodes"][2]["axes"] = {0, 1};
  EXPECT_ERROR(parse_config(j), "is the batch axis");
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

json two_input() {
  std::ifstream f(std::string(SG_SOURCE_DIR) + "/configs/two_input_regression.json");
  json j = json::parse(f);
  j["train"]["device"] = "cpu";
  j["train"]["log_every"] = 100;
  j["train"]["eval_every"] = 0;
  return j;
}

// configs/two_input_regression.json: one generated X split into two inputs by column groups,
// batch norm and dropout, gathered from a device-resident data set; host-fed it trains as well.
TEST(ConfigNamed, TwoInputRegressionSplitsOneXIntoInputs) {
  const RunSummary untrained = run(two_input(), "", 1);
  const RunSummary s = run(two_input(), "", 300);
  EXPECT_EQ(s.task, "graph");
  EXPECT_EQ(s.val_size, 400);
  EXPECT_LT(s.val_loss, 0.5 * untrained.val_loss) << "untrained " << untrained.val_loss;
  json fed = two_input();
  fed["data"]["device_resident"] = false;
  const RunSummary f = run(fed, "", 300);
  EXPECT_LT(f.val_loss, 0.5 * untrained.val_loss) << "untrained " << untrained.val_loss;
  // The groups are columns of the one X: the split arrays hold exactly those columns.
  const RunConfig cfg = parse_config(two_input());
  const Dataset whole = load_data(cfg.data);
  const NamedDataset split = load_named_data(cfg.data, {"x", "t"}, {"y"});
  ASSERT_EQ(split.inputs.at("t").shape(), (Shape{2000, 2}));
  for (int64_t r = 0; r < 2000; r += 397) {
    EXPECT_EQ(split.inputs.at("x").data<float>()[r * 6 + 5], whole.X.data<float>()[r * 8 + 5]);
    EXPECT_EQ(split.inputs.at("t").data<float>()[r * 2 + 1], whole.X.data<float>()[r * 8 + 7]);
  }
  // Bad groups name the input, the column and what the X holds.
  json bad = two_input();
  bad["data"]["inputs"]["t"] = {6, 8};
  EXPECT_ERROR(quiet_run(parse_config(bad)), "data.inputs.t[1]: column 8 is outside the 8 columns");
  bad["data"]["inputs"].erase("t");
  EXPECT_ERROR(quiet_run(parse_config(bad)), "data.inputs.t: missing", "splits its X [2000, 8]");
  bad["data"]["inputs"]["t"] = {6, 7};
  bad["data"]["inputs"]["x"] = {0, 1, 2};
  EXPECT_ERROR(quiet_run(parse_config(bad)), "input 'x' has shape [", "but the model takes [");
  bad["data"]["inputs"]["x"] = "first";
  EXPECT_ERROR(parse_config(bad), "data.inputs.x: source \"synthetic_regression\" has no header");
}

}  // namespace
}  // namespace sg::test
