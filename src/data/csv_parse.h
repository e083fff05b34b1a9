// Internal: the numeric CSV parser shared by load_csv (files) and load_digits (embedded text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepgraph/data.h"

namespace sg::detail {

// A rectangular table of numbers read from CSV text.
struct CsvTable {
  std::vector<std::string> header;  // empty when the first row was numeric
  int64_t rows = 0, cols = 0;
  std::vector<double> values;       // row-major, rows * cols
  std::vector<int64_t> line_of_row; // 1-based text line of each data row, for error messages
  int64_t dropped = 0;              // rows left out for a missing value (CsvMissing::drop_rows)
};

// Parses comma-separated numeric text by RFC 4180 (quoted cells may hold commas, line breaks and
// quotes written twice; LF or CRLF). `source` names the text in errors ("'iris.csv'").
// Empty (or all-blank) lines are skipped; spaces and tabs around cells are ignored; the first
// non-empty row is a header when any of its cells is not a number (nan and inf are numbers, so a
// first row holding one is a data row, refused as not finite). Every row must have the
// header's (or first row's) column count, and every data cell must be a finite number: an empty
// cell (or one of missing.na_values) is a missing value, refused naming its line and column
// unless missing.drop_rows leaves its row out.
CsvTable parse_csv(const std::string& text, const std::string& source, const CsvMissing& missing = {});

// Splits a table into features and label/target columns per `opt` and validates the result
// with make_dataset. Errors name `source` and the text line of the offending row.
Dataset csv_to_dataset(const CsvTable& table, const CsvOptions& opt, std::string name,
                       const std::string& source, int64_t num_classes = 0);

}  // namespace sg::detail
