// Bad data through the configuration path (load_config, load_data, train_run): data that does
// not fit the model (features, image and sequence geometry, labels, targets, batch size) and
// files the data section names. Each error must name the path or file, what was found and what
// fits, so each test asserts on the message itself.
#include <filesystem>
#include <fstream>
#include <functional>

#include "npy_builders.h"
#include "run_test_util.h"
#include "test_util.h"

namespace sg::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string tmp_dir(const std::string& name) { return fresh_dir("config_data", name); }

// ---------------------------------------------------------------------------------------------
// Data that does not fit the model.

TEST(Config, ModelInputsMismatchNamesBothNumbers) {
  json j = small_config();
  j["model"]["inputs"] = 60;
  EXPECT_ERROR(quiet_run(parse_config(j)), "model.inputs is 60", "data 'digits'", "has 64 features per sample");
  // The same on a synthetic set, and for eval.
  j["model"]["inputs"] = 8;
  j["data"] = {{"source", "synthetic_classification"}, {"features", 12}, {"classes", 10}};
  EXPECT_ERROR(quiet_run(parse_config(j)), "model.inputs is 8", "has 12 features per sample");
  std::ostringstream sink;
  RunOptions eo;
  eo.out = &sink;
  eo.device = "cpu";
  EXPECT_ERROR(eval_run(parse_config(j), "unused.safetensors", eo), "model.inputs is 8",
               "has 12 features per sample");
  // Matching numbers train.
  j["model"]["inputs"] = 12;
  EXPECT_EQ(quiet_run(parse_config(j)).steps, 5);
}

// A small CNN on the digits images.
json cnn() {
  return json::parse(R"({
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1, "activation": "relu"},
      {"type": "max_pool2d", "window": 2},
      {"type": "flatten"},
      {"type": "dense", "units": 10}
    ]},
    "train": {"steps": 5, "batch_size": 16, "log_every": 0, "device": "cpu"}
  })");
}

TEST(Config, ImageLayersAndInputShapeNameThePath) {
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["model"]["layers"][0].erase("filters"); },
       {"model.layers[0].filters: missing (the number of output channels)"}},
      {[](json& j) { j["model"]["layers"][0].erase("kernel"); }, {"model.layers[0].kernel: missing"}},
      {[](json& j) { j["model"]["layers"][0]["filters"] = 0; }, {"model.layers[0].filters: ", "got 0"}},
      {[](json& j) { j["model"]["layers"][0]["stride"] = 0; },
       {"model.layers[0].stride: expected an integer in [1, 4096], got 0"}},
      {[](json& j) { j["model"]["layers"][0]["padding"] = -1; },
       {"model.layers[0].padding: expected an integer in [0, 4096], got -1"}},
      {[](json& j) { j["model"]["layers"][0]["dilation"] = "2"; },
       {"model.layers[0].dilation: ", "got the string \"2\""}},
      {[](json& j) { j["model"]["layers"][0]["activation"] = "gelu"; },
       {"model.layers[0].activation: unknown value \"gelu\"; allowed: none, relu"}},
      {[](json& j) { j["model"]["layers"][0]["kernel_size"] = 3; },
       {"model.layers[0].kernel_size: unknown key; allowed keys here: type, filters, kernel, stride, padding, "
        "dilation, activation, init, std, bias"}},
      {[](json& j) { j["model"]["layers"][1].erase("window"); }, {"model.layers[1].window: missing"}},
      {[](json& j) { j["model"]["layers"][1]["padding"] = 2; },
       {"model.layers[1].padding: expected an integer in [0, 1], got 2"}},
      {[](json& j) { j["model"]["layers"][1]["size"] = 2; },
       {"model.layers[1].size: unknown key; allowed keys here: type, window, stride, padding"}},
      {[](json& j) { j["model"]["layers"][2]["units"] = 2; },
       {"model.layers[2].units: unknown key; allowed keys here: type"}},
      {[](json& j) { j["model"]["input_shape"] = 64; },
       {"model.input_shape: expected [height, width, channels]", "got the integer 64"}},
      {[](json& j) { j["model"]["input_shape"] = {8, 8}; },
       {"model.input_shape: expected [height, width, channels]", "got 2 values"}},
      {[](json& j) { j["model"]["input_shape"] = {8, 0, 1}; },
       {"model.input_shape[1]: expected an integer in [1, ", "got the integer 0"}},
      {[](json& j) { j["model"]["input_shape"] = {8, "8", 1}; },
       {"model.input_shape[1]: expected an integer", "got the string \"8\""}},
      {[](json& j) { j["model"]["inputs"] = 60; },
       {"model.inputs: 60 does not match model.input_shape [8, 8, 1] (64 values per sample)"}},
  };
  for (const Case& c : cases) {
    json j = cnn();
    c.edit(j);
    EXPECT_TRUE(contains_all(parse_error(j), c.parts)) << j.dump();
  }
}

TEST(Config, ImageModelsCheckTheDataAndTheirGeometry) {
  json j = cnn();
  j["model"]["input_shape"] = {7, 7, 1};
  EXPECT_ERROR(quiet_run(parse_config(j)), "model.input_shape [7, 7, 1] holds 49 values per sample",
               "data 'digits'", "has 64 features per sample");
  j = cnn();
  j["model"].erase("input_shape");
  EXPECT_ERROR(quiet_run(parse_config(j)), "conv2d layer '0' expects NHWC images [batch, height, width, channels], got "
               "[16, 64]; give the model an input_shape");
  j = cnn();
  j["model"]["layers"][0]["kernel"] = 11;
  EXPECT_ERROR(quiet_run(parse_config(j)), "conv2d layer '0': a 11x11 kernel with dilation 1 and padding 1 does not fit",
               "8x8 input [16, 8, 8, 1]");
  j = cnn();
  j["model"]["layers"][1]["window"] = 9;
  EXPECT_ERROR(quiet_run(parse_config(j)), "max_pool2d layer '1': a 9x9 window does not fit its input [16, 8, 8, 4]");
  // The valid one trains, and describes its input shape.
  RunConfig ok = parse_config(cnn());
  EXPECT_EQ(ok.model_input_shape, (Shape{8, 8, 1}));
  EXPECT_NE(ok.model->describe().find("sequential(input_shape=[8, 8, 1], conv2d(4, 3x3"), std::string::npos);
  EXPECT_EQ(quiet_run(ok).steps, 5);
}

// A tiny decoder-only transformer on the generated reverse task.
json seq() {
  return json::parse(R"({
    "model": {"layers": [
      {"type": "embedding", "vocab": 6, "dim": 8, "positions": 6},
      {"type": "transformer_block", "heads": 2, "causal": true, "mlp": 16},
      {"type": "residual", "layers": [{"type": "layer_norm"}, {"type": "self_attention", "heads": 2, "causal": true}]},
      {"type": "layer_norm", "eps": 1e-6},
      {"type": "dense", "units": 6}
    ]},
    "data": {"source": "sequence_task", "kind": "reverse", "length": 3, "symbols": 5, "samples": 200},
    "train": {"steps": 5, "batch_size": 16, "log_every": 0, "device": "cpu"}
  })");
}

TEST(Config, SequenceLayersAndTaskNameThePath) {
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["model"]["layers"][0].erase("vocab"); }, {"model.layers[0].vocab: missing"}},
      {[](json& j) { j["model"]["layers"][0].erase("dim"); }, {"model.layers[0].dim: missing"}},
      {[](json& j) { j["model"]["layers"][0]["positions"] = -1; }, {"model.layers[0].positions: ", "got -1"}},
      {[](json& j) { j["model"]["layers"][0]["units"] = 3; },
       {"model.layers[0].units: unknown key; allowed keys here: type, vocab, dim, positions"}},
      {[](json& j) { j["model"]["layers"][1].erase("mlp"); }, {"model.layers[1].mlp: missing"}},
      {[](json& j) { j["model"]["layers"][1]["heads"] = 0; }, {"model.layers[1].heads: ", "got 0"}},
      {[](json& j) { j["model"]["layers"][1]["causal"] = "yes"; },
       {"model.layers[1].causal: expected true or false", "got the string \"yes\""}},
      {[](json& j) { j["model"]["layers"][2]["layers"][1].erase("heads"); },
       {"model.layers[2].layers[1].heads: missing (the number of attention heads)"}},
      {[](json& j) { j["model"]["layers"][2]["layers"][1]["dropout"] = 0.1; },
       {"model.layers[2].layers[1].dropout: unknown key; allowed keys here: type, heads, causal, bias"}},
      {[](json& j) { j["model"]["layers"][3]["eps"] = 0; }, {"model.layers[3].eps: ", "got 0"}},
      {[](json& j) { j["data"]["kind"] = "sort"; }, {"data.kind: unknown value \"sort\"; allowed: copy, reverse"}},
      {[](json& j) { j["data"]["length"] = 0; }, {"data.length: ", "got 0"}},
      {[](json& j) { j["data"]["task"] = "regression"; },
       {"data.task: source \"sequence_task\" is a classification set"}},
      {[](json& j) { j["data"] = {{"source", "digits"}, {"symbols", 5}}; },
       {"data.symbols: \"symbols\" is a setting of source \"sequence_task\", not of \"digits\""}},
  };
  for (const Case& c : cases) {
    json j = seq();
    c.edit(j);
    EXPECT_TRUE(contains_all(parse_error(j), c.parts)) << j.dump();
  }
}

TEST(Config, SequenceModelsTrainAndCheckTheirData) {
  RunConfig ok = parse_config(seq());
  EXPECT_EQ(ok.data.sequence_kind, "reverse");
  RunSummary s = quiet_run(ok);
  EXPECT_EQ(s.steps, 5);
  EXPECT_EQ(s.task, "classification");
  // Output units below the vocabulary: named by sample and position.
  json j = seq();
  j["model"]["layers"][4]["units"] = 4;
  EXPECT_ERROR(quiet_run(parse_config(j)), "model output has 4 units", "has 6 classes",
               "label 4 of sample 0 position 3 (0-based) is out of range [0, 4)", "set the last layer's units to at least 6");
  // Ids beyond the embedding's vocabulary: found when the step runs, naming the id.
  j = seq();
  j["model"]["layers"][0]["vocab"] = 3;
  EXPECT_ERROR(quiet_run(parse_config(j)), "embedding: token id ", "is not an integer in [0, 3), the embedding's vocabulary");
  // Sequences longer than the position table.
  j = seq();
  j["model"]["layers"][0]["positions"] = 4;
  EXPECT_ERROR(quiet_run(parse_config(j)), "embedding layer '0': sequences of 6 tokens are longer than its 4 positions");
}

TEST(Config, LastLayerSmallerThanTheClassCount) {
  json j = small_config();
  j["model"]["layers"][1]["units"] = 5;
  // Digits are stored 0, 1, ..., 9, 0, ...: sample 5 is the first label the model cannot output.
  EXPECT_ERROR(quiet_run(parse_config(j)), "model output has 5 units", "data 'digits'", "10 classes (labels 0..9)",
               "label 5 of sample 5 (0-based) is out of range [0, 5)", "set the last layer's units to at least 10");
  j["model"]["layers"][1]["units"] = 9;
  EXPECT_ERROR(quiet_run(parse_config(j)), "model output has 9 units", "label 9 of sample 9 (0-based)",
               "at least 10");
  // The width that counts is the last layer's, after a residual block too.
  j["model"]["layers"][1] = json::parse(R"({"type": "residual", "layers": [{"type": "dense", "units": 32}]})");
  j["model"]["layers"].push_back({{"type", "dense"}, {"units", 4}});
  EXPECT_ERROR(quiet_run(parse_config(j)), "model output has 4 units", "label 4 of sample 4 (0-based)");
  j["model"]["layers"][2]["units"] = 10;
  EXPECT_EQ(quiet_run(parse_config(j)).steps, 5);
}

TEST(Config, CsvLabelsOutOfRangeNameTheRow) {
  const std::string dir = tmp_dir("csv_labels");
  auto csv = [](std::vector<std::string> labels) {
    std::string s = "a,b,label\n";
    for (size_t i = 0; i < labels.size(); ++i) s += cat(i * 0.5, ",", 1.0 - i * 0.25, ",", labels[i], "\n");
    return s;
  };
  json j = small_config();
  j["model"] = json::parse(R"({"inputs": 2, "layers": [{"type": "dense", "units": 8, "activation": "relu"},
                                                        {"type": "dense", "units": 3}]})");
  j["data"] = {{"source", "csv"}, {"path", "labels.csv"}, {"validation_split", 0.0}};
  j["train"]["batch_size"] = 2;

  // Negative: the reader names the line (header is line 1) and column.
  write_file(dir, "labels.csv", csv({"0", "1", "2", "-1", "0", "1"}));
  const std::string cfg_path = write_file(dir, "cfg.json", j.dump());
  const std::string csv_path = (fs::path(dir) / "labels.csv").string();
  EXPECT_ERROR(quiet_run(load_config(cfg_path)), cat("CSV file '", csv_path, "' line 5, column 3"),
               "class label -1 is out of range");
  // Not an integer.
  write_file(dir, "labels.csv", csv({"0", "1.5", "2", "0"}));
  EXPECT_ERROR(quiet_run(load_config(cfg_path)), "line 3, column 3", "class label 1.5 is not an integer");
  // >= the model's 3 outputs: the sample is named.
  write_file(dir, "labels.csv", csv({"0", "1", "2", "0", "7", "1"}));
  EXPECT_ERROR(quiet_run(load_config(cfg_path)), "model output has 3 units", "data 'labels.csv'",
               "8 classes (labels 0..7)", "label 7 of sample 4 (0-based) is out of range [0, 3)");
  // ... also when the bad row would land in the validation split.
  j["data"]["validation_split"] = 0.5;
  const std::string split_cfg = write_file(dir, "split.json", j.dump());
  EXPECT_ERROR(quiet_run(load_config(split_cfg)), "label 7 of sample 4 (0-based)");
  // Labels in range train.
  write_file(dir, "labels.csv", csv({"0", "1", "2", "0", "2", "1"}));
  EXPECT_EQ(quiet_run(load_config(cfg_path)).steps, 5);
}

TEST(Config, NpyLabelsOutOfRangeNameTheRow) {
  const std::string dir = tmp_dir("npy_labels");
  const std::string x = (fs::path(dir) / "x.npy").string(), y = (fs::path(dir) / "y.npy").string();
  write_npy(x, random_f32({6, 2}, 1));
  json j = small_config();
  j["model"] = json::parse(R"({"layers": [{"type": "dense", "units": 3}]})");
  j["data"] = {{"source", "npy"}, {"x", x}, {"y", y}, {"validation_split", 0.0}};
  j["train"]["batch_size"] = 2;
  DataConfig d = parse_config(j).data;

  write_npy(y, HostArray::i32({6}, {0, 1, -2, 0, 1, 2}));
  EXPECT_ERROR(load_data(d), cat("data.x '", x, "' / data.y '", y, "'"), "label y[2] = -2",
               "outside the allowed range [0, ");
  write_npy(y, HostArray::i32({6}, {0, 1, 2, 0, 1, 9}));
  EXPECT_ERROR(quiet_run(parse_config(j)), "model output has 3 units", "label 9 of sample 5 (0-based)",
               "out of range [0, 3)");
  write_npy(y, HostArray::f32({6}, {0, 1, 2, 0, 1, 2}));
  EXPECT_ERROR(load_data(d), "data.y", "classification labels must be integers, got a f32 array");
  write_npy(y, HostArray::i32({5}, {0, 1, 2, 0, 1}));
  EXPECT_ERROR(load_data(d), "X has 6 rows but y has 5 rows");
  write_npy(y, HostArray::i32({6}, {0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(quiet_run(parse_config(j)).steps, 5);
}

TEST(Config, RegressionTargetCountMismatch) {
  json j = small_config();
  j["model"]["layers"][1]["units"] = 3;
  j["loss"] = {{"type", "mse"}};
  j["data"] = {{"source", "synthetic_regression"}, {"samples", 100}, {"features", 4}, {"targets", 2}};
  EXPECT_ERROR(quiet_run(parse_config(j)), "model output has 3 units", "data.source \"synthetic_regression\"",
               "has 2 regression targets per sample");
  // From a CSV file: the last num_targets columns are the targets.
  const std::string dir = tmp_dir("regression");
  std::string text = "a,b,c,t1,t2\n";
  for (int i = 0; i < 10; ++i) text += cat(i, ",", 2 * i, ",", 3 * i, ",", 0.5 * i, ",", -0.5 * i, "\n");
  write_file(dir, "reg.csv", text);
  j["model"]["layers"][1]["units"] = 1;
  j["data"] = {{"source", "csv"}, {"task", "regression"}, {"path", "reg.csv"}, {"num_targets", 2},
               {"validation_split", 0.0}};
  j["train"]["batch_size"] = 4;
  const std::string cfg = write_file(dir, "reg.json", j.dump());
  EXPECT_ERROR(quiet_run(load_config(cfg)), "model output has 1 units", "data 'reg.csv'",
               "has 2 regression targets per sample");
  j["model"]["layers"][1]["units"] = 2;
  EXPECT_EQ(quiet_run(load_config(write_file(dir, "reg2.json", j.dump()))).steps, 5);
}

TEST(Config, BatchSizeLargerThanTheTrainingSplit) {
  json j = small_config();
  j["train"]["batch_size"] = 1500;
  EXPECT_ERROR(quiet_run(parse_config(j)), "train.batch_size 1500 is larger than the training split",
               "1437 samples of 'digits'");
  j["data"] = {{"validation_split", 0.0}};
  j["train"]["batch_size"] = 1797;  // the whole set fits without a validation split
  j["train"]["steps"] = 1;
  EXPECT_EQ(quiet_run(parse_config(j)).steps, 1);
}

// ---------------------------------------------------------------------------------------------
// Files named by the data section.

TEST(Config, MissingDataFilesNameThePath) {
  const std::string dir = tmp_dir("missing_data");
  json j = small_config();
  // Relative paths are resolved against the config file's folder, and the message names the result.
  j["data"] = {{"source", "csv"}, {"path", "nope.csv"}};
  RunConfig csv = load_config(write_file(dir, "csv.json", j.dump()));
  const std::string nope = (fs::path(dir) / "nope.csv").string();
  EXPECT_ERROR(load_data(csv.data), cat("'", nope, "'"), "No such file or directory");
  EXPECT_ERROR(quiet_run(csv), cat("'", nope, "'"), "No such file or directory");

  write_npy((fs::path(dir) / "x.npy").string(), random_f32({4, 2}, 1));
  j["data"] = {{"source", "npy"}, {"x", "x.npy"}, {"y", "y_missing.npy"}};
  RunConfig npy = load_config(write_file(dir, "npy.json", j.dump()));
  EXPECT_ERROR(load_data(npy.data), cat("'", (fs::path(dir) / "y_missing.npy").string(), "'"),
               "No such file or directory");

  j["data"] = {{"source", "npz"}, {"path", "gone.npz"}};
  RunConfig npz = load_config(write_file(dir, "npz.json", j.dump()));
  EXPECT_ERROR(load_data(npz.data), cat("'", (fs::path(dir) / "gone.npz").string(), "'"),
               "No such file or directory");
}

TEST(Config, NpzMissingMemberNamesTheMembersItHas) {
  const std::string dir = tmp_dir("npz");
  const std::string xf = (fs::path(dir) / "x.npy").string(), yf = (fs::path(dir) / "y.npy").string();
  write_npy(xf, random_f32({8, 3}, 1));
  write_npy(yf, HostArray::i32({8}, {0, 1, 0, 1, 0, 1, 0, 1}));
  write_file(dir, "set.npz", build_zip({{"features.npy", read_bytes(xf)}, {"labels.npy", read_bytes(yf)}}));
  json j = small_config();
  j["model"]["layers"][1]["units"] = 2;
  j["data"] = {{"source", "npz"}, {"path", "set.npz"}, {"validation_split", 0.0}};
  j["train"]["batch_size"] = 4;
  RunConfig rc = load_config(write_file(dir, "npz.json", j.dump()));
  const std::string npz = (fs::path(dir) / "set.npz").string();
  EXPECT_ERROR(load_data(rc.data), cat("data.path '", npz, "' has no array 'X'"), "(it has: features, labels)",
               "set data.x_key / data.y_key");
  j["data"]["x_key"] = "features";
  EXPECT_ERROR(load_data(load_config(write_file(dir, "npz2.json", j.dump())).data), "has no array 'y'",
               "(it has: features, labels)");
  // With both keys set the archive loads: the errors above were about the names only.
  j["data"]["y_key"] = "labels";
  Dataset d = load_data(load_config(write_file(dir, "npz3.json", j.dump())).data);
  EXPECT_EQ(d.size(), 8);
  EXPECT_EQ(d.features(), 3);
  EXPECT_EQ(d.num_classes, 2);
}

}  // namespace
}  // namespace sg::test
