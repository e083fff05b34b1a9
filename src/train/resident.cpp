// Device-resident data sets (trainer.h set_dataset): uploaded once, every step gathers its batch
// inside the step (the GatherBatch rule), for one X and one y or a graph model's arrays by name.
#include "train/trainer_state.h"

namespace sg {

namespace {

Shape with_rows(int64_t rows, const Shape& slot) {
  Shape s = slot;
  s[0] = rows;
  return s;
}

}  // namespace

void Trainer::check_dataset_args(int64_t N, int64_t batch_size, LastBatch last, int shard, int shards) const {
  SG_REQUIRE(batch_size > 0, "set_dataset: batch_size must be positive, got ", batch_size);
  SG_REQUIRE(shards >= 1 && shard >= 0 && shard < shards, "set_dataset: shard ", shard, " of ", shards);
  SG_REQUIRE(shards == 1 || last == LastBatch::Drop,
             "set_dataset: a sharded data set drops the last partial global batch (LastBatch::Drop)");
  SG_REQUIRE(last == LastBatch::Partial || batch_size * shards <= N, "set_dataset: batch_size ", batch_size,
             shards > 1 ? cat(" times ", shards, " shards") : std::string(), " is larger than the data set (", N,
             " samples)");
}

// Builds the gathering variant and uploads the data set into its slots ("data.<slot>").
void Trainer::install_resident(std::unique_ptr<Resident> r, const Shape& input_shape) {
  resident_variant_.reset();
  resident_ = std::move(r);
  auto v = build_variant(input_shape, true, resident_.get());
  const Op& gather = v->program.ops().front();
  SG_ASSERT(gather.kind == OpKind::GatherBatch);
  std::vector<const HostArray*> arrays;
  if (graph_) {
    for (const HostArray& a : resident_->inputs) arrays.push_back(&a);
    for (const HostArray& a : resident_->targets) arrays.push_back(&a);
  } else {
    arrays = {&resident_->X, &resident_->y};
  }
  SG_ASSERT(arrays.size() + 1 == gather.in.size());
  for (size_t k = 0; k < arrays.size(); ++k) backend_->upload(v->ptrs[gather.in[k + 1]], arrays[k]->raw(), arrays[k]->nbytes());
  backend_->synchronize();
  resident_variant_ = std::move(v);
  current_ = resident_variant_.get();
}

void Trainer::set_dataset(const HostArray& X, const HostArray& y, int64_t batch_size, bool shuffle,
                          LastBatch last, uint64_t seed, int shard, int shards) {
  settle();
  SG_REQUIRE(!graph_, "set_dataset: this graph model takes its data set as arrays by name ",
             "(set_dataset(inputs, targets, ...))");
  SG_REQUIRE(X.dtype() == DType::F32 && X.shape().size() == 2 && X.shape()[0] > 0,
             "set_dataset: X must be f32 [samples, features], got ", dtype_name(X.dtype()), " ", shape_str(X.shape()));
  const int64_t N = X.shape()[0];
  check_dataset_args(N, batch_size, last, shard, shards);
  // Shapes, dtypes and labels are checked through a host-fed variant of the same batch size.
  if (!current_ || current_->resident || current_->input_shape != Shape{batch_size, X.shape()[1]})
    compile({batch_size, X.shape()[1]});
  check_batch(*current_, X, y, "batch");
  auto r = std::make_unique<Resident>();
  r->X = X;
  r->y = y;
  if (r->y.dtype() == DType::F32 && r->y.shape().size() == 1) r->y = r->y.reshaped({N, 1});
  r->batch = batch_size;
  r->attrs = GatherAttrs{seed, shuffle, last == LastBatch::Partial, shard, shards};
  install_resident(std::move(r), {batch_size, X.shape()[1]});
}


void Trainer::set_dataset(const NamedArrays& inputs, const NamedArrays& targets, int64_t batch_size, bool shuffle,
                          LastBatch last, uint64_t seed, int shard, int shards) {
  settle();
  SG_REQUIRE(graph_, "set_dataset: this trainer's model takes one X and one y, not arrays by name");
  SG_REQUIRE(batch_size > 0, "set_dataset: batch_size must be positive, got ", batch_size);
  // Names, shapes, dtypes and labels are checked against a host-fed variant of the same batch size.
  if (!current_ || current_->resident || current_->input_shape != Shape{batch_size}) compile({batch_size});
  const int64_t N = check_named(*current_, inputs, &targets, "data set");
  check_dataset_args(N, batch_size, last, shard, shards);
  auto r = std::make_unique<Resident>();
  const auto& names = graph_->input_names();
  for (size_t i = 0; i < names.size(); ++i)
    r->inputs.push_back(inputs.at(names[i]).reshaped(with_rows(N, current_->program.tensor(current_->inputs[i]).shape)));
  for (size_t i = 0; i < terms_.size(); ++i)
    r->targets.push_back(
        targets.at(terms_[i].output).reshaped(with_rows(N, current_->program.tensor(current_->targets[i]).shape)));
  r->batch = batch_size;
  r->attrs = GatherAttrs{seed, shuffle, last == LastBatch::Partial, shard, shards};
  install_resident(std::move(r), {batch_size});
}

}  // namespace sg
