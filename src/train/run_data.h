// Internal: the data of a supervised run from a configuration (train, eval, predict, bench,
// verify, explain): one X and one y (Dataset), or arrays by name for a graph model with several
// inputs or outputs (NamedDataset; RunConfig::named). Loaded, split by data.validation_split
// and standardized with the training split's statistics; every use goes through these functions
// so that the two kinds of data follow one rule.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stepgraph/config.h"
#include "stepgraph/trainer.h"

namespace sg {

// The z-score of each value of a sample by the training split's mean and standard deviation
// (data.standardize): training, validation and predicted inputs alike.
struct Scaling {
  std::vector<double> mean, sd;
  explicit Scaling(const HostArray& train);  // f32 [N, ...]: per value of a sample
  void apply(HostArray& X) const;
};

struct RunData {
  bool named = false;
  Dataset all, train, val;                        // one X and one y; `all` in file order
  NamedDataset named_all, named_train, named_val;  // by name
  std::map<std::string, Scaling> scaling;          // data.standardize: by input name ("X": one-array data)

  const std::string& name() const { return named ? named_all.name : all.name; }
  int64_t train_size() const { return named ? named_train.size() : train.size(); }
  int64_t val_size() const { return named ? named_val.size() : val.size(); }
};

// Loads, splits and standardizes. Targets by name are converted to the dtype their loss takes
// (integral f32 labels to i32, i32 regression targets to f32; [N, 1] labels to [N]).
// split = false: the training split is the whole data set in file order (bench, verify, explain).
RunData prepare_data(const RunConfig& cfg, bool split = true);

// Compiles `t` for batches of `batch` rows and checks the whole data set against the model
// (shapes, dtypes, labels) before anything is written.
void compile_for(Trainer& t, const RunConfig& cfg, const RunData& d, int64_t batch);

// One training step on rows of the training split.
float train_rows(Trainer& t, const RunData& d, const std::vector<int64_t>& rows);
// The first `rows` rows of the training split as the trainer's current batch (bench).
void set_first_rows(Trainer& t, const RunData& d, int64_t rows);
// Loss (and accuracy, one-array classification) over a split.
EvalResult evaluate_split(Trainer& t, const RunData& d, bool validation);

// "  u 0.0123  v 0.4567": terms by name for a progress line.
std::string terms_text(const std::map<std::string, double>& terms);

}  // namespace sg
