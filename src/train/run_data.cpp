#include "train/run_data.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <tuple>

namespace sg {

Scaling::Scaling(const HostArray& train) {
  const int64_t N = train.shape().empty() ? 0 : train.shape()[0], D = train.numel() / std::max<int64_t>(N, 1);
  mean.assign(D, 0.0), sd.assign(D, 0.0);
  const float* x = train.data<float>();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < D; ++k) mean[k] += x[i * D + k] / static_cast<double>(N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < D; ++k) sd[k] += std::pow(x[i * D + k] - mean[k], 2) / static_cast<double>(N);
  for (double& v : sd) v = std::sqrt(v + 1e-12);
}

void Scaling::apply(HostArray& X) const {
  const int64_t D = static_cast<int64_t>(mean.size()), N = X.numel() / std::max<int64_t>(D, 1);
  float* v = X.data<float>();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < D; ++k) v[i * D + k] = static_cast<float>((v[i * D + k] - mean[k]) / sd[k]);
}

namespace {

// A target as its loss takes it: i32 labels ([N], from integral f32 values too) or f32 values.
HostArray fit_target(HostArray a, const LossTerm& term, const std::string& where) {
  const DType want = term.loss->target_dtype();
  if (want == DType::I32 && a.dtype() == DType::F32) {
    HostArray l(DType::I32, a.shape());
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float v = a.data<float>()[i];
      SG_REQUIRE(v == std::floor(v) && std::fabs(v) < 2147483648.0f, where, ": the target of output '", term.output,
                 "' holds ", v, " at element ", i, ", not a class label (", term.loss->describe(),
                 " takes integer labels)");
      l.data<int32_t>()[i] = static_cast<int32_t>(v);
    }
    a = l;
  } else if (want == DType::F32 && a.dtype() == DType::I32) {
    HostArray f(DType::F32, a.shape());
    for (int64_t i = 0; i < a.numel(); ++i) f.data<float>()[i] = static_cast<float>(a.data<int32_t>()[i]);
    a = f;
  }
  if (want == DType::I32 && a.shape().size() == 2 && a.shape()[1] == 1) a = a.reshaped({a.shape()[0]});
  return a;
}

}  // namespace

RunData prepare_data(const RunConfig& cfg, bool split_data) {
  RunData d;
  d.named = cfg.named();
  const double split = split_data ? cfg.data.validation_split : 0.0;
  if (d.named) {
    std::vector<std::string> targets;
    for (const LossTerm& t : cfg.loss_terms) targets.push_back(t.output);
    d.named_all = load_named_data(cfg.data, cfg.graph->input_names(), targets);
    const std::string where = cat("data '", d.named_all.name, "'");
    for (const LossTerm& t : cfg.loss_terms)
      d.named_all.targets[t.output] = fit_target(std::move(d.named_all.targets[t.output]), t, where);
    if (split > 0) std::tie(d.named_train, d.named_val) = train_val_split(d.named_all, split, cfg.data.seed);
    else d.named_train = d.named_all;
    if (cfg.data.standardize)
      for (auto& [name, a] : d.named_train.inputs) {
        if (a.dtype() != DType::F32) continue;
        const Scaling& s = d.scaling.emplace(name, Scaling(a)).first->second;
        s.apply(a);
        if (d.named_val.size()) s.apply(d.named_val.inputs.at(name));
      }
    return d;
  }
  d.all = load_data(cfg.data);
  if (split > 0) std::tie(d.train, d.val) = train_val_split(d.all, split, cfg.data.seed);
  else d.train = d.all;
  if (cfg.data.standardize) {
    const Scaling& s = d.scaling.emplace("X", Scaling(d.train.X)).first->second;
    for (Dataset* part : {&d.train, &d.val})
      if (part->size()) s.apply(part->X);
  }
  return d;
}

void compile_for(Trainer& t, const RunConfig& cfg, const RunData& d, int64_t batch) {
  if (d.named) {
    t.compile({batch});
    t.check_data(d.named_all.inputs, d.named_all.targets, cat("data '", d.name(), "'"));
    return;
  }
  check_model_inputs(cfg, d.all);
  t.compile({batch, d.all.features()});
  check_data_fits(cfg, d.all, t.output_shape().back());
  t.check_data(d.all.X, d.all.y, cat("data '", d.all.name, "'"));
}

float train_rows(Trainer& t, const RunData& d, const std::vector<int64_t>& rows) {
  if (d.named) {
    const NamedDataset b = gather(d.named_train, rows);
    return t.one_step(b.inputs, b.targets);
  }
  const Dataset b = gather(d.train, rows);
  return t.one_step(b.X, b.y);
}

void set_first_rows(Trainer& t, const RunData& d, int64_t rows) {
  SG_REQUIRE(rows <= d.train_size(), "train.batch_size ", rows, " is larger than the training split of '", d.name(),
             "' (", d.train_size(), " samples)");
  std::vector<int64_t> idx(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) idx[i] = i;
  if (d.named) {
    const NamedDataset b = gather(d.named_train, idx);
    t.set_batch(b.inputs, b.targets);
  } else {
    const Dataset b = gather(d.train, idx);
    t.set_batch(b.X, b.y);
  }
}

EvalResult evaluate_split(Trainer& t, const RunData& d, bool validation) {
  if (d.named) {
    const NamedDataset& s = validation ? d.named_val : d.named_train;
    return t.evaluate(s.inputs, s.targets);
  }
  const Dataset& s = validation ? d.val : d.train;
  return t.evaluate(s.X, s.y);
}

std::string terms_text(const std::map<std::string, double>& terms) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(4);
  for (const auto& [name, v] : terms) s << "  " << name << " " << v;
  return s.str();
}

}  // namespace sg
