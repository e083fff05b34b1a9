// The lowering pass: planning before the ops (fusions, collectives, batched weight gradients),
// each op through its row of the table in lowerings.cpp, then concurrent streams.
#include "backend/cuda/lower/lowering.h"

#include "backend/cuda/lower/lowerings.h"

namespace sg::cuda {


// Ops (and forms of ops) this build or these kernels cannot run: refused before anything is
// planned.
void Lowering::refuse_unsupported_ops() const {
  for (const Op& op : p_.ops())
    if (const auto refuse = cuda_lowering(op.kind).refuse) refuse(p_, op, opt_);
}

std::unique_ptr<Executable> Lowering::run() {
  refuse_unsupported_ops();
  fusions_ = plan_fusions(p_, ptrs_, opt_, /*jet_dense=*/!tc_, dev_);
  if (!fuse_)
    notes_ << "  fusion plan: none (fusion off: every op in the launches it would take alone)\n";
  else if (fusions_.decisions.empty())
    notes_ << "  fusion plan: nothing to fuse\n";
  else
    notes_ << "  fusion plan (" << fusions_.decisions.size() << " decisions, made before lowering):\n";
  for (const std::string& d : fusions_.decisions) notes_ << "    " << d << "\n";
  if (fusions_.one_stream.empty())
    notes_ << "  streams: ops that share no memory may run on a second stream (which ones: after the ops)\n";
  else
    notes_ << "  streams: one (" << fusions_.one_stream << ")\n";
  for (const std::vector<int>& run : fusions_.wgrad_runs) {
    for (int i : run) wgrad_run_of_[i] = wgrad_runs_.size();
    wgrad_runs_.push_back({run, {}});
  }
  plan_collectives();
  const size_t fixed_ops = invariant_prefix(p_);
  for (size_t i = 0; i < p_.ops().size(); ++i) {
    const Op& op = p_.ops()[i];
    join_before(static_cast<int>(i), op);
    notes_ << "  " << i << " " << op_kind_name(op.kind) << " '" << op.name << "': ";
    current_op_ = static_cast<int>(i);
    const size_t before = steps_.size();
    cuda_lowering(op.kind).lower(*this, static_cast<int>(i), op);
    if (i < fixed_ops && steps_.size() > before) {
      for (size_t k = before; k < steps_.size(); ++k) steps_[k].once = true;
      notes_ << " [once: its output is the same every step, so it runs before the first step and "
                "stays out of the graph]";
    }
    notes_ << "\n";
    fork_after(static_cast<int>(i));
  }
  if (!unjoined_.empty()) add_join("end of step");
  if (dense_rules_used_) notes_ << dense_rules_text(dev_);
  finish_cudnn_dense();
  if (image_) image_->finish();
  if (sequence_) sequence_->finish();
  plan_streams();
  Shape key;
  for (const TensorInfo& t : p_.tensors())
    if (t.role == Role::Input && key.empty()) key = t.shape;
  return make_executable(be_, std::move(steps_), std::move(owned_), std::move(gemms_), notes_.str(), key,
                         std::move(coll_), concurrent_);
}

void Lowering::add_step(const Op& op, std::function<void(cudaStream_t)> fn) {
  steps_.push_back({op.name, std::move(fn)});
  steps_.back().op = current_op_;
}

char* Lowering::own(size_t bytes) {
  owned_.emplace_back(be_, bytes);
  return owned_.back().data();
}

GemmPlan* Lowering::gemm(const GemmShape& s, cublasLtEpilogue_t epi, const GemmArgs& a) {
  std::string why;
  void* ws = be_.workspace(largest_product());
  workspace_users_.insert(current_op_);  // the library workspace is shared by every plan
  auto g = GemmPlan::create(be_.lt(), s, epi, a, opt_.precision, ws, be_.workspace_bytes(), &why);
  if (!g) {
    notes_ << "[" << why << "] ";
    return nullptr;
  }
  g->autotune(opt_.autotune, be_.stream());
  gemms_.push_back(std::move(g));
  return gemms_.back().get();
}

void Lowering::add_gemm(const Op& op, GemmPlan* g, const char* what) {
  notes_ << what << " " << g->describe() << "; ";
  add_step(op, [g](cudaStream_t s) { g->run(s); });
}

ImageLowering& Lowering::image() {
  if (!image_) {
    image_ = std::make_unique<ImageLowering>(LoweringHooks{
        be_, p_, ptrs_, opt_, [this](const Op& op, std::function<void(cudaStream_t)> fn) { add_step(op, std::move(fn)); },
        [this](size_t bytes) { return own(bytes); }, notes_});
  }
  return *image_;
}

SequenceLowering& Lowering::sequence() {
  if (!sequence_) {
    sequence_ = std::make_unique<SequenceLowering>(LoweringHooks{
        be_, p_, ptrs_, opt_, [this](const Op& op, std::function<void(cudaStream_t)> fn) { add_step(op, std::move(fn)); },
        [this](size_t bytes) { return own(bytes); }, notes_});
  }
  return *sequence_;
}

TensorLowering& Lowering::tensor() {
  if (!tensor_) {
    tensor_ = std::make_unique<TensorLowering>(LoweringHooks{
        be_, p_, ptrs_, opt_, [this](const Op& op, std::function<void(cudaStream_t)> fn) { add_step(op, std::move(fn)); },
        [this](size_t bytes) { return own(bytes); }, notes_});
  }
  return *tensor_;
}

size_t Lowering::largest_product() const {
  size_t most = 0;
  for (const Op& op : p_.ops())
    if (op.kind == OpKind::Dense)
      most = std::max<size_t>(most, static_cast<size_t>(rows(op.in[0]) * std::max(width(op.in[0]), dim(op.in[1], 0))));
  return most;
}

std::unique_ptr<Executable> lower_program(CudaBackend& be, const Program& p, const std::vector<void*>& ptrs,
                                          const LowerOptions& opt) {
  return Lowering(be, p, ptrs, opt).run();
}

}  // namespace sg::cuda
