// Model graphs (model.h) and their trainers (the LossTerm constructor of trainer.h): shapes and
// errors at the call site, shared weights and names, several inputs, outputs and weighted terms
// (gradients against central differences of evaluate), padding, checkpoints, CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "stepgraph/bench.h"
#include "stepgraph/config.h"
#include "stepgraph/data.h"
#include "stepgraph/model.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

// The issue's example: two inputs through one shared encoder, a third joined in, two heads.
struct TwoHeads {
  std::shared_ptr<Model> model;
  std::shared_ptr<Dense> enc;
};

TwoHeads two_heads() {
  auto x1 = Input({3}, "x1"), x2 = Input({3}, "x2"), t = Input({2}, "t");
  auto enc = dense(8, Activation::Tanh);
  enc->set_name("enc");
  auto a = call(enc, x1), b = call(enc, x2);
  auto c = concat({a * b, a - b, t});
  auto u_head = dense(1);
  u_head->set_name("u_head");
  auto u = call(u_head, c) + a.sum(-1, true);
  auto v = call(dense(2), activation(c, Activation::ReLU));
  return {std::make_shared<Model>(std::vector<SymbolicTensor>{x1, x2, t},
                                  std::vector<std::pair<std::string, SymbolicTensor>>{{"u", u}, {"v", v}}),
          enc};
}

NamedArrays inputs_of(int64_t rows, uint64_t seed) {
  return {{"x1", random_f32({rows, 3}, seed + 1)}, {"x2", random_f32({rows, 3}, seed + 2)},
          {"t", random_f32({rows, 2}, seed + 3)}};
}
NamedArrays targets_of(int64_t rows, uint64_t seed) {
  return {{"u", random_f32({rows, 1}, seed + 4)}, {"v", random_f32({rows, 2}, seed + 5)}};
}

std::vector<LossTerm> two_terms() {
  return {{"u", std::make_shared<MeanSquaredError>(), 1.0}, {"v", std::make_shared<MeanSquaredError>(), 0.5}};
}

double mse(const HostArray& pred, const HostArray& target) {
  double s = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) {
    const double d = pred.data<float>()[i] - target.data<float>()[i];
    s += d * d;
  }
  return s / static_cast<double>(pred.numel());
}

TEST(ModelGraph, ShapesAreKnownWhenNodesAreMade) {
  auto x = Input({4}, "x");
  auto h = call(dense(6), x);
  EXPECT_EQ(h.shape(), (Shape{6}));
  EXPECT_EQ(concat({h, x}).shape(), (Shape{10}));
  EXPECT_EQ(h.sum(-1, true).shape(), (Shape{1}));
  EXPECT_EQ(h.mean(1).shape(), (Shape{}));
  EXPECT_EQ(h.slice(1, 2, 5).shape(), (Shape{3}));
  auto pieces = split(h, {2, 4});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].shape(), (Shape{4}));
  EXPECT_EQ((h * 2.0 + 1.0).shape(), (Shape{6}));
  EXPECT_EQ((h - h.sum(-1, true)).shape(), (Shape{6}));  // broadcast along a size-1 axis
}

TEST(ModelGraph, BadGraphsAreErrorsNamingTheNodeAndShapes) {
  auto x = Input({4}, "x"), y = Input({3}, "y");
  EXPECT_ERROR(x + y, "add", "'x' [4]", "'y' [3]", "broadcast");
  EXPECT_ERROR(concat({x, Input({2, 2}, "img")}), "concat", "'img' [2, 2]", "agree");
  EXPECT_ERROR(split(x, {1, 2}), "add up to 3", "'x' [4]");
  EXPECT_ERROR(x.slice(1, 3, 9), "[3, 9)", "'x' [4]");
  EXPECT_ERROR(x.sum(0), "batch axis");
  auto conv = conv2d(2);
  conv->set_name("conv");
  EXPECT_ERROR(call(conv, x), "layer 'conv' applied to 'x' [4]");
  EXPECT_ERROR(Input({3}, "bad name"), "letters, digits");
  // An output that reads an input the model does not list.
  auto h = call(dense(2), x + call(dense(4), y));
  EXPECT_ERROR(Model({x}, h), "output 'output' depends on input 'y'", "not among the model's inputs (x)");
  // Two layers with one name.
  auto d1 = dense(2), d2 = dense(2);
  d1->set_name("head"), d2->set_name("head");
  EXPECT_ERROR(Model({x}, call(d1, x) + call(d2, x)), "two different layers are named 'head'");
  EXPECT_ERROR(Model({x, x}, x), "listed twice");
  // An unused input is legal, and said.
  Model m({x, y}, call(dense(1), x));
  ASSERT_EQ(m.warnings().size(), 1u);
  EXPECT_NE(m.warnings()[0].find("input 'y' is not used"), std::string::npos);
}

TEST(ModelGraph, ASharedLayerHasOneSetOfNamedParameters) {
  TwoHeads m = two_heads();
  Trainer t(m.model, two_terms(), std::make_shared<SGD>(0.1));
  t.compile({4});
  const auto params = t.params();
  std::vector<std::string> names;
  for (const auto& [name, a] : params) names.push_back(name);
  // enc once (shared), u_head by name, the unnamed v head by its position among the layers.
  EXPECT_EQ(names, (std::vector<std::string>{"0.bias", "0.weight", "enc.bias", "enc.weight", "u_head.bias",
                                             "u_head.weight"}));
  EXPECT_EQ(params.at("enc.weight").shape(), (Shape{8, 3}));
  EXPECT_EQ(params.at("u_head.weight").shape(), (Shape{1, 18}));
  EXPECT_NE(m.model->describe().find("enc@1 = dense("), std::string::npos) << m.model->describe();
}

// The total is the weighted sum of the terms, each the loss of predict's outputs.
TEST(ModelGraph, TermsAreReportedByNameAndWeightedInTheTotal) {
  TwoHeads m = two_heads();
  Trainer t(m.model, two_terms(), std::make_shared<SGD>(1e-12));
  t.compile({6});
  const NamedArrays X = inputs_of(6, 10), Y = targets_of(6, 10);
  const float total = t.one_step(X, Y);
  const auto terms = t.loss_terms();
  ASSERT_EQ(terms.size(), 2u);
  const NamedArrays out = t.predict(X);
  EXPECT_EQ(out.at("u").shape(), (Shape{6, 1}));
  EXPECT_EQ(out.at("v").shape(), (Shape{6, 2}));
  EXPECT_NEAR(terms.at("u"), mse(out.at("u"), Y.at("u")), 1e-5);
  EXPECT_NEAR(terms.at("v"), mse(out.at("v"), Y.at("v")), 1e-5);
  EXPECT_NEAR(total, terms.at("u") + 0.5 * terms.at("v"), 1e-5);
  const EvalResult e = t.evaluate(X, Y);
  EXPECT_NEAR(e.loss, total, 1e-5);
  EXPECT_NEAR(e.terms.at("v"), terms.at("v"), 1e-5);
}

// One SGD step moves every parameter by -lr * gradient; the gradient against central differences
// of evaluate's total (float32 forward, so a loose tolerance), for every parameter tensor.
TEST(ModelGraph, GradientsOfTheWeightedTotalMatchFiniteDifferences) {
  TwoHeads m = two_heads();
  const double lr = 1.0;
  Trainer t(m.model, two_terms(), std::make_shared<SGD>(lr), Device::CPU, 7);
  t.compile({5});
  const NamedArrays X = inputs_of(5, 20), Y = targets_of(5, 20);
  const auto before = t.params();
  t.one_step(X, Y);
  const auto after = t.params();
  Trainer probe(m.model, two_terms(), std::make_shared<SGD>(1e-12), Device::CPU, 7);
  probe.compile({5});
  for (const auto& param : before) {
    const std::string& name = param.first;  // a structured binding cannot be captured in C++17
    const HostArray& w0 = param.second;
    for (int64_t k = 0; k < w0.numel(); k += std::max<int64_t>(1, w0.numel() / 7)) {
      auto at = [&](double delta) {
        auto p = before;
        p.at(name).data<float>()[k] += static_cast<float>(delta);
        probe.set_params(p);
        return probe.evaluate(X, Y).loss;
      };
      const double h = 1e-2, fd = (at(h) - at(-h)) / (2 * h);
      const double grad = (w0.data<float>()[k] - after.at(name).data<float>()[k]) / lr;
      EXPECT_NEAR(grad, fd, 2e-3 + 2e-2 * std::fabs(fd)) << name << "[" << k << "]";
    }
  }
}

// A padded last batch trains like the same rows compiled exactly.
TEST(ModelGraph, APaddedBatchIsExact) {
  TwoHeads m = two_heads();
  TrainerOptions pad;
  pad.shape_policy = ShapePolicy::Pad;
  Trainer padded(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CPU, 3, pad);
  Trainer exact(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CPU, 3);
  padded.compile({8});
  exact.compile({5});
  for (int s = 0; s < 3; ++s) {
    const NamedArrays X = inputs_of(5, 30 + s), Y = targets_of(5, 30 + s);
    EXPECT_NEAR(padded.one_step(X, Y), exact.one_step(X, Y), 1e-6) << "step " << s;
  }
  const auto a = padded.params(), b = exact.params();
  for (const auto& [name, w] : a)
    for (int64_t k = 0; k < w.numel(); ++k) EXPECT_NEAR(w.data<float>()[k], b.at(name).data<float>()[k], 1e-6) << name;
}

TEST(ModelGraph, BatchesByNameAreChecked) {
  TwoHeads m = two_heads();
  Trainer t(m.model, two_terms(), std::make_shared<SGD>(0.1));
  t.compile({4});
  NamedArrays X = inputs_of(4, 1), Y = targets_of(4, 1);
  NamedArrays missing = X;
  missing.erase("t");
  EXPECT_ERROR(t.one_step(missing, Y), "input 't' is missing", "x1, x2, t");
  NamedArrays extra = X;
  extra["z"] = random_f32({4, 1}, 2);
  EXPECT_ERROR(t.one_step(extra, Y), "no input 'z'");
  NamedArrays wide = X;
  wide["t"] = random_f32({4, 3}, 2);
  EXPECT_ERROR(t.one_step(wide, Y), "input 't' has shape [4, 3]", "takes [4, 2]");
  NamedArrays short_rows = X;
  short_rows["x2"] = random_f32({3, 3}, 2);
  EXPECT_ERROR(t.one_step(short_rows, Y), "has 3 rows", "has 4");
  NamedArrays no_v = Y;
  no_v.erase("v");
  EXPECT_ERROR(t.one_step(X, no_v), "target of output 'v' is missing");
  NamedArrays bad_v = Y;
  bad_v["v"] = random_f32({4, 1}, 2);
  EXPECT_ERROR(t.one_step(X, bad_v), "target 'v' has shape [4, 1]", "needs [4, 2]");
  EXPECT_ERROR(t.one_step(random_f32({4, 8}, 1), random_f32({4, 1}, 1)), "named inputs (x1, x2, t)");
  EXPECT_ERROR(Trainer(m.model, {{"w", std::make_shared<MeanSquaredError>(), 1.0}}, std::make_shared<SGD>(0.1)),
               "no output of that name", "u, v");
  EXPECT_ERROR(Trainer(m.model, {{"u", std::make_shared<MeanSquaredError>(), -1.0}}, std::make_shared<SGD>(0.1)),
               "weight must be finite and >= 0");
  EXPECT_ERROR(t.compile({4, 8}), "a graph model takes {batch}");
}

// A model of one input and one output is a layer: it trains like the Sequential it spells out.
TEST(ModelGraph, AOneInputModelIsALayer) {
  auto x = Input({5}, "x");
  auto model = std::make_shared<Model>(std::vector<SymbolicTensor>{x},
                                       call(dense(3), call(dense(7, Activation::Tanh), x)));
  auto seq = sequential({dense(7, Activation::Tanh), dense(3)});
  Trainer a(model, std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CPU, 5);
  Trainer b(seq, std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CPU, 5);
  a.compile({6, 5});
  b.compile({6, 5});
  for (int s = 0; s < 3; ++s) {
    const HostArray X = random_f32({6, 5}, 40 + s), Y = random_f32({6, 3}, 50 + s);
    EXPECT_EQ(a.one_step(X, Y), b.one_step(X, Y)) << "step " << s;
  }
}

TEST(ModelGraph, CheckpointsResumeExactly) {
  TwoHeads m = two_heads();
  const std::string dir = fresh_dir("model_graph", "checkpoint");
  Trainer a(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CPU, 9);
  a.compile({4});
  a.one_step(inputs_of(4, 60), targets_of(4, 60));
  a.save(dir + "/c.safetensors");
  Trainer b(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CPU, 1);
  b.compile({4});
  b.load(dir + "/c.safetensors");
  for (int s = 0; s < 2; ++s)
    EXPECT_EQ(a.one_step(inputs_of(4, 70 + s), targets_of(4, 70 + s)),
              b.one_step(inputs_of(4, 70 + s), targets_of(4, 70 + s)));
  // Other weights on the terms are another setup.
  Trainer c(m.model, {{"u", std::make_shared<MeanSquaredError>(), 2.0}, {"v", std::make_shared<MeanSquaredError>(), 0.5}},
            std::make_shared<Adam>(1e-2));
  c.compile({4});
  EXPECT_ERROR(c.load(dir + "/c.safetensors"), "another setup", "loss");
}

// model.type "graph" in a configuration: errors name the node's JSON path.
std::string graph_config(const std::string& inputs, const std::string& nodes, const std::string& outputs) {
  return R"({"model": {"type": "graph", "inputs": )" + inputs + R"(, "nodes": )" + nodes + R"(, "outputs": )" +
         outputs + R"(}, "data": {"source": "synthetic_regression", "samples": 64, "features": 3, "targets": 1},
         "train": {"steps": 2, "batch_size": 8}})";
}

TEST(ModelGraph, ConfigGraphsBuildAndShareLayers) {
  const RunConfig c = parse_config_text(
      graph_config(R"({"x": 3})",
                   R"([{"name": "u", "type": "add", "inputs": ["a", "b"]},
                       {"name": "a", "type": "dense", "units": 4, "activation": "tanh", "input": "x"},
                       {"name": "b", "layer": "a", "input": "x2"},
                       {"name": "x2", "type": "scale_shift", "input": "x", "scale": 2.0},
                       {"name": "s", "type": "split", "input": "u", "sizes": [1, 3]},
                       {"name": "y", "type": "dense", "units": 1, "input": "s:1"}])",
                   R"({"y": "y"})"),
      "graph.json");
  auto m = std::dynamic_pointer_cast<Model>(c.model);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->output_shape("y"), (Shape{1}));
  Trainer t(c.model, std::make_shared<MeanSquaredError>(), std::make_shared<SGD>(0.1));
  t.compile({8, 3});
  std::vector<std::string> names;
  for (const auto& [name, a] : t.params()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.bias", "a.weight", "y.bias", "y.weight"}));  // b shares a's
  EXPECT_TRUE(std::isfinite(t.one_step(random_f32({8, 3}, 1), random_f32({8, 1}, 2))));
}

TEST(ModelGraph, ConfigGraphErrorsNameTheNodeAndPath) {
  auto parse = [](const std::string& nodes, const std::string& outputs = R"({"y": "y"})",
                  const std::string& inputs = R"({"x": 3})") {
    parse_config_text(graph_config(inputs, nodes, outputs), "g.json");
  };
  EXPECT_ERROR(parse(R"([{"name": "y", "type": "dense", "units": 1, "input": "z"}])"), "model.nodes[0].input",
               "'z' is neither an input (x) nor a node");
  EXPECT_ERROR(parse(R"([{"name": "y", "type": "add", "inputs": ["x", "b"]},
                         {"name": "b", "type": "mul", "inputs": ["y", "x"]}])"),
               "the nodes form a cycle", "b -> y -> b");
  EXPECT_ERROR(parse(R"([{"name": "a", "type": "dense", "units": 4, "input": "x"},
                         {"name": "y", "type": "concat", "inputs": ["a", "img"]}])",
                     R"({"y": "y"})", R"({"x": 3, "img": [2, 2]})"),
               "model.nodes[1] ('y')", "'a' [4], 'img' [2, 2]");
  EXPECT_ERROR(parse(R"([{"name": "y", "type": "dense", "units": 1, "input": "x", "color": 1}])"),
               "model.nodes[0].color: unknown key");
  EXPECT_ERROR(parse(R"([{"name": "y", "type": "dense", "units": 1, "input": "x"},
                         {"name": "y", "type": "dense", "units": 1, "input": "x"}])"),
               "model.nodes[1].name", "names two nodes");
  EXPECT_ERROR(parse(R"([{"name": "y", "type": "dense", "units": 1, "input": "x"}])", R"({"y": "q"})"),
               "model.outputs.y", "'q' is neither");
  EXPECT_ERROR(parse(R"([{"name": "y", "layer": "x", "input": "x"}])"), "model.nodes[0].layer", "'x' is not a node");
}

TEST(ModelGraph, CudaTrainsLikeTheCpu) {
  REQUIRE_GPU();
  TwoHeads m = two_heads();
  TrainerOptions eager;
  eager.mode = ExecMode::Eager;
  Trainer cpu(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CPU, 11);
  Trainer gpu(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CUDA, 11);
  cpu.compile({16});
  gpu.compile({16});
  for (int s = 0; s < 5; ++s) {
    const NamedArrays X = inputs_of(16, 80 + s), Y = targets_of(16, 80 + s);
    const float lc = cpu.one_step(X, Y), lg = gpu.one_step(X, Y);
    EXPECT_NEAR(lg, lc, 1e-4 * std::max(1.0f, std::fabs(lc))) << "step " << s;
  }
  const auto tc = cpu.loss_terms(), tg = gpu.loss_terms();
  for (const auto& [name, v] : tc) EXPECT_NEAR(tg.at(name), v, 1e-4 * std::max(1.0f, std::fabs(v))) << name;
  const NamedArrays pc = cpu.predict(inputs_of(21, 90)), pg = gpu.predict(inputs_of(21, 90));
  for (const auto& [name, a] : pc) {
    const ArrayDiff d = array_diff(a, pg.at(name));
    EXPECT_LE(d.rel, 1e-4) << name;
  }
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

// evaluate in chunks of the compiled batch equals one chunk of all rows, also for a class-weighted
// cross-entropy (whose mean divides by the labels' summed weights, not by rows).
TEST(ModelGraph, ChunkedEvaluateIsExactForWeightedCrossEntropy) {
  const TwoHeads m = two_heads();
  std::vector<LossTerm> terms = {{"u", std::make_shared<MeanSquaredError>(), 1.0},
                                 {"v", std::make_shared<SoftmaxCrossEntropy>(Reduction::Mean, 0.1,
                                                                             std::vector<float>{0.2f, 3.0f}),
                                  0.5}};
  Trainer chunked(m.model, terms, std::make_shared<Adam>(1e-3), Device::CPU, 1),
      whole(m.model, terms, std::make_shared<Adam>(1e-3), Device::CPU, 1);
  chunked.compile({4});
  whole.compile({10});
  const NamedArrays X = inputs_of(10, 40);
  NamedArrays Y = {{"u", random_f32({10, 1}, 41)}, {"v", HostArray::i32({10}, {0, 1, 1, 0, 1, 0, 0, 0, 1, 1})}};
  const EvalResult a = chunked.evaluate(X, Y), b = whole.evaluate(X, Y);
  EXPECT_NEAR(a.terms.at("v"), b.terms.at("v"), 1e-6 * std::fabs(b.terms.at("v")));
  EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::fabs(b.loss));
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

// --mode verify on the graph-model example configs: graph replay equals eager, and each CUDA
// step agrees with the CPU's from the same state (dropout masks, batch statistics included).
TEST(ModelGraph, ExampleConfigsVerifyOnCuda) {
  REQUIRE_GPU();
  for (const char* name : {"deeponet", "two_input_regression", "graph_regression"}) {
    const RunConfig cfg = load_config(std::string(SG_SOURCE_DIR) + "/configs/" + name + ".json");
    const VerifyResult r = verify_run(cfg, RunOptions{}, 20, 1e-3);
    std::cout << "[ verify   ] " << name << ": " << r.to_json().dump() << "\n";
    EXPECT_EQ(r.graph_vs_eager, 0.0) << name;
    EXPECT_TRUE(r.ok) << name << ": " << r.to_json().dump();
  }
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

// bench/configs/*_graph.json spell the bench MLPs as graph models (their layers named d0, d1,
// ...): from the same initial weights and batches they train bitwise as the Sequential on the CPU.
TEST(ModelGraph, BenchConfigsAsGraphsTrainAsTheirSequentials) {
  for (const char* name : {"seed_mlp", "mlp_8x256"}) {
    const std::string dir = std::string(SG_SOURCE_DIR) + "/bench/configs/";
    const RunConfig seq_cfg = load_config(dir + name + ".json"), graph_cfg = load_config(dir + name + "_graph.json");
    EXPECT_FALSE(graph_cfg.named()) << name << ": one input, one output, one loss trains as any model";
    const Dataset data = load_data(seq_cfg.data);
    auto seq = trainer_from_config(seq_cfg, Device::CPU, 3, seq_cfg.trainer),
         graph = trainer_from_config(graph_cfg, Device::CPU, 3, graph_cfg.trainer);
    const int64_t B = 16, D = data.X.shape()[1];
    seq->compile({B, D});
    graph->compile({B, D});
    std::map<std::string, HostArray> renamed;
    for (const auto& [param, v] : seq->params()) renamed.emplace("d" + param, v);  // 0.weight -> d0.weight
    graph->set_params(renamed);
    for (int64_t s = 0; s < 3; ++s) {
      std::vector<int64_t> rows;
      for (int64_t r = 0; r < B; ++r) rows.push_back((s * 37 + r * 11) % data.X.shape()[0]);
      const Dataset b = gather(data, rows);
      EXPECT_EQ(seq->one_step(b.X, b.y), graph->one_step(b.X, b.y)) << name << " step " << s;
    }
  }
}

}  // namespace
}  // namespace sg::test

namespace sg::test {
namespace {

NamedDeviceArrays views_of(const NamedArrays& arrays) {
  NamedDeviceArrays out;
  for (const auto& [name, a] : arrays) out.emplace(name, DeviceArray{a.raw(), a.shape(), a.dtype()});
  return out;
}

// Batches already in device memory by name: the CPU backend's device memory is host memory, so
// the same arrays through set_batch_device train exactly as through set_batch.
TEST(ModelGraph, DeviceBatchesByNameTrainAsHostBatches) {
  TwoHeads m = two_heads();
  Trainer host(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CPU, 4);
  Trainer dev(m.model, two_terms(), std::make_shared<Adam>(1e-2), Device::CPU, 4);
  host.compile({8});
  dev.compile({8});
  for (int s = 0; s < 3; ++s) {
    const int64_t rows = s < 2 ? 8 : 5;  // a smaller batch: its own compiled shape
    const NamedArrays X = inputs_of(rows, 30 + s), Y = targets_of(rows, 30 + s);
    dev.set_batch_device(views_of(X), views_of(Y));
    dev.launch();
    EXPECT_EQ(dev.loss(), host.one_step(X, Y)) << "step " << s;
  }
  const NamedArrays X = inputs_of(8, 1), Y = targets_of(8, 1);
  NamedDeviceArrays bad = views_of(Y);
  bad["v"].shape = {8, 3};
  EXPECT_ERROR(dev.set_batch_device(views_of(X), bad), "batch target 'v' has shape [8, 3]", "needs [8, 2]");
  bad = views_of(X);
  bad["t"].data = nullptr;
  EXPECT_ERROR(dev.set_batch_device(bad, views_of(Y)), "'t' is a null pointer");
  bad = views_of(X);
  bad.erase("x2");
  EXPECT_ERROR(dev.set_batch_device(bad, views_of(Y)), "input 'x2' is missing");
}

}  // namespace
}  // namespace sg::test
