#include "stepgraph/config.h"
#include "stepgraph/custom_loss.h"
#include "stepgraph/custom_optimizer.h"

#include "core/host_memory.h"
#include "core/json_text.h"
#include "train/config_node.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace sg {

using nlohmann::json;

namespace {

using cfg::Node;
using cfg::type_of;
using cfg::parse_layer;
using cfg::kMaxWidth;


// Caps that keep element counts far from int64 overflow (a larger value is a typo, not a model).
constexpr int64_t kMaxUnits = int64_t{1} << 24;
// Far beyond real networks, and it keeps building the step program within seconds.
constexpr int64_t kMaxLayers = int64_t{1} << 16;

std::vector<LayerPtr> parse_layers(const Node& n) {
  SG_REQUIRE(n.has("layers"), n.at("layers"), ": missing (a list of layers)");
  const json& arr = n.raw()["layers"];
  SG_REQUIRE(arr.is_array(), n.at("layers"), ": expected an array of layers, got ", type_of(arr));
  SG_REQUIRE(!arr.empty(), n.at("layers"), ": expected at least one layer");
  SG_REQUIRE(arr.size() <= static_cast<size_t>(kMaxLayers), n.at("layers"), ": ", arr.size(), " layers; at most ",
             kMaxLayers, " are supported");
  std::vector<LayerPtr> out;
  for (size_t i = 0; i < arr.size(); ++i)
    out.push_back(parse_layer(Node(arr[i], cat(n.at("layers"), "[", i, "]"))));
  return out;
}

Init parse_init(const Node& n, std::optional<Init> def) {
  if (!n.has("init")) return def ? *def : Init::he();
  std::string s = n.string("init", "he", {"he", "xavier", "normal", "zeros"});
  if (s == "he") return Init::he();
  if (s == "xavier") return Init::xavier();
  if (s == "zeros") return Init::zeros();
  SG_REQUIRE(n.has("std"), n.at("std"), ": missing (init \"normal\" needs a standard deviation)");
  return Init::normal(n.number("std", 0.02, 1e-12, 1e6));
}

// Convolution and pooling sizes: kernel, stride, dilation in [1, kMaxWindow], padding in [0, kMaxWindow].
constexpr int64_t kMaxWindow = 4096;

LayerPtr parse_image_layer(const Node& n, const std::string& type) {
  if (type == "conv2d") {
    n.only({"type", "filters", "kernel", "stride", "padding", "dilation", "activation", "init", "std", "bias"});
    SG_REQUIRE(n.has("filters"), n.at("filters"), ": missing (the number of output channels)");
    SG_REQUIRE(n.has("kernel"), n.at("kernel"), ": missing (the filter size: 3 for 3x3 filters)");
    Conv2dOptions o;
    const int64_t filters = n.integer("filters", 0, 1, kMaxUnits);
    o.kernel = n.integer("kernel", 3, 1, kMaxWindow);
    o.stride = n.integer("stride", 1, 1, kMaxWindow);
    o.padding = n.integer("padding", 0, 0, kMaxWindow);
    o.dilation = n.integer("dilation", 1, 1, kMaxWindow);
    o.act = parse_activation(n.string("activation", "none", {"none", "relu"}));
    if (n.has("init")) o.init = parse_init(n, std::nullopt);
    o.bias = n.boolean("bias", true);
    return conv2d(filters, o);
  }
  if (type == "max_pool2d") {
    n.only({"type", "window", "stride", "padding"});
    SG_REQUIRE(n.has("window"), n.at("window"), ": missing (the pooling window: 2 for 2x2)");
    const int64_t window = n.integer("window", 2, 1, kMaxWindow);
    const int64_t stride = n.integer("stride", window, 1, kMaxWindow);
    const int64_t padding = n.integer("padding", 0, 0, window / 2);
    return max_pool2d(window, stride, padding);
  }
  n.only({"type"});
  if (type == "global_avg_pool") return global_avg_pool();
  return flatten();
}

LayerPtr parse_sequence_layer(const Node& n, const std::string& type) {
  if (type == "embedding") {
    n.only({"type", "vocab", "dim", "positions"});
    SG_REQUIRE(n.has("vocab"), n.at("vocab"), ": missing (the number of token ids)");
    SG_REQUIRE(n.has("dim"), n.at("dim"), ": missing (the width of the token vectors)");
    return embedding(n.integer("vocab", 0, 1, kMaxUnits), n.integer("dim", 0, 1, kMaxUnits),
                     n.integer("positions", 0, 0, kMaxUnits));
  }
  if (type == "layer_norm") {
    n.only({"type", "eps"});
    return layer_norm(n.number("eps", 1e-5, 1e-12, 1.0));
  }
  if (type == "self_attention") {
    n.only({"type", "heads", "causal", "bias"});
    SG_REQUIRE(n.has("heads"), n.at("heads"), ": missing (the number of attention heads)");
    return self_attention(n.integer("heads", 1, 1, 1 << 16), n.boolean("causal", false), n.boolean("bias", true));
  }
  n.only({"type", "heads", "causal", "mlp"});
  SG_REQUIRE(n.has("heads"), n.at("heads"), ": missing (the number of attention heads)");
  SG_REQUIRE(n.has("mlp"), n.at("mlp"), ": missing (the hidden width of the block's feed-forward part)");
  return transformer_block(n.integer("heads", 1, 1, 1 << 16), n.boolean("causal", false),
                           n.integer("mlp", 0, 1, kMaxUnits));
}

}  // namespace

LayerPtr cfg::parse_layer(const Node& n) {
  SG_REQUIRE(n.has("type"), n.at("type"), ": missing; allowed: dense, residual, sequential, fourier_features, conv2d, "
             "max_pool2d, global_avg_pool, flatten, embedding, layer_norm, self_attention, transformer_block, dropout, batch_norm");
  std::string type = n.string("type", "", {"dense", "residual", "sequential", "fourier_features", "conv2d",
                                           "max_pool2d", "global_avg_pool", "flatten", "embedding", "layer_norm",
                                           "self_attention", "transformer_block", "dropout", "batch_norm"});
  if (type == "dropout") {
    n.only({"type", "p"});
    SG_REQUIRE(n.has("p"), n.at("p"), ": missing (the probability of zeroing an element, e.g. 0.1)");
    const double p = n.number("p", 0.0, 0.0, 1.0);
    SG_REQUIRE(p < 1, n.at("p"), ": must be below 1 (1 would zero everything), got ", p);
    return dropout(p);
  }
  if (type == "batch_norm") {
    n.only({"type", "momentum", "eps"});
    const double momentum = n.number("momentum", 0.1, 0.0, 1.0);
    SG_REQUIRE(momentum > 0, n.at("momentum"), ": must be above 0 (0 would never update the running statistics), got ",
               momentum);
    return batch_norm(momentum, n.number("eps", 1e-5, 1e-12, 1.0));
  }
  if (type == "conv2d" || type == "max_pool2d" || type == "global_avg_pool" || type == "flatten")
    return parse_image_layer(n, type);
  if (type == "embedding" || type == "layer_norm" || type == "self_attention" || type == "transformer_block")
    return parse_sequence_layer(n, type);
  if (type == "fourier_features") {
    n.only({"type", "features", "sigma", "trainable"});
    SG_REQUIRE(n.has("features"), n.at("features"), ": missing (the number of frequencies; the output has twice as many)");
    return std::make_shared<FourierFeatures>(n.integer("features", 0, 1, 1 << 16), n.number("sigma", 1.0, 1e-9, 1e6),
                                             n.boolean("trainable", false));
  }
  if (type == "dense") {
    n.only({"type", "units", "activation", "init", "std", "bias", "amax"});
    SG_REQUIRE(n.has("units"), n.at("units"), ": missing (the number of outputs)");
    int64_t units = n.integer("units", 0, 1, kMaxUnits);
    const Activation act = n.activation("activation");
    std::optional<Init> init;
    if (n.has("init")) init = parse_init(n, std::nullopt);
    return dense(units, act, init, n.boolean("bias", true), n.boolean("amax", false));
  }
  n.only({"type", "layers"});
  auto layers = parse_layers(n);
  if (type == "sequential") return sequential(std::move(layers));
  return residual(sequential(std::move(layers)));
}

namespace {

// softmax_cross_entropy's label_smoothing: a number in [0, 1) (1 would leave no target).
double parse_label_smoothing(const Node& n) {
  if (!n.has("label_smoothing")) return 0.0;
  const json& v = n.raw()["label_smoothing"];
  SG_REQUIRE(v.is_number(), n.at("label_smoothing"), ": expected a number in [0, 1), got ", type_of(v));
  const double eps = v.get<double>();
  SG_REQUIRE(eps >= 0 && eps < 1, n.at("label_smoothing"), ": expected a number in [0, 1), got ", eps);
  return eps;
}

// softmax_cross_entropy's class_weights: one number >= 0 per class (the count is checked against
// the logits when the loss is built).
std::vector<float> parse_class_weights(const Node& n) {
  if (!n.has("class_weights")) return {};
  const json& v = n.raw()["class_weights"];
  const std::string at = n.at("class_weights");
  SG_REQUIRE(v.is_array() && !v.empty(), at, ": expected an array of numbers >= 0, one per class, got ",
             v.is_array() ? std::string("an empty array") : type_of(v));
  std::vector<float> w;
  for (size_t c = 0; c < v.size(); ++c) {
    SG_REQUIRE(v[c].is_number(), at, "[", c, "]: expected a number >= 0, got ", type_of(v[c]));
    const double x = v[c].get<double>();
    SG_REQUIRE(x >= 0 && x <= 1e30, at, "[", c, "]: expected a number in [0, 1e+30], got ", x);
    w.push_back(static_cast<float>(x));
  }
  return w;
}

// A "type" that names no built-in kind but a registered one (a user loss, an update rule): its
// name; "" for a built-in or absent type. Neither: an Error listing both.
std::string registered_type(const Node& n, std::initializer_list<const char*> built_in,
                            bool (*registered)(const std::string&), const char* what) {
  if (!n.has("type") || !n.raw()["type"].is_string()) return "";
  const std::string t = n.raw()["type"].get<std::string>();
  for (const char* b : built_in)
    if (t == b) return "";
  SG_REQUIRE(registered(t), n.at("type"), ": unknown value \"", t, "\"; allowed: ", joined(std::vector<std::string>(built_in.begin(), built_in.end())),
             ", or the name of ", what);
  return t;
}

// `task`: the data's (the loss must fit it), or none for a graph model's term (its target's
// dtype is checked against the loss when the data is loaded).
LossPtr parse_loss(const Node& n, Task task, bool check_task = true) {
  std::string def = task == Task::Classification ? "softmax_cross_entropy" : "mse";
  // A loss registered with sg::register_loss (custom_loss.h) goes by its name: its kernel is its settings.
  const std::string named = registered_type(n, {"softmax_cross_entropy", "mse", "l1", "huber", "bce_with_logits"},
                                            is_registered_loss, "a loss registered with sg::register_loss");
  if (!named.empty()) {
    n.only({"type"});
    return std::make_shared<CustomLoss>(named);
  }
  std::string type = n.string("type", def, {"softmax_cross_entropy", "mse", "l1", "huber", "bce_with_logits"});
  if (type == "huber") n.only({"type", "reduction", "delta"});
  else if (type == "softmax_cross_entropy") n.only({"type", "reduction", "label_smoothing", "class_weights"});
  else n.only({"type", "reduction"});
  Reduction r = n.string("reduction", "mean", {"mean", "sum"}) == "mean" ? Reduction::Mean : Reduction::Sum;
  LossPtr loss;
  if (type == "softmax_cross_entropy")
    loss = std::make_shared<SoftmaxCrossEntropy>(r, parse_label_smoothing(n), parse_class_weights(n));
  else if (type == "l1") loss = std::make_shared<L1Loss>(r);
  else if (type == "huber") loss = std::make_shared<HuberLoss>(n.number("delta", 1.0, 1e-30, 1e30), r);
  else if (type == "bce_with_logits") loss = std::make_shared<BinaryCrossEntropyWithLogits>(r);
  else loss = std::make_shared<MeanSquaredError>(r);
  SG_REQUIRE(!check_task || loss->task() == task, n.at("type"), ": loss \"", type, "\" is for ", task_name(loss->task()),
             " but data.task is ", task_name(task));
  return loss;
}

// Whether "loss" is a map of terms by output ({"u": {"type": "mse"}, "v": {...}}) rather than
// one loss object (whose values are strings and numbers).
bool is_loss_map(const json& loss) {
  if (!loss.is_object() || loss.empty()) return false;
  for (const auto& kv : loss.items())
    if (!kv.value().is_object()) return false;
  return true;
}

// A graph model's terms: a map by output, each {"type", "weight", ...}; or one loss object, put
// on every output (as Keras does with one loss for several outputs).
std::vector<LossTerm> parse_loss_terms(const json& root, const Model& model, Task task) {
  const std::vector<std::string>& outs = model.output_names();
  std::vector<LossTerm> terms;
  json empty = json::object();
  const json& loss = root.contains("loss") ? root["loss"] : empty;
  if (!is_loss_map(loss)) {
    const LossPtr l = parse_loss(Node(loss, "loss"), task, false);  // data.task does not apply to arrays by name
    for (const std::string& o : outs) terms.push_back(LossTerm{o, l, 1.0});
    return terms;
  }
  for (const auto& [name, v] : loss.items()) {
    const std::string at = "loss." + name;
    SG_REQUIRE(std::find(outs.begin(), outs.end(), name) != outs.end(), at, ": the model has no output '", name,
               "' (its outputs: ", joined(outs), ")");
    json rest = v;
    double weight = 1.0;
    if (rest.contains("weight")) {
      weight = Node(v, at).number("weight", 1.0, 0.0, 1e12);
      rest.erase("weight");
    }
    terms.push_back(LossTerm{name, parse_loss(Node(rest, at), task, false), weight});
  }
  return terms;
}

Schedule parse_schedule(const Node& n, int64_t total_steps) {
  n.only({"type", "step_size", "gamma", "warmup_steps", "total_steps", "min_lr_ratio"});
  std::string type = n.string("type", "constant", {"constant", "step", "cosine"});
  if (type == "constant") return Schedule::constant();
  if (type == "step")
    return Schedule::step(n.integer("step_size", 1000, 1), n.number("gamma", 0.1, 1e-12, 1e6));
  int64_t warm = n.integer("warmup_steps", 0, 0);
  int64_t total = n.integer("total_steps", total_steps, 1);
  SG_REQUIRE(total > warm, n.at("total_steps"), ": must be greater than warmup_steps (", warm,
             "), got ", total);
  return Schedule::cosine(warm, total, n.number("min_lr_ratio", 0.0, 0.0, 1.0));
}

OptimizerPtr parse_optimizer_kind(const Node& n, int64_t total_steps);

OptimizerPtr parse_optimizer(const Node& n, int64_t total_steps) {
  n.only({"type", "lr", "momentum", "nesterov", "dampening", "weight_decay", "beta1", "beta2", "eps",
          "schedule", "clip_norm", "constants"});
  OptimizerPtr opt = parse_optimizer_kind(n, total_steps);
  if (n.has("clip_norm")) opt->set_clip_norm(n.number("clip_norm", 0.0, 0.0, 1e30));
  return opt;
}

OptimizerPtr parse_optimizer_kind(const Node& n, int64_t total_steps) {
  // An update rule registered with sg::register_update_rule (custom_optimizer.h) goes by its name,
  // with lr, weight_decay, schedule and its constants (the numbers its kernel reads, in order).
  const std::string named = registered_type(n, {"sgd", "adam", "adamw", "lion"}, is_registered_update_rule,
                                            "an update rule registered with sg::register_update_rule");
  if (!named.empty()) {
    n.only({"type", "lr", "weight_decay", "schedule", "constants", "clip_norm"});
    std::vector<double> constants;
    if (n.has("constants")) {
      const json& c = n.raw()["constants"];
      SG_REQUIRE(c.is_array(), n.at("constants"), ": expected an array of numbers, got ", type_of(c));
      for (size_t i = 0; i < c.size(); ++i) {
        SG_REQUIRE(c[i].is_number(), n.at("constants"), "[", i, "]: expected a number, got ", type_of(c[i]));
        constants.push_back(c[i].get<double>());
      }
    }
    return std::make_shared<CustomOptimizer>(
        named, n.number("lr", 1e-3, 1e-12, 1e6), n.number("weight_decay", 0.0, 0.0, 1e6),
        n.has("schedule") ? parse_schedule(n.object("schedule"), total_steps) : Schedule::constant(), constants);
  }
  std::string type = n.string("type", "adamw", {"sgd", "adam", "adamw", "lion"});
  double lr = n.number("lr", type == "sgd" ? 0.01 : type == "lion" ? 1e-4 : 1e-3, 1e-12, 1e6);
  Schedule s = n.has("schedule") ? parse_schedule(n.object("schedule"), total_steps) : Schedule::constant();
  if (type == "sgd") {
    for (const char* k : {"beta1", "beta2", "eps"})
      SG_REQUIRE(!n.has(k), n.at(k), ": \"", k, "\" is an Adam setting (beta1, beta2, eps); "
                 "optimizer \"sgd\" takes lr, momentum, nesterov, dampening, weight_decay, schedule");
    double mom = n.number("momentum", 0.0, 0.0, 0.999999);
    bool nest = n.boolean("nesterov", false);
    SG_REQUIRE(!nest || mom > 0, n.at("nesterov"), ": nesterov needs momentum > 0");
    return std::make_shared<SGD>(lr, mom, nest, n.number("weight_decay", 0.0, 0.0, 1e6),
                                 n.number("dampening", 0.0, 0.0, 1.0), s);
  }
  for (const char* k : {"momentum", "nesterov", "dampening"})
    SG_REQUIRE(!n.has(k), n.at(k), ": \"", k, "\" is an SGD setting (momentum, nesterov, dampening); "
               "optimizer \"", type, "\" takes lr, beta1, beta2, eps, weight_decay, schedule");
  double b1 = n.number("beta1", 0.9, 0.0, 0.999999), b2 = n.number("beta2", type == "lion" ? 0.99 : 0.999, 0.0, 0.999999);
  if (type == "lion") {
    SG_REQUIRE(!n.has("eps"), n.at("eps"), ": optimizer \"lion\" has no eps (it takes lr, beta1, beta2, weight_decay, schedule)");
    return std::make_shared<Lion>(lr, b1, b2, n.number("weight_decay", 0.0, 0.0, 1e6), s);
  }
  double eps = n.number("eps", 1e-8, 1e-30, 1.0);
  if (type == "adam") return std::make_shared<Adam>(lr, b1, b2, eps, n.number("weight_decay", 0.0, 0.0, 1e6), s);
  return std::make_shared<AdamW>(lr, b1, b2, eps, n.number("weight_decay", 1e-2, 0.0, 1e6), s);
}

Shape parse_input_shape(const Node& model) {
  const json& v = model.raw()["input_shape"];
  const std::string at = model.at("input_shape");
  const char* expected = "expected [height, width, channels], three positive integers (e.g. [8, 8, 1])";
  SG_REQUIRE(v.is_array(), at, ": ", expected, ", got ", type_of(v));
  SG_REQUIRE(v.size() == 3, at, ": ", expected, ", got ", v.size(), " values");
  Shape s;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& d = v[i];
    const bool fits = d.is_number_unsigned() ? d.get<uint64_t>() >= 1 && d.get<uint64_t>() <= uint64_t{kMaxWidth}
                      : d.is_number_integer() && d.get<int64_t>() >= 1 && d.get<int64_t>() <= kMaxWidth;
    SG_REQUIRE(fits, at, "[", i, "]: expected an integer in [1, ", kMaxWidth, "], got ", type_of(d));
    s.push_back(d.get<int64_t>());
  }
  SG_REQUIRE(numel(s) <= kMaxWidth, at, ": ", shape_str(s), " holds ", numel(s), " values per sample, more than ",
             kMaxWidth);
  return s;
}

TrainerOptions parse_trainer_options(const Node& n) {
  TrainerOptions o;
  o.mode = parse_exec_mode(n.string("mode", "graph", {"graph", "eager"}));
  o.shape_policy = parse_shape_policy(n.string("shape_policy", "recapture", {"recapture", "pad", "error"}));
  o.max_shapes = static_cast<int>(n.integer("max_shapes", o.max_shapes, 1));
  o.lower.autotune = parse_autotune(n.string("autotune", "off", {"off", "heuristic", "exhaustive"}));
  o.lower.precision = parse_precision(n.string("precision", "fp32", {"fp32", "tf32", "tf32x3"}));
  o.lower.attention = parse_attention_mode(n.string("attention", "fp32", {"fp32", "cudnn_bf16"}));
  o.lower.deterministic = n.boolean("deterministic", true);
  o.lower.fusion = n.boolean("fusion", true);
  o.lower.concurrent = n.boolean("concurrent", true);
  o.lower.plan_cache = n.string("plan_cache", "");
  o.on_nan = parse_nan_policy(n.string("on_nan", "stop", {"stop", "skip", "continue"}));
  return o;
}

TrainConfig parse_train(const Node& n) {
  n.only({"steps", "batch_size", "seed", "device", "log_every", "eval_every", "checkpoint_every", "mode",
          "shape_policy", "max_shapes", "autotune", "precision", "attention", "deterministic", "fusion", "concurrent", "plan_cache", "distributed",
          "bucket_mb", "check_params", "on_nan", "early_stopping"});
  TrainConfig t;
  t.steps = n.integer("steps", t.steps, 1);
  t.batch_size = n.integer("batch_size", t.batch_size, 1);
  t.seed = static_cast<uint64_t>(n.integer("seed", 0, 0));
  t.device = n.string("device", "auto", {"auto", "cpu", "cuda"});
  t.log_every = n.integer("log_every", t.log_every, 0);
  t.eval_every = n.integer("eval_every", t.eval_every, 0);
  t.checkpoint_every = n.integer("checkpoint_every", t.checkpoint_every, 0);
  t.distributed = n.string("distributed", "auto", {"auto", "nccl"});
  t.bucket_mb = n.number("bucket_mb", t.bucket_mb, 1.0 / 1024, 1 << 20);
  t.check_params = n.integer("check_params", t.check_params, 0);
  if (n.has("early_stopping")) {
    const Node e = n.object("early_stopping");
    e.only({"metric", "mode", "patience", "min_delta", "restore_best"});
    EarlyStopping& es = t.early_stopping;
    es.metric = e.string("metric", es.metric);
    es.mode = e.string("mode", es.metric == "val_accuracy" ? "max" : "min", {"min", "max"});
    es.patience = e.integer("patience", es.patience, 1);
    es.min_delta = e.number("min_delta", es.min_delta, 0.0, 1e300);
    es.restore_best = e.boolean("restore_best", es.restore_best);
    es.on = true;
  }
  return t;
}

std::string resolve(const std::string& p, const std::filesystem::path& base) {
  if (p.empty() || base.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (base / p).string();
}

}  // namespace

RunConfig parse_config(const json& j, const std::string& base_dir) {
  Node root(j, "");
  root.only({"model", "loss", "optimizer", "data", "train", "problem"});
  RunConfig rc;
  rc.json = j;
  json empty = json::object();
  auto section = [&](const char* k) { return root.has(k) ? root.object(k) : Node(empty, k); };
  SG_REQUIRE(root.has("model"), "model: missing (the network, e.g. {\"layers\": [{\"type\": \"dense\", \"units\": 10}]})");
  Node model = root.object("model");
  if (model.string("type", "sequential", {"sequential", "graph"}) == "graph") {
    rc.graph = cfg::parse_graph_model(model);
    rc.model = rc.graph;
  } else {
    model.only({"type", "inputs", "input_shape", "layers"});
    rc.model_inputs = model.integer("inputs", 0, 1);
    if (model.has("input_shape")) {
      rc.model_input_shape = parse_input_shape(model);
      SG_REQUIRE(rc.model_inputs == 0 || rc.model_inputs == numel(rc.model_input_shape), model.at("inputs"), ": ",
                 rc.model_inputs, " does not match model.input_shape ", shape_str(rc.model_input_shape), " (",
                 numel(rc.model_input_shape), " values per sample)");
    }
    auto seq = sequential(parse_layers(model));
    if (!rc.model_input_shape.empty()) seq->set_input_shape(rc.model_input_shape);
    rc.model = seq;
  }
  if (root.has("problem")) {
    SG_REQUIRE(!root.has("data") && !root.has("loss"), "problem: a physics-informed problem defines its own points ",
               "and loss; remove the \"data\" and \"loss\" sections");
    try {
      rc.problem = pinn::parse_problem(j.at("problem"), base_dir);
    } catch (const Error& e) {
      throw Error(e.what());
    }
  }
  rc.data = cfg::parse_data(section("data"));
  rc.train = parse_train(section("train"));
  rc.trainer = parse_trainer_options(section("train"));
  // A graph model of one input and one output, with one loss and one-array data, trains as any
  // model; with several, losses by output or arrays by name, it trains by name.
  const Model* graph = rc.graph.get();
  const bool by_name = graph && (graph->input_names().size() > 1 || graph->output_names().size() > 1 ||
                                 (root.has("loss") && is_loss_map(j["loss"])) || !rc.data.input_members.empty() ||
                                 !rc.data.target_members.empty() || !rc.data.input_columns.empty() ||
                                 !rc.data.target_columns.empty() || rc.data.source == "antiderivative");
  if (graph && !by_name) rc.model_inputs = numel(graph->input_shape(graph->input_names()[0]));
  if (!graph) {
    SG_REQUIRE(rc.data.source != "antiderivative", "data.source: \"antiderivative\" holds arrays by name (u, y, G) ",
               "for a graph model (model.type \"graph\"), e.g. a DeepONet (configs/deeponet.json)");
    const bool by_name_data = !rc.data.input_members.empty() || !rc.data.target_members.empty() ||
                              !rc.data.input_columns.empty() || !rc.data.target_columns.empty();
    SG_REQUIRE(!by_name_data, "data.", rc.data.input_members.empty() && rc.data.input_columns.empty() ? "targets" : "inputs",
               ": arrays by name are for a graph model's inputs and outputs (model.type \"graph\")");
  }
  if (by_name) {
    SG_REQUIRE(!rc.problem, "problem: a physics-informed problem trains a one-input model; model.type \"graph\" ",
               "with several inputs or outputs trains on data");
    rc.loss_terms = parse_loss_terms(j, *rc.graph, rc.data.task);
  } else {
    SG_REQUIRE(!root.has("loss") || !is_loss_map(j["loss"]), "loss: losses by output are for a graph model ",
               "(model.type \"graph\"); this model has one output: give one loss object");
    rc.loss = rc.problem ? nullptr : parse_loss(section("loss"), rc.data.task);
  }
  rc.optimizer = parse_optimizer(section("optimizer"), rc.train.steps);
  return rc;
}

RunConfig load_config(const std::string& path) {
  std::error_code ec;
  SG_REQUIRE(!std::filesystem::is_directory(path, ec), "cannot read config '", path,
             "': it is a directory, not a JSON file");
  std::ifstream f(path, std::ios::binary);
  SG_REQUIRE(f, "cannot read config '", path, "': ", std::strerror(errno));
  // Refused before it is read: the parser would refuse it anyway.
  const auto size = std::filesystem::file_size(path, ec);
  SG_REQUIRE(ec || size <= JsonLimits{}.max_bytes, "config '", path, "' is ", human_bytes(size), "; at most ",
             human_bytes(JsonLimits{}.max_bytes), " of JSON are accepted");
  std::stringstream ss;
  ss << f.rdbuf();
  SG_REQUIRE(!f.bad(), "cannot read config '", path, "': read error");
  RunConfig rc = parse_config_text(ss.str(), path);
  const auto base = std::filesystem::path(path).parent_path();
  rc.data.path = resolve(rc.data.path, base);
  rc.data.x_path = resolve(rc.data.x_path, base);
  rc.data.y_path = resolve(rc.data.y_path, base);
  if (rc.trainer.lower.plan_cache != "off") rc.trainer.lower.plan_cache = resolve(rc.trainer.lower.plan_cache, base);
  return rc;
}

RunConfig parse_config_text(const std::string& text, const std::string& source) {
  const std::string who = source.empty() ? "config" : cat("config '", source, "'");
  const json j = parse_json_text<json>(text, who);
  try {
    return parse_config(j, source.empty() ? std::string() : std::filesystem::path(source).parent_path().string());
  } catch (const Error& e) {
    throw Error(cat(who, ": ", e.what()));
  }
}

json default_config() {
  return json::parse(R"({
    "model": {"layers": [
      {"type": "dense", "units": 256, "activation": "relu", "init": "he"},
      {"type": "dense", "units": 10, "init": "xavier"}
    ]},
    "loss": {"type": "softmax_cross_entropy", "reduction": "mean"},
    "optimizer": {"type": "adamw", "lr": 0.001, "weight_decay": 0.0001},
    "data": {"source": "digits", "validation_split": 0.2, "seed": 0},
    "train": {"steps": 1500, "batch_size": 64, "seed": 0, "log_every": 250}
  })");
}

void check_model_inputs(const RunConfig& cfg, const Dataset& d) {
  const std::string src = cat("data '", d.name, "' (data.source \"", cfg.data.source, "\")");
  SG_REQUIRE(cfg.model_inputs == 0 || cfg.model_inputs == d.features(), "model.inputs is ",
             cfg.model_inputs, " but ", src, " has ", d.features(), " features per sample");
  SG_REQUIRE(cfg.model_input_shape.empty() || numel(cfg.model_input_shape) == d.features(), "model.input_shape ",
             shape_str(cfg.model_input_shape), " holds ", numel(cfg.model_input_shape), " values per sample but ", src,
             " has ", d.features(), " features per sample");
}

void check_data_fits(const RunConfig& cfg, const Dataset& d, int64_t outputs) {
  const std::string src = cat("data '", d.name, "' (data.source \"", cfg.data.source, "\")");
  check_model_inputs(cfg, d);
  if (d.task == Task::Classification && outputs < d.num_classes) {
    // Name the first sample whose label the model cannot predict (labels per token: [N, T]).
    int64_t i = 0;
    const int32_t* y = d.y.data<int32_t>();
    const int64_t per_row = d.y.numel() / std::max<int64_t>(d.size(), 1);
    while (i < d.y.numel() && y[i] < outputs) ++i;
    const std::string first =
        i < d.y.numel() ? cat("label ", y[i], " of sample ", i / per_row, per_row > 1 ? cat(" position ", i % per_row) : "",
                              " (0-based) is out of range [0, ", outputs, "); ")
                        : std::string();
    throw Error(cat("model output has ", outputs, " units but ", src, " has ", d.num_classes,
                    " classes (labels 0..", d.num_classes - 1, "): ", first,
                    "set the last layer's units to at least ", d.num_classes));
  }
  if (d.task == Task::Regression)
    SG_REQUIRE(outputs == d.targets(), "model output has ", outputs, " units but ", src, " has ",
               d.targets(), " regression targets per sample");
}

Dataset load_data(const DataConfig& d) {
  if (d.source == "digits") return load_digits();
  if (d.source == "synthetic_classification")
    return make_classification(d.samples, d.features, d.classes, d.seed);
  if (d.source == "synthetic_regression")
    return make_regression(d.samples, d.features, d.targets, d.seed, d.noise);
  if (d.source == "sequence_task") return make_sequence_task(d.sequence_kind, d.samples, d.sequence_length, d.symbols, d.seed);
  if (d.source == "text_file") return load_text_windows(d.path, d.sequence_length, d.stride);
  if (d.source == "csv") return load_csv(d.path, d.csv);
  HostArray X, y;
  std::string where;
  if (d.source == "npy") {
    X = read_npy(d.x_path);
    y = read_npy(d.y_path);
    where = cat("data.x '", d.x_path, "' / data.y '", d.y_path, "'");
  } else {
    auto members = read_npz(d.path);
    for (const std::string& k : {d.x_key, d.y_key}) {
      if (members.count(k)) continue;
      std::string have;
      for (auto& [name, a] : members) have += (have.empty() ? "" : ", ") + name;
      throw Error(cat("data.path '", d.path, "' has no array '", k, "' (it has: ", have,
                      "); set data.x_key / data.y_key"));
    }
    X = members[d.x_key];
    y = members[d.y_key];
    where = cat("data.path '", d.path, "'");
  }
  if (d.task == Task::Regression && y.dtype() == DType::I32) {
    HostArray f(DType::F32, y.shape());
    for (int64_t i = 0; i < y.numel(); ++i) f.data<float>()[i] = static_cast<float>(y.data<int32_t>()[i]);
    y = f;
  }
  if (d.task == Task::Regression && y.shape().size() == 1) y = y.reshaped({y.shape()[0], 1});
  if (d.task == Task::Classification && y.shape().size() == 2 && y.shape()[1] == 1)
    y = y.reshaped({y.shape()[0]});
  SG_REQUIRE(d.task == Task::Regression || y.dtype() == DType::I32, where,
             ": classification labels must be integers, got a ", dtype_name(y.dtype()), " array");
  try {
    return make_dataset(std::filesystem::path(d.source == "npy" ? d.x_path : d.path).filename().string(),
                        d.task, std::move(X), std::move(y));
  } catch (const Error& e) {
    throw Error(cat(where, ": ", e.what()));
  }
}

}  // namespace sg
