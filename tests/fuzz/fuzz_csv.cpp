// Fuzzes the CSV data reader and its column selection. The first input byte picks the options
// (task, label column, number of targets: out-of-range values included), the rest is the file.
#include <climits>
#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "stepgraph/data.h"

namespace {

// Small column indices both ways, plus the int extremes (a negation of INT_MIN would be UB).
int label_column(uint8_t bits) {
  static const int kColumns[8] = {-1, 0, 1, 2, -2, -3, INT_MIN, INT_MAX};
  return kColumns[bits & 7];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  sg::CsvOptions opt;
  opt.task = data[0] & 0x80 ? sg::Task::Regression : sg::Task::Classification;
  opt.label_column = label_column(data[0]);
  opt.num_targets = (data[0] >> 3) & 0xF;  // 0..15: 0 is out of range
  static sg::fuzz::InputFile file("input.csv");
  const std::string& path = file.write(data + 1, size - 1);
  try {
    sg::Dataset d = sg::load_csv(path, opt);
    (void)d;
  } catch (const sg::Error&) {
  }
  return 0;
}
