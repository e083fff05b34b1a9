// Tests of the data module: data sets, the digits set, splitting, batching (the .npy/.npz
// readers: test_numpy_io.cpp; the CSV reader: test_csv.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "stepgraph/data.h"
#include "stepgraph/rng.h"
#include "data_test_util.h"

namespace {

using sg::DType;
using sg::HostArray;
using sg::test::expect_error;
using sg::test::floats;
using sg::test::ints;
using sg::test::tmp_path;
using sg::test::write_file;

// A data set whose feature 0 is the row number, so rows can be traced through splits.
sg::Dataset traceable(int64_t n, int64_t classes = 3) {
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int64_t i = 0; i < n; ++i) {
    x.push_back(static_cast<float>(i));
    x.push_back(static_cast<float>(-2 * i));
    y.push_back(static_cast<int32_t>(i % classes));
  }
  return sg::make_dataset("trace", sg::Task::Classification, HostArray::f32({n, 2}, x),
                          HostArray::i32({n}, y));
}

std::vector<int64_t> row_ids(const sg::Dataset& d) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < d.size(); ++i) ids.push_back(static_cast<int64_t>(d.X.data<float>()[2 * i]));
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Digits

TEST(Digits, ShapeClassesAndKnownValues) {
  const sg::Dataset d = sg::load_digits();
  EXPECT_EQ(d.name, "digits");
  EXPECT_EQ(d.task, sg::Task::Classification);
  ASSERT_EQ(d.X.shape(), (sg::Shape{1797, 64}));
  ASSERT_EQ(d.y.shape(), (sg::Shape{1797}));
  EXPECT_EQ(d.num_classes, 10);
  EXPECT_EQ(d.features(), 64);
  EXPECT_EQ(d.targets(), 1);

  const std::vector<float> x = floats(d.X);
  EXPECT_GE(*std::min_element(x.begin(), x.end()), 0.0f);
  EXPECT_EQ(*std::max_element(x.begin(), x.end()), 1.0f);  // some pixels are 16
  // First row of the file: 0,0,5,13,9,1,... label 0; the second has label 1.
  EXPECT_FLOAT_EQ(x[2], 5.0f / 16);
  EXPECT_FLOAT_EQ(x[3], 13.0f / 16);
  EXPECT_FLOAT_EQ(x[5], 1.0f / 16);
  const std::vector<int32_t> y = ints(d.y);
  EXPECT_EQ(y[0], 0);
  EXPECT_EQ(y[1], 1);
  EXPECT_EQ(y[2], 2);

  std::vector<int> count(10, 0);
  for (int32_t label : y) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++count[label];
  }
  for (int c = 0; c < 10; ++c) {
    EXPECT_GE(count[c], 174) << "class " << c;
    EXPECT_LE(count[c], 183) << "class " << c;
  }
  EXPECT_EQ(count[0], 178);
  EXPECT_EQ(count[8], 174);
}

// ---------------------------------------------------------------------------------------------
// make_dataset

TEST(MakeDataset, ValidatesShapesTypesAndLabels) {
  const HostArray X = HostArray::f32({3, 2}, {1, 2, 3, 4, 5, 6});
  expect_error(
      [&] { sg::make_dataset("d", sg::Task::Classification, X, HostArray::i32({3}, {0, 1, 5}), 3); },
      {"'d'", "y[2] = 5", "[0, 3)"});
  expect_error(
      [&] { sg::make_dataset("d", sg::Task::Classification, X, HostArray::i32({3}, {0, -1, 1})); },
      {"y[1] = -1"});
  expect_error(
      [&] { sg::make_dataset("d", sg::Task::Classification, X, HostArray::i32({2}, {0, 1})); },
      {"X has 3 rows", "y has 2 rows"});
  expect_error(
      [&] { sg::make_dataset("d", sg::Task::Classification, X, HostArray::f32({3}, {0, 1, 0})); },
      {"i32 [N]", "f32 [3]"});
  expect_error([&] {
    sg::make_dataset("d", sg::Task::Classification, HostArray::i32({3, 1}, {1, 2, 3}),
                     HostArray::i32({3}, {0, 1, 0}));
  }, {"f32 [N, D]", "i32 [3, 1]"});
  expect_error([&] {
    sg::make_dataset("d", sg::Task::Classification, HostArray(DType::F32, {0, 2}),
                     HostArray(DType::I32, {0}));
  }, {"empty"});
  expect_error(
      [&] { sg::make_dataset("d", sg::Task::Regression, X, HostArray::f32({3}, {0, 1, 0})); },
      {"f32 [N, T]"});
  expect_error([&] {
    sg::make_dataset("d", sg::Task::Regression, HostArray::f32({1, 2}, {1, NAN}),
                     HostArray::f32({1, 1}, {0}));
  }, {"row 0, column 1", "finite"});

  const sg::Dataset d =
      sg::make_dataset("d", sg::Task::Classification, X, HostArray::i32({3}, {0, 4, 1}));
  EXPECT_EQ(d.num_classes, 5);  // inferred max + 1
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(d.features(), 2);
  const sg::Dataset r = sg::make_dataset("r", sg::Task::Regression, X,
                                         HostArray::f32({3, 2}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(r.targets(), 2);
  EXPECT_STREQ(sg::task_name(sg::Task::Regression), "regression");
  EXPECT_STREQ(sg::task_name(sg::Task::Classification), "classification");
}

TEST(MakeDataset, PerTokenLabels) {
  const HostArray X = HostArray::f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const sg::Dataset d = sg::make_dataset("t", sg::Task::Classification, X, HostArray::i32({2, 3}, {-1, 2, 0, -1, -1, 3}));
  EXPECT_EQ(d.num_classes, 4);
  expect_error(
      [&] { sg::make_dataset("t", sg::Task::Classification, X, HostArray::i32({2, 3}, {-1, 2, 0, -2, -1, 3})); },
      {"'t'", "y[1, 0] = -2", "[-1, num_classes)", "-1: no target"});
  expect_error(
      [&] { sg::make_dataset("t", sg::Task::Classification, X, HostArray::i32({2, 3}, {-1, 2, 0, 1, 1, 3}), 3); },
      {"y[1, 2] = 3", "[-1, 3)"});
}

TEST(SequenceTask, CopyAndReverseLayout) {
  for (const std::string kind : {"copy", "reverse"}) {
    const sg::Dataset d = sg::make_sequence_task(kind, 50, 4, 6, 3);
    ASSERT_EQ(d.X.shape(), (sg::Shape{50, 8}));
    ASSERT_EQ(d.y.shape(), (sg::Shape{50, 8}));
    EXPECT_EQ(d.num_classes, 7);
    for (int64_t n = 0; n < 50; ++n) {
      const float* x = d.X.data<float>() + n * 8;
      const int32_t* y = d.y.data<int32_t>() + n * 8;
      EXPECT_EQ(x[4], 0.0f);  // the separator
      for (int64_t i = 0; i < 4; ++i) {
        EXPECT_GE(x[i], 1.0f);
        EXPECT_LE(x[i], 6.0f);
        EXPECT_EQ(y[i], -1);  // no target before the separator
        const float want = kind == "copy" ? x[i] : x[3 - i];
        EXPECT_EQ(y[4 + i], static_cast<int32_t>(want)) << kind;  // answer token i + 1
        if (i < 3) EXPECT_EQ(x[5 + i], static_cast<float>(y[4 + i]));  // teacher forcing: the next input
      }
    }
  }
  // Deterministic by seed; another seed gives other strings.
  EXPECT_EQ(std::memcmp(sg::make_sequence_task("copy", 20, 5, 9, 1).X.raw(),
                        sg::make_sequence_task("copy", 20, 5, 9, 1).X.raw(), 20 * 10 * 4), 0);
  EXPECT_NE(std::memcmp(sg::make_sequence_task("copy", 20, 5, 9, 1).X.raw(),
                        sg::make_sequence_task("copy", 20, 5, 9, 2).X.raw(), 20 * 10 * 4), 0);
  expect_error([] { sg::make_sequence_task("sort", 20, 5, 9, 1); }, {"unknown kind 'sort'", "copy or reverse"});
}

// ---------------------------------------------------------------------------------------------
// Splitting and gathering

TEST(Split, SizesDisjointnessAndLabelsFollowRows) {
  const sg::Dataset d = traceable(100);
  const auto [train, val] = sg::train_val_split(d, 0.2, 7);
  EXPECT_EQ(train.size(), 80);
  EXPECT_EQ(val.size(), 20);
  EXPECT_EQ(train.num_classes, 3);
  std::vector<int64_t> all = row_ids(train);
  const std::vector<int64_t> v = row_ids(val);
  all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(all[i], i);  // disjoint and complete
  // Shuffled, not the first or last 20 rows.
  EXPECT_NE(v, (std::vector<int64_t>{80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94,
                                     95, 96, 97, 98, 99}));
  for (const sg::Dataset* part : {&train, &val})
    for (int64_t i = 0; i < part->size(); ++i) {
      const int64_t row = static_cast<int64_t>(part->X.data<float>()[2 * i]);
      EXPECT_EQ(part->X.data<float>()[2 * i + 1], -2.0f * row);
      EXPECT_EQ(part->y.data<int32_t>()[i], row % 3);
    }
}

TEST(Split, DeterministicBySeedAndRounding) {
  const sg::Dataset d = traceable(50);
  EXPECT_EQ(row_ids(sg::train_val_split(d, 0.3, 1).second),
            row_ids(sg::train_val_split(d, 0.3, 1).second));
  EXPECT_NE(row_ids(sg::train_val_split(d, 0.3, 1).second),
            row_ids(sg::train_val_split(d, 0.3, 2).second));
  // 100 * 0.07 is 7.000000000000001 in floating point: still 7, not 8.
  EXPECT_EQ(sg::train_val_split(traceable(100), 0.07, 1).second.size(), 7);
  EXPECT_EQ(sg::train_val_split(traceable(10), 0.25, 1).second.size(), 3);  // ceil(2.5)
  const auto [train, val] = sg::train_val_split(d, 0.0, 1);
  EXPECT_EQ(train.size(), 50);
  EXPECT_EQ(val.size(), 0);
  EXPECT_EQ(val.X.shape(), (sg::Shape{0, 2}));

  expect_error([&] { sg::train_val_split(d, 1.0, 1); }, {"val_fraction", "[0, 1)"});
  expect_error([&] { sg::train_val_split(d, -0.1, 1); }, {"val_fraction"});
  expect_error([&] { sg::train_val_split(traceable(1), 0.5, 1); }, {"no training samples"});
}

TEST(Gather, KeepsClassCountAndChecksIndices) {
  const sg::Dataset d = traceable(6);
  const sg::Dataset g = sg::gather(d, {4, 0, 4});
  EXPECT_EQ(row_ids(g), (std::vector<int64_t>{4, 0, 4}));
  EXPECT_EQ(ints(g.y), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(g.num_classes, 3);  // class 2 is absent but the count is kept
  expect_error([&] { sg::gather(d, {1, 6}); }, {"index[1] = 6", "6 rows"});
}

// ---------------------------------------------------------------------------------------------
// BatchSampler

TEST(BatchSampler, PartialVisitsEveryIndexOnce) {
  const sg::BatchSampler s(10, 3, true, 42, sg::LastBatch::Partial);
  ASSERT_EQ(s.batches_per_epoch(), 4);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t b = 0; b < 4; ++b) {
      const std::vector<int64_t> idx = s.indices(epoch * 4 + b);
      EXPECT_EQ(idx.size(), b < 3 ? 3u : 1u);
      seen.insert(seen.end(), idx.begin(), idx.end());
    }
    EXPECT_EQ(seen, s.permutation(epoch));
    std::sort(seen.begin(), seen.end());
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(seen[i], i);
  }
}

TEST(BatchSampler, DropSkipsOnlyTheTail) {
  const sg::BatchSampler s(10, 3, true, 42);
  ASSERT_EQ(s.batches_per_epoch(), 3);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    for (int64_t b = 0; b < 3; ++b) {
      const std::vector<int64_t> idx = s.indices(epoch * 3 + b);
      ASSERT_EQ(idx.size(), 3u);
      seen.insert(idx.begin(), idx.end());
    }
    EXPECT_EQ(seen.size(), 9u);
    EXPECT_EQ(seen.count(s.permutation(epoch)[9]), 0u);  // the skipped tail
  }
}

TEST(BatchSampler, StepMapsToEpochAndBatch) {
  const sg::BatchSampler s(100, 8, true, 9);
  ASSERT_EQ(s.batches_per_epoch(), 12);
  for (int64_t step : {0, 5, 11, 12, 13, 30, 119}) {
    const std::vector<int64_t> perm = s.permutation(step / 12);
    const int64_t begin = (step % 12) * 8;
    EXPECT_EQ(s.indices(step), std::vector<int64_t>(perm.begin() + begin, perm.begin() + begin + 8))
        << "step " << step;
  }
  EXPECT_EQ(s.permutation(3), sg::random_permutation(100, sg::mix_seed(9, 3)));

  const sg::BatchSampler ordered(10, 3, false, 9);
  EXPECT_EQ(ordered.indices(5), (std::vector<int64_t>{6, 7, 8}));  // epoch 1, batch 2
  EXPECT_EQ(ordered.permutation(4), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(BatchSampler, DeterministicBySeedAndEpochsDiffer) {
  const sg::BatchSampler a(100, 10, true, 5), b(100, 10, true, 5), c(100, 10, true, 6);
  const sg::BatchSampler copy = a;
  for (int64_t step : {0, 25, 3, 10}) {  // out of order: the cache must not leak state
    EXPECT_EQ(a.indices(step), b.indices(step));
    EXPECT_EQ(copy.indices(step + 10), b.indices(step + 10));
  }
  EXPECT_NE(a.permutation(0), c.permutation(0));
  EXPECT_NE(a.permutation(0), a.permutation(1));
  EXPECT_NE(a.indices(0), a.indices(10));  // same batch slot, different epochs
}

TEST(BatchSampler, Errors) {
  expect_error([] { sg::BatchSampler(10, 0, true, 1); }, {"batch_size", "0"});
  expect_error([] { sg::BatchSampler(10, 11, true, 1); }, {"11", "10"});
  expect_error([] { sg::BatchSampler(0, 1, true, 1); }, {"empty"});
  const sg::BatchSampler partial(10, 11, true, 1, sg::LastBatch::Partial);
  EXPECT_EQ(partial.batches_per_epoch(), 1);
  EXPECT_EQ(partial.indices(0).size(), 10u);
  expect_error([&] { partial.indices(-1); }, {"step"});
}

// ---------------------------------------------------------------------------------------------
// Synthetic sets

TEST(Synthetic, ClassificationShapesBalanceAndDeterminism) {
  const sg::Dataset d = sg::make_classification(3000, 4, 3, 11, 3.0);
  ASSERT_EQ(d.X.shape(), (sg::Shape{3000, 4}));
  ASSERT_EQ(d.y.shape(), (sg::Shape{3000}));
  EXPECT_EQ(d.num_classes, 3);
  const std::vector<int32_t> y = ints(d.y);
  EXPECT_EQ(std::count(y.begin(), y.end(), 0), 1000);
  EXPECT_EQ(std::count(y.begin(), y.end(), 2), 1000);
  int round_robin = 0;  // shuffled: labels are not simply i % 3
  for (int i = 0; i < 3000; ++i) round_robin += y[i] == i % 3;
  EXPECT_LT(round_robin, 1500);

  // Points are center + N(0, 1): the within-class variance is about 1 in every dimension.
  const std::vector<float> x = floats(d.X);
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 4; ++j) {
      double sum = 0, sq = 0;
      for (int i = 0; i < 3000; ++i)
        if (y[i] == k) sum += x[i * 4 + j];
      const double mean = sum / 1000;
      for (int i = 0; i < 3000; ++i)
        if (y[i] == k) sq += (x[i * 4 + j] - mean) * (x[i * 4 + j] - mean);
      EXPECT_NEAR(sq / 1000, 1.0, 0.15) << "class " << k << " dim " << j;
    }

  const sg::Dataset again = sg::make_classification(3000, 4, 3, 11, 3.0);
  EXPECT_EQ(floats(again.X), x);
  EXPECT_EQ(ints(again.y), y);
  EXPECT_NE(floats(sg::make_classification(3000, 4, 3, 12, 3.0).X), x);
  expect_error([] { sg::make_classification(0, 4, 3, 1); }, {"make_classification"});
}

TEST(Synthetic, RegressionShapesNoiseAndDeterminism) {
  const sg::Dataset d = sg::make_regression(2000, 5, 2, 3);
  ASSERT_EQ(d.X.shape(), (sg::Shape{2000, 5}));
  ASSERT_EQ(d.y.shape(), (sg::Shape{2000, 2}));
  EXPECT_EQ(d.targets(), 2);
  const std::vector<float> x = floats(d.X), y = floats(d.y);
  EXPECT_GE(*std::min_element(x.begin(), x.end()), -1.0f);
  EXPECT_LT(*std::max_element(x.begin(), x.end()), 1.0f);
  double var = 0;
  for (float v : y) var += v * v;
  EXPECT_GT(var / y.size(), 0.05);  // a real signal
  EXPECT_EQ(floats(sg::make_regression(2000, 5, 2, 3).y), y);
  EXPECT_NE(floats(sg::make_regression(2000, 5, 2, 4).y), y);

  // Same seed with noise: same X, y shifted by N(0, 0.5^2).
  const sg::Dataset noisy = sg::make_regression(2000, 5, 2, 3, 0.5);
  EXPECT_EQ(floats(noisy.X), x);
  const std::vector<float> yn = floats(noisy.y);
  double diff_sq = 0;
  for (size_t i = 0; i < y.size(); ++i) diff_sq += (yn[i] - y[i]) * (yn[i] - y[i]);
  EXPECT_NEAR(std::sqrt(diff_sq / y.size()), 0.5, 0.03);
  expect_error([] { sg::make_regression(10, 5, 1, 3, -1.0); }, {"noise"});
}

TEST(TextFile, WindowsOfByteTokensWithTheNextByteAsTarget) {
  const std::string path = tmp_path("text.txt");
  write_file(path, "abcabd\nab");  // bytes: \n a b c d -> tokens 0 1 2 3 4
  const sg::Dataset d = sg::load_text_windows(path, 4, 2);
  EXPECT_EQ(d.num_classes, 5);
  ASSERT_EQ(d.X.shape(), (sg::Shape{3, 4}));  // windows at 0, 2, 4 (each needs the byte after it)
  EXPECT_EQ(floats(d.X), (std::vector<float>{1, 2, 3, 1, 3, 1, 2, 4, 2, 4, 0, 1}));
  ASSERT_EQ(d.y.shape(), (sg::Shape{3, 4}));
  const int32_t* y = d.y.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(y, y + 12), (std::vector<int32_t>{2, 3, 1, 2, 1, 2, 4, 0, 4, 0, 1, 2}));
  expect_error([&] { sg::load_text_windows(path, 9, 1); }, {"text.txt", "has 9 bytes", "at least 10"});
  expect_error([&] { sg::load_text_windows(tmp_path("missing.txt"), 4, 1); }, {"cannot open text file", "missing.txt"});
  expect_error([&] { sg::load_text_windows(path, 4, 0); }, {"stride must be positive"});
}

}  // namespace
