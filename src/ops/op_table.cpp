// The op table: every kind's row, in OpKind order, checked when this file compiles.
#include "ir/op_table.h"

#include <iterator>

#include "autodiff/grad_builder.h"
#include "ops/custom_loss_ops.h"
#include "ops/custom_ops.h"
#include "ops/data_ops.h"
#include "ops/dense_ops.h"
#include "ops/image_ops.h"
#include "ops/linalg_ops.h"
#include "ops/loss_ops.h"
#include "ops/norm_ops.h"
#include "ops/optim_ops.h"
#include "ops/pinn_ops.h"
#include "ops/sequence_ops.h"
#include "ops/tensor_ops.h"

namespace sg {

namespace {

using namespace ops;

constexpr const OpDef* kRows[] = {
    &kGatherBatch,   &kJetInput,         &kJetActivation,     &kJetActivationBackward,
    &kFourierFeatures, &kFourierFeaturesBackward, &kExpressionLoss, &kSamplePoints, &kObservedPoints,
    &kDense,         &kDenseBackward,    &kAdd,               &kAddBackward,
    &kSoftmaxCrossEntropy, &kMeanSquaredError, &kSchedule,    &kSgdUpdate,
    &kAdamUpdate,    &kConv2d,           &kConv2dBackward,    &kMaxPool2d,
    &kMaxPool2dBackward, &kGlobalAvgPool, &kGlobalAvgPoolBackward, &kReshape,
    &kLayerNorm,     &kLayerNormBackward, &kEmbedding,        &kEmbeddingBackward,
    &kAttention,     &kAttentionBackward, &kAbsMax,
    &kSub,           &kSubBackward,      &kMul,               &kMulBackward,
    &kDiv,           &kDivBackward,      &kScaleShift,        &kActivation,
    &kActivationBackward, &kConcat,      &kSplit,             &kSplitBackward,
    &kSlice,         &kSliceBackward,    &kSum,               &kSumBackward,
    &kMean,          &kMeanBackward,     &kPointwiseLoss,     &kDropout,
    &kClipGradNorm,  &kMatMul,           &kTranspose,
    &kBatchNorm,     &kBatchNormBackward, &kBatchNormInference, &kCustom, &kCustomUpdate, &kCustomLoss,
};

constexpr bool rows_in_kind_order() {
  for (int k = 0; k < kNumOpKinds; ++k)
    if (static_cast<int>(kRows[k]->kind) != k) return false;
  return true;
}
constexpr bool rows_complete() {
  for (const OpDef* d : kRows)
    if (!d->name || !d->inputs || !d->outputs || !d->check || !d->gradient || !d->cpu) return false;
  return true;
}
static_assert(std::size(kRows) == kNumOpKinds, "every OpKind needs its row in the op table");
static_assert(rows_in_kind_order(), "the op table's rows must be in OpKind order");
static_assert(rows_complete(), "every row needs a name, slots, a shape rule, a gradient rule and a CPU kernel");

}  // namespace

const OpDef& op_def(OpKind k) {
  const int i = static_cast<int>(k);
  SG_ASSERT(i >= 0 && i < kNumOpKinds);
  return *kRows[i];
}

const std::vector<const OpDef*>& op_table() {
  static const std::vector<const OpDef*> rows(std::begin(kRows), std::end(kRows));
  return rows;
}

const char* op_kind_name(OpKind k) {
  const int i = static_cast<int>(k);
  return i >= 0 && i < kNumOpKinds ? kRows[i]->name : "?";
}

std::vector<Slot> parse_slots(const char* list) {
  std::vector<Slot> slots;
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    Slot s;
    if (word.size() > 3 && word.compare(word.size() - 3, 3, "...") == 0) {
      s.variadic = true;
      word.resize(word.size() - 3);
    }
    if (word.size() > 1 && word.back() == '?') {
      s.optional = true;
      word.pop_back();
    }
    s.name = word;
    slots.push_back(s);
    word.clear();
  };
  for (const char* c = list; *c; ++c) {
    if (*c == ' ')
      flush();
    else
      word += *c;
  }
  flush();
  return slots;
}

void no_gradient(GradBuilder&, const Op& op) {
  throw Error(cat("op '", op.name, "' (", op_kind_name(op.kind), ") has no gradient rule and cannot be in a forward pass"));
}

bool same_if_inputs_fixed(const Op&, bool inputs_fixed) { return inputs_fixed; }

std::string OpCheck::desc(TensorId t) const { return cat("'", name(t), "' ", shape_str(shape(t))); }

void OpCheck::expect(bool ok, const std::string& what) const {
  SG_REQUIRE(ok, "op '", op_.name, "' (", op_kind_name(op_.kind), "): ", what);
}

void OpCheck::same(TensorId a, TensorId b) const {
  if (a == kNone || b == kNone) return;
  expect(shape(a) == shape(b), cat(desc(a), " and ", desc(b), " must have the same shape"));
}

void OpCheck::rank(TensorId t, size_t r) const {
  expect(shape(t).size() == r, cat("'", name(t), "' has shape ", shape_str(shape(t)), ", expected rank ", r));
}

}  // namespace sg
