// Weights for other tools: the torch.nn.Sequential of a Sequential model and its state_dict
// names (torch_layout), Trainer::torch_module, Trainer::export_weights and the forward program
// exporters read (Trainer::inference_graph; the ONNX writer is Python's, stepgraph/_onnx.py).
#include <set>

#include "stepgraph/safetensors.h"
#include "train/torch_names.h"
#include "train/trainer_state.h"

namespace sg {

namespace {

// The torch module of a dense layer's fused activation (torch's defaults are ours: leaky_relu's
// slope 0.01, elu's alpha 1); empty: none.
std::string torch_activation(Activation a, const std::string& layer) {
  switch (a) {
    case Activation::None: return "";
    case Activation::ReLU: return "torch.nn.ReLU()";
    case Activation::GELU: return "torch.nn.GELU(approximate='tanh')";
    case Activation::GELUErf: return "torch.nn.GELU()";
    case Activation::Tanh: return "torch.nn.Tanh()";
    case Activation::Sigmoid: return "torch.nn.Sigmoid()";
    case Activation::Softplus: return "torch.nn.Softplus()";
    case Activation::SiLU: return "torch.nn.SiLU()";
    case Activation::LeakyReLU: return "torch.nn.LeakyReLU()";
    case Activation::ELU: return "torch.nn.ELU()";
    case Activation::Sin:
    case Activation::Exp:
    case Activation::Square: break;
  }
  throw Error(cat("torch export: layer '", layer, "' uses activation ", activation_name(a),
                  ", which torch.nn has no module for; export to ONNX instead"));
}

}  // namespace

TorchLayout torch_layout(const Layer& model, const std::map<std::string, Shape>& weights) {
  const auto* seq = dynamic_cast<const Sequential*>(&model);
  SG_REQUIRE(seq, "torch export: the model is ", model.describe().substr(0, 60),
             "; only a sequential model has a torch.nn.Sequential with the same names (export a graph model to "
             "ONNX)");
  SG_REQUIRE(seq->input_shape().empty(), "torch export: the model views its rows as ", shape_str(seq->input_shape()),
             " images (NHWC here, NCHW in torch): export it to ONNX");
  TorchLayout out;
  std::vector<std::string> modules;
  auto shape_of = [&](const std::string& name) -> const Shape& {
    const auto it = weights.find(name);
    SG_REQUIRE(it != weights.end(), "torch export: the model has no weight '", name, "' (is it compiled?)");
    return it->second;
  };
  auto add = [&](const std::string& ours, const std::string& local) {
    shape_of(ours);
    out.names.emplace_back(ours, cat(modules.size(), ".", local));
  };
  for (size_t i = 0; i < seq->layers().size(); ++i) {
    const Layer& l = *seq->layers()[i];
    const std::string prefix = l.name().empty() ? std::to_string(i) : l.name();
    if (const auto* d = dynamic_cast<const Dense*>(&l)) {
      const Shape& w = shape_of(prefix + ".weight");
      add(prefix + ".weight", "weight");
      if (d->has_bias()) add(prefix + ".bias", "bias");
      modules.push_back(cat("torch.nn.Linear(", w[1], ", ", w[0], d->has_bias() ? "" : ", bias=False", ")"));
      const std::string act = torch_activation(d->activation(), prefix);
      if (!act.empty()) modules.push_back(act);
    } else if (const auto* n = dynamic_cast<const LayerNorm*>(&l)) {
      const Shape& g = shape_of(prefix + ".gain");
      add(prefix + ".gain", "weight");
      add(prefix + ".shift", "bias");
      modules.push_back(cat("torch.nn.LayerNorm(", g[0], ", eps=", n->eps(), ")"));
    } else if (const auto* e = dynamic_cast<const Embedding*>(&l)) {
      SG_REQUIRE(e->positions() == 0, "torch export: embedding layer '", prefix,
                 "' adds a position table, which torch.nn.Embedding has not: export to ONNX instead");
      const Shape& t = shape_of(prefix + ".table");
      add(prefix + ".table", "weight");
      modules.push_back(cat("torch.nn.Embedding(", t[0], ", ", t[1], ")"));
    } else if (const auto* p = dynamic_cast<const Dropout*>(&l)) {
      modules.push_back(cat("torch.nn.Dropout(", p->p(), ")"));
    } else if (dynamic_cast<const Flatten*>(&l)) {
      modules.push_back("torch.nn.Flatten()");
    } else {
      throw Error(cat("torch export: layer '", prefix, "' (", l.describe().substr(0, 60),
                      ") has no torch.nn module with the same parameters and layout; export to ONNX instead"));
    }
  }
  out.module = "torch.nn.Sequential(" + joined(modules) + ")";
  return out;
}

const char* export_format_name(ExportFormat f) { return f == ExportFormat::Torch ? "torch" : "safetensors"; }

ExportFormat parse_export_format(const std::string& s) {
  if (s == "torch") return ExportFormat::Torch;
  if (s == "safetensors") return ExportFormat::Safetensors;
  throw Error(cat("export format '", s, "' is not one of: safetensors, torch",
                  s == "onnx" ? " (ONNX is written by the Python package: python -m stepgraph export --format onnx)" : ""));
}

std::map<std::string, Shape> weight_shapes(const std::vector<TensorInfo>& tensors) {
  std::map<std::string, Shape> out;
  for (const TensorInfo& t : tensors)
    if (t.role == Role::Parameter || t.role == Role::Constant) out[t.name] = t.shape;
  return out;
}

std::string Trainer::torch_module() const {
  return torch_layout(*model_, weight_shapes(persistent_tensors())).module;
}

void Trainer::export_weights(const std::string& path, ExportFormat format) const {
  const std::vector<TensorInfo> mine = persistent_tensors();
  std::vector<std::pair<std::string, HostArray>> tensors;
  std::map<std::string, std::string> meta = {{"model", model_->describe()}};
  if (format == ExportFormat::Torch) {
    const TorchLayout layout = torch_layout(*model_, weight_shapes(mine));
    for (const auto& [ours, theirs] : layout.names) tensors.emplace_back(theirs, read_tensor(ours));
    meta["format"] = "pt";  // what safetensors' torch helpers write
    meta["torch_module"] = layout.module;
  } else {
    for (const TensorInfo& t : mine)
      if (t.role == Role::Parameter || t.role == Role::Constant) tensors.emplace_back(t.name, read_tensor(t.name));
    meta["format"] = "stepgraph-weights";
  }
  write_safetensors(path, tensors, meta);
}

InferenceGraph Trainer::inference_graph(int64_t rows) {
  settle();
  SG_REQUIRE(current_, "inference_graph: the trainer is not compiled: call compile first");
  SG_REQUIRE(rows > 0, "inference_graph: rows must be positive, got ", rows);
  Variant& v = eval_variant(rows);
  InferenceGraph g;
  g.program = &v.program;
  if (graph_) {
    for (size_t i = 0; i < v.inputs.size(); ++i) g.inputs.emplace_back(graph_->input_names()[i], v.inputs[i]);
    for (size_t i = 0; i < v.outputs.size(); ++i) g.outputs.emplace_back(graph_->output_names()[i], v.outputs[i]);
  } else {
    g.inputs.emplace_back("input", v.X);
    g.outputs.emplace_back("output", v.pred);
  }
  return g;
}

}  // namespace sg
