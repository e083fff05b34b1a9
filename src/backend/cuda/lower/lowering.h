// The CUDA backend's lowering pass: one Lowering per program lowered, turning each op into its
// steps (kernel launches, library plans) with pointers bound once. Which member lowers which op
// kind is the table in lowerings.cpp; the members are defined by family: lowering.cpp (the
// pass), dense.cpp, dense_backward.cpp, dense_gemm.cpp (our product kernels), losses.cpp,
// optim.cpp, pinn.cpp, data.cpp, collectives.cpp; image, sequence and tensor ops in their own
// classes.
//
// Small and medium dense products (the rules of kernels/dense_dispatch.h) use our fused kernel: forward with bias
// and activation, dW with the bias gradient, and dX with the previous layer's activation
// derivative (any activation) in one launch each. Larger ones use cuBLASLt with epilogues where
// they apply:
//   forward   BIAS, RELU_(AUX_)BIAS, GELU_AUX_BIAS (the aux keeps what backward needs)
//   backward  dW with BGRADB (bias gradient for free); dX with DRELU_BGRAD / DGELU_BGRAD, which
//             applies the *previous* layer's activation derivative and computes its bias
//             gradient in the same product, so that layer's backward skips both.
// Where cuBLASLt has no algorithm for an epilogue, the op falls back to a plain product and the
// project's own kernels (noted in explain). A last dense layer with at most 32 outputs runs
// inside the softmax cross-entropy kernel that reads it. LowerOptions::fusion false turns these
// fusions off everywhere.
// A dense layer whose output an AbsMax op reads ("amax": true) is, where cuDNN has an engine for
// it, one cuDNN graph (cudnn_dense.h): product, scale, bias, activation and the max |Y|
// reduction, and the AbsMax op is then empty; otherwise the paths above and our abs_max kernel,
// with the reason in explain. LowerOptions::fusion false forces the latter.
#pragma once

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "backend/cuda/libs/cublaslt_gemm.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/runtime/cuda_executable.h"
#include "backend/cuda/kernels/dense_dispatch.h"
#include "backend/cuda/kernels/dense_kernels.cuh"
#include "backend/cuda/lower/fusion_plan.h"
#include "backend/cuda/lower/image.h"
#include "backend/cuda/kernels/jet_dense.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/pinn_kernels.cuh"
#include "backend/cuda/lower/sequence.h"
#include "backend/cuda/lower/tensor.h"
#include "backend/cuda/runtime/stream_plan.h"
#include "stepgraph/distributed.h"
#include "stepgraph/graph.h"
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/plan_cache.h"
#endif

namespace sg::cuda {

class ConvPlan;

class Lowering {
 public:
  Lowering(CudaBackend& be, const Program& p, const std::vector<void*>& ptrs, const LowerOptions& opt)
      : be_(be), p_(p), ptrs_(ptrs), opt_(opt), dev_(DenseDevice::current()), fuse_(opt.fusion),
        tc_(opt.precision == Precision::TF32X3 && dev_.tf32_mma) {}

  std::unique_ptr<Executable> run();

  // One per op kind (lower/lowerings.cpp maps kinds to them).
  void abs_max_op(int i, const Op& op);         // AbsMax
  void gather_batch_op(int i, const Op& op);  // GatherBatch
  void jet_input_op(int i, const Op& op);  // JetInput
  void jet_activation_op(int i, const Op& op);  // JetActivation, FourierFeatures
  void jet_activation_backward_op(int i, const Op& op);  // JetActivationBackward, FourierFeaturesBackward
  void sample_points_op(int i, const Op& op);  // SamplePoints
  void observed_points_op(int i, const Op& op);  // ObservedPoints
  void dense_op(int i, const Op& op);  // Dense
  void add_op(int i, const Op& op);  // Add
  void add_backward_op(int i, const Op& op);  // AddBackward
  void loss_op(int i, const Op& op);  // SoftmaxCrossEntropy, MeanSquaredError, PointwiseLoss
  void schedule_op(int i, const Op& op);  // Schedule
  void expression_loss_op(int i, const Op& op);  // ExpressionLoss
  void dense_backward(int i, const Op& op);  // DenseBackward
  void update_op(int i, const Op& op);  // SgdUpdate, AdamUpdate
  void clip_op(const Op& op);           // ClipGradNorm
  void matmul_op(const Op& op);         // MatMul (matmul.cpp)
  void custom_op(const Op& op);         // Custom: a user-defined op's launcher (custom.cpp)
  void custom_update_op(const Op& op);  // CustomUpdate
  void custom_loss_op(const Op& op);    // CustomLoss

  // Convolution, pooling and reshape ops (image_lowering.h).
  ImageLowering& image();

  // Layer norm, embedding and attention ops (sequence_lowering.h).
  SequenceLowering& sequence();

  // Broadcasting elementwise, activation, concat/split/slice and reduction ops (tensor.h).
  TensorLowering& tensor();

 private:
  // Data parallel: the gradient buckets, each as few contiguous f32 spans as the memory plan
  // allows (the planner keeps a bucket's gradients together; a gap is crossed only when no other
  // tensor lies in it, so the all-reduce touches nothing but padding).
  void plan_collectives();
  void fork_after(int i);
  // Before an op that reads a gradient whose all-reduce is still in flight: join the side stream.
  void join_before(int i, const Op& op);
  void add_join(const std::string& before);

  // Concurrent branches (lower/streams.cpp, runtime/stream_plan.h), unless the fusion plan keeps
  // one stream (FusionPlan::one_stream) or a dense layer's amax went into a cuDNN graph.
  void plan_streams();

  void refuse_unsupported_ops() const;

  float* f(TensorId t) const { return t == kNone ? nullptr : static_cast<float*>(ptrs_[t]); }
  int32_t* i32(TensorId t) const { return t == kNone ? nullptr : static_cast<int32_t*>(ptrs_[t]); }
  int64_t dim(TensorId t, size_t k) const { return p_.tensor(t).shape[k]; }
  int64_t count(TensorId t) const { return numel(p_.tensor(t).shape); }
  // Dense ops act on the last dimension: X [..., I] is a [rows, I] matrix (a sequence's tokens
  // are rows like a batch's samples), as on the CPU backend.
  int64_t width(TensorId t) const { return p_.tensor(t).shape.back(); }
  int64_t rows(TensorId t) const { return count(t) / width(t); }

  void add_step(const Op& op, std::function<void(cudaStream_t)> fn);
  char* own(size_t bytes);

  // A plan for the product, or nullptr if cuBLASLt has none for this epilogue.
  GemmPlan* gemm(const GemmShape& s, cublasLtEpilogue_t epi, const GemmArgs& a);
  void add_gemm(const Op& op, GemmPlan* g, const char* what);

  size_t largest_product() const;

  // The tape and variable table go to the device once; the kernel stages them in shared memory.
  // Term op i, launched by op `launcher`'s step (i itself, or the term before it).
  ExprTerm expression_term(int i, const Op& op, int launcher);

  ColumnSumScratch column_sum_scratch(int64_t rows, int64_t cols);

  // Rows that get the bias: all, or a jet's value rows.
  int64_t bias_rows(const Op& op, int64_t B) const;

  // The input gradient the fused loss kernel of op i (computing dense op d) writes, if the plan
  // has it (FusionPlan::loss_dx).
  FusedInputGrad loss_input_gradient(int i, const Op& d);

  void dense_forward(int i, const Op& op);

  // A dense layer read by an AbsMax op, as one cuDNN graph computing both; false (noted) when
  // that is not possible, and the usual paths follow.
  bool dense_with_amax(int i, const Op& op);

  // Empty when the cuDNN graph of op i computes AbsMax op j too; else why not (no cuDNN).
  std::string try_dense_amax(int i, int j, const Op& op);
  // The dense graphs' shared workspace (their steps run one after another on one stream).
  void finish_cudnn_dense();

  // Batched weight gradients (FusionPlan::wgrad_runs): a run's batch is filled as its ops are
  // lowered and launched at its last op.
  struct WgradRun {
    std::vector<int> ops;
    WgradBatch batch;
  };
  // Op i's weight gradient (and bias gradient) into its run's batch; the batch launched at the
  // run's last op.
  void add_to_wgrad_batch(int i, const Op& op, float* dz, bool need_db);


  // The jet op fused with dense op i in `plan` (FusionPlan::jet_dense_*), or -1.
  static int fused_jet(const std::map<int, int>& plan, int i);
  // A jet layer and its activation (FusionPlan::jet_dense_forward) in one launch.
  void jet_dense_forward(int i, const Op& op);
  // A jet layer's input gradient and the activation backward below it (jet_dense_backward).
  void jet_dense_backward(const Op& op, const Op& jet);
  void jet_dense_step(const Op& op, const JetDense& g, const std::string& what);

  // Whether one of our kernels takes the M x N x K product `what` (the dense rules,
  // dense_dispatch.h); explain names the rule: "[dW: medium]".
  bool prefer_own(const char* what, int64_t M, int64_t N, int64_t K, bool rows = false);
  // Our kernel for the product (plan_own_gemm) and its scratch, unless planned already.
  void plan_split(DenseGemm& d);
  // The split partial sums and per-tile counters the chosen kernel needs, owned by the executable.
  void own_scratch(DenseGemm& d);
  void own_gemm(const Op& op, DenseGemm d, const DenseGemm* second, const std::string& what);

  // dW through cuBLASLt: X^T dZ, with BGRADB summing dZ over the batch into db.
  void cublas_weight_gradient(int i, const Op& op, bool need_db);

  // dX through cuBLASLt, with DRELU/DGELU(_BGRAD) absorbing the previous layer's activation.
  void cublas_input_gradient(int i, const Op& op);


  CudaBackend& be_;
  const Program& p_;
  const std::vector<void*>& ptrs_;
  LowerOptions opt_;
  const DenseDevice& dev_;  // what the dense rules read about the GPU
  bool fuse_;
  bool tc_;  // tf32x3 on a device with TF32 tensor cores: our products run 3xTF32 (own_gemm_tensor_cores)
  bool dense_rules_used_ = false;  // explain lists the rules once, after the ops
  std::vector<Step> steps_;
  std::vector<DeviceBuffer> owned_;
  std::vector<std::unique_ptr<GemmPlan>> gemms_;
  std::ostringstream notes_;
  // What the libraries accepted of the plan: dZ or db already written by a fused epilogue.
  std::set<int> dz_ready_, db_done_;
  FusionPlan fusions_;  // every cross-op decision (fusion_plan.h), made before any op is lowered
  std::map<int, std::pair<void*, int64_t>> relu_mask_;
  std::map<int, JetDY> skinny_grads_;     // skinny dense backward -> its dW/db, formed by a jet backward
  std::unique_ptr<ImageLowering> image_;
  std::unique_ptr<Collectives> coll_;               // data parallel (opt_.comm)
  std::map<int, std::vector<size_t>> fork_at_;      // op -> buckets to all-reduce after it
  std::map<TensorId, size_t> bucket_of_;            // gradient -> its bucket
  std::set<size_t> unjoined_;                       // buckets forked and not joined yet
  std::unique_ptr<SequenceLowering> sequence_;
  std::unique_ptr<TensorLowering> tensor_;
  std::map<int, int> amax_in_graph_;              // AbsMax op -> the dense op whose cuDNN graph computes it
  int current_op_ = -1;                           // the op being lowered
  std::set<int> workspace_users_;                 // ops with cuBLASLt plans (one shared workspace)
  bool concurrent_ = false;                       // plan_streams put ops on a second stream
  std::map<int, std::string> amax_not_in_graph_;  // AbsMax op -> why its dense layer's graph could not
  std::vector<WgradRun> wgrad_runs_;              // batched weight gradients (plan_wgrad_runs)
  std::map<int, size_t> wgrad_run_of_;            // dense backward op -> its run in wgrad_runs_
#ifdef STEPGRAPH_HAVE_CUDNN
  std::vector<std::shared_ptr<ConvPlan>> dense_plans_;
  std::unique_ptr<plan_cache::PlanCache> dense_cache_;
#endif
};

}  // namespace sg::cuda
