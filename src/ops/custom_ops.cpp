// The registry of user-defined ops and the row of the op table that runs them.
#include "ops/custom_ops.h"

#include <algorithm>

#include "autodiff/grad_builder.h"
#include "core/named_registry.h"

namespace sg {

namespace {

NamedRegistry<CustomOpDef>& registry() {
  static NamedRegistry<CustomOpDef> r("user-defined op", "sg::register_op");
  return r;
}

Shape per_sample(const Shape& s) { return Shape(s.begin() + (s.empty() ? 0 : 1), s.end()); }

}  // namespace

void register_op(CustomOpDef def) {
  SG_REQUIRE(is_registry_name(def.name), "register_op: the name '", def.name, "' must be letters, digits, '_' and '-'");
  SG_REQUIRE(def.output_shapes, "register_op '", def.name, "': output_shapes is missing");
  SG_REQUIRE(def.cpu, "register_op '", def.name, "': the CPU forward (cpu) is missing; it is the reference");
  SG_REQUIRE(!def.cuda_backward || def.cpu_backward, "register_op '", def.name,
             "': cuda_backward without cpu_backward (the CPU backward is the reference)");
  SG_REQUIRE(!def.cpu_backward || !def.cuda || def.cuda_backward, "register_op '", def.name,
             "': a CUDA forward and a CPU backward but no cuda_backward; give both backwards or neither");
  const std::string taken = cat("register_op: an op named '", def.name, "' is already registered");
  registry().add(std::move(def), taken);
}

int32_t custom_op_id(const std::string& name) { return registry().id(name); }

bool is_registered_op(const std::string& name) { return registry().has(name); }

const CustomOpDef& registered_op(const std::string& name) { return custom_op_def(custom_op_id(name)); }

const CustomOpDef& custom_op_def(int32_t id) { return registry().at(id, "custom op"); }

CustomOpArgs custom_op_args(const Program& p, const Op& op, const std::function<void*(TensorId)>& address) {
  CustomOpArgs a;
  for (TensorId t : op.in) {
    a.in.push_back(static_cast<const float*>(address(t)));
    a.in_shapes.push_back(p.tensor(t).shape);
  }
  for (TensorId t : op.out) {
    a.out.push_back(t == kNone ? nullptr : static_cast<float*>(address(t)));
    a.out_shapes.push_back(t == kNone ? Shape{} : p.tensor(t).shape);
  }
  return a;
}

std::vector<Shape> custom_output_shapes(const CustomOpDef& d, const std::vector<Shape>& in, const std::string& where) {
  std::vector<Shape> out;
  try {
    out = d.output_shapes(in);
  } catch (const Error& e) {
    throw Error(cat(where, ": ", e.what()));
  }
  SG_REQUIRE(!out.empty(), where, ": output_shapes gave no outputs");
  return out;
}

void run_custom_kernel(const CustomKernel& k, const CustomOpArgs& args, const std::string& who) { run_user_kernel(k, args, who); }

namespace ops {

void check_custom(const OpCheck& c) {
  const Op& op = c.op();
  const CustomAttrs& a = c.attr<CustomAttrs>();
  const CustomOpDef& d = custom_op_def(a.id);
  for (TensorId t : op.in) c.expect(c.dtype(t) == DType::F32, cat("user-defined op '", d.name, "' takes f32 tensors, got ", c.desc(t)));
  const size_t nx = static_cast<size_t>(a.inputs), ny = static_cast<size_t>(a.outputs);
  if (a.backward) {
    c.expect(op.in.size() == ny + nx + ny && op.out.size() == nx,
             cat("the backward of '", d.name, "' takes dY, X and Y of its ", nx, " inputs and ", ny, " outputs"));
    for (size_t k = 0; k < nx; ++k)
      if (op.out[k] != kNone) c.same(op.in[ny + k], op.out[k]);
    return;
  }
  c.expect(op.in.size() == nx && op.out.size() == ny && nx > 0 && ny > 0,
           cat("user-defined op '", d.name, "': ", op.in.size(), " inputs and ", op.out.size(), " outputs, but ", nx,
               " and ", ny, " were declared"));
  const int64_t rows = c.shape(op.in[0]).empty() ? 0 : c.shape(op.in[0])[0];
  std::vector<Shape> in;
  for (TensorId t : op.in) {
    c.expect(!c.shape(t).empty() && c.shape(t)[0] == rows, cat("inputs must share their batch rows: ", c.desc(t), " and ",
                                                               c.desc(op.in[0])));
    in.push_back(per_sample(c.shape(t)));
  }
  const std::vector<Shape> want = custom_output_shapes(d, in, cat("op '", op.name, "' (user-defined '", d.name, "')"));
  c.expect(want.size() == ny, cat("output_shapes gave ", want.size(), " outputs for ", ny, " declared"));
  for (size_t k = 0; k < ny; ++k) {
    c.expect(op.out[k] != kNone, cat("output ", k, " is missing"));
    Shape s{rows};
    s.insert(s.end(), want[k].begin(), want[k].end());
    c.expect(c.shape(op.out[k]) == s, cat("output ", c.desc(op.out[k]), " must be ", shape_str(s), " by output_shapes"));
  }
}

// The backward op reads (dY..., X..., Y...) and writes each dX, into the input's gradient when it
// is the first contribution, else into a temporary added into it (user kernels overwrite).
void grad_custom(GradBuilder& g, const Op& op) {
  const CustomAttrs a = op.attr<CustomAttrs>();
  const CustomOpDef& d = custom_op_def(a.id);
  std::string needing;
  for (TensorId t : op.in)
    if (g.needs(t) && needing.empty()) needing = g.program().tensor(t).name;
  if (needing.empty()) return;
  SG_REQUIRE(d.cpu_backward, "op '", op.name, "' (user-defined '", d.name, "'): its input '", needing,
             "' needs a gradient, but the op has no backward (register cpu_backward and cuda_backward)");
  Program& p = g.program();
  Op b;
  b.kind = OpKind::Custom;
  b.name = "backward " + op.name;
  CustomAttrs ba = a;
  ba.backward = true;
  b.attrs = ba;
  for (TensorId y : op.out) {
    if (g.grad(y) != kNone) {
      b.in.push_back(g.grad(y));
      continue;
    }
    // An output the loss does not read: its gradient is zero (0 * Y, one small kernel).
    const TensorInfo info = p.tensor(y);
    const TensorId zero = p.add_tensor({cat("d.", info.name, ".zero"), info.shape, DType::F32, Role::Temporary});
    Op z;
    z.kind = OpKind::ScaleShift;
    z.name = cat("backward ", op.name, " zero ", info.name);
    z.in = {y};
    z.out = {zero};
    z.attrs = ScaleShiftAttrs{0.0, 0.0};
    p.add_op(std::move(z));
    b.in.push_back(zero);
  }
  b.in.insert(b.in.end(), op.in.begin(), op.in.end());
  b.in.insert(b.in.end(), op.out.begin(), op.out.end());
  std::vector<std::pair<TensorId, TensorId>> added;  // (temporary, the input it adds into)
  for (TensorId x : op.in) {
    uint8_t acc = 0;
    if (!g.needs(x)) {
      b.out.push_back(kNone);
    } else if (g.grad(x) == kNone) {
      b.out.push_back(g.slot(x, &acc));
    } else {
      const TensorInfo info = p.tensor(x);
      b.out.push_back(p.add_tensor({cat("d.", info.name, ".", op.name), info.shape, DType::F32, Role::Temporary}));
      added.emplace_back(b.out.back(), x);
    }
  }
  b.accumulate.assign(b.out.size(), 0);
  p.add_op(std::move(b));
  for (const auto& [tmp, x] : added) g.emit_with(op, OpKind::ScaleShift, ScaleShiftAttrs{}, {tmp}, {x});
}

std::function<void()> cpu_custom(const CpuBind& b) {
  const CustomAttrs a = b.attr<CustomAttrs>();
  const CustomOpDef& d = custom_op_def(a.id);
  const CustomOpArgs args = custom_op_args(b.program(), b.op(), [&](TensorId t) { return b.raw(t); });
  const CustomKernel* k = a.backward ? &d.cpu_backward : &d.cpu;  // registry entries never move
  const std::string who = cat("user-defined op '", d.name, "'", a.backward ? " (backward)" : "");
  return [args, k, who] { run_custom_kernel(*k, args, who); };
}

std::string custom_attrs_text(const Op& op) {
  const CustomAttrs& a = op.attr<CustomAttrs>();
  return cat("(user-defined '", custom_op_def(a.id).name, "'", a.backward ? ", backward" : "", ")");
}

}  // namespace ops
}  // namespace sg
