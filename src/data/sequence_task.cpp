// Generated sequence tasks (copy, reverse) for training small decoder-only models.
#include "stepgraph/data.h"
#include "stepgraph/rng.h"

namespace sg {

Dataset make_sequence_task(const std::string& kind, int64_t samples, int64_t length, int64_t symbols, uint64_t seed) {
  SG_REQUIRE(kind == "copy" || kind == "reverse", "sequence task: unknown kind '", kind, "': expected copy or reverse");
  SG_REQUIRE(samples > 0 && length > 0 && symbols > 0, "sequence task: samples, length and symbols must be positive, got ",
             samples, ", ", length, ", ", symbols);
  const int64_t S = 2 * length;  // model positions: x (length), separator, answer without its last token
  HostArray X(DType::F32, {samples, S}), y(DType::I32, {samples, S});
  Rng rng(mix_seed(seed, "sequence_task." + kind));
  std::vector<int32_t> seq(static_cast<size_t>(S + 1));
  for (int64_t n = 0; n < samples; ++n) {
    for (int64_t i = 0; i < length; ++i) seq[i] = static_cast<int32_t>(1 + rng.below(symbols));
    seq[length] = 0;  // the separator
    for (int64_t i = 0; i < length; ++i) seq[length + 1 + i] = kind == "copy" ? seq[i] : seq[length - 1 - i];
    for (int64_t i = 0; i < S; ++i) {
      X.data<float>()[n * S + i] = static_cast<float>(seq[i]);
      // Position i predicts token i + 1; before the separator that is part of the random input.
      y.data<int32_t>()[n * S + i] = i >= length ? seq[i + 1] : -1;
    }
  }
  return make_dataset(kind + "_task", Task::Classification, std::move(X), std::move(y), symbols + 1);
}

}  // namespace sg
