// Evaluation and prediction: the trainer's forward-only variants over a data set, in chunks of
// the compiled batch.
#include <algorithm>
#include <cmath>

#include "train/trainer_state.h"

namespace sg {

Trainer::Variant& Trainer::eval_variant(int64_t batch) {
  auto it = eval_variants_.find(batch);
  if (it != eval_variants_.end()) return *it->second;
  auto v = build_variant(graph_ ? Shape{batch} : Shape{batch, current_->input_shape[1]}, false);
  Variant& ref = *v;
  eval_variants_[batch] = std::move(v);
  return ref;
}

EvalResult Trainer::evaluate(const HostArray& X, const HostArray& y) {
  settle();
  SG_REQUIRE(current_, "evaluate: the trainer is not compiled: call compile({batch, features}) first");
  check_batch(*current_, X, y, "batch");
  const int64_t N = X.shape()[0];
  SG_REQUIRE(N > 0, "evaluate: no rows");
  const int64_t chunk = current_->input_shape[0];
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0, labelled = 0;
  const bool classify = loss_->target_dtype() == DType::I32;
  const int64_t per_row = y.numel() / N;  // labels per row: 1, or one per position of a sequence
  // A class-weighted cross-entropy's mean is over the labelled targets' summed weights.
  const auto* ce = dynamic_cast<const SoftmaxCrossEntropy*>(loss_.get());
  const std::vector<float>* cw = ce && !ce->class_weights().empty() ? &ce->class_weights() : nullptr;
  double weighted_units = 0;  // the mean's denominator over all chunks
  for (int64_t row0 = 0; row0 < N; row0 += chunk) {
    const int64_t rows = std::min(chunk, N - row0);
    Variant& v = eval_variant(rows);
    upload_batch(v, X, y, row0, rows);
    v.exe->run();
    float l = 0;
    backend_->download(&l, v.ptrs[v.loss], sizeof(float));
    const Shape ps = v.program.tensor(v.pred).shape;
    // Mean losses are per labelled row or token (cross-entropy) or per element (MSE): weight
    // chunks accordingly.
    int64_t units = numel(ps), chunk_correct = 0;
    double chunk_weight = 0;
    if (classify) {
      HostArray out(DType::F32, ps);
      backend_->download(out.raw(), v.ptrs[v.pred], out.nbytes());
      const float* z = out.data<float>();
      const int64_t C = ps.back();
      const int32_t* lab = y.data<int32_t>() + row0 * per_row;
      units = 0;
      for (int64_t i = 0; i < rows * per_row; ++i) {
        if (lab[i] < 0) continue;  // a position without a target
        ++units;
        if (cw && lab[i] < C) chunk_weight += (*cw)[lab[i]];
        const float* zi = z + i * C;
        if (std::max_element(zi, zi + C) - zi == lab[i]) ++chunk_correct;
      }
    }
    correct += chunk_correct;
    labelled += units;
    const double chunk_units = cw ? chunk_weight : static_cast<double>(units);
    weighted_units += chunk_units;
    loss_sum += loss_->reduction() == Reduction::Mean ? l * chunk_units : l;
  }
  const int64_t denom_units = classify ? labelled : y.numel();
  if (cw)  // a zero sum: loss 0, as the step's
    r.loss = loss_->reduction() == Reduction::Mean ? (weighted_units > 0 ? loss_sum / weighted_units : 0.0) : loss_sum;
  else
    r.loss = loss_->reduction() == Reduction::Mean ? loss_sum / static_cast<double>(std::max<int64_t>(denom_units, 1))
                                                   : loss_sum;
  r.accuracy = classify ? static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(labelled, 1)) : 0.0;
  r.count = N;
  return r;
}

HostArray Trainer::predict(const HostArray& X) {
  settle();
  SG_REQUIRE(current_, "predict: the trainer is not compiled: call compile({batch, features}) first");
  SG_REQUIRE(!graph_, "predict: this trainer's model has named inputs: pass them by name (NamedArrays; a dict in Python)");
  SG_REQUIRE(X.dtype() == DType::F32 && X.shape().size() == 2 && X.shape()[1] == current_->input_shape[1],
             "predict: X must be f32 [rows, ", current_->input_shape[1], "], got ",
             dtype_name(X.dtype()), " ", shape_str(X.shape()));
  check_token_ids(current_->program, current_->X, X, "input");
  const int64_t N = X.shape()[0];
  const int64_t chunk = current_->input_shape[0] > 0 ? current_->input_shape[0] : 4096;
  HostArray out;
  for (int64_t row0 = 0; row0 < N; row0 += chunk) {
    const int64_t rows = std::min(chunk, N - row0);
    Variant& v = eval_variant(rows);
    Shape os = v.program.tensor(v.pred).shape;  // [rows, ...]: per row, out_dim values
    const int64_t out_dim = numel(os) / os[0];
    os[0] = N;
    if (row0 == 0) out = HostArray(DType::F32, os);
    backend_->upload(v.ptrs[v.X], static_cast<const char*>(X.raw()) + row0 * X.shape()[1] * 4,
                     rows * X.shape()[1] * 4);
    if (v.y != kNone) {  // the loss op needs valid targets; zeros are valid for both losses
      const TensorInfo& yt = v.program.tensor(v.y);
      HostArray zeros(yt.dtype, yt.shape);
      backend_->upload(v.ptrs[v.y], zeros.raw(), zeros.nbytes());
      const int32_t valid = static_cast<int32_t>(rows);
      backend_->upload(v.ptrs[v.valid], &valid, sizeof(valid));
    }
    v.exe->run();
    backend_->download(out.data<float>() + row0 * out_dim, v.ptrs[v.pred], rows * out_dim * 4);
  }
  return out;
}

}  // namespace sg
