// Data set validation, synthetic sets, splitting and the batching rule.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>

#include "stepgraph/data.h"
#include "stepgraph/rng.h"

namespace sg {

const char* task_name(Task t) {
  switch (t) {
    case Task::Classification: return "classification";
    case Task::Regression: return "regression";
  }
  return "?";
}

int64_t Dataset::targets() const {
  if (task == Task::Classification) return 1;
  return y.shape().size() == 2 ? y.shape()[1] : 0;
}

namespace {

std::string array_desc(const HostArray& a) {
  return cat(dtype_name(a.dtype()), " ", shape_str(a.shape()));
}

// NaN or infinite inputs would silently poison every gradient; catch them where they enter.
void require_finite(const HostArray& a, const std::string& what, const std::string& name) {
  const float* v = a.data<float>();
  const int64_t cols = a.shape()[1];
  for (int64_t i = 0; i < a.numel(); ++i)
    SG_REQUIRE(std::isfinite(v[i]), "data set '", name, "': ", what, " row ", i / cols,
               ", column ", i % cols, " is ", v[i], "; values must be finite");
}

// Labels i32 [N] in [0, classes), or per-token labels i32 [N, T] in [-1, classes) where -1 marks
// a position without a target.
void check_labels(const HostArray& y, int64_t& num_classes, const std::string& name) {
  SG_REQUIRE(y.dtype() == DType::I32 && (y.shape().size() == 1 || y.shape().size() == 2), "data set '", name,
             "': classification labels y must be i32 [N] (or [N, T] per token), got ", array_desc(y));
  SG_REQUIRE(num_classes >= 0, "data set '", name, "': num_classes must be >= 0 (0 = infer), got ",
             num_classes);
  const int32_t* labels = y.data<int32_t>();
  const bool tokens = y.shape().size() == 2;
  const int64_t T = tokens ? y.shape()[1] : 1;
  SG_REQUIRE(T > 0, "data set '", name, "' has no label columns (y has shape ", shape_str(y.shape()), ")");
  const int32_t lowest = tokens ? -1 : 0;
  int32_t max_label = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    SG_REQUIRE(labels[i] >= lowest && (num_classes == 0 || labels[i] < num_classes), "data set '", name,
               "': label y[", tokens ? cat(i / T, ", ", i % T) : cat(i), "] = ", labels[i],
               " is outside the allowed range [", lowest, ", ",
               num_classes == 0 ? std::string("num_classes") : std::to_string(num_classes), ")",
               tokens ? " (-1: no target at that position)" : "");
    max_label = std::max(max_label, labels[i]);
  }
  if (num_classes == 0) num_classes = static_cast<int64_t>(max_label) + 1;
}

}  // namespace

Dataset make_dataset(std::string name, Task task, HostArray X, HostArray y, int64_t num_classes) {
  SG_REQUIRE(X.dtype() == DType::F32 && X.shape().size() == 2, "data set '", name,
             "': features X must be f32 [N, D], got ", array_desc(X));
  const int64_t n = X.shape()[0];
  SG_REQUIRE(n > 0, "data set '", name, "' is empty (X has shape ", shape_str(X.shape()), ")");
  SG_REQUIRE(X.shape()[1] > 0, "data set '", name, "' has no feature columns (X has shape ",
             shape_str(X.shape()), ")");
  require_finite(X, "X", name);

  if (task == Task::Classification) {
    check_labels(y, num_classes, name);
  } else {
    SG_REQUIRE(y.dtype() == DType::F32 && y.shape().size() == 2, "data set '", name,
               "': regression targets y must be f32 [N, T], got ", array_desc(y));
    SG_REQUIRE(y.shape()[1] > 0, "data set '", name, "' has no target columns (y has shape ",
               shape_str(y.shape()), ")");
    num_classes = 0;  // meaningless for regression
  }
  SG_REQUIRE(y.shape()[0] == n, "data set '", name, "': X has ", n, " rows but y has ",
             y.shape()[0], " rows");
  if (task == Task::Regression) require_finite(y, "y", name);

  Dataset d;
  d.name = std::move(name);
  d.task = task;
  d.X = std::move(X);
  d.y = std::move(y);
  d.num_classes = num_classes;
  return d;
}

Dataset make_classification(int64_t samples, int64_t features, int64_t classes, uint64_t seed,
                            double separation) {
  SG_REQUIRE(samples > 0 && features > 0 && classes > 0,
             "make_classification: samples, features and classes must be positive, got ", samples,
             ", ", features, ", ", classes);
  SG_REQUIRE(std::isfinite(separation) && separation >= 0,
             "make_classification: separation must be a finite number >= 0, got ", separation);
  // Independent streams, so that e.g. the centers do not change with the sample count.
  Rng center_rng(mix_seed(seed, "classification.centers"));
  Rng point_rng(mix_seed(seed, "classification.points"));
  std::vector<double> centers(static_cast<size_t>(classes * features));
  for (double& c : centers) c = separation * center_rng.normal();

  // Row r has class r % classes (balanced), then the whole set is shuffled.
  const std::vector<int64_t> perm =
      random_permutation(samples, mix_seed(seed, "classification.shuffle"));
  HostArray X(DType::F32, {samples, features});
  HostArray y(DType::I32, {samples});
  float* x = X.data<float>();
  int32_t* labels = y.data<int32_t>();
  for (int64_t r = 0; r < samples; ++r) {
    const int64_t k = r % classes;
    const int64_t row = perm[r];  // where unshuffled row r lands
    for (int64_t j = 0; j < features; ++j)
      x[row * features + j] = static_cast<float>(centers[k * features + j] + point_rng.normal());
    labels[row] = static_cast<int32_t>(k);
  }
  return make_dataset("classification", Task::Classification, std::move(X), std::move(y),
                      classes);
}

Dataset make_regression(int64_t samples, int64_t features, int64_t targets, uint64_t seed,
                        double noise) {
  SG_REQUIRE(samples > 0 && features > 0 && targets > 0,
             "make_regression: samples, features and targets must be positive, got ", samples,
             ", ", features, ", ", targets);
  SG_REQUIRE(std::isfinite(noise) && noise >= 0,
             "make_regression: noise must be a finite number >= 0, got ", noise);
  Rng weight_rng(mix_seed(seed, "regression.weights"));
  Rng x_rng(mix_seed(seed, "regression.x"));
  Rng noise_rng(mix_seed(seed, "regression.noise"));
  // a[t] then b[t] for each target t, each a vector over the features.
  std::vector<double> a(static_cast<size_t>(targets * features));
  std::vector<double> b(a.size());
  for (int64_t t = 0; t < targets; ++t) {
    for (int64_t j = 0; j < features; ++j) a[t * features + j] = weight_rng.normal();
    for (int64_t j = 0; j < features; ++j) b[t * features + j] = weight_rng.normal();
  }
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(features));

  HostArray X(DType::F32, {samples, features});
  HostArray Y(DType::F32, {samples, targets});
  float* x = X.data<float>();
  float* y = Y.data<float>();
  for (int64_t r = 0; r < samples; ++r) {
    float* xr = x + r * features;
    for (int64_t j = 0; j < features; ++j) xr[j] = static_cast<float>(x_rng.uniform(-1.0, 1.0));
    for (int64_t t = 0; t < targets; ++t) {
      double xa = 0, xb = 0;  // from the stored f32 x, so y is exactly a function of X
      for (int64_t j = 0; j < features; ++j) {
        xa += xr[j] * a[t * features + j];
        xb += xr[j] * b[t * features + j];
      }
      const double eps = noise > 0 ? noise * noise_rng.normal() : 0.0;
      y[r * targets + t] = static_cast<float>(std::sin(xa) + xb * inv_sqrt_d + eps);
    }
  }
  return make_dataset("regression", Task::Regression, std::move(X), std::move(Y));
}

namespace {

// The rows of each side of a split: the last ceil(N * val_fraction) of a seeded permutation
// are the validation set.
std::pair<std::vector<int64_t>, std::vector<int64_t>> split_rows(int64_t n, double val_fraction, uint64_t seed,
                                                                 const std::string& name) {
  SG_REQUIRE(val_fraction >= 0.0 && val_fraction < 1.0, "train_val_split of data set '", name,
             "': val_fraction must be in [0, 1), got ", val_fraction);
  // The tolerance keeps e.g. 10 * 0.3 = 3.0000000000000004 from rounding up to 4.
  const double raw = static_cast<double>(n) * val_fraction;
  const int64_t n_val = static_cast<int64_t>(std::ceil(raw - 1e-9 * std::max(1.0, raw)));
  const int64_t n_train = n - n_val;
  SG_REQUIRE(n_train > 0, "train_val_split of data set '", name, "': val_fraction ",
             val_fraction, " of ", n, " samples leaves no training samples");
  const std::vector<int64_t> perm = random_permutation(n, mix_seed(seed, "train_val_split"));
  return {std::vector<int64_t>(perm.begin(), perm.begin() + n_train), std::vector<int64_t>(perm.begin() + n_train, perm.end())};
}

// Rows `index` of a [n, ...] array (bytes, so every dtype works).
// `what` names the array only in errors: it is built then, not for every batch of a training loop.
template <class What>
HostArray gather_rows(const HostArray& a, const std::vector<int64_t>& index, const What& what) {
  const int64_t n = a.shape().empty() ? 0 : a.shape()[0];
  Shape s = a.shape();
  SG_REQUIRE(!s.empty(), "gather: ", what(), " is a scalar; expected [rows, ...]");
  s[0] = static_cast<int64_t>(index.size());
  HostArray out(a.dtype(), s);
  const size_t row = a.nbytes() / static_cast<size_t>(std::max<int64_t>(n, 1));
  const char* src = static_cast<const char*>(a.raw());
  char* dst = static_cast<char*>(out.raw());
  for (size_t i = 0; i < index.size(); ++i) {
    const int64_t r = index[i];
    SG_REQUIRE(r >= 0 && r < n, "gather: index[", i, "] = ", r, " is out of range for ", what(), " with ", n, " rows");
    std::memcpy(dst + i * row, src + r * row, row);
  }
  return out;
}

}  // namespace

Dataset gather(const Dataset& d, const std::vector<int64_t>& index) {
  const int64_t n = d.size();
  SG_REQUIRE(d.X.shape().size() == 2 && !d.y.shape().empty() && d.y.shape()[0] == n, "gather: data set '", d.name,
             "' is malformed (X ", shape_str(d.X.shape()), ", y ", shape_str(d.y.shape()), ")");
  // Not through make_dataset: the source was validated, the class count must be kept (a
  // subset may miss the top class) and an empty selection (a 0% validation split) is allowed.
  Dataset out;
  out.name = d.name;
  out.task = d.task;
  const auto what = [&] { return cat("data set '", d.name, "'"); };
  out.X = gather_rows(d.X, index, what);
  out.y = gather_rows(d.y, index, what);
  out.num_classes = d.num_classes;
  return out;
}

std::pair<Dataset, Dataset> train_val_split(const Dataset& d, double val_fraction,
                                            uint64_t seed) {
  const auto [train, val] = split_rows(d.size(), val_fraction, seed, d.name);
  return {gather(d, train), gather(d, val)};
}

int64_t NamedDataset::size() const {
  for (const NamedArrays* m : {&inputs, &targets})
    for (const auto& kv : *m)
      if (!kv.second.shape().empty()) return kv.second.shape()[0];
  return 0;
}

NamedDataset gather(const NamedDataset& d, const std::vector<int64_t>& index) {
  NamedDataset out;
  out.name = d.name;
  for (const auto& kv : d.inputs)
    out.inputs.emplace(kv.first, gather_rows(kv.second, index, [&] { return cat("input '", kv.first, "' of '", d.name, "'"); }));
  for (const auto& kv : d.targets)  // (a lambda cannot capture a structured binding in C++17)
    out.targets.emplace(kv.first,
                        gather_rows(kv.second, index, [&] { return cat("target '", kv.first, "' of '", d.name, "'"); }));
  return out;
}

std::pair<NamedDataset, NamedDataset> train_val_split(const NamedDataset& d, double val_fraction, uint64_t seed) {
  const auto [train, val] = split_rows(d.size(), val_fraction, seed, d.name);
  return {gather(d, train), gather(d, val)};
}

// The last epoch's permutation, so that consecutive steps do not each pay O(N) to rebuild it.
// Copies of a sampler share it; they have the same (n, seed), so the entries are the same.
struct BatchSampler::PermCache {
  std::mutex mu;
  int64_t epoch = -1;
  std::vector<int64_t> perm;
};

BatchSampler::BatchSampler(int64_t num_samples, int64_t batch_size, bool shuffle, uint64_t seed,
                           LastBatch last)
    : n_(num_samples),
      batch_(batch_size),
      shuffle_(shuffle),
      seed_(seed),
      last_(last),
      cache_(std::make_shared<PermCache>()) {
  SG_REQUIRE(n_ > 0, "batch sampler: the data set is empty (", n_, " samples)");
  SG_REQUIRE(batch_ > 0, "batch sampler: batch_size must be positive, got ", batch_);
  SG_REQUIRE(last_ == LastBatch::Partial || batch_ <= n_, "batch sampler: batch_size ", batch_,
             " is larger than the ", n_,
             " samples, so with last batch 'drop' every epoch would be empty");
}

int64_t BatchSampler::batches_per_epoch() const {
  return last_ == LastBatch::Drop ? n_ / batch_ : (n_ + batch_ - 1) / batch_;
}

std::vector<int64_t> BatchSampler::permutation(int64_t epoch) const {
  SG_REQUIRE(epoch >= 0, "batch sampler: epoch must be >= 0, got ", epoch);
  if (!shuffle_) {
    std::vector<int64_t> p(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) p[i] = i;
    return p;
  }
  return random_permutation(n_, mix_seed(seed_, static_cast<uint64_t>(epoch)));
}

std::vector<int64_t> BatchSampler::indices(int64_t step) const {
  SG_REQUIRE(step >= 0, "batch sampler: step must be >= 0, got ", step);
  const int64_t per_epoch = batches_per_epoch();
  const int64_t epoch = step / per_epoch;
  const int64_t begin = (step % per_epoch) * batch_;
  const int64_t end = std::min(n_, begin + batch_);
  if (!shuffle_) {
    std::vector<int64_t> out;
    for (int64_t i = begin; i < end; ++i) out.push_back(i);
    return out;
  }
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->epoch != epoch) {
    cache_->perm = permutation(epoch);
    cache_->epoch = epoch;
  }
  return std::vector<int64_t>(cache_->perm.begin() + begin, cache_->perm.begin() + end);
}

}  // namespace sg
