// Convolutions through cuDNN frontend graphs, part 1: loading libcudnn.so.9, the context (handle,
// GPU description), and the graph definitions: tensors in cuDNN's NCHW dimension order with NHWC
// strides, conv_fprop (+ bias + relu), conv_dgrad, conv_wgrad. Building, choosing, timing and
// caching plans is part 2 (cudnn_plans.cpp). One of the two translation units that include the
// frontend (it is heavy), through cudnn_graphs.h.
#include "backend/cuda/libs/cudnn_graphs.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "backend/cuda/runtime/cuda_check.h"
#include "core/environment.h"

// The frontend's dynamic loading reads every libcudnn symbol through this handle, which it
// declares and leaves to the program to define and set: one process-wide library handle, by the
// frontend's design (handles themselves stay per backend).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

#ifndef STEPGRAPH_CUDNN_LIB_DIR
#define STEPGRAPH_CUDNN_LIB_DIR ""
#endif
#ifndef STEPGRAPH_CUDART_LIB_DIR
#define STEPGRAPH_CUDART_LIB_DIR ""
#endif

namespace sg::cuda {

namespace {

struct Loaded {
  bool ok = false;
  size_t version = 0;
  std::string error;
};

// The frontend makes its few CUDA runtime calls through dlopen("libcudart.so.12" / ".13") (we
// link the runtime statically). Point it at this build's major, 13: by name, else the toolkit's
// copy CMake saw; without this it warns when both are on the path and takes 12. A value the
// user set is kept.
void choose_cudart_for_frontend() {
  if (env::get("CUDNN_FRONTEND_CUDART_LIB_NAME")) return;
  std::vector<std::string> names = {"libcudart.so.13"};
  if (std::strlen(STEPGRAPH_CUDART_LIB_DIR) > 0) names.push_back(std::string(STEPGRAPH_CUDART_LIB_DIR) + "/libcudart.so.13");
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      (void)h;  // stays loaded for the frontend
      env::set_default("CUDNN_FRONTEND_CUDART_LIB_NAME", n.c_str());
      return;
    }
  }
}

// dlopen once: by name (LD_LIBRARY_PATH, the system's paths), then where CMake saw it.
const Loaded& load_cudnn() {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    choose_cudart_for_frontend();
    std::vector<std::string> names = {"libcudnn.so.9"};
    if (std::strlen(STEPGRAPH_CUDNN_LIB_DIR) > 0) names.push_back(std::string(STEPGRAPH_CUDNN_LIB_DIR) + "/libcudnn.so.9");
    std::string tried;
    for (const std::string& n : names) {
      dlerror();
      void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (h) {
        fe::cudnn_dlhandle = h;
        break;
      }
      const char* e = dlerror();
      tried += cat("; ", n, ": ", e ? e : "not loadable");
    }
    if (!fe::cudnn_dlhandle) {
      loaded.error = cat("cuDNN 9 not found (libcudnn.so.9): install nvidia-cudnn-cu13 or set LD_LIBRARY_PATH (", tried.substr(2), ")");
      return;
    }
    try {
      loaded.version = fe::detail::get_backend_version();
    } catch (const std::exception& e) {
      loaded.error = cat("libcudnn.so.9 loaded but unusable: ", e.what());
      return;
    }
    if (loaded.version < 90000 || loaded.version >= 100000) {
      loaded.error = cat("libcudnn.so.9 reports version ", loaded.version, "; cuDNN 9 is needed");
      return;
    }
    loaded.ok = true;
  });
  return loaded;
}

// cuDNN names dimensions N, C, H, W whatever the layout; strides make it channels-last.
std::vector<int64_t> nhwc_strides(int64_t C, int64_t H, int64_t W) { return {H * W * C, 1, W * C, C}; }

fe::DataType_t fe_type(ConvIO t) { return t == ConvIO::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT; }

// Tensors the graph defines take its io type; sums and the pointwise nodes between are fp32.
std::shared_ptr<fe::graph::Graph> new_graph(ConvIO io) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_type(io))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}
TensorPtr image(fe::graph::Graph& g, const char* name, Uid uid, int64_t N, int64_t C, int64_t H, int64_t W) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(static_cast<int64_t>(uid))
                      .set_dim({N, C, H, W})
                      .set_stride(nhwc_strides(C, H, W)));
}
TensorPtr filters(fe::graph::Graph& g, const char* name, Uid uid, const ConvGeometry& s) {
  return image(g, name, uid, s.K, s.C, s.R, s.S);
}
std::string conv_attrs(const ConvGeometry& s) {
  return cat("padding ", s.pad_h, "x", s.pad_w, " stride ", s.stride_h, "x", s.stride_w, " dilation ", s.dil_h, "x",
             s.dil_w);
}
// The geometry of a convolution node (fprop, dgrad and wgrad have attribute types of their own).
template <class Attributes>
Attributes conv_node(const char* name, const ConvGeometry& s) {
  Attributes a;
  a.set_name(name)
      .set_padding({s.pad_h, s.pad_w})
      .set_stride({s.stride_h, s.stride_w})
      .set_dilation({s.dil_h, s.dil_w});
  return a;
}
GraphDef new_def(const ConvGeometry& s, const char* what) {
  GraphDef d;
  d.graph = new_graph(s.io);
  d.io_type = s.io;
  d.what = what;
  d.attrs = conv_attrs(s);
  return d;
}
// The graph's output: an NHWC tensor [N, C, H, W] that validate() checks cuDNN agrees on.
// `shape` false leaves its dims and strides to the frontend's inference (the check).
void set_output(GraphDef& d, const TensorPtr& t, Uid uid, int64_t N, int64_t C, int64_t H, int64_t W, bool shape) {
  t->set_output(true).set_uid(static_cast<int64_t>(uid)).set_data_type(fe_type(d.io_type));
  if (shape) t->set_dim({N, C, H, W}).set_stride(nhwc_strides(C, H, W));
  d.io.emplace_back(uid, t);
  d.out = t;
  d.want_dim = {N, C, H, W};
  d.want_stride = nhwc_strides(C, H, W);
}

}  // namespace

GraphDef forward_def(const ConvGeometry& s, bool bias, bool relu, bool shape) {
  GraphDef d = new_def(s, "conv_fprop");
  auto& g = *d.graph;
  TensorPtr X = image(g, "X", Uid::X, s.N, s.C, s.H, s.W), Wt = filters(g, "W", Uid::W, s);
  TensorPtr Y = g.conv_fprop(X, Wt, conv_node<fe::graph::Conv_fprop_attributes>("conv_fprop", s));
  d.io = {{Uid::X, X}, {Uid::W, Wt}};
  if (bias) {
    TensorPtr B = g.tensor(fe::graph::Tensor_attributes()
                               .set_name("b")
                               .set_uid(static_cast<int64_t>(Uid::B))
                               .set_dim({1, s.K, 1, 1})
                               .set_stride({s.K, 1, s.K, s.K}));
    Y = g.pointwise(Y, B, fe::graph::Pointwise_attributes().set_name("bias").set_mode(fe::PointwiseMode_t::ADD));
    d.io.emplace_back(Uid::B, B);
    d.what += " + bias";
  }
  if (relu) {
    Y = g.pointwise(Y, fe::graph::Pointwise_attributes().set_name("relu").set_mode(fe::PointwiseMode_t::RELU_FWD));
    d.what += " + relu";
  }
  if (s.io == ConvIO::BF16) d.what += " (bf16)";
  set_output(d, Y, Uid::Y, s.N, s.K, s.P, s.Q, shape);
  return d;
}

GraphDef data_grad_def(const ConvGeometry& s) {
  GraphDef d = new_def(s, "conv_dgrad");
  auto& g = *d.graph;
  TensorPtr dZ = image(g, "dZ", Uid::dZ, s.N, s.K, s.P, s.Q), Wt = filters(g, "W", Uid::W, s);
  d.io = {{Uid::dZ, dZ}, {Uid::W, Wt}};
  set_output(d, g.conv_dgrad(dZ, Wt, conv_node<fe::graph::Conv_dgrad_attributes>("conv_dgrad", s)), Uid::dX, s.N, s.C,
             s.H, s.W, true);
  return d;
}

GraphDef weight_grad_def(const ConvGeometry& s) {
  GraphDef d = new_def(s, "conv_wgrad");
  auto& g = *d.graph;
  TensorPtr dZ = image(g, "dZ", Uid::dZ, s.N, s.K, s.P, s.Q), X = image(g, "X", Uid::X, s.N, s.C, s.H, s.W);
  d.io = {{Uid::dZ, dZ}, {Uid::X, X}};
  set_output(d, g.conv_wgrad(dZ, X, conv_node<fe::graph::Conv_wgrad_attributes>("conv_wgrad", s)), Uid::dW, s.K, s.C,
             s.R, s.S, true);
  return d;
}

std::string validate(GraphDef& d) {
  SG_FE_TRY(d.graph->validate());
  if (d.out->get_dim() != d.want_dim || d.out->get_stride() != d.want_stride) {
    std::ostringstream os;
    os << d.what << ": cuDNN's output dims [";
    for (int64_t v : d.out->get_dim()) os << v << " ";
    os << "] strides [";
    for (int64_t v : d.out->get_stride()) os << v << " ";
    os << "], stepgraph's (NHWC) [";
    for (int64_t v : d.want_dim) os << v << " ";
    os << "] [";
    for (int64_t v : d.want_stride) os << v << " ";
    os << "]";
    return os.str();
  }
  return "";
}

CudnnContext::CudnnContext() {
  const Loaded& l = load_cudnn();
  SG_REQUIRE(l.ok, l.error);
  version = l.version;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  gpu = cat(prop.name, ", sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount, " SMs");
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  try {
    st = fe::detail::create_handle(&handle);
  } catch (const std::exception& e) {
    throw Error(cat("cuDNN: cudnnCreate failed: ", e.what()));
  }
  SG_REQUIRE(st == CUDNN_STATUS_SUCCESS, "cuDNN: cudnnCreate failed with status ", static_cast<int>(st));
}

CudnnContext::~CudnnContext() {
  kernel_caches.clear();  // before the handle
  if (handle) {
    try {
      fe::detail::destroy_handle(handle);
    } catch (...) {
      std::fprintf(stderr, "stepgraph: warning: cudnnDestroy failed\n");
    }
  }
}

std::shared_ptr<CudnnContext> make_cudnn_context() { return std::make_shared<CudnnContext>(); }

bool cudnn_loadable(std::string* why, size_t* version) {
  const Loaded& l = load_cudnn();
  if (!l.ok && why) *why = l.error;
  if (version) *version = l.version;
  return l.ok;
}

const char* conv_io_name(ConvIO t) { return t == ConvIO::BF16 ? "bfloat16" : "float32"; }

std::unique_ptr<ConvPlan> conv_forward_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                            const void* X, const void* W, const void* b, void* Y,
                                            Activation act, bool fuse, const ConvPlanOptions& opt, std::string* why) {
  SG_REQUIRE(act == Activation::None || act == Activation::ReLU, "conv2d: activation ", activation_name(act),
             " (none or relu)");
  const bool bias = fuse && b != nullptr, relu = fuse && act == Activation::ReLU;
  std::vector<std::pair<Uid, const void*>> ptrs = {{Uid::X, X}, {Uid::W, W}, {Uid::Y, Y}};
  if (bias) ptrs.emplace_back(Uid::B, b);
  return make_plan(ctx, [=] { return forward_def(g, bias, relu); }, g, ptrs, opt, why);
}

std::unique_ptr<ConvPlan> conv_data_grad_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                              const float* dZ, const float* W, float* dX, const ConvPlanOptions& opt,
                                              std::string* why) {
  SG_REQUIRE(g.io == ConvIO::F32, "conv_dgrad: ", conv_io_name(g.io), " tensors (float32 only; bf16 is forward only)");
  return make_plan(ctx, [=] { return data_grad_def(g); }, g, {{Uid::dZ, dZ}, {Uid::W, W}, {Uid::dX, dX}}, opt, why);
}

std::unique_ptr<ConvPlan> conv_weight_grad_plan(const std::shared_ptr<CudnnContext>& ctx, const ConvGeometry& g,
                                                const float* dZ, const float* X, float* dW,
                                                const ConvPlanOptions& opt, std::string* why) {
  SG_REQUIRE(g.io == ConvIO::F32, "conv_wgrad: ", conv_io_name(g.io), " tensors (float32 only; bf16 is forward only)");
  return make_plan(ctx, [=] { return weight_grad_def(g); }, g, {{Uid::dZ, dZ}, {Uid::X, X}, {Uid::dW, dW}}, opt, why);
}

std::string check_conv_graphs(const ConvGeometry& g, bool bias, Activation act) {
  std::string why;
  if (!cudnn_loadable(&why)) return why;
  try {
    // As lowering builds them; then the forward ones with the output shape left to cuDNN's
    // inference, which must agree with stepgraph's (dgrad and wgrad cannot infer theirs: they
    // are X's and W's shapes, set explicitly).
    std::vector<GraphDef> defs;
    defs.push_back(forward_def(g, bias, act == Activation::ReLU));
    defs.push_back(forward_def(g, false, false));
    if (g.io == ConvIO::F32) {
      defs.push_back(data_grad_def(g));
      defs.push_back(weight_grad_def(g));
    }
    defs.push_back(forward_def(g, bias, act == Activation::ReLU, false));
    defs.push_back(forward_def(g, false, false, false));
    for (GraphDef& d : defs)
      if (std::string v = validate(d); !v.empty()) return v;
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace sg::cuda
