// Bad configurations: malformed JSON, unknown keys, wrong types and values, bad checkpoints, and
// the example configs that must load. Every error must say where (the JSON path or the file),
// what was found (the offending value) and what is allowed, so each test asserts on the message
// itself. Data that does not fit the model: test_config_data.cpp.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "npy_builders.h"
#include "run_test_util.h"
#include "test_util.h"

namespace sg::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string tmp_dir(const std::string& name) { return fresh_dir("config", name); }

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
    const std::string locked = write_file(dir, "locked.json", small_config().dump());
    fs::permissions(locked, fs::perms::none);
    EXPECT_ERROR(load_config(locked), cat("cannot read config '", locked, "'"), "Permission denied");
    fs::permissions(locked, fs::perms::owner_all);
  }
  // A readable copy loads (so the errors above are about the files, not the content).
  EXPECT_NO_THROW(load_config(write_file(dir, "ok.json", small_config().dump())));
}

TEST(Config, LoadConfigPrefixesTheFileToPathErrors) {
  const std::string dir = tmp_dir("prefix");
  json j = small_config();
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
    json j = small_config();
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
    json j = small_config();
    c.edit(j);
    EXPECT_TRUE(contains_all(parse_error(j), c.parts)) << j.dump();
  }
}

// train.attention: "fp32" (default) or "cudnn_bf16" (cuDNN's fused attention in bf16 on CUDA; the
// CPU runs fp32 either way, so a CPU run with it trains).
TEST(Config, TrainAttentionTakesFp32OrCudnnBf16) {
  json j = small_config();
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
      json j = small_config();
      j["optimizer"] = {{"type", type}};
      j["optimizer"][key] = std::string(key) == "nesterov" ? json(true) : json(0.5);
      EXPECT_TRUE(contains_all(parse_error(j),
                               {cat("optimizer.", key, ": \"", key, "\" is an SGD setting"),
                                cat("optimizer \"", type, "\" takes lr, beta1, beta2, eps, weight_decay")}));
    }
  for (const char* key : {"beta1", "beta2", "eps"}) {
    json j = small_config();
    j["optimizer"] = {{"type", "sgd"}, {"momentum", 0.9}};
    j["optimizer"][key] = 0.5;
    EXPECT_TRUE(contains_all(parse_error(j), {cat("optimizer.", key, ": \"", key, "\" is an Adam setting"),
                                              "optimizer \"sgd\" takes lr, momentum, nesterov, dampening"}));
  }
  // Each optimizer's own keys are accepted.
  json sgd = small_config();
  sgd["optimizer"] = {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}, {"dampening", 0.0}};
  EXPECT_NO_THROW(parse_config(sgd));
  json adam = small_config();
  adam["optimizer"] = {{"type", "adam"}, {"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-7}};
  EXPECT_NO_THROW(parse_config(adam));
}

// ---------------------------------------------------------------------------------------------
// Checkpoints: a bad --resume file changes nothing in the output folder.

TEST(Config, BadResumeCheckpointLeavesTheOutputFolderAsItWas) {
  const std::string dir = tmp_dir("resume");
  json j = small_config();
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
  json other = small_config();
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
