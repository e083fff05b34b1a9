// Device-resident data: the in-step gather and its per-epoch Feistel shuffle (CPU reference).
#include <cmath>
#include <cstring>
#include <set>

#include "data/feistel.h"
#include "stepgraph/model.h"
#include "stepgraph/trainer.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

TEST(Resident, FeistelIsAPermutationPerEpoch) {
  for (uint64_t n : {1ull, 2ull, 7ull, 64ull, 1000ull, 1797ull}) {
    std::vector<uint64_t> e0, e1;
    for (uint64_t i = 0; i < n; ++i) {
      e0.push_back(feistel_permute(i, n, 42, 0));
      e1.push_back(feistel_permute(i, n, 42, 1));
    }
    EXPECT_EQ(std::set<uint64_t>(e0.begin(), e0.end()).size(), n) << "n=" << n;
    EXPECT_LT(*std::max_element(e0.begin(), e0.end()), n);
    if (n >= 7) {
      EXPECT_NE(e0, e1) << "epochs must differ, n=" << n;
      std::vector<uint64_t> id(n);
      for (uint64_t i = 0; i < n; ++i) id[i] = i;
      EXPECT_NE(e0, id) << "not shuffled, n=" << n;
    }
    EXPECT_EQ(feistel_permute(n - 1, n, 42, 3), feistel_permute(n - 1, n, 42, 3));  // deterministic
  }
}

std::unique_ptr<Trainer> small_trainer(Device d = Device::CPU, ExecMode mode = ExecMode::Eager) {
  TrainerOptions o;
  o.mode = mode;
  auto t = std::make_unique<Trainer>(sequential({dense(16, Activation::Tanh), dense(4)}),
                                     std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<Adam>(1e-2),
                                     d, 9, o);
  t->compile({8, 5});
  return t;
}

// Rows the GatherBatch rule picks for `step` (written out here independently of the kernels).
std::vector<int64_t> rows_for(int64_t step, int64_t N, int64_t B, bool partial, uint64_t seed) {
  const int64_t bpe = partial ? (N + B - 1) / B : N / B, epoch = step / bpe, pos0 = (step % bpe) * B;
  std::vector<int64_t> rows;
  for (int64_t j = 0; j < B && pos0 + j < N; ++j)
    rows.push_back(static_cast<int64_t>(feistel_permute(pos0 + j, N, seed, epoch)));
  return rows;
}

HostArray take(const HostArray& a, const std::vector<int64_t>& rows) {
  Shape s = a.shape();
  s[0] = static_cast<int64_t>(rows.size());
  HostArray out(a.dtype(), s);
  const size_t row = a.nbytes() / a.shape()[0];
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<char*>(out.raw()) + i * row, static_cast<const char*>(a.raw()) + rows[i] * row, row);
  return out;
}

TEST(Resident, InStepGatherEqualsHostFedBatches) {
  for (LastBatch last : {LastBatch::Drop, LastBatch::Partial}) {
    const int64_t N = 29, B = 8;  // 3 full batches + a tail of 5
    HostArray X = random_f32({N, 5}, 1), y = random_labels(N, 4, 2);
    auto resident = small_trainer(), fed = small_trainer();
    resident->set_dataset(X, y, B, true, last, 77);
    EXPECT_TRUE(resident->is_resident());
    EXPECT_THROW(resident->set_batch(take(X, {0, 1, 2, 3, 4, 5, 6, 7}), take(y, {0, 1, 2, 3, 4, 5, 6, 7})), Error);
    const bool partial = last == LastBatch::Partial;
    for (int64_t s = 0; s < 10; ++s) {  // crosses epoch boundaries (and the padded tail)
      resident->launch();
      auto rows = rows_for(s, N, B, partial, 77);
      float lf = fed->one_step(take(X, rows), take(y, rows));
      EXPECT_TRUE(near(resident->loss(), lf, 1e-6, 1e-5)) << "step " << s << (partial ? " partial" : " drop");
    }
    auto a = resident->params(), b = fed->params();
    for (auto& [name, v] : a)
      for (int64_t k = 0; k < v.numel(); ++k)
        ASSERT_TRUE(near(v.data<float>()[k], b.at(name).data<float>()[k], 1e-6, 1e-5)) << name;
    EXPECT_EQ(resident->step(), 10);
  }
}

// Data parallel: shard r of 3 gathers rows [r*B, (r+1)*B) of the global batch of 3*B rows that
// the GatherBatch rule draws (dist::shard_of's slice), and trains exactly as if fed those rows.
TEST(Resident, ShardsGatherTheirSliceOfTheGlobalBatch) {
  const int64_t N = 29, B = 8, shards = 3;  // global batch 24: one per epoch, 5 rows dropped
  HostArray X = random_f32({N, 5}, 3), y = random_labels(N, 4, 4);
  for (int r = 0; r < shards; ++r) {
    auto resident = small_trainer(), fed = small_trainer();
    resident->set_dataset(X, y, B, true, LastBatch::Drop, 77, r, shards);
    for (int64_t s = 0; s < 4; ++s) {  // crosses epochs
      resident->launch();
      const std::vector<int64_t> all = rows_for(s, N, B * shards, false, 77);
      ASSERT_EQ(static_cast<int64_t>(all.size()), B * shards);
      const std::vector<int64_t> mine(all.begin() + r * B, all.begin() + (r + 1) * B);
      const float lf = fed->one_step(take(X, mine), take(y, mine));
      EXPECT_TRUE(near(resident->loss(), lf, 1e-6, 1e-5)) << "shard " << r << " step " << s;
    }
    auto a = resident->params(), b = fed->params();
    for (auto& [name, v] : a)
      for (int64_t k = 0; k < v.numel(); ++k)
        ASSERT_TRUE(near(v.data<float>()[k], b.at(name).data<float>()[k], 1e-6, 1e-5)) << name << " shard " << r;
  }
  auto t = small_trainer();
  EXPECT_THROW(t->set_dataset(X, y, B, true, LastBatch::Partial, 77, 1, 3), Error);  // shards drop the tail
  EXPECT_THROW(t->set_dataset(X, y, B, true, LastBatch::Drop, 77, 3, 3), Error);
  EXPECT_THROW(t->set_dataset(X, y, 10, true, LastBatch::Drop, 77, 0, 3), Error);  // 30 rows > 29
}

TEST(Resident, BadDataSetsAreClearErrors) {
  auto t = small_trainer();
  EXPECT_THROW(t->set_dataset(random_f32({5, 5}, 1), random_labels(5, 4, 2), 8), Error);   // batch > N
  EXPECT_THROW(t->set_dataset(random_f32({9, 6}, 1), random_labels(9, 4, 2), 8), Error);   // features
  HostArray y = random_labels(9, 4, 2);
  y.data<int32_t>()[4] = 7;
  EXPECT_THROW(t->set_dataset(random_f32({9, 5}, 1), y, 8), Error);  // label out of range
}

// A graph model's data set by name: an image-like input of per-sample shape [2, 3] (given as
// [N, 6]), a second input, class labels and a regression target given as [N].
struct NamedSet {
  NamedArrays inputs, targets;
};

NamedSet named_set(int64_t N, uint64_t seed) {
  HostArray labels = random_labels(N, 3, seed + 3), val = random_f32({N}, seed + 4);
  return {{{"img", random_f32({N, 6}, seed + 1)}, {"t", random_f32({N, 1}, seed + 2)}}, {{"cls", labels}, {"val", val}}};
}

std::unique_ptr<Trainer> named_trainer(Device d = Device::CPU, ExecMode mode = ExecMode::Eager) {
  auto img = Input({2, 3}, "img"), t = Input({1}, "t");
  auto h = call(dense(8, Activation::Tanh), concat({img.reshape({6}), t}));
  auto model = std::make_shared<Model>(std::vector<SymbolicTensor>{img, t},
                                       std::vector<std::pair<std::string, SymbolicTensor>>{
                                           {"cls", call(dense(3), h)}, {"val", call(dense(1), h) + t}});
  TrainerOptions o;
  o.mode = mode;
  return std::make_unique<Trainer>(model,
                                   std::vector<LossTerm>{{"cls", std::make_shared<SoftmaxCrossEntropy>(), 1.0},
                                                         {"val", std::make_shared<MeanSquaredError>(), 0.5}},
                                   std::make_shared<Adam>(1e-2), d, 9, o);
}

NamedArrays take_all(const NamedArrays& arrays, const std::vector<int64_t>& rows) {
  NamedArrays out;
  for (const auto& [name, a] : arrays) out.emplace(name, take(a, rows));
  return out;
}

TEST(Resident, GraphModelsGatherEveryArrayByName) {
  for (LastBatch last : {LastBatch::Drop, LastBatch::Partial}) {
    const int64_t N = 29, B = 8;
    const NamedSet d = named_set(N, 5);
    auto resident = named_trainer(), fed = named_trainer();
    fed->compile({B});
    resident->set_dataset(d.inputs, d.targets, B, true, last, 77);
    EXPECT_TRUE(resident->is_resident());
    const bool partial = last == LastBatch::Partial;
    for (int64_t s = 0; s < 10; ++s) {  // crosses epochs (and the padded tail)
      resident->launch();
      const auto rows = rows_for(s, N, B, partial, 77);
      const float lf = fed->one_step(take_all(d.inputs, rows), take_all(d.targets, rows));
      EXPECT_TRUE(near(resident->loss(), lf, 1e-6, 1e-5)) << "step " << s << (partial ? " partial" : " drop");
      const auto tr = resident->loss_terms(), tf = fed->loss_terms();
      for (const auto& [name, v] : tf) EXPECT_TRUE(near(tr.at(name), v, 1e-6, 1e-5)) << name << " step " << s;
    }
    const auto a = resident->params(), b = fed->params();
    for (const auto& [name, v] : a)
      for (int64_t k = 0; k < v.numel(); ++k)
        ASSERT_TRUE(near(v.data<float>()[k], b.at(name).data<float>()[k], 1e-6, 1e-5)) << name;
    // compile() switches back to batches by name from the host.
    resident->compile({B});
    EXPECT_FALSE(resident->is_resident());
    const auto rows = rows_for(0, N, B, false, 1);
    EXPECT_NO_THROW(resident->one_step(take_all(d.inputs, rows), take_all(d.targets, rows)));
  }
}

TEST(Resident, GraphModelDataSetsAreCheckedByName) {
  const NamedSet d = named_set(9, 1);
  auto t = named_trainer();
  NamedArrays no_val = d.targets;
  no_val.erase("val");
  EXPECT_ERROR(t->set_dataset(d.inputs, no_val, 4), "data set: the target of output 'val' is missing");
  NamedArrays bad = d.inputs;
  bad["img"] = random_f32({9, 5}, 2);
  EXPECT_ERROR(t->set_dataset(bad, d.targets, 4), "data set input 'img' has shape [9, 5]", "takes [9, 2, 3]");
  NamedArrays short_t = d.inputs;
  short_t["t"] = random_f32({8, 1}, 2);
  EXPECT_ERROR(t->set_dataset(short_t, d.targets, 4), "input 't' has 8 rows but input 'img' has 9");
  NamedArrays labels = d.targets;
  labels["cls"].data<int32_t>()[3] = 3;
  EXPECT_ERROR(t->set_dataset(d.inputs, labels, 4), "target 'cls': label 3 at element 3 is outside [0, 3)");
  EXPECT_ERROR(t->set_dataset(d.inputs, d.targets, 10), "batch_size 10 is larger than the data set (9 samples)");
  EXPECT_ERROR(t->set_dataset(random_f32({9, 5}, 1), random_labels(9, 3, 2), 4), "takes its data set as arrays by name");
  EXPECT_ERROR(small_trainer()->set_dataset(d.inputs, d.targets, 4), "takes one X and one y, not arrays by name");
}

// On CUDA: the gather of every array is part of the captured step (replay equals eager bitwise)
// and trains as the CPU does.
TEST(Resident, GraphModelsGatherOnCuda) {
  REQUIRE_GPU();
  const int64_t N = 61, B = 16;
  const NamedSet d = named_set(N, 8);
  auto cpu = named_trainer(), graph = named_trainer(Device::CUDA, ExecMode::Graph),
       eager = named_trainer(Device::CUDA, ExecMode::Eager);
  for (Trainer* t : {cpu.get(), graph.get(), eager.get()}) t->set_dataset(d.inputs, d.targets, B, true, LastBatch::Partial, 3);
  for (int s = 0; s < 12; ++s) {
    for (Trainer* t : {cpu.get(), graph.get(), eager.get()}) t->launch();
    EXPECT_EQ(graph->loss(), eager->loss()) << "step " << s;
    EXPECT_NEAR(graph->loss(), cpu->loss(), 1e-4 * std::max(1.0f, std::fabs(cpu->loss()))) << "step " << s;
  }
  const auto pg = graph->params(), pe = eager->params();
  for (const auto& [name, v] : pg)
    EXPECT_EQ(std::memcmp(v.raw(), pe.at(name).raw(), v.nbytes()), 0) << name << ": graph replay differs from eager";
}

}  // namespace
}  // namespace sg::test
