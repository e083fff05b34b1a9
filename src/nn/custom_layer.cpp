// User-defined ops in models (custom_op.h): as a layer of one input and one output, and applied
// to model-graph tensors.
#include "ops/custom_ops.h"

namespace sg {

std::vector<TensorId> emit_custom(GraphBuilder& g, int32_t id, const std::vector<TensorId>& in, const std::string& label) {
  const CustomOpDef& d = custom_op_def(id);
  const std::string where = cat("op '", label, "' (user-defined '", d.name, "')");
  SG_REQUIRE(!g.jet(), where, ": user-defined ops do not run on jets; a physics-informed network is a chain of ",
             "built-in layers");
  Program& p = g.program();
  std::vector<Shape> per;
  for (TensorId t : in) {
    const TensorInfo& info = p.tensor(t);
    SG_REQUIRE(info.dtype == DType::F32, where, " takes f32 tensors, got '", info.name, "' ", dtype_name(info.dtype));
    per.emplace_back(info.shape.begin() + 1, info.shape.end());
  }
  const std::vector<Shape> outs = custom_output_shapes(d, per, where);
  Op op;
  op.kind = OpKind::Custom;
  op.name = label;
  op.in = in;
  op.attrs = CustomAttrs{id, false, static_cast<int32_t>(in.size()), static_cast<int32_t>(outs.size())};
  for (size_t k = 0; k < outs.size(); ++k) {
    Shape s{p.tensor(in[0]).shape[0]};
    s.insert(s.end(), outs[k].begin(), outs[k].end());
    op.out.push_back(g.tensor(outs.size() == 1 ? label : cat(label, ".", k), s, Role::Activation));
  }
  std::vector<TensorId> ids = op.out;
  p.add_op(std::move(op));
  return ids;
}

namespace {

class CustomLayer : public Layer {
 public:
  explicit CustomLayer(int32_t id) : id_(id) {}
  TensorId build(GraphBuilder& g, TensorId x, const std::string& prefix) override {
    const std::string label = prefix.empty() ? custom_op_def(id_).name : prefix;
    const std::vector<TensorId> out = emit_custom(g, id_, {x}, label);
    SG_REQUIRE(out.size() == 1, "layer '", label, "': user-defined op '", custom_op_def(id_).name, "' has ", out.size(),
               " outputs; a layer has one (apply it with sg::custom in a model graph)");
    return out[0];
  }
  std::string describe() const override { return cat("custom(", custom_op_def(id_).name, ")"); }

 private:
  int32_t id_;
};

}  // namespace

LayerPtr custom_layer(const std::string& op, std::string name) {
  auto l = std::make_shared<CustomLayer>(custom_op_id(op));
  l->set_name(std::move(name));
  return l;
}

}  // namespace sg
