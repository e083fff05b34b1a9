// The Trainer's weights in and out: params / set_params / state (by name, numpy or DLPack), save /
// load / load_weights (checkpoints and weights files), export (torch and safetensors here; ONNX by
// stepgraph/_onnx.py, from the forward program _inference_graph gives).
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <variant>

#include "common.h"

namespace sgpy {

namespace {

using namespace nb::literals;
using nlohmann::json;

// An op's attributes as the exporters read them (the kinds a forward program holds).
json attrs_json(const sg::Op& op) {
  return std::visit(
      [](const auto& a) -> json {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, sg::DenseAttrs>) {
          return {{"act", sg::activation_name(a.act)}, {"bias_rows", a.bias_rows}};
        } else if constexpr (std::is_same_v<T, sg::ActivationAttrs>) {
          return {{"act", sg::activation_name(a.act)}, {"negative_slope", a.negative_slope}, {"alpha", a.alpha}};
        } else if constexpr (std::is_same_v<T, sg::ScaleShiftAttrs>) {
          return {{"a", a.a}, {"b", a.b}};
        } else if constexpr (std::is_same_v<T, sg::ConcatAttrs>) {
          return {{"axis", a.axis}};
        } else if constexpr (std::is_same_v<T, sg::SplitAttrs>) {
          return {{"axis", a.axis}, {"sizes", a.sizes}};
        } else if constexpr (std::is_same_v<T, sg::SliceAttrs>) {
          return {{"axis", a.axis}, {"begin", a.begin}, {"end", a.end}};
        } else if constexpr (std::is_same_v<T, sg::ReduceAttrs>) {
          return {{"axis", a.axis}, {"keepdims", a.keepdims}};
        } else if constexpr (std::is_same_v<T, sg::MatMulAttrs>) {
          return {{"trans_a", a.trans_a}, {"trans_b", a.trans_b}};
        } else if constexpr (std::is_same_v<T, sg::TransposeAttrs>) {
          return {{"axis_a", a.axis_a}, {"axis_b", a.axis_b}};
        } else if constexpr (std::is_same_v<T, sg::ConvAttrs>) {
          return {{"pad", {a.pad_h, a.pad_w}}, {"stride", {a.stride_h, a.stride_w}},
                  {"dilation", {a.dil_h, a.dil_w}}, {"act", sg::activation_name(a.act)}};
        } else if constexpr (std::is_same_v<T, sg::PoolAttrs>) {
          return {{"window", {a.window_h, a.window_w}}, {"stride", {a.stride_h, a.stride_w}},
                  {"pad", {a.pad_h, a.pad_w}}};
        } else if constexpr (std::is_same_v<T, sg::NormAttrs>) {
          return {{"eps", a.eps}};
        } else if constexpr (std::is_same_v<T, sg::BatchNormAttrs>) {
          return {{"eps", a.eps}};
        } else if constexpr (std::is_same_v<T, sg::AttentionAttrs>) {
          return {{"heads", a.heads}, {"causal", a.causal}, {"scale", a.scale}};
        } else if constexpr (std::is_same_v<T, sg::JetAttrs>) {
          return {{"act", sg::activation_name(a.act)}, {"components", a.jet.K()}, {"head", a.head}};
        } else {
          return json::object();
        }
      },
      op.attrs);
}

// The forward program as plain data: {inputs, outputs: [{name, tensor}], tensors: {name: {shape,
// dtype, role}}, ops: [{kind, name, in, out (null: an absent slot), attrs}]}.
std::string inference_graph_json(const sg::InferenceGraph& g) {
  const sg::Program& p = *g.program;
  auto names = [&](const std::vector<sg::TensorId>& ids) {
    json out = json::array();
    for (sg::TensorId t : ids) out.push_back(t == sg::kNone ? json() : json(p.tensor(t).name));
    return out;
  };
  auto ends = [&](const std::vector<std::pair<std::string, sg::TensorId>>& list) {
    json out = json::array();
    for (const auto& [name, t] : list) out.push_back({{"name", name}, {"tensor", p.tensor(t).name}});
    return out;
  };
  json tensors = json::object();
  for (const sg::TensorInfo& t : p.tensors())
    tensors[t.name] = {{"shape", t.shape}, {"dtype", sg::dtype_name(t.dtype)}, {"role", sg::role_name(t.role)}};
  json ops = json::array();
  for (const sg::Op& op : p.ops())
    ops.push_back({{"kind", sg::op_kind_name(op.kind)}, {"name", op.name}, {"in", names(op.in)},
                   {"out", names(op.out)}, {"attrs", attrs_json(op)}});
  return json{{"inputs", ends(g.inputs)}, {"outputs", ends(g.outputs)}, {"tensors", tensors}, {"ops", ops}}.dump();
}

}  // namespace

void bind_trainer_weights(nb::module_& m, nb::class_<PyTrainer>& cls) {
  nb::class_<sg::WeightsReport>(m, "WeightsReport",
                                "What Trainer.load_weights took and left, as PyTorch's load_state_dict reports it.")
      .def_ro("loaded", &sg::WeightsReport::loaded, "This model's weights taken from the file, in model order.")
      .def_ro("missing", &sg::WeightsReport::missing, "This model's weights the file does not hold (missing_keys).")
      .def_ro("unexpected", &sg::WeightsReport::unexpected,
              "The file's tensors this model has no weight for (unexpected_keys).")
      .def_ro("converted", &sg::WeightsReport::converted,
              "Loaded weights stored in another type, converted to float32: name -> the file's dtype ('F64').")
      .def_ro("naming", &sg::WeightsReport::naming,
              "The file's names: 'stepgraph', or 'torch' (a state_dict of Trainer.torch_module()).")
      .def("__repr__", [](const sg::WeightsReport& r) {
        return sg::cat("WeightsReport(loaded=", r.loaded.size(), ", missing=[", sg::joined(r.missing),
                       "], unexpected=[", sg::joined(r.unexpected), "], naming='", r.naming, "')");
      });
  cls.def("params",
           [](PyTrainer& s) {
             std::vector<std::string> order;
             auto m = locked(s, [&](sg::Trainer& t) {
               order = param_names(t);
               return t.params();
             });
             return to_dict(std::move(m), order);
           },
           "Parameters by name ('0.weight' [out, in], '0.bias' [out], ...) as numpy copies, "
           "in model order.")
      .def("set_params",
           [](PyTrainer& s, nb::handle values) {
             if (!nb::hasattr(values, "items"))
               throw InputError("set_params: expected a dict of name -> array");
             std::map<std::string, sg::HostArray> host;
             std::vector<std::pair<std::string, Imported>> device;
             std::map<std::string, sg::Shape> shapes;
             std::string known;
             {
               std::lock_guard<std::mutex> lock(s.mu);
               if (s.t.is_compiled())
                 for (const sg::TensorInfo& ti : s.t.program().tensors())
                   if (ti.role == sg::Role::Parameter) {
                     shapes[ti.name] = ti.shape;
                     known += (known.empty() ? "" : ", ") + ti.name;
                   }
             }
             for (nb::handle item : values.attr("items")()) {
               if (!nb::isinstance<nb::str>(item[0]))
                 throw InputError("set_params: parameter names must be strings, got " + py_type_name(item[0]));
               const std::string name = nb::cast<std::string>(item[0]);
               const std::string what = "set_params: '" + name + "'";
               Imported a = import_array(item[1], what);
               check_device(s, a, "set_params", "'" + name + "'", true);
               if (!shapes.empty()) {
                 auto it = shapes.find(name);
                 if (it == shapes.end())
                   throw InputError("set_params: no parameter named '" + name + "' (parameters: " + known + ")");
                 sg::Shape got(a.ndim());
                 for (size_t k = 0; k < a.ndim(); ++k) got[k] = a.dim(k);
                 if (got != it->second)
                   throw InputError("set_params: '" + name + "' must be f32 " + sg::shape_str(it->second) + ", got " +
                                    a.describe());
               }
               if (a.on_device) {
                 if (!a.is(kFloat, 32) || !a.c_contiguous())
                   throw InputError("set_params: '" + name + "' must be a C-contiguous float32 tensor, got " +
                                    a.describe());
                 if (shapes.empty()) not_compiled("set_params");
                 device.emplace_back(name, std::move(a));
               } else {
                 host[name] = host_f32(a, what);
               }
             }
             locked(s, [&](sg::Trainer& t) {
               if (!host.empty()) t.set_params(host);
               if (device.empty()) return;
               cuda_device_synchronize();
               for (const auto& [name, a] : device) t.backend().copy_on_device(t.device_ptr(name), a.array.data(), a.array.nbytes());
               t.backend().synchronize();
             });
           },
           "values"_a,
           "Writes the given parameters in place (no recompile). Every name must be a parameter "
           "with the right shape; on a mismatch nothing is written. Values: numpy arrays "
           "(float64 converted), CPU tensors, or CUDA tensors (copied device to device).")
      .def("state",
           [](PyTrainer& s) {
             std::vector<std::string> order;
             auto m = locked(s, [&](sg::Trainer& t) {
               if (t.is_compiled())
                 for (const sg::TensorInfo& ti : t.program().tensors()) order.push_back(ti.name);
               return t.state();
             });
             return to_dict(std::move(m), order);
           },
           "Every persistent tensor (parameters, gradients, optimizer state, step scalars) by name.")
      .def("save",
          [](PyTrainer& s, const std::filesystem::path& p) { locked(s, [&](sg::Trainer& t) { t.save(p.string()); }); },
          "path"_a,
          "Writes a safetensors checkpoint (parameters, optimizer state, step scalars, seed), atomically.")
      .def("load",
           [](PyTrainer& s, const std::filesystem::path& p, bool weights_only, bool strict) -> nb::object {
             if (!weights_only && strict) {
               locked(s, [&](sg::Trainer& t) { t.load(p.string(), sg::LoadMode::Resume); });
               return nb::none();
             }
             return nb::cast(locked(s, [&](sg::Trainer& t) { return t.load_weights(p.string(), strict); }));
           },
           "path"_a, "weights_only"_a = false, "strict"_a = true,
           "Reads a checkpoint; the whole file is validated before anything changes. By default it takes "
           "everything (parameters, optimizer state, step) and the model, loss and optimizer must be the ones it "
           "was saved from. weights_only=True takes only the parameters (load_weights), into any setup of the same "
           "shapes, and returns its WeightsReport; strict=False implies weights_only and takes the weights that "
           "fit, reporting the rest.")
      .def("load_weights",
           [](PyTrainer& s, const std::filesystem::path& p, bool strict) {
             return locked(s, [&](sg::Trainer& t) { return t.load_weights(p.string(), strict); });
           },
           "path"_a, "strict"_a = true,
           "Loads a weights file: parameters-only safetensors (float32, or float64/float16/bfloat16 converted), a "
           "checkpoint's parameters, or a state_dict of torch_module() saved with safetensors.torch.save_file (its "
           "names are recognised). Shapes must match. strict: every weight present and nothing extra, else an "
           "error listing each; strict=False takes what fits. Returns a WeightsReport (loaded, missing, unexpected, "
           "converted, naming). The step and optimizer state are kept.")
      .def("torch_module", [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.torch_module(); }); },
           "The torch.nn.Sequential (as Python source) whose state_dict export(format='torch') writes.")
      .def("export",
           [](PyTrainer& s, const std::filesystem::path& p, const std::string& format, int opset) {
             if (format == "onnx") {
               nb::object self = nb::find(&s);
               nb::module_::import_("stepgraph._onnx").attr("export_onnx")(self, p, opset);
               return;
             }
             const sg::ExportFormat f = as_input_error([&] { return sg::parse_export_format(format); });
             locked(s, [&](sg::Trainer& t) { t.export_weights(p.string(), f); });
           },
           "path"_a, "format"_a = "torch", "opset"_a = 17,
           "Writes the model for another tool. format='torch': a safetensors file of the parameters under the "
           "names torch_module()'s state_dict uses (torch.nn.Sequential.load_state_dict takes it); "
           "'safetensors': the parameters under stepgraph's names; 'onnx': the inference graph (needs the onnx "
           "package; opset: the ONNX opset, 17 or later).")
      .def("_inference_graph",
           [](PyTrainer& s, int64_t rows) {
             return locked(s, [&](sg::Trainer& t) { return inference_graph_json(t.inference_graph(rows)); });
           },
           "rows"_a = 1, "The forward program predict runs, as JSON text (for the ONNX exporter).");
}

}  // namespace sgpy
