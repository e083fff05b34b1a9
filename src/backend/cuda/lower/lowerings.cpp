// Which Lowering member lowers each op kind: one row per kind, in OpKind order, every row with
// its function (checked when this file compiles).
#include "backend/cuda/lower/lowerings.h"

#include <iterator>

#include "backend/cuda/lower/lowering.h"

namespace sg::cuda {

namespace {

void refuse_without_cudnn(const Program&, const Op& op, const LowerOptions&) {
  SG_REQUIRE(ImageLowering::have_convolutions(), "op '", op.name, "' (", op_kind_name(op.kind),
             "): convolutions in a build without cuDNN (CMake did not find its headers) run on the CPU backend in "
             "this version; use --device cpu");
}
void refuse_unsupported_sequence(const Program& p, const Op& op, const LowerOptions& opt) {
  SequenceLowering::check_supported(p, op, opt.attention);
}

// Steps with image or sequence ops stay on one stream: each family's cuDNN plans share one
// workspace, used in turn.
constexpr const char* kImage = "lowered with the image ops, whose cuDNN plans share one workspace";
constexpr const char* kSequence = "lowered with the sequence ops, whose cuDNN plans share one workspace";

using L = Lowering;
constexpr CudaLowering kLowerings[] = {
    {OpKind::GatherBatch, [](L& l, int i, const Op& op) { l.gather_batch_op(i, op); }},
    {OpKind::JetInput, [](L& l, int i, const Op& op) { l.jet_input_op(i, op); }},
    {OpKind::JetActivation, [](L& l, int i, const Op& op) { l.jet_activation_op(i, op); }},
    {OpKind::JetActivationBackward, [](L& l, int i, const Op& op) { l.jet_activation_backward_op(i, op); }},
    {OpKind::FourierFeatures, [](L& l, int i, const Op& op) { l.jet_activation_op(i, op); }},
    {OpKind::FourierFeaturesBackward, [](L& l, int i, const Op& op) { l.jet_activation_backward_op(i, op); }},
    {OpKind::ExpressionLoss, [](L& l, int i, const Op& op) { l.expression_loss_op(i, op); }},
    {OpKind::SamplePoints, [](L& l, int i, const Op& op) { l.sample_points_op(i, op); }},
    {OpKind::ObservedPoints, [](L& l, int i, const Op& op) { l.observed_points_op(i, op); }},
    {OpKind::Dense, [](L& l, int i, const Op& op) { l.dense_op(i, op); }},
    {OpKind::DenseBackward, [](L& l, int i, const Op& op) { l.dense_backward(i, op); }},
    // Same shapes: the add kernels and their fusions (dense.cpp); broadcasting: tensor.cpp.
    {OpKind::Add,
     [](L& l, int i, const Op& op) { l.tensor().broadcasts(op) ? l.tensor().binary(op) : l.add_op(i, op); }},
    {OpKind::AddBackward,
     [](L& l, int i, const Op& op) {
       l.tensor().broadcasts(op) ? l.tensor().binary_backward(op) : l.add_backward_op(i, op);
     }},
    {OpKind::SoftmaxCrossEntropy, [](L& l, int i, const Op& op) { l.loss_op(i, op); }},
    {OpKind::MeanSquaredError, [](L& l, int i, const Op& op) { l.loss_op(i, op); }},
    {OpKind::Schedule, [](L& l, int i, const Op& op) { l.schedule_op(i, op); }},
    {OpKind::SgdUpdate, [](L& l, int i, const Op& op) { l.update_op(i, op); }},
    {OpKind::AdamUpdate, [](L& l, int i, const Op& op) { l.update_op(i, op); }},
    {OpKind::Conv2d, [](L& l, int, const Op& op) { l.image().conv_forward(op); }, refuse_without_cudnn, kImage},
    {OpKind::Conv2dBackward, [](L& l, int, const Op& op) { l.image().conv_backward(op); }, refuse_without_cudnn, kImage},
    {OpKind::MaxPool2d, [](L& l, int, const Op& op) { l.image().max_pool(op); }, nullptr, kImage},
    {OpKind::MaxPool2dBackward, [](L& l, int, const Op& op) { l.image().max_pool(op); }, nullptr, kImage},
    {OpKind::GlobalAvgPool, [](L& l, int, const Op& op) { l.image().global_avg_pool(op); }, nullptr, kImage},
    {OpKind::GlobalAvgPoolBackward, [](L& l, int, const Op& op) { l.image().global_avg_pool(op); }, nullptr, kImage},
    {OpKind::Reshape, [](L& l, int, const Op& op) { l.image().reshape(op); }, nullptr, kImage},
    {OpKind::LayerNorm, [](L& l, int, const Op& op) { l.sequence().layer_norm(op); }, refuse_unsupported_sequence, kSequence},
    {OpKind::LayerNormBackward, [](L& l, int, const Op& op) { l.sequence().layer_norm_backward(op); },
     refuse_unsupported_sequence, kSequence},
    {OpKind::Embedding, [](L& l, int, const Op& op) { l.sequence().embedding(op); }, refuse_unsupported_sequence, kSequence},
    {OpKind::EmbeddingBackward, [](L& l, int, const Op& op) { l.sequence().embedding_backward(op); },
     refuse_unsupported_sequence, kSequence},
    {OpKind::Attention, [](L& l, int, const Op& op) { l.sequence().attention(op); }, refuse_unsupported_sequence, kSequence},
    {OpKind::AttentionBackward, [](L& l, int, const Op& op) { l.sequence().attention_backward(op); },
     refuse_unsupported_sequence, kSequence},
    {OpKind::AbsMax, [](L& l, int i, const Op& op) { l.abs_max_op(i, op); }},
    {OpKind::Sub, [](L& l, int, const Op& op) { l.tensor().binary(op); }},
    {OpKind::SubBackward, [](L& l, int, const Op& op) { l.tensor().binary_backward(op); }},
    {OpKind::Mul, [](L& l, int, const Op& op) { l.tensor().binary(op); }},
    {OpKind::MulBackward, [](L& l, int, const Op& op) { l.tensor().binary_backward(op); }},
    {OpKind::Div, [](L& l, int, const Op& op) { l.tensor().binary(op); }},
    {OpKind::DivBackward, [](L& l, int, const Op& op) { l.tensor().binary_backward(op); }},
    {OpKind::ScaleShift, [](L& l, int, const Op& op) { l.tensor().scale_shift(op); }},
    {OpKind::Activation, [](L& l, int, const Op& op) { l.tensor().activation(op); }},
    {OpKind::ActivationBackward, [](L& l, int, const Op& op) { l.tensor().activation_backward(op); }},
    {OpKind::Concat, [](L& l, int, const Op& op) { l.tensor().pieces(op); }},
    {OpKind::Split, [](L& l, int, const Op& op) { l.tensor().pieces(op); }},
    {OpKind::SplitBackward, [](L& l, int, const Op& op) { l.tensor().pieces(op); }},
    {OpKind::Slice, [](L& l, int, const Op& op) { l.tensor().pieces(op); }},
    {OpKind::SliceBackward, [](L& l, int, const Op& op) { l.tensor().pieces(op); }},
    {OpKind::Sum, [](L& l, int, const Op& op) { l.tensor().reduce(op); }},
    {OpKind::SumBackward, [](L& l, int, const Op& op) { l.tensor().reduce_backward(op); }},
    {OpKind::Mean, [](L& l, int, const Op& op) { l.tensor().reduce(op); }},
    {OpKind::MeanBackward, [](L& l, int, const Op& op) { l.tensor().reduce_backward(op); }},
    {OpKind::PointwiseLoss, [](L& l, int i, const Op& op) { l.loss_op(i, op); }},
    {OpKind::Dropout, [](L& l, int, const Op& op) { l.tensor().dropout(op); }},
    {OpKind::ClipGradNorm, [](L& l, int, const Op& op) { l.clip_op(op); }},
    {OpKind::MatMul, [](L& l, int, const Op& op) { l.matmul_op(op); }},
    {OpKind::Transpose, [](L& l, int, const Op& op) { l.tensor().transpose(op); }},
    {OpKind::BatchNorm, [](L& l, int, const Op& op) { l.tensor().batch_norm(op); }},
    {OpKind::BatchNormBackward, [](L& l, int, const Op& op) { l.tensor().batch_norm_backward(op); }},
    {OpKind::BatchNormInference, [](L& l, int, const Op& op) { l.tensor().batch_norm_inference(op); }},
    {OpKind::Custom, [](L& l, int, const Op& op) { l.custom_op(op); }},
    {OpKind::CustomUpdate, [](L& l, int, const Op& op) { l.custom_update_op(op); }},
    {OpKind::CustomLoss, [](L& l, int, const Op& op) { l.custom_loss_op(op); }},
};

constexpr bool rows_in_kind_order() {
  for (int k = 0; k < kNumOpKinds; ++k)
    if (static_cast<int>(kLowerings[k].kind) != k || kLowerings[k].lower == nullptr) return false;
  return true;
}
static_assert(std::size(kLowerings) == kNumOpKinds, "every OpKind needs its CUDA lowering");
static_assert(rows_in_kind_order(), "the CUDA lowerings must be in OpKind order, each with its function");

}  // namespace

const CudaLowering& cuda_lowering(OpKind k) {
  const int i = static_cast<int>(k);
  SG_ASSERT(i >= 0 && i < kNumOpKinds);
  return kLowerings[i];
}

}  // namespace sg::cuda
