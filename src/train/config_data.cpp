// The data section of a configuration: the source and its settings, the split, CSV options and
// missing values, and (through config_named.cpp) a graph model's data by name.
#include <limits>

#include "stepgraph/config.h"
#include "train/config_node.h"

namespace sg::cfg {

DataConfig parse_data(const Node& n) {
  n.only({"source", "path", "x", "y", "x_key", "y_key", "task", "label_column", "num_targets", "samples",
          "features", "classes", "targets", "noise", "seed", "validation_split", "shuffle", "last_batch",
          "standardize", "device_resident", "kind", "length", "symbols", "stride", "inputs", "targets", "functions",
          "sensors", "points", "na_values", "missing"});
  DataConfig d;
  d.source = n.string("source", "digits",
                      {"digits", "synthetic_classification", "synthetic_regression", "npy", "npz", "csv",
                       "sequence_task", "text_file", "antiderivative"});
  if (d.source == "sequence_task") {
    d.sequence_kind = n.string("kind", "reverse", {"copy", "reverse"});
    d.sequence_length = n.integer("length", 8, 1, 4096);
    d.symbols = n.integer("symbols", 10, 1, 1 << 20);
  } else if (d.source == "text_file") {
    SG_REQUIRE(n.has("path"), n.at("path"), ": missing (source \"text_file\" needs the text file to learn)");
    d.path = n.string("path", "");
    d.sequence_length = n.integer("length", 64, 1, 4096);
    d.stride = n.integer("stride", d.sequence_length, 1, 1 << 30);
  }
  for (const char* k : {"kind", "symbols"})
    SG_REQUIRE(d.source == "sequence_task" || !n.has(k), n.at(k), ": \"", k,
               "\" is a setting of source \"sequence_task\", not of \"", d.source, "\"");
  SG_REQUIRE(d.source == "sequence_task" || d.source == "text_file" || !n.has("length"), n.at("length"),
             ": \"length\" is a setting of sources \"sequence_task\" and \"text_file\", not of \"", d.source, "\"");
  SG_REQUIRE(d.source == "text_file" || !n.has("stride"), n.at("stride"),
             ": \"stride\" is a setting of source \"text_file\", not of \"", d.source, "\"");
  bool regression_source = d.source == "synthetic_regression" || d.source == "antiderivative";
  std::string default_task = regression_source ? "regression" : "classification";
  d.task = n.string("task", default_task, {"classification", "regression"}) == "classification"
               ? Task::Classification
               : Task::Regression;
  if (d.source == "digits" || d.source == "synthetic_classification" || d.source == "sequence_task" ||
      d.source == "text_file")
    SG_REQUIRE(d.task == Task::Classification, n.at("task"), ": source \"", d.source, "\" is a classification set");
  if (regression_source)
    SG_REQUIRE(d.task == Task::Regression, n.at("task"), ": source \"", d.source, "\" is a regression set");
  if (d.source == "npy") {
    SG_REQUIRE(n.has("x") && n.has("y"), n.path(), ": source \"npy\" needs \"x\" and \"y\" file paths");
    d.x_path = n.string("x", "");
    d.y_path = n.string("y", "");
  }
  if (d.source == "npz" || d.source == "csv") {
    SG_REQUIRE(n.has("path"), n.at("path"), ": missing (source \"", d.source, "\" needs a file path)");
    d.path = n.string("path", "");
  }
  d.x_key = n.string("x_key", "X");
  d.y_key = n.string("y_key", "y");
  d.csv.task = d.task;
  if (n.has("label_column")) {
    const json& v = n.raw()["label_column"];
    SG_REQUIRE(v.is_number_integer(), n.at("label_column"), ": expected an integer column index, got ", type_of(v));
    const bool fits = v.is_number_unsigned()
                          ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max())
                          : v.get<int64_t>() >= std::numeric_limits<int>::min() &&
                                v.get<int64_t>() <= std::numeric_limits<int>::max();
    SG_REQUIRE(fits, n.at("label_column"), ": column index ", v.dump(), " is out of range");
    d.csv.label_column = v.get<int>();
  }
  d.csv.num_targets = static_cast<int>(n.integer("num_targets", 1, 1, kMaxWidth));
  SG_REQUIRE(d.source == "csv" || (!n.has("na_values") && !n.has("missing")), n.at(n.has("missing") ? "missing" : "na_values"),
             ": a setting of source \"csv\", not of \"", d.source, "\"");
  if (n.has("na_values")) {
    const json& v = n.raw()["na_values"];
    SG_REQUIRE(v.is_array(), n.at("na_values"), ": expected an array of strings (e.g. [\"NA\", \"?\"]), got ", type_of(v));
    for (size_t i = 0; i < v.size(); ++i) {
      SG_REQUIRE(v[i].is_string(), n.at("na_values"), "[", i, "]: expected a string, got ", type_of(v[i]));
      d.csv.missing.na_values.push_back(v[i].get<std::string>());
    }
  }
  d.csv.missing.drop_rows = n.string("missing", "error", {"error", "drop_row"}) == "drop_row";
  d.samples = n.integer("samples", 1000, 1, kMaxSamples);
  d.features = n.integer("features", 16, 1, kMaxWidth);
  d.classes = n.integer("classes", 4, 2, kMaxWidth);
  if (!n.has("targets") || !n.raw()["targets"].is_object()) d.targets = n.integer("targets", 1, 1, kMaxWidth);
  d.noise = n.number("noise", 0.0, 0.0, 1e6);
  d.seed = static_cast<uint64_t>(n.integer("seed", 0, 0));
  d.validation_split = n.number("validation_split", 0.2, 0.0, 0.95);
  d.shuffle = n.boolean("shuffle", true);
  d.last_batch = n.string("last_batch", "drop", {"drop", "partial"}) == "drop" ? LastBatch::Drop : LastBatch::Partial;
  d.standardize = n.boolean("standardize", false);
  d.device_resident = n.boolean("device_resident", false);
  parse_named_data(n, d);
  return d;
}

// model.input_shape: [height, width, channels], each sample's features as an NHWC image.

}  // namespace sg::cfg
