// A dense layer with its absolute maximum as one cuDNN frontend graph (see cudnn_dense.h): the
// definition here; building, choosing, timing and caching the plan is make_plan's
// (cudnn_plans.cpp), as for the convolutions.
//
// cuDNN's matmul is batched: X is [1, B, I] and W^T is [1, I, O] described with the strides of
// our row-major W [O, I] (no transpose is made); bias [1, 1, O] broadcasts over the rows.
#include "backend/cuda/libs/cudnn_dense.h"

#include <vector>

#include "backend/cuda/libs/cudnn_graphs.h"

namespace sg::cuda {

namespace {

fe::DataType_t fe_type(ConvIO t) { return t == ConvIO::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT; }

// The pointwise mode computing `a` as activation_math.h does; false when there is none.
bool pointwise_mode(Activation a, fe::PointwiseMode_t* m) {
  switch (a) {
    case Activation::ReLU: *m = fe::PointwiseMode_t::RELU_FWD; return true;
    case Activation::GELU: *m = fe::PointwiseMode_t::GELU_APPROX_TANH_FWD; return true;  // ours is the tanh form
    case Activation::Tanh: *m = fe::PointwiseMode_t::TANH_FWD; return true;
    case Activation::Sigmoid: *m = fe::PointwiseMode_t::SIGMOID_FWD; return true;
    default: return false;
  }
}

std::vector<int64_t> rows_strides(const DenseAmaxGeometry& g) { return {g.B * g.O, g.O, 1}; }

void check_geometry(const DenseAmaxGeometry& g) {
  SG_REQUIRE(g.B > 0 && g.I > 0 && g.O > 0, "dense amax graph: rows, inputs and outputs must be positive (got B ", g.B,
             ", I ", g.I, ", O ", g.O, ")");
}

// `shape` false leaves Y's dims and strides to the frontend's inference (the check).
GraphDef dense_amax_def(const DenseAmaxGeometry& g, bool shape = true) {
  check_geometry(g);
  fe::PointwiseMode_t mode{};
  const bool act = g.act != Activation::None;
  SG_REQUIRE(!act || pointwise_mode(g.act, &mode), "dense amax graph: ", dense_amax_refusal(g.act));
  GraphDef d;
  d.graph = std::make_shared<fe::graph::Graph>();
  d.graph->set_io_data_type(fe_type(g.io))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  d.io_type = g.io;
  auto& gr = *d.graph;
  TensorPtr X = gr.tensor(fe::graph::Tensor_attributes()
                              .set_name("X")
                              .set_uid(static_cast<int64_t>(Uid::X))
                              .set_dim({1, g.B, g.I})
                              .set_stride({g.B * g.I, g.I, 1}));
  TensorPtr Wt = gr.tensor(fe::graph::Tensor_attributes()  // W^T [I, O] over W's [O, I] storage
                               .set_name("W")
                               .set_uid(static_cast<int64_t>(Uid::W))
                               .set_dim({1, g.I, g.O})
                               .set_stride({g.I * g.O, 1, g.I}));
  d.io = {{Uid::X, X}, {Uid::W, Wt}};
  TensorPtr T = gr.matmul(X, Wt, fe::graph::Matmul_attributes().set_name("matmul").set_compute_data_type(fe::DataType_t::FLOAT));
  // The seed's scale node: a host scalar passed by value, so nothing is bound for it.
  TensorPtr s = gr.tensor(fe::graph::Tensor_attributes(g.scale).set_name("scale"));
  T = gr.pointwise(T, s, fe::graph::Pointwise_attributes().set_name("scale").set_mode(fe::PointwiseMode_t::MUL));
  d.what = "matmul + scale";
  if (g.bias) {
    TensorPtr b = gr.tensor(fe::graph::Tensor_attributes()
                                .set_name("b")
                                .set_uid(static_cast<int64_t>(Uid::B))
                                .set_dim({1, 1, g.O})
                                .set_stride({g.O, g.O, 1}));
    T = gr.pointwise(T, b, fe::graph::Pointwise_attributes().set_name("bias").set_mode(fe::PointwiseMode_t::ADD));
    d.io.emplace_back(Uid::B, b);
    d.what += " + bias";
  }
  TensorPtr Y = T;
  if (act) {
    if (g.preact) {  // the pre-activation backward needs (gelu'), written as well
      T->set_output(true).set_name("Z").set_uid(static_cast<int64_t>(Uid::Z)).set_data_type(fe_type(g.io))
          .set_dim({1, g.B, g.O}).set_stride(rows_strides(g));
      d.io.emplace_back(Uid::Z, T);
    }
    Y = gr.pointwise(T, fe::graph::Pointwise_attributes().set_name(activation_name(g.act)).set_mode(mode));
    d.what += cat(" + ", g.act == Activation::GELU ? "gelu (tanh)" : activation_name(g.act));
  }
  Y->set_output(true).set_name("Y").set_uid(static_cast<int64_t>(Uid::Y)).set_data_type(fe_type(g.io));
  if (shape) Y->set_dim({1, g.B, g.O}).set_stride(rows_strides(g));
  d.io.emplace_back(Uid::Y, Y);
  TensorPtr m = gr.reduction(Y, fe::graph::Reduction_attributes()
                                    .set_name("amax")
                                    .set_mode(fe::ReductionMode_t::AMAX)
                                    .set_compute_data_type(fe::DataType_t::FLOAT));
  m->set_output(true).set_name("amax").set_uid(static_cast<int64_t>(Uid::Amax)).set_data_type(fe::DataType_t::FLOAT)
      .set_dim({1, 1, 1}).set_stride({1, 1, 1});
  d.io.emplace_back(Uid::Amax, m);
  d.what += " + amax";
  if (g.preact && act) d.what += " (Z kept)";
  if (g.io == ConvIO::BF16) d.what += " (bf16)";
  d.out = Y;
  d.want_dim = {1, g.B, g.O};
  d.want_stride = rows_strides(g);
  d.attrs = cat("scale ", g.scale);
  d.structure = cat("I", g.I, " O", g.O, "; ", conv_io_name(g.io));
  return d;
}

}  // namespace

std::string dense_amax_refusal(Activation act) {
  fe::PointwiseMode_t m{};
  if (act == Activation::None || pointwise_mode(act, &m)) return "";
  return cat("activation ", activation_name(act),
             " has no cuDNN pointwise mode computing it as stepgraph does (none, relu, gelu, tanh, sigmoid do)");
}

std::unique_ptr<ConvPlan> dense_amax_plan(const std::shared_ptr<CudnnContext>& ctx, const DenseAmaxGeometry& g,
                                          const void* X, const void* W, const void* b, void* Y, void* Z, float* amax,
                                          const ConvPlanOptions& opt, std::string* why) {
  check_geometry(g);
  if (std::string r = dense_amax_refusal(g.act); !r.empty()) {
    if (why) *why = r;
    return nullptr;
  }
  SG_REQUIRE(!g.bias || b, "dense amax graph: bias requested without a bias pointer");
  const bool z = g.preact && g.act != Activation::None;
  SG_REQUIRE(!z || Z, "dense amax graph: pre-activation requested without a Z pointer");
  std::vector<std::pair<Uid, const void*>> ptrs = {{Uid::X, X}, {Uid::W, W}, {Uid::Y, Y}, {Uid::Amax, amax}};
  if (g.bias) ptrs.emplace_back(Uid::B, b);
  if (z) ptrs.emplace_back(Uid::Z, Z);
  ConvGeometry key;  // make_plan's kernel-cache key is GraphDef::structure here; N is the batch
  key.N = g.B;
  return make_plan(ctx, [=] { return dense_amax_def(g); }, key, ptrs, opt, why);
}

std::string check_dense_amax_graph(const DenseAmaxGeometry& g) {
  std::string why;
  if (!cudnn_loadable(&why)) return why;
  if (std::string r = dense_amax_refusal(g.act); !r.empty()) return r;
  try {
    for (bool shape : {true, false}) {
      GraphDef d = dense_amax_def(g, shape);
      if (std::string v = validate(d); !v.empty()) return v;
      const std::vector<int64_t> one = {1, 1, 1};
      for (const auto& [uid, t] : d.io)
        if (uid == Uid::Amax && t->get_dim() != one) return cat(d.what, ": cuDNN's amax is not a single value");
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace sg::cuda
