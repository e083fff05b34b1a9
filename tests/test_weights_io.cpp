// Weights in and out (Trainer::load_weights, export_weights, torch_module): files of weights alone
// in any float type, strict and lenient loads, and the state_dict names of the matching
// torch.nn.Sequential, which load back.
#include <cstring>

#include "stepgraph/safetensors.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"

namespace sg::test {
namespace {

std::unique_ptr<Trainer> mlp(uint64_t seed, Activation act = Activation::Tanh) {
  auto t = std::make_unique<Trainer>(sequential({dense(8, act), dropout(0.25), layer_norm(), dense(3)}),
                                     std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2), Device::CPU,
                                     seed);
  t->compile({4, 5});
  return t;
}

bool same(const HostArray& a, const HostArray& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(Weights, AParametersOnlyFileLoadsAndReportsWhatItTook) {
  const std::string path = fresh_dir("weights", "plain") + "/w.safetensors";
  auto src = mlp(1);
  std::vector<std::pair<std::string, HostArray>> tensors;
  for (const auto& [name, a] : src->params()) tensors.emplace_back(name, a);
  write_safetensors(path, tensors);  // no metadata at all
  auto t = mlp(2);
  const WeightsReport r = t->load_weights(path);
  EXPECT_EQ(r.loaded, (std::vector<std::string>{"0.weight", "0.bias", "2.gain", "2.shift", "3.weight", "3.bias"}));
  EXPECT_TRUE(r.missing.empty() && r.unexpected.empty() && r.converted.empty());
  EXPECT_EQ(r.naming, "stepgraph");
  for (const auto& [name, a] : src->params()) EXPECT_TRUE(same(a, t->params().at(name))) << name;
  EXPECT_EQ(t->step(), 0);
}

TEST(Weights, StrictRefusesListingEverythingAndLenientTakesWhatFits) {
  const std::string path = fresh_dir("weights", "partial") + "/w.safetensors";
  auto src = mlp(1);
  write_safetensors(path, {{"0.weight", src->params().at("0.weight")}, {"extra", HostArray::f32({2}, {1, 2})}});
  auto t = mlp(2);
  const HostArray before = t->params().at("3.weight");
  EXPECT_ERROR(t->load_weights(path), "weights file '" + path + "' does not fit this model's parameters",
               "missing: '0.bias' (parameter), '2.gain' (parameter)", "not in this model: 'extra'", "strict=False");
  EXPECT_FALSE(same(t->params().at("0.weight"), src->params().at("0.weight")));  // nothing written
  const WeightsReport r = t->load_weights(path, false);
  EXPECT_EQ(r.loaded, std::vector<std::string>{"0.weight"});
  EXPECT_EQ(r.missing.size(), 5u);
  EXPECT_EQ(r.unexpected, std::vector<std::string>{"extra"});
  EXPECT_TRUE(same(t->params().at("0.weight"), src->params().at("0.weight")));
  EXPECT_TRUE(same(t->params().at("3.weight"), before));
  // Other shapes are refused either way.
  write_safetensors(path, {{"0.weight", HostArray::f32({8, 4}, std::vector<float>(32, 0.f))}});
  EXPECT_ERROR(t->load_weights(path, false), "'0.weight' is f32 [8, 4] there but f32 [8, 5] here");
}

TEST(Weights, TheTorchExportHasTheSequentialsNamesAndLoadsBack) {
  const std::string dir = fresh_dir("weights", "torch");
  auto t = mlp(3, Activation::ReLU);
  EXPECT_EQ(t->torch_module(),
            "torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Dropout(0.25), "
            "torch.nn.LayerNorm(8, eps=1e-05), torch.nn.Linear(8, 3))");
  t->export_weights(dir + "/torch.safetensors", ExportFormat::Torch);
  const SafetensorsFile f = read_safetensors(dir + "/torch.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, a] : f.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "4.weight", "4.bias"}));
  EXPECT_TRUE(same(*f.find("3.weight"), t->params().at("2.gain")));
  EXPECT_TRUE(same(*f.find("4.weight"), t->params().at("3.weight")));
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("torch_module"), t->torch_module());
  auto back = mlp(4, Activation::ReLU);
  const WeightsReport r = back->load_weights(dir + "/torch.safetensors");
  EXPECT_EQ(r.naming, "torch");
  EXPECT_TRUE(r.missing.empty() && r.unexpected.empty());
  for (const auto& [name, a] : t->params()) EXPECT_TRUE(same(a, back->params().at(name))) << name;
  // safetensors: our names, the weights alone.
  t->export_weights(dir + "/plain.safetensors", ExportFormat::Safetensors);
  const SafetensorsFile p = read_safetensors(dir + "/plain.safetensors");
  EXPECT_EQ(p.tensors.size(), 6u);
  EXPECT_TRUE(p.find("2.gain") != nullptr);
  EXPECT_ERROR(back->load(dir + "/plain.safetensors"), "is not a stepgraph checkpoint (metadata format is "
                                                       "'stepgraph-weights')", "load_weights");
}

TEST(Weights, ModelsWithoutATorchModuleSayWhichLayerAndWhatToDo) {
  Trainer sin(sequential({dense(4, Activation::Sin), dense(1)}), std::make_shared<MeanSquaredError>(),
              std::make_shared<Adam>(1e-2));
  sin.compile({2, 3});
  EXPECT_ERROR(sin.torch_module(), "layer '0' uses activation sin", "export to ONNX instead");
  auto cnn = sequential({conv2d(2), flatten(), dense(1)});
  cnn->set_input_shape({4, 4, 1});
  Trainer img(cnn, std::make_shared<MeanSquaredError>(), std::make_shared<Adam>(1e-2));
  img.compile({2, 16});
  EXPECT_ERROR(img.torch_module(), "views its rows as [4, 4, 1] images (NHWC here, NCHW in torch)", "ONNX");
  Trainer conv(sequential({dense(16), residual(dense(16)), dense(1)}), std::make_shared<MeanSquaredError>(),
               std::make_shared<Adam>(1e-2));
  conv.compile({2, 3});
  EXPECT_ERROR(conv.torch_module(), "layer '1' (residual(", "no torch.nn module with the same parameters and layout");
  EXPECT_ERROR(parse_export_format("onnx"), "not one of: safetensors, torch", "python -m stepgraph export");
}

}  // namespace
}  // namespace sg::test
