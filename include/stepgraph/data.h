// Data sets, file readers, splitting and the batching rule.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/core.h"

namespace sg {

enum class Task { Classification, Regression };
const char* task_name(Task t);  // "classification" | "regression"

// A whole data set in host memory.
//   X: f32 [N, D]
//   y: i32 [N] class labels in [0, num_classes) for classification (or i32 [N, T]: one label
//      per position of a sequence, -1 where a position has no target),
//      f32 [N, T] targets for regression.
struct Dataset {
  std::string name;
  Task task = Task::Classification;
  HostArray X;
  HostArray y;
  int64_t num_classes = 0;  // classification only

  int64_t size() const { return X.shape().empty() ? 0 : X.shape()[0]; }
  int64_t features() const { return X.shape().size() < 2 ? 0 : X.shape()[1]; }
  int64_t targets() const;  // regression: T; classification: 1
};

// Arrays by name: a graph model's inputs, its targets (by output name), its predictions.
using NamedArrays = std::map<std::string, HostArray>;
// An array in CUDA memory, row-major: a DLPack tensor's data, shape and dtype (by name: a graph
// model's batch, Trainer::set_batch_device).
struct DeviceArray {
  const void* data = nullptr;
  Shape shape;
  DType dtype = DType::F32;
};
using NamedDeviceArrays = std::map<std::string, DeviceArray>;

// A data set for a graph model: every model input and every output's target by name, each
// [N, ...] with the same N (row i of every array is sample i).
struct NamedDataset {
  std::string name;
  NamedArrays inputs, targets;

  int64_t size() const;  // N (0 when empty)
};

// Checks shapes, dtypes and label range; errors name `what` (e.g. "data.path 'x.npy'").
// For classification with num_classes == 0 the count is inferred as max(label) + 1.
Dataset make_dataset(std::string name, Task task, HostArray X, HostArray y,
                     int64_t num_classes = 0);

// The handwritten digits (1797 8x8 images, 10 classes) from scikit-learn, embedded in the
// library. Pixels are scaled from 0..16 to 0..1.
Dataset load_digits();

// Seeded synthetic sets. Classification: `classes` Gaussian blobs in `features` dimensions with
// random centers (separation controls difficulty). Regression: y = sin(x·a) + x·b (+ noise),
// `targets` outputs.
Dataset make_classification(int64_t samples, int64_t features, int64_t classes, uint64_t seed,
                            double separation = 3.0);
Dataset make_regression(int64_t samples, int64_t features, int64_t targets, uint64_t seed,
                        double noise = 0.0);

// A generated character-level sequence task for decoder-only models. Each sample is a random
// string x of `length` symbols (tokens 1..symbols) followed by the separator token 0 and its
// answer: x itself ("copy") or x reversed ("reverse"). X holds the first 2 * length tokens of
// that 2 * length + 1 token sequence (as f32 ids), y the next token at each position (i32
// [N, 2 * length]) with -1 before the separator, so only the answer is predicted (length targets
// per sample). Vocabulary: symbols + 1 tokens.
Dataset make_sequence_task(const std::string& kind, int64_t samples, int64_t length, int64_t symbols, uint64_t seed);

// A text file as a character-level next-token task: tokens are the file's distinct bytes in byte
// order (UTF-8 text works byte by byte), samples are windows of `length` tokens starting every
// `stride` bytes (X as f32 ids [N, length]), and y is the token after each position (i32
// [N, length]: every position has a target). Vocabulary: the distinct bytes. Errors name the file.
Dataset load_text_windows(const std::string& path, int64_t length, int64_t stride);

// NumPy files. .npy: little-endian f4/f8/i4/i8/u1/i1/b1 (f8 and i8 converted to f32/i32, with
// range checks), C order. .npz: zip archive of .npy files, stored or deflated.
HostArray read_npy(const std::string& path);
std::map<std::string, HostArray> read_npz(const std::string& path);
void write_npy(const std::string& path, const HostArray& a);  // for tests and tools
void write_npz(const std::string& path, const NamedArrays& arrays);  // stored members "<name>.npy"

// CSV: numeric cells, optional header row (detected when the first row is not numeric),
// label/target column(s) selected by index (negative counts from the end).
// Missing values in a CSV file: empty cells, and cells that are one of na_values (compared
// after trimming spaces, e.g. "NA", "?", "null"). Each is an Error naming its line and column,
// unless drop_rows: then every row holding one is left out (CsvTable::dropped counts them; a
// file left with no row is an Error).
struct CsvMissing {
  std::vector<std::string> na_values;
  bool drop_rows = false;
};

struct CsvOptions {
  Task task = Task::Classification;
  CsvMissing missing;
  int label_column = -1;   // classification: the label column
  int num_targets = 1;     // regression: the last `num_targets` columns unless label_column set
};
Dataset load_csv(const std::string& path, const CsvOptions& opt);
// Column groups by name (a graph model's inputs and targets): each group's columns, by index
// (negative counts from the end) or by header name, into f32 [rows, columns]. Columns in no
// group are not read; errors name the group and the column.
struct CsvColumn {
  int64_t index = 0;
  std::string header;  // non-empty: the column of this header name
};
NamedArrays load_csv_columns(const std::string& path, const std::map<std::string, std::vector<CsvColumn>>& groups,
                             const CsvMissing& missing = {});

// Shuffled (seeded) split: the last ceil(N * val_fraction) samples of a permutation are the
// validation set. val_fraction in [0, 1).
std::pair<Dataset, Dataset> train_val_split(const Dataset& d, double val_fraction, uint64_t seed);

// Rows `index` of d into a new data set (same task and classes).
Dataset gather(const Dataset& d, const std::vector<int64_t>& index);
// The same for arrays by name: the split takes the same rows as a Dataset of as many samples
// with the same seed (a graph model spelling out a Sequential trains on the same samples).
std::pair<NamedDataset, NamedDataset> train_val_split(const NamedDataset& d, double val_fraction, uint64_t seed);
NamedDataset gather(const NamedDataset& d, const std::vector<int64_t>& index);

// The DeepONet antiderivative set (operator learning, Lu et al. 2021): `functions` random
// functions u(x) = c + sum_k (a_k cos(2 pi k x) + b_k sin(2 pi k x)) / k on [0, 1] (k <= 4,
// coefficients standard normal), each sampled at `sensors` evenly spaced points and queried at
// `points` uniform random y in [0, 1]. One row per (function, y): members "u" f32 [N, sensors]
// (the function at the sensors), "y" f32 [N, 1] and "G" f32 [N, 1] = the integral of u from 0 to
// y (closed form). N = functions * points; rows of one function are adjacent.
NamedArrays make_antiderivative(int64_t functions, int64_t sensors, int64_t points, uint64_t seed);

// The batching rule. Epoch e visits a permutation of [0, N) that depends only on (seed, e)
// (identity when shuffle is false); step s (0-based) is batch s % batches_per_epoch of epoch
// s / batches_per_epoch. Last partial batch:
//   drop    (default) a tail smaller than batch_size is skipped, every batch is full
//   partial the tail is its own, smaller batch
// Because the position depends only on the step, resuming at step s continues bit-exactly.
enum class LastBatch { Drop, Partial };
class BatchSampler {
 public:
  BatchSampler(int64_t num_samples, int64_t batch_size, bool shuffle, uint64_t seed,
               LastBatch last = LastBatch::Drop);
  int64_t batches_per_epoch() const;
  std::vector<int64_t> indices(int64_t step) const;  // rows of the batch at `step`
  std::vector<int64_t> permutation(int64_t epoch) const;

 private:
  struct PermCache;  // the current epoch's permutation (mutex-guarded; shared by copies)

  int64_t n_, batch_;
  bool shuffle_;
  uint64_t seed_;
  LastBatch last_;
  std::shared_ptr<PermCache> cache_;
};

}  // namespace sg
