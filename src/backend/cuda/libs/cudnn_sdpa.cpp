// Scaled dot-product attention as cuDNN frontend graphs (see cudnn_sdpa.h). One graph for the
// forward (output and logsumexp statistics) and one for the backward, each built once:
//   define -> validate -> build_operation_graph -> plans from heuristics A -> check_support ->
//   build the heuristic's choice.
// Tensors are described in cuDNN's [B, H, S, D] dimension order with the strides of our
// [B, S, H*D] rows, so no transposes are needed around the fused kernels.
#include "backend/cuda/libs/cudnn_sdpa.h"

#include <unordered_map>
#include <vector>

#include "backend/cuda/libs/cudnn_graphs.h"

namespace sg::cuda {

namespace {

enum SdpaUid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

std::vector<int64_t> rows_strides(const SdpaGeometry& g) { return {g.S * g.H * g.D, g.D, g.H * g.D, 1}; }

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}
TensorPtr rows_tensor(fe::graph::Graph& graph, const char* name, SdpaUid uid, const SdpaGeometry& g) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({g.B, g.H, g.S, g.D})
                          .set_stride(rows_strides(g)));
}
void rows_output(const TensorPtr& t, SdpaUid uid, const SdpaGeometry& g) {
  t->set_output(true).set_uid(uid).set_dim({g.B, g.H, g.S, g.D}).set_stride(rows_strides(g));
}
void stats_shape(fe::graph::Tensor_attributes& t, const SdpaGeometry& g) {
  t.set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({g.B, g.H, g.S, 1}).set_stride({g.H * g.S, g.S, 1, 1});
}


// Builds the heuristic's first supported plan; "" on success.
std::string build(CudnnContext& ctx, fe::graph::Graph& graph, std::string* plan_name, int64_t* ws) {
  auto handle = ctx.handle;
  SG_FE_TRY(graph.validate());
  SG_FE_TRY(graph.build_operation_graph(handle));
  SG_FE_TRY(graph.create_execution_plans({fe::HeurMode_t::A}));
  SG_FE_TRY(graph.check_support(handle));
  SG_FE_TRY(graph.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE));
  SG_FE_TRY(graph.get_plan_name(*plan_name));
  SG_FE_TRY(graph.get_workspace_size(*ws));
  return "";
}

void check_geometry(const SdpaGeometry& g) {
  SG_REQUIRE(g.B > 0 && g.S > 0 && g.H > 0 && g.D > 0, "sdpa: batch, sequence, heads and head size must be positive (got B ",
             g.B, ", S ", g.S, ", H ", g.H, ", D ", g.D, ")");
  SG_REQUIRE(g.D % 8 == 0 && g.D <= 256, "sdpa: cuDNN's fused attention needs a head size that is a multiple of 8, at most 256 (got ",
             g.D, ")");
}

std::unique_ptr<CudnnPlan> make(const std::shared_ptr<CudnnContext>& ctx, std::shared_ptr<fe::graph::Graph> graph,
                                std::unordered_map<int64_t, void*> pack, const SdpaGeometry& g, const std::string& what,
                                std::string* why) {
  std::string name, err;
  int64_t ws = 0;
  try {
    err = build(*ctx, *graph, &name, &ws);
  } catch (const std::exception& e) {  // the frontend throws from its dynamic-loading shims
    err = e.what();
  }
  if (!err.empty()) {
    if (why) *why = cat("cuDNN has no engine for ", what, " (B ", g.B, ", S ", g.S, ", H ", g.H, ", D ", g.D, "): ", err);
    return nullptr;
  }
  std::string desc = cat("cuDNN graph ", what, ", engine ", name, ", workspace ", ws, " B (bf16 in and out, fp32 accumulation)");
  // Neither tuned nor cached yet: the heuristic's choice, built each time.
  return std::make_unique<GraphPlan>(ctx, std::move(graph), what, std::move(pack), -1, ws, std::move(desc), ConvPlanStats{});
}

}  // namespace

std::unique_ptr<CudnnPlan> sdpa_forward_plan(const std::shared_ptr<CudnnContext>& ctx, const SdpaGeometry& g,
                                             const void* Q, const void* K, const void* V, void* O, float* stats,
                                             std::string* why) {
  check_geometry(g);
  auto graph = new_graph();
  TensorPtr q = rows_tensor(*graph, "Q", kQ, g), k = rows_tensor(*graph, "K", kK, g), v = rows_tensor(*graph, "V", kV, g);
  auto attrs = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(g.scale);
  if (g.causal) attrs.set_causal_mask(true);
  auto [o, st] = graph->sdpa(q, k, v, attrs);
  rows_output(o, kO, g);
  st->set_output(true);
  stats_shape(*st, g);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(Q)}, {kK, const_cast<void*>(K)},
                                             {kV, const_cast<void*>(V)}, {kO, O}, {kStats, stats}};
  return make(ctx, std::move(graph), std::move(pack), g, g.causal ? "sdpa forward (causal)" : "sdpa forward", why);
}

std::unique_ptr<CudnnPlan> sdpa_backward_plan(const std::shared_ptr<CudnnContext>& ctx, const SdpaGeometry& g,
                                              const void* Q, const void* K, const void* V, const void* O,
                                              const void* dO, const float* stats, void* dQ, void* dK, void* dV,
                                              bool deterministic, std::string* why) {
  check_geometry(g);
  auto graph = new_graph();
  TensorPtr q = rows_tensor(*graph, "Q", kQ, g), k = rows_tensor(*graph, "K", kK, g), v = rows_tensor(*graph, "V", kV, g);
  TensorPtr o = rows_tensor(*graph, "O", kO, g), d_o = rows_tensor(*graph, "dO", kdO, g);
  fe::graph::Tensor_attributes st_attr;
  st_attr.set_name("stats");
  stats_shape(st_attr, g);
  TensorPtr st = graph->tensor(st_attr);
  auto attrs = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(g.scale);
  if (g.causal) attrs.set_causal_mask(true);
  if (deterministic) attrs.set_deterministic_algorithm(true);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, st, attrs);
  rows_output(dq, kdQ, g);
  rows_output(dk, kdK, g);
  rows_output(dv, kdV, g);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(Q)}, {kK, const_cast<void*>(K)},   {kV, const_cast<void*>(V)},
      {kO, const_cast<void*>(O)}, {kdO, const_cast<void*>(dO)}, {kStats, const_cast<float*>(stats)},
      {kdQ, dQ},                  {kdK, dK},                    {kdV, dV}};
  const std::string what = cat("sdpa backward", g.causal ? " (causal)" : "", deterministic ? ", deterministic" : "");
  return make(ctx, std::move(graph), std::move(pack), g, what, why);
}

}  // namespace sg::cuda
