// The scikit-learn handwritten digits, embedded in the library as gzip-compressed CSV.
#include <zlib.h>


#include "csv_parse.h"

// Defined in a source generated at build time from data/digits.csv.gz (cmake/EmbedFile.cmake):
// 1797 rows of 64 pixel values 0..16 followed by the label 0..9, no header.
extern const unsigned char sg_digits_csv_gz[];
extern const size_t sg_digits_csv_gz_size;

namespace sg {
namespace {

constexpr const char* kSource = "embedded digits data (data/digits.csv.gz)";

std::string gunzip(const unsigned char* data, size_t size) {
  z_stream zs{};
  SG_REQUIRE(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, kSource, ": cannot initialise zlib");
  struct End {
    z_stream* s;
    ~End() { inflateEnd(s); }
  } end{&zs};
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  std::string out;
  char buf[1 << 16];
  int ret = Z_OK;
  while (ret != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    ret = inflate(&zs, Z_NO_FLUSH);
    SG_REQUIRE(ret == Z_OK || ret == Z_STREAM_END, kSource, ": corrupt gzip data (",
               zs.msg ? zs.msg : "truncated", ")");
    out.append(buf, sizeof buf - zs.avail_out);
  }
  return out;
}

}  // namespace

Dataset load_digits() {
  const detail::CsvTable table = detail::parse_csv(gunzip(sg_digits_csv_gz, sg_digits_csv_gz_size),
                                                   kSource);
  SG_ASSERT(table.header.empty() && table.cols == 65);
  CsvOptions opt;
  opt.task = Task::Classification;
  opt.label_column = -1;
  Dataset d = detail::csv_to_dataset(table, opt, "digits", kSource, 10);
  // Pixels are integers 0..16; scale to [0, 1] so that no feature normalisation is needed.
  float* x = d.X.data<float>();
  for (int64_t i = 0; i < d.X.numel(); ++i) x[i] *= 1.0f / 16.0f;
  return d;
}

}  // namespace sg
