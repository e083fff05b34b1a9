// Bad input through the configuration and data path: parse_config, load_config, load_data and
// train_run. Every error must say where (the JSON path or the file), what was found (the
// offending value) and what is allowed, so each test asserts on the message itself.
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "stepgraph/config.h"
#include "stepgraph/run.h"
#include "npy_builders.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string tmp_dir(const std::string& name) { return fresh_dir("config", name); }

json base() {
  return json::parse(R"({
    "model": {"layers": [
      {"type": "dense", "units": 32, "activation": "relu"},
      {"type": "dense", "units": 10}
    ]},
    "train": {"steps": 5, "batch_size": 16, "log_every": 0, "device": "cpu"}
  })");
}

std::string parse_error(const json& j) { return error_of([&] { parse_config(j); }); }

// train_run without an output folder; progress goes to a string.
RunSummary quiet_run(const RunConfig& cfg) {
  std::ostringstream sink;
  RunOptions o;
  o.out = &sink;
  return train_run(cfg, o);
}

// ---------------------------------------------------------------------------------------------
// Malformed JSON and unreadable files.

TEST(Config, MalformedJsonReportsLineAndColumn) {
  const std::string dir = tmp_dir("malformed");
  struct Case {
    const char* text;
    int line, column;
    const char* path;  // where it is, as the message says
    const char* what;
  };
  const Case cases[] = {
      // A trailing comma: the '}' on line 4 is at column 37, after the value of units.
      {"{\n  \"model\": {\n    \"layers\": [\n      {\"type\": \"dense\", \"units\": 10,}\n    ]\n  }\n}\n",
       4, 37, " (model.layers[0].units)", "unexpected '}'"},
      // A misspelled literal: 'u' of "ture" (column 15) is where it stops being "true".
      {"{\n \"train\": {\n  \"shuffle\": ture\n }\n}\n", 3, 15, " (train.shuffle)", "syntax error"},
      // Missing a closing brace: the error is at the end of the input (after the last newline).
      {"{\"model\": {\"layers\": []}\n", 2, 1, " (model)", "unexpected end of input"},
      // A stray character on the first line.
      {"{\"model\" {}}", 1, 10, " (model)", "syntax error"},
      // An empty file.
      {"", 1, 1, "", "unexpected end of input"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = write_file(dir, cat("bad", i++, ".json"), c.text);
    EXPECT_ERROR(load_config(path), cat("config '", path, "' is not valid JSON"),
                 cat("line ", c.line, ", column ", c.column, c.path, ": "), c.what);
  }
}

TEST(Config, UnreadableConfigNamesThePath) {
  const std::string dir = tmp_dir("unreadable");
  const std::string missing = (fs::path(dir) / "no_such.json").string();
  EXPECT_ERROR(load_config(missing), cat("cannot read config '", missing, "'"), "No such file or directory");
  EXPECT_ERROR(load_config(dir), cat("cannot read config '", dir, "'"), "directory");
  if (geteuid() != 0) {  // root reads files regardless of their mode
    const std::string locked = write_file(dir, "locked.json", base().dump());
    fs::permissions(locked, fs::perms::none);
    EXPECT_ERROR(load_config(locked), cat("cannot read config '", locked, "'"), "Permission denied");
    fs::permissions(locked, fs::perms::owner_all);
  }
  // A readable copy loads (so the errors above are about the files, not the content).
  EXPECT_NO_THROW(load_config(write_file(dir, "ok.json", base().dump())));
}

TEST(Config, LoadConfigPrefixesTheFileToPathErrors) {
  const std::string dir = tmp_dir("prefix");
  json j = base();
  j["model"]["layers"][1]["units"] = -3;
  const std::string path = write_file(dir, "neg.json", j.dump(2));
  EXPECT_ERROR(load_config(path), cat("config '", path, "': model.layers[1].units: "), "got -3");
  json root = json::array({1, 2});
  EXPECT_ERROR(load_config(write_file(dir, "array.json", root.dump())), "the top level: expected an object",
               "got an array");
}

// ---------------------------------------------------------------------------------------------
// Unknown keys, wrong types, unknown values.

TEST(Config, UnknownKeysAtEveryLevelNameTheAllowedKeys) {
  struct Case {
    std::function<void(json&)> edit;
    std::string path, allowed;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["trian"] = json::object(); }, "trian",
       "model, loss, optimizer, data, train"},
      {[](json& j) { j["model"]["layer"] = 1; }, "model.layer", "type, inputs, input_shape, layers"},
      {[](json& j) { j["model"]["layers"][1]["unit"] = 10; }, "model.layers[1].unit",
       "type, units, activation, init, std, bias"},
      {[](json& j) {
         j["model"]["layers"][0] = json::parse(
             R"({"type": "residual", "units": 3, "layers": [{"type": "dense", "units": 64}]})");
       },
       "model.layers[0].units", "type, layers"},
      {[](json& j) {
         j["model"]["layers"][0] = json::parse(
             R"({"type": "residual", "layers": [{"type": "dense", "units": 64, "actvation": "relu"}]})");
       },
       "model.layers[0].layers[0].actvation", "type, units, activation, init, std, bias"},
      {[](json& j) { j["loss"] = {{"kind", "mse"}}; }, "loss.kind", "type, reduction"},
      {[](json& j) { j["optimizer"] = {{"type", "adam"}, {"betas", {0.9, 0.99}}}; }, "optimizer.betas",
       "type, lr, momentum, nesterov, dampening, weight_decay, beta1, beta2, eps, schedule"},
      {[](json& j) { j["optimizer"] = {{"schedule", {{"type", "cosine"}, {"warmup", 10}}}}; },
       "optimizer.schedule.warmup", "type, step_size, gamma, warmup_steps, total_steps, min_lr_ratio"},
      {[](json& j) { j["data"] = {{"file", "x.csv"}}; }, "data.file",
       "source, path, x, y, x_key, y_key, task, label_column, num_targets, samples, features, classes, "
       "targets, noise, seed, validation_split, shuffle, last_batch, standardize"},
      {[](json& j) { j["train"]["epochs"] = 3; }, "train.epochs",
       "steps, batch_size, seed, device, log_every, eval_every, checkpoint_every"},
  };
  for (const Case& c : cases) {
    json j = base();
    c.edit(j);
    EXPECT_TRUE(contains_all(parse_error(j), {c.path + ": unknown key; allowed keys here: " + c.allowed}));
  }
}

TEST(Config, WrongTypesAndValuesNamePathValueAndExpectation) {
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> parts;  // path, offending value, what is allowed
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["model"]["layers"][1]["units"] = "10"; },
       {"model.layers[1].units: ", "got the string \"10\"", "expected an integer in [1, 16777216]"}},
      {[](json& j) { j["model"]["layers"][1]["units"] = -3; },
       {"model.layers[1].units: ", "got -3", "expected an integer in [1, 16777216]"}},
      {[](json& j) { j["model"]["layers"][0]["units"] = 0; }, {"model.layers[0].units: ", "got 0", "[1, "}},
      {[](json& j) { j["model"]["layers"][0]["units"] = 2.5; },
       {"model.layers[0].units: ", "got the number 2.5", "expected an integer"}},
      {[](json& j) { j["model"]["layers"][0]["units"] = int64_t{1} << 62; },
       {"model.layers[0].units: ", "got 4611686018427387904", "[1, 16777216]"}},
      {[](json& j) { j["train"]["steps"] = 1.5; },
       {"train.steps: ", "got the number 1.5", "expected a positive integer"}},
      {[](json& j) { j["train"]["steps"] = uint64_t{18446744073709551615u}; },
       {"train.steps: ", "got 18446744073709551615", "expected a positive integer"}},
      {[](json& j) { j["train"]["batch_size"] = true; },
       {"train.batch_size: ", "got a boolean", "expected a positive integer"}},
      {[](json& j) { j["train"]["log_every"] = -1; }, {"train.log_every: ", "got -1", "an integer >= 0"}},
      {[](json& j) { j["data"]["stride"] = 4; },
       {"data.stride: ", "\"stride\" is a setting of source \"text_file\", not of \"digits\""}},
      {[](json& j) { j["data"]["source"] = "text_file"; }, {"data.path: ", "missing (source \"text_file\""}},
      {[](json& j) { j["model"]["layers"][0]["amax"] = "yes"; },
       {"model.layers[0].amax: ", "got the string \"yes\"", "expected true or false"}},
      {[](json& j) { j["train"]["device"] = "gpu"; },
       {"train.device: ", "\"gpu\"", "allowed: auto, cpu, cuda"}},
      {[](json& j) { j["train"]["deterministic"] = "no"; },
       {"train.deterministic: ", "got the string \"no\"", "expected true or false"}},
      {[](json& j) { j["train"]["attention"] = "bf16"; },
       {"train.attention: ", "unknown value \"bf16\"", "allowed: fp32, cudnn_bf16"}},
      {[](json& j) { j["train"]["attention"] = true; },
       {"train.attention: ", "expected a string (one of fp32, cudnn_bf16)", "got a boolean"}},
      {[](json& j) { j["model"]["layers"][0]["activation"] = "relu6"; },
       {"model.layers[0].activation: ", "unknown activation 'relu6'", "expected one of none, relu, gelu, tanh, sigmoid, sin", "gelu_erf"}},
      {[](json& j) { j["model"]["layers"][0]["activation"] = 1; },
       {"model.layers[0].activation: ", "got the integer 1", "one of none, relu, gelu, tanh, sigmoid, sin"}},
      {[](json& j) { j["model"]["layers"][0]["init"] = "uniform"; },
       {"model.layers[0].init: ", "\"uniform\"", "allowed: he, xavier, normal, zeros"}},
      {[](json& j) { j["model"]["layers"][0]["init"] = "normal"; },
       {"model.layers[0].std: missing", "normal"}},
      {[](json& j) { j["model"]["layers"][0]["bias"] = "yes"; },
       {"model.layers[0].bias: ", "got the string \"yes\"", "expected true or false"}},
      {[](json& j) { j["loss"] = {{"type", "cross_entropy"}}; },
       {"loss.type: ", "\"cross_entropy\"", "allowed: softmax_cross_entropy, mse"}},
      {[](json& j) { j["loss"] = {{"reduction", "avg"}}; }, {"loss.reduction: ", "\"avg\"", "allowed: mean, sum"}},
      {[](json& j) { j["loss"] = {{"type", "mse"}}; },
       {"loss.type: ", "\"mse\" is for regression", "data.task is classification"}},
      {[](json& j) { j["optimizer"] = {{"type", "rmsprop"}}; },
       {"optimizer.type: ", "\"rmsprop\"", "allowed: sgd, adam, adamw"}},
      {[](json& j) { j["optimizer"] = {{"lr", "fast"}}; },
       {"optimizer.lr: ", "got the string \"fast\"", "expected a number"}},
      {[](json& j) { j["optimizer"] = {{"lr", -0.1}}; }, {"optimizer.lr: ", "got -0.1", "expected a number in ["}},
      {[](json& j) { j["optimizer"] = {{"type", "sgd"}, {"nesterov", true}}; },
       {"optimizer.nesterov: ", "needs momentum > 0"}},
      {[](json& j) { j["optimizer"] = {{"schedule", {{"type", "linear"}}}}; },
       {"optimizer.schedule.type: ", "\"linear\"", "allowed: constant, step, cosine"}},
      {[](json& j) { j["optimizer"] = {{"schedule", {{"type", "cosine"}, {"warmup_steps", 50}, {"total_steps", 40}}}}; },
       {"optimizer.schedule.total_steps: ", "greater than warmup_steps (50)", "got 40"}},
      {[](json& j) { j["optimizer"] = {{"schedule", "cosine"}}; },
       {"optimizer.schedule: expected an object", "got the string \"cosine\""}},
      {[](json& j) { j["data"] = {{"source", "mnist"}}; },
       {"data.source: ", "\"mnist\"", "allowed: digits, synthetic_classification, synthetic_regression, npy, npz, csv"}},
      {[](json& j) { j["data"] = {{"task", "ranking"}}; }, {"data.task: ", "\"ranking\"", "allowed: classification, regression"}},
      {[](json& j) { j["data"] = {{"task", "regression"}}; },
       {"data.task: ", "source \"digits\" is a classification set"}},
      {[](json& j) { j["data"] = {{"validation_split", 1.5}}; },
       {"data.validation_split: ", "got 1.5", "in [0, 0.95]"}},
      {[](json& j) { j["data"] = {{"shuffle", "yes"}}; }, {"data.shuffle: ", "expected true or false"}},
      {[](json& j) { j["data"] = {{"last_batch", "keep"}}; }, {"data.last_batch: ", "\"keep\"", "allowed: drop, partial"}},
      {[](json& j) { j["data"] = {{"source", "csv"}}; }, {"data.path: missing", "source \"csv\" needs a file path"}},
      {[](json& j) { j["data"] = {{"source", "npy"}, {"x", "x.npy"}}; }, {"data: source \"npy\" needs \"x\" and \"y\""}},
      {[](json& j) { j["data"] = {{"source", "csv"}, {"path", "a.csv"}, {"label_column", "last"}}; },
       {"data.label_column: ", "got the string \"last\"", "expected an integer column index"}},
      {[](json& j) { j["data"] = {{"source", "csv"}, {"path", "a.csv"}, {"label_column", int64_t{99999999999}}}; },
       {"data.label_column: ", "99999999999", "out of range"}},
      {[](json& j) { j["data"] = {{"source", "csv"}, {"path", "a.csv"}, {"na_values", "NA"}}; },
       {"data.na_values: ", "expected an array of strings", "got the string \"NA\""}},
      {[](json& j) { j["data"] = {{"source", "csv"}, {"path", "a.csv"}, {"na_values", {"NA", 0}}}; },
       {"data.na_values[1]: expected a string, got the integer 0"}},
      {[](json& j) { j["data"] = {{"source", "csv"}, {"path", "a.csv"}, {"missing", "fill"}}; },
       {"data.missing: ", "\"fill\"", "allowed: error, drop_row"}},
      {[](json& j) { j["data"] = {{"na_values", json::array({"NA"})}}; },
       {"data.na_values: a setting of source \"csv\", not of \"digits\""}},
      {[](json& j) { j["data"] = {{"source", "synthetic_classification"}, {"samples", int64_t{100000000000}}}; },
       {"data.samples: ", "got 100000000000", "[1, 268435456]"}},
      {[](json& j) { j["data"] = {{"source", "synthetic_classification"}, {"classes", 1}}; },
       {"data.classes: ", "got 1", "an integer in [2, "}},
      {[](json& j) { j.erase("model"); }, {"model: missing"}},
      {[](json& j) { j["model"]["layers"] = json::object(); },
       {"model.layers: expected an array of layers", "got an object"}},
      {[](json& j) { j["model"]["layers"] = json::array(); }, {"model.layers: expected at least one layer"}},
      {[](json& j) { j["model"]["layers"][1] = 5; }, {"model.layers[1]: expected an object", "got the integer 5"}},
      {[](json& j) { j["model"]["layers"][1].erase("type"); },
       {"model.layers[1].type: missing", "allowed: dense, residual, sequential"}},
      {[](json& j) { j["model"]["layers"][1]["type"] = "conv3d"; },
       {"model.layers[1].type: ", "\"conv3d\"",
        "allowed: dense, residual, sequential, fourier_features, conv2d, max_pool2d, global_avg_pool, flatten"}},
      {[](json& j) { j["model"]["layers"][1].erase("units"); }, {"model.layers[1].units: missing"}},
      {[](json& j) { j["model"]["type"] = "residual"; }, {"model.type: ", "\"residual\"", "allowed: sequential"}},
      {[](json& j) { j["model"]["inputs"] = 0; }, {"model.inputs: ", "got 0", "positive integer"}},
  };
  for (const Case& c : cases) {
    json j = base();
    c.edit(j);
    EXPECT_TRUE(contains_all(parse_error(j), c.parts)) << j.dump();
  }
}

// train.attention: "fp32" (default) or "cudnn_bf16" (cuDNN's fused attention in bf16 on CUDA; the
// CPU runs fp32 either way, so a CPU run with it trains).
TEST(Config, TrainAttentionTakesFp32OrCudnnBf16) {
  json j = base();
  EXPECT_EQ(parse_config(j).trainer.lower.attention, AttentionMode::FP32);
  j["train"]["attention"] = "fp32";
  EXPECT_EQ(parse_config(j).trainer.lower.attention, AttentionMode::FP32);
  j["train"]["attention"] = "cudnn_bf16";
  RunConfig c = parse_config(j);
  EXPECT_EQ(c.trainer.lower.attention, AttentionMode::CudnnBF16);
  EXPECT_GT(quiet_run(c).steps, 0);
  for (AttentionMode m : {AttentionMode::FP32, AttentionMode::CudnnBF16})
    EXPECT_EQ(parse_attention_mode(attention_mode_name(m)), m);
  EXPECT_ERROR(parse_attention_mode("FP32"), "unknown attention mode 'FP32'", "expected fp32 or cudnn_bf16");
  for (const char* bad : {"bf16", "cudnn", "fp16", ""}) {
    j["train"]["attention"] = bad;
    EXPECT_TRUE(contains_all(parse_error(j), {"train.attention: ", cat("unknown value \"", bad, "\""),
                                              "allowed: fp32, cudnn_bf16"}));
  }
}

TEST(Config, SgdOnlyKeysOnAdamAndAdamKeysOnSgd) {
  for (const char* type : {"adam", "adamw"})
    for (const char* key : {"momentum", "nesterov", "dampening"}) {
      json j = base();
      j["optimizer"] = {{"type", type}};
      j["optimizer"][key] = std::string(key) == "nesterov" ? json(true) : json(0.5);
      EXPECT_TRUE(contains_all(parse_error(j),
                               {cat("optimizer.", key, ": \"", key, "\" is an SGD setting"),
                                cat("optimizer \"", type, "\" takes lr, beta1, beta2, eps, weight_decay")}));
    }
  for (const char* key : {"beta1", "beta2", "eps"}) {
    json j = base();
    j["optimizer"] = {{"type", "sgd"}, {"momentum", 0.9}};
    j["optimizer"][key] = 0.5;
    EXPECT_TRUE(contains_all(parse_error(j), {cat("optimizer.", key, ": \"", key, "\" is an Adam setting"),
                                              "optimizer \"sgd\" takes lr, momentum, nesterov, dampening"}));
  }
  // Each optimizer's own keys are accepted.
  json sgd = base();
  sgd["optimizer"] = {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}, {"dampening", 0.0}};
  EXPECT_NO_THROW(parse_config(sgd));
  json adam = base();
  adam["optimizer"] = {{"type", "adam"}, {"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-7}};
  EXPECT_NO_THROW(parse_config(adam));
}

// ---------------------------------------------------------------------------------------------
// Data that does not fit the model.

TEST(Config, ModelInputsMismatchNamesBothNumbers) {
  json j = base();
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
  json j = base();
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
  json j = base();
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
  json j = base();
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
  json j = base();
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
  json j = base();
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
  json j = base();
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
  json j = base();
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

// ---------------------------------------------------------------------------------------------
// Checkpoints: a bad --resume file changes nothing in the output folder.

TEST(Config, BadResumeCheckpointLeavesTheOutputFolderAsItWas) {
  const std::string dir = tmp_dir("resume");
  json j = base();
  RunConfig cfg = parse_config(j);
  std::ostringstream sink;
  RunOptions o;
  o.out = &sink;
  o.out_dir = (fs::path(dir) / "run").string();
  train_run(cfg, o);
  const std::string ckpt = o.out_dir + "/checkpoint.safetensors";
  const std::string metrics = o.out_dir + "/metrics.jsonl";
  const std::string config = o.out_dir + "/config.json";
  const std::string good = read_bytes(ckpt), good_metrics = read_bytes(metrics), good_config = read_bytes(config);
  ASSERT_GT(good.size(), 1000u);

  const std::string bad = write_file(dir, "truncated.safetensors", good.substr(0, good.size() / 2));
  const std::string garbage = write_file(dir, "garbage.safetensors", "not a checkpoint at all");
  // A different config (another output width) in the same folder: refused before any write.
  json other = base();
  other["model"]["layers"][1]["units"] = 12;
  for (const auto& bad_want : std::vector<std::pair<std::string, std::string>>{
           {bad, "safetensors file '" + bad + "': "}, {garbage, "safetensors file '" + garbage + "': "}}) {
    const std::string &path = bad_want.first, &want = bad_want.second;  // EXPECT_ERROR's lambda captures them
    o.resume = path;
    o.steps = 10;
    // Another run's checkpoint into this folder: refused as it stands, and with --overwrite the
    // checkpoint is checked before the folder's run is replaced.
    EXPECT_ERROR(train_run(cfg, o), cat("output folder '", o.out_dir, "' holds another run than the checkpoint '", path,
                                        "'"), "--overwrite");
    o.overwrite = true;
    EXPECT_ERROR(train_run(cfg, o), want);
    o.overwrite = false;
    EXPECT_ERROR(eval_run(cfg, path, o), want);
  }
  o.resume = ckpt;
  EXPECT_ERROR(train_run(parse_config(other), o), cat("checkpoint '", ckpt, "' was saved from another setup"),
               "model: dense(10, none, init=xavier, bias) in the checkpoint, dense(12, none, init=xavier, bias) here (item 1 of "
               "sequential(...))",
               "--weights-only");
  o.weights_only = true;  // a new run from its weights: it replaces the folder's run, once checked
  o.overwrite = true;
  EXPECT_ERROR(train_run(parse_config(other), o), cat("weights file '", ckpt, "' does not fit this model's parameters"),
               "'1.weight' is f32 [10, 32] there but f32 [12, 32] here", "'1.bias' is f32 [10] there but f32 [12] here");
  o.weights_only = false;
  o.overwrite = false;
  EXPECT_EQ(read_bytes(ckpt), good);
  EXPECT_EQ(read_bytes(metrics), good_metrics);
  EXPECT_EQ(read_bytes(config), good_config);
  // And a good resume does write (the comparison above could fail).
  o.steps = 10;
  EXPECT_EQ(train_run(cfg, o).steps, 10);
  EXPECT_NE(read_bytes(ckpt), good);
}

// ---------------------------------------------------------------------------------------------
// The example configs.

TEST(Config, ExampleConfigsLoad) {
  const fs::path configs = fs::path(SG_SOURCE_DIR) / "configs";
  RunConfig mlp = load_config((configs / "digits_mlp.json").string());
  EXPECT_EQ(mlp.json, default_config()) << "configs/digits_mlp.json must equal sg::default_config()";

  RunConfig res = load_config((configs / "digits_residual.json").string());
  EXPECT_NE(res.model->describe().find("residual("), std::string::npos) << res.model->describe();
  EXPECT_EQ(res.data.source, "digits");

  RunConfig reg = load_config((configs / "synthetic_regression.json").string());
  EXPECT_EQ(reg.data.task, Task::Regression);
  EXPECT_EQ(reg.loss->describe(), "mse(mean)");

  RunConfig cnn = load_config((configs / "digits_cnn.json").string());
  EXPECT_EQ(cnn.model_input_shape, (Shape{8, 8, 1}));
  EXPECT_NE(cnn.model->describe().find("conv2d(32, 3x3"), std::string::npos) << cnn.model->describe();

  RunConfig tr = load_config((configs / "reverse_transformer.json").string());
  EXPECT_EQ(tr.data.source, "sequence_task");
  EXPECT_EQ(tr.data.sequence_kind, "reverse");
  EXPECT_NE(tr.model->describe().find("transformer_block(4 heads, causal, mlp 64)"), std::string::npos)
      << tr.model->describe();

  RunConfig sgd = load_config((configs / "digits_sgd_cosine.json").string());
  const std::string opt = sgd.optimizer->describe();
  for (const char* want : {"sgd(", "momentum=0.9", "nesterov", "cosine(warmup=100"})
    EXPECT_NE(opt.find(want), std::string::npos) << want << " in " << opt;
}

}  // namespace
}  // namespace sg::test
