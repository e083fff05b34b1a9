// A user's text file as a character-level next-token task for decoder-only models.
#include <array>
#include <filesystem>

#include "stepgraph/data.h"

namespace sg {

Dataset load_text_windows(const std::string& path, int64_t length, int64_t stride) {
  SG_REQUIRE(length > 0 && stride > 0, "text file '", path, "': length and stride must be positive, got ", length,
             " and ", stride);
  const std::string text = read_file(path, "text file");
  const int64_t n = static_cast<int64_t>(text.size());
  SG_REQUIRE(n >= length + 1, "text file '", path, "' has ", n, " bytes: a window of length ", length,
             " needs at least ", length + 1, " (the window and the byte after it)");
  // The vocabulary: the bytes that occur, in byte order (token k = the k-th smallest).
  std::array<int32_t, 256> id;
  id.fill(-1);
  for (unsigned char c : text) id[c] = 0;
  int32_t vocab = 0;
  for (int32_t& v : id)
    if (v == 0) v = vocab++;
  const int64_t samples = (n - 1 - length) / stride + 1;
  HostArray X(DType::F32, {samples, length}), y(DType::I32, {samples, length});
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t i = 0; i < length; ++i) {
      const int64_t at = s * stride + i;
      X.data<float>()[s * length + i] = static_cast<float>(id[static_cast<unsigned char>(text[at])]);
      y.data<int32_t>()[s * length + i] = id[static_cast<unsigned char>(text[at + 1])];
    }
  return make_dataset(std::filesystem::path(path).filename().string(), Task::Classification, std::move(X),
                      std::move(y), vocab);
}

}  // namespace sg
