// Tests of the CSV reader: headers, spaces and line ends, label and target columns, quoted cells
// by RFC 4180, missing values (na_values, rows left out) and every kind of bad file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data_test_util.h"
#include "stepgraph/data.h"

namespace {

using sg::test::expect_error;
using sg::test::floats;
using sg::test::ints;
using sg::test::tmp_path;
using sg::test::write_file;

// ---------------------------------------------------------------------------------------------
// CSV

TEST(Csv, WithHeaderSpacesBlankLinesAndCrlf) {
  const std::string path = tmp_path("iris_like.csv");
  write_file(path,
             "a, b ,label\r\n"
             " 1.5, 2 , 0\r\n"
             "\r\n"
             "-3,+4.25,2\r\n"
             "   \n"
             "5e-1,6,1\n");
  const sg::Dataset d = sg::load_csv(path, {});
  EXPECT_EQ(d.name, "data_iris_like.csv");
  EXPECT_EQ(d.task, sg::Task::Classification);
  EXPECT_EQ(d.X.shape(), (sg::Shape{3, 2}));
  EXPECT_EQ(floats(d.X), (std::vector<float>{1.5f, 2, -3, 4.25f, 0.5f, 6}));
  EXPECT_EQ(ints(d.y), (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(d.num_classes, 3);
}

TEST(Csv, WithoutHeaderAndLabelColumnFirst) {
  const std::string path = tmp_path("noheader.csv");
  write_file(path, "1,0.5,0.25\n0,1.5,2.5\n3,-1,-2\n");
  sg::CsvOptions opt;
  opt.label_column = 0;
  const sg::Dataset d = sg::load_csv(path, opt);
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(floats(d.X), (std::vector<float>{0.5f, 0.25f, 1.5f, 2.5f, -1, -2}));
  EXPECT_EQ(ints(d.y), (std::vector<int32_t>{1, 0, 3}));
  EXPECT_EQ(d.num_classes, 4);

  opt.label_column = -2;  // the middle column, counted from the end
  write_file(path, "1,4,0.25\n0,2,2.5\n");
  const sg::Dataset e = sg::load_csv(path, opt);
  EXPECT_EQ(ints(e.y), (std::vector<int32_t>{4, 2}));
  EXPECT_EQ(floats(e.X), (std::vector<float>{1, 0.25f, 0, 2.5f}));
}

TEST(Csv, RegressionTargets) {
  const std::string path = tmp_path("reg.csv");
  write_file(path, "x1,x2,t1,t2\n1,2,3.5,4.5\n5,6,7.5,-8.5\n");
  sg::CsvOptions opt;
  opt.task = sg::Task::Regression;
  opt.num_targets = 2;
  const sg::Dataset d = sg::load_csv(path, opt);
  EXPECT_EQ(d.task, sg::Task::Regression);
  EXPECT_EQ(d.targets(), 2);
  EXPECT_EQ(floats(d.X), (std::vector<float>{1, 2, 5, 6}));
  EXPECT_EQ(floats(d.y), (std::vector<float>{3.5f, 4.5f, 7.5f, -8.5f}));

  opt.num_targets = 1;
  opt.label_column = 1;
  const sg::Dataset e = sg::load_csv(path, opt);
  EXPECT_EQ(e.y.shape(), (sg::Shape{2, 1}));
  EXPECT_EQ(floats(e.y), (std::vector<float>{2, 6}));
  EXPECT_EQ(floats(e.X), (std::vector<float>{1, 3.5f, 4.5f, 5, 7.5f, -8.5f}));

  opt.label_column = -1;
  opt.num_targets = 4;  // would leave no features
  expect_error([&] { sg::load_csv(path, opt); }, {path, "num_targets 4"});
}

// RFC 4180 (section 2): quoted cells may hold commas, line breaks (LF or CRLF) and quotes written
// twice; numbers may be quoted too; a record's line is where it starts.
TEST(Csv, QuotedCellsByRfc4180) {
  const std::string path = tmp_path("quoted.csv");
  write_file(path,
             "\"x, first\",\"say \"\"hi\"\"\",\"label\r\nof row\"\r\n"
             "\"1.5\", 2 ,0\r\n"
             "  \"-3\"  ,4,\"1\"\n");
  const sg::Dataset d = sg::load_csv(path, {});
  EXPECT_EQ(floats(d.X), (std::vector<float>{1.5f, 2, -3, 4}));
  EXPECT_EQ(ints(d.y), (std::vector<int32_t>{0, 1}));

  // Rows are numbered by the line they start on, past a header cell that spans two lines.
  const std::string later = tmp_path("quoted_later.csv");
  write_file(later, "a,\"b\nc\",d\n1,2,0\n3,x,1\n");
  expect_error([&] { sg::load_csv(later, {}); }, {later, "line 4", "column 2 ('b\nc')", "'x'"});

  const std::string open = tmp_path("unclosed.csv");
  write_file(open, "a,b,c\n1,\"2,0\n3,4,1\n");
  expect_error([&] { sg::load_csv(open, {}); }, {open, "line 2, column 2", "never closed"});

  const std::string after = tmp_path("after_quote.csv");
  write_file(after, "a,b,c\n1,\"2\"x,0\n");
  expect_error([&] { sg::load_csv(after, {}); }, {after, "line 2, column 2", "text after the closing quote"});

  // An empty cell, bare or quoted, is a missing value, named with its column's header.
  const std::string missing = tmp_path("missing_value.csv");
  write_file(missing, "a,b,c\n1,2,0\n3,\"\",1\n");
  expect_error([&] { sg::load_csv(missing, {}); }, {missing, "line 3, column 2 ('b')", "empty, a missing value"});
  // A first row with a missing value is data (refused), not a header.
  write_file(missing, "1,,0\n3,4,1\n");
  expect_error([&] { sg::load_csv(missing, {}); }, {missing, "line 1, column 2", "missing value"});
}

// na_values name the strings that mean "missing"; missing rows are refused by default, or left out.
TEST(Csv, NaValuesAndRowsLeftOut) {
  const std::string path = tmp_path("na_values.csv");
  write_file(path, "a,b,label\n1,2,0\nNA,4,1\n5, ? ,1\n7,,0\n9,10,1\n");
  sg::CsvOptions opt;
  opt.missing.na_values = {"NA", "?"};
  expect_error([&] { sg::load_csv(path, opt); }, {path, "line 3, column 1 ('a')", "cell 'NA' is in na_values",
                                                  "data.missing \"drop_row\""});
  opt.missing.drop_rows = true;
  const sg::Dataset d = sg::load_csv(path, opt);
  EXPECT_EQ(floats(d.X), (std::vector<float>{1, 2, 9, 10}));
  EXPECT_EQ(ints(d.y), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(d.name, "data_na_values.csv (3 rows with a missing value left out)");
  // Without na_values, "NA" is text: not a number.
  sg::CsvOptions plain;
  plain.missing.drop_rows = true;
  expect_error([&] { sg::load_csv(path, plain); }, {path, "line 3, column 1 ('a')", "cell 'NA' is not a number"});
  write_file(path, "a,b\n1,\n,2\n");
  expect_error([&] { sg::load_csv(path, plain); }, {path, "has no data rows (every one of its 2 rows has a missing value)"});
}

TEST(Csv, Errors) {
  const std::string ragged = tmp_path("ragged.csv");
  write_file(ragged, "1,2,0\n\n3,4\n");
  expect_error([&] { sg::load_csv(ragged, {}); }, {ragged, "line 3", "expected 3", "got 2"});

  const std::string bad_cell = tmp_path("bad_cell.csv");
  write_file(bad_cell, "a,b,c\n1,2,0\n3,abc,1\n");
  expect_error([&] { sg::load_csv(bad_cell, {}); }, {bad_cell, "line 3", "column 2", "'abc'"});

  const std::string empty_cell = tmp_path("empty_cell.csv");
  write_file(empty_cell, "1,2,0\n3,,1\n");
  expect_error([&] { sg::load_csv(empty_cell, {}); }, {empty_cell, "line 2", "column 2"});

  const std::string non_int = tmp_path("non_int.csv");
  write_file(non_int, "1,2,0\n3,4,2.5\n");
  expect_error([&] { sg::load_csv(non_int, {}); }, {non_int, "line 2", "2.5", "not an integer"});

  const std::string negative = tmp_path("negative.csv");
  write_file(negative, "1,2,0\n3,4,-1\n");
  expect_error([&] { sg::load_csv(negative, {}); }, {negative, "line 2", "-1"});

  const std::string ok = tmp_path("ok.csv");
  write_file(ok, "1,2,0\n3,4,1\n");
  sg::CsvOptions opt;
  opt.label_column = 3;
  expect_error([&] { sg::load_csv(ok, opt); }, {ok, "label_column 3", "out of range"});
  opt.label_column = -4;
  expect_error([&] { sg::load_csv(ok, opt); }, {ok, "label_column -4"});

  const std::string header_only = tmp_path("header_only.csv");
  write_file(header_only, "a,b,c\n\n");
  expect_error([&] { sg::load_csv(header_only, {}); }, {header_only, "no data rows"});

  const std::string missing = tmp_path("missing.csv");
  expect_error([&] { sg::load_csv(missing, {}); }, {missing, "cannot open"});
}

}  // namespace
