// Numeric CSV files: parsing (shared with the embedded digits set) and column selection.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "csv_parse.h"

namespace sg {
namespace detail {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_blank(s[b])) ++b;
  while (e > b && is_blank(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// One record of RFC 4180 text: its cells, the 1-based line it starts on, and whether it is blank
// (one empty unquoted cell: an empty line, skipped).
struct Record {
  std::vector<std::string> cells;
  int64_t line = 0;
  bool blank = false;
};

// Splits text into records by RFC 4180: cells separated by commas, records by LF or CRLF; a cell
// in double quotes may hold commas, line breaks and quotes written twice (""). Spaces and tabs
// around a cell (outside its quotes) are ignored. Errors name the line and the column.
std::vector<Record> csv_records(const std::string& text, size_t pos, const std::string& source) {
  std::vector<Record> records;
  int64_t line = 1;
  Record rec;
  rec.line = 1;
  std::string cell;
  bool quoted = false;  // this cell was in quotes
  auto end_cell = [&] {
    rec.cells.push_back(quoted ? cell : trim(cell));
    cell.clear();
    quoted = false;
  };
  auto end_record = [&] {
    const bool was_quoted = quoted;
    end_cell();
    rec.blank = rec.cells.size() == 1 && rec.cells[0].empty() && !was_quoted;
    records.push_back(std::move(rec));
    rec = Record{};
    rec.line = line;
  };
  const size_t n = text.size();
  while (pos < n) {
    const char c = text[pos];
    if (c == '"' && trim(cell).empty() && !quoted) {  // a quoted cell: up to its closing quote
      const int64_t opened = line;
      cell.clear();
      ++pos;
      while (true) {
        SG_REQUIRE(pos < n, source, " line ", opened, ", column ", rec.cells.size() + 1,
                   ": a quoted cell is never closed (its opening quote is on line ", opened, ")");
        if (text[pos] == '"') {
          if (pos + 1 < n && text[pos + 1] == '"') {
            cell += '"';
            pos += 2;
            continue;
          }
          ++pos;
          break;
        }
        if (text[pos] == '\n') ++line;
        cell += text[pos++];
      }
      quoted = true;
      while (pos < n && is_blank(text[pos])) ++pos;
      SG_REQUIRE(pos >= n || text[pos] == ',' || text[pos] == '\n', source, " line ", line, ", column ",
                 rec.cells.size() + 1, ": text after the closing quote of a quoted cell (write a quote inside "
                 "one as \"\")");
      continue;
    }
    ++pos;
    if (c == ',') {
      end_cell();
    } else if (c == '\n') {
      ++line;
      end_record();
    } else {
      cell += c;
    }
  }
  if (!cell.empty() || quoted || !rec.cells.empty()) end_record();
  return records;
}

enum class NumberKind { Ok, NotANumber, NotFinite };

// std::from_chars is locale-independent (strtod is not); it rejects a leading '+', which
// spreadsheets sometimes write, so that is skipped here.
NumberKind parse_number(const std::string& cell, double& out) {
  const char* b = cell.data();
  const char* e = cell.data() + cell.size();
  if (b != e && *b == '+') ++b;
  if (b == e) return NumberKind::NotANumber;
  auto [ptr, ec] = std::from_chars(b, e, out);
  if (ec == std::errc::result_out_of_range) return NumberKind::NotFinite;
  if (ec != std::errc() || ptr != e) return NumberKind::NotANumber;
  return std::isfinite(out) ? NumberKind::Ok : NumberKind::NotFinite;
}

// A first row is a header when a cell is not a number; nan and inf are numbers (a data row
// that must be refused, not a header to drop), and an empty cell is a missing value.
bool is_header(const std::vector<std::string>& cells) {
  double ignored;
  for (const std::string& c : cells)
    if (!c.empty() && parse_number(c, ignored) == NumberKind::NotANumber) return true;
  return false;
}

// Maps a possibly negative column index onto [0, cols).
int64_t resolve_column(int64_t column, int64_t cols, const std::string& source,
                       const char* option) {
  int64_t c = column < 0 ? column + cols : column;
  SG_REQUIRE(c >= 0 && c < cols, source, ": ", option, " ", column, " is out of range for ", cols,
             " columns (valid: ", -cols, "..", cols - 1, ")");
  return c;
}

float to_f32(double v, const CsvTable& t, int64_t row, int64_t col, const std::string& source) {
  SG_REQUIRE(std::fabs(v) <= std::numeric_limits<float>::max(), source, " line ",
             t.line_of_row[row], ", column ", col + 1, ": value ", v,
             " does not fit in a 32-bit float");
  return static_cast<float>(v);
}

// Copies the columns `keep` (in order) of every row into an f32 [rows, keep.size()] array.
HostArray take_columns(const CsvTable& t, const std::vector<int64_t>& keep,
                       const std::string& source) {
  const int64_t k = static_cast<int64_t>(keep.size());
  HostArray a(DType::F32, {t.rows, k});
  float* out = a.data<float>();
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      out[r * k + j] = to_f32(t.values[r * t.cols + keep[j]], t, r, keep[j], source);
  return a;
}

HostArray take_labels(const CsvTable& t, int64_t col, const std::string& source) {
  HostArray y(DType::I32, {t.rows});
  int32_t* out = y.data<int32_t>();
  for (int64_t r = 0; r < t.rows; ++r) {
    const double v = t.values[r * t.cols + col];
    SG_REQUIRE(v == std::floor(v), source, " line ", t.line_of_row[r], ", column ", col + 1,
               ": class label ", v, " is not an integer");
    SG_REQUIRE(v >= 0 && v <= std::numeric_limits<int32_t>::max(), source, " line ",
               t.line_of_row[r], ", column ", col + 1, ": class label ", v,
               " is out of range (labels must be 0..num_classes-1)");
    out[r] = static_cast<int32_t>(v);
  }
  return y;
}

std::vector<int64_t> columns_except(int64_t cols, const std::vector<int64_t>& excluded) {
  std::vector<int64_t> keep;
  for (int64_t c = 0; c < cols; ++c) {
    bool skip = false;
    for (int64_t e : excluded) skip = skip || e == c;
    if (!skip) keep.push_back(c);
  }
  return keep;
}

}  // namespace

CsvTable parse_csv(const std::string& text, const std::string& source, const CsvMissing& missing) {
  CsvTable t;
  size_t pos = 0;
  // Spreadsheet programs often start UTF-8 files with a byte-order mark.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
  int64_t first_line = 0;
  bool first_row = true;
  for (Record& r : csv_records(text, pos, source)) {
    if (r.blank) continue;
    std::vector<std::string>& cells = r.cells;
    const int64_t n = static_cast<int64_t>(cells.size()), line_no = r.line;
    if (first_row) {
      first_row = false;
      first_line = line_no;
      t.cols = n;
      if (is_header(cells)) {
        t.header = std::move(cells);
        continue;
      }
    }
    SG_REQUIRE(n == t.cols, source, " line ", line_no, ": expected ", t.cols,
               " columns (as in line ", first_line, "), got ", n);
    auto is_missing = [&](const std::string& cell) {
      return cell.empty() || std::find(missing.na_values.begin(), missing.na_values.end(), cell) != missing.na_values.end();
    };
    if (missing.drop_rows && std::any_of(cells.begin(), cells.end(), is_missing)) {
      ++t.dropped;
      continue;
    }
    for (int64_t c = 0; c < n; ++c) {
      const std::string column =
          t.header.empty() ? cat("column ", c + 1) : cat("column ", c + 1, " ('", t.header[c], "')");
      SG_REQUIRE(!is_missing(cells[c]), source, " line ", line_no, ", ", column, ": ",
                 cells[c].empty() ? std::string("the cell is empty") : cat("cell '", cells[c], "' is in na_values"),
                 ", a missing value (every cell of a data row needs a number: fill it in, or drop such rows with "
                 "data.missing \"drop_row\")");
      double v = 0;
      NumberKind kind = parse_number(cells[c], v);
      SG_REQUIRE(kind != NumberKind::NotANumber, source, " line ", line_no, ", ", column, ": cell '", cells[c],
                 "' is not a number");
      SG_REQUIRE(kind != NumberKind::NotFinite, source, " line ", line_no, ", ", column, ": cell '", cells[c],
                 "' is not a finite number");
      t.values.push_back(v);
    }
    t.line_of_row.push_back(line_no);
    ++t.rows;
  }
  SG_REQUIRE(t.rows > 0, source, " has no data rows",
             t.dropped ? cat(" (every one of its ", t.dropped, " rows has a missing value)")
                       : std::string(t.header.empty() ? "" : " (only a header line)"));
  return t;
}

Dataset csv_to_dataset(const CsvTable& t, const CsvOptions& opt, std::string name,
                       const std::string& source, int64_t num_classes) {
  SG_REQUIRE(t.cols >= 2, source, " has ", t.cols,
             " column; need at least one feature column and one label/target column");
  if (opt.task == Task::Classification) {
    const int64_t lc = resolve_column(opt.label_column, t.cols, source, "label_column");
    HostArray X = take_columns(t, columns_except(t.cols, {lc}), source);
    HostArray y = take_labels(t, lc, source);
    return make_dataset(std::move(name), opt.task, std::move(X), std::move(y), num_classes);
  }

  std::vector<int64_t> targets;
  if (opt.label_column == -1) {
    SG_REQUIRE(opt.num_targets >= 1 && opt.num_targets < t.cols, source, ": num_targets ",
               opt.num_targets, " must be between 1 and ", t.cols - 1,
               " (the file has ", t.cols, " columns and needs at least one feature)");
    for (int64_t c = t.cols - opt.num_targets; c < t.cols; ++c) targets.push_back(c);
  } else {
    SG_REQUIRE(opt.num_targets == 1, source, ": label_column ", opt.label_column,
               " selects a single target column, but num_targets is ", opt.num_targets,
               " (use label_column -1 to take the last num_targets columns)");
    targets.push_back(resolve_column(opt.label_column, t.cols, source, "label_column"));
  }
  HostArray X = take_columns(t, columns_except(t.cols, targets), source);
  HostArray y = take_columns(t, targets, source);
  return make_dataset(std::move(name), opt.task, std::move(X), std::move(y), num_classes);
}

}  // namespace detail

NamedArrays load_csv_columns(const std::string& path, const std::map<std::string, std::vector<CsvColumn>>& groups,
                             const CsvMissing& missing) {
  const std::string source = cat("CSV file '", path, "'");
  const detail::CsvTable t = detail::parse_csv(read_file(path, "CSV file"), source, missing);
  NamedArrays out;
  for (const auto& [name, columns] : groups) {
    SG_REQUIRE(!columns.empty(), source, ": the column group '", name, "' names no columns");
    std::vector<int64_t> keep;
    for (const CsvColumn& c : columns) {
      if (c.header.empty()) {
        keep.push_back(detail::resolve_column(c.index, t.cols, source, cat("the column group '", name, "': column").c_str()));
        continue;
      }
      SG_REQUIRE(!t.header.empty(), source, ": the column group '", name, "' names the column '", c.header,
                 "' but the file has no header row; name columns by index");
      const auto it = std::find(t.header.begin(), t.header.end(), c.header);
      SG_REQUIRE(it != t.header.end(), source, ": the column group '", name, "' names the column '", c.header,
                 "', which the header does not have (it has: ", joined(t.header), ")");
      keep.push_back(static_cast<int64_t>(it - t.header.begin()));
    }
    out.emplace(name, detail::take_columns(t, keep, source));
  }
  return out;
}

Dataset load_csv(const std::string& path, const CsvOptions& opt) {
  const std::string text = read_file(path, "CSV file");
  const std::string source = cat("CSV file '", path, "'");
  detail::CsvTable table = detail::parse_csv(text, source, opt.missing);
  std::string name = std::filesystem::path(path).filename().string();
  if (table.dropped) name += cat(" (", table.dropped, " rows with a missing value left out)");
  return detail::csv_to_dataset(table, opt, std::move(name), source);
}

}  // namespace sg
