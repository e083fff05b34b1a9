// A graph model's data by name in a configuration: data.inputs and data.targets (which npz
// member or CSV columns hold each model input and each output's target), and loading them.
//   "data": {"source": "npz", "path": "d.npz", "inputs": {"x": "X1", "t": "T"}, "targets": {"u": "U"}}
//   "data": {"source": "csv", "path": "d.csv", "inputs": {"x": [0, 1, 2], "t": ["time"]}, "targets": {"u": [-1]}}
//   "data": {"source": "synthetic_regression", "features": 8, "inputs": {"x": [0, 1, 2, 3, 4, 5], "t": [6, 7]}}
#include <algorithm>
#include <filesystem>
#include <limits>

#include "stepgraph/config.h"
#include "train/config_node.h"

namespace sg::cfg {

namespace {

// One CSV column: an index (negative from the end) or a header name.
CsvColumn column(const json& v, const std::string& at) {
  if (v.is_string()) {
    SG_REQUIRE(!v.get<std::string>().empty(), at, ": a header name cannot be empty");
    return CsvColumn{0, v.get<std::string>()};
  }
  const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t{1} << 31
                    : v.is_number_integer() && v.get<int64_t>() >= -(int64_t{1} << 31) && v.get<int64_t>() < int64_t{1} << 31;
  SG_REQUIRE(fits, at, ": expected a column index (an integer; negative counts from the end) or a header name, got ",
             type_of(v));
  return CsvColumn{v.get<int64_t>(), ""};
}

void parse_map(const Node& n, const char* key, bool csv, std::map<std::string, std::string>& members,
               std::map<std::string, std::vector<CsvColumn>>& columns) {
  if (!n.has(key)) return;
  const json& m = n.raw()[key];
  const std::string at = n.at(key);
  SG_REQUIRE(m.is_object() && !m.empty(), at, ": expected an object by ", std::string(key) == "inputs" ? "input" : "output",
             " name, e.g. ", csv ? "{\"x\": [0, 1, 2]}" : "{\"x\": \"X\"}", ", got ", m.is_object() ? "an empty object" : type_of(m));
  for (const auto& [name, v] : m.items()) {
    const std::string here = at + "." + name;
    if (!csv) {
      SG_REQUIRE(v.is_string() && !v.get<std::string>().empty(), here, ": expected the name of an array in the ",
                 "data (a member of the npz file), got ", type_of(v));
      members[name] = v.get<std::string>();
      continue;
    }
    std::vector<CsvColumn>& cols = columns[name];
    if (!v.is_array()) {
      cols.push_back(column(v, here));
      continue;
    }
    SG_REQUIRE(!v.empty(), here, ": expected at least one column");
    for (size_t i = 0; i < v.size(); ++i) cols.push_back(column(v[i], cat(here, "[", i, "]")));
  }
}

// The arrays of a generated or npz source (members by name), and where they came from.
NamedArrays members_of(const DataConfig& d, std::string* where) {
  if (d.source == "antiderivative") {
    *where = "data.source \"antiderivative\"";
    return make_antiderivative(d.functions, d.sensors, d.points, d.seed);
  }
  *where = cat("data.path '", d.path, "'");
  return read_npz(d.path);
}

// A one-array source's X split into the model's inputs by column groups; its y is the target of
// the one output with a loss.
NamedDataset split_columns(const DataConfig& d, const Dataset& data, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& targets) {
  const std::string where = cat("data.source \"", d.source, "\"");
  SG_REQUIRE(targets.size() == 1, where, " holds one y: it is the target of one output, but the model has ",
             targets.size(), " outputs with a loss (", joined(targets), "); use source \"npz\" or \"csv\" for ",
             "several targets");
  const HostArray& X = data.X;
  SG_REQUIRE(X.shape().size() == 2 && X.dtype() == DType::F32, where, ": its X is ", dtype_name(X.dtype()), " ",
             shape_str(X.shape()), "; column groups need f32 [rows, columns]");
  const int64_t N = X.shape()[0], D = X.shape()[1];
  if (inputs.size() == 1 && d.input_columns.empty()) return NamedDataset{data.name, {{inputs[0], X}}, {{targets[0], data.y}}};
  NamedDataset out;
  out.name = data.name;
  for (const std::string& name : inputs) {
    SG_REQUIRE(d.input_columns.count(name), "data.inputs.", name, ": missing; ", where, " splits its X [", N, ", ", D,
               "] into the model's inputs by column index (e.g. \"inputs\": {\"", name, "\": [0, 1]})");
    const std::vector<CsvColumn>& cols = d.input_columns.at(name);
    HostArray a(DType::F32, {N, static_cast<int64_t>(cols.size())});
    std::vector<int64_t> at;
    for (size_t k = 0; k < cols.size(); ++k) {
      const int64_t c = cols[k].index < 0 ? D + cols[k].index : cols[k].index;
      SG_REQUIRE(c >= 0 && c < D, "data.inputs.", name, "[", k, "]: column ", cols[k].index, " is outside the ", D,
                 " columns of ", where, "'s X");
      at.push_back(c);
    }
    const float* x = X.data<float>();
    float* y = a.data<float>();
    for (int64_t r = 0; r < N; ++r)
      for (size_t k = 0; k < at.size(); ++k) y[r * static_cast<int64_t>(at.size()) + static_cast<int64_t>(k)] = x[r * D + at[k]];
    out.inputs[name] = std::move(a);
  }
  out.targets[targets[0]] = data.y;
  return out;
}

}  // namespace

void parse_named_data(const Node& n, DataConfig& d) {
  const bool csv = d.source == "csv";
  const bool named_source = csv || d.source == "npz" || d.source == "antiderivative";
  const bool sequences = d.source == "sequence_task" || d.source == "text_file";
  // "targets" is also synthetic_regression's target count (an integer); by name it is an object.
  const bool targets_by_name = n.has("targets") && n.raw()["targets"].is_object();
  SG_REQUIRE(!sequences || !n.has("inputs"), n.at("inputs"), ": source \"", d.source, "\" holds token sequences; ",
             "arrays by name come from sources \"npz\", \"csv\" and \"antiderivative\", and column groups of one X ",
             "from the other sources");
  SG_REQUIRE(named_source || !targets_by_name, n.at("targets"), ": targets by name come from sources \"npz\", ",
             "\"csv\" and \"antiderivative\", not from \"", d.source, "\" (its one y is the target of the model's ",
             "one output with a loss)");
  SG_REQUIRE(!named_source || !n.has("targets") || targets_by_name, n.at("targets"), ": expected an object by ",
             "output name, e.g. ", csv ? "{\"u\": [-1]}" : "{\"u\": \"U\"}", ", got ", type_of(n.raw()["targets"]));
  // A one-array source (digits, synthetic data, npy) splits its X into the model's inputs by
  // column index, as a CSV file's columns: "inputs": {"x": [0, 1, 2], "t": [3]}.
  parse_map(n, "inputs", csv || !named_source, d.input_members, d.input_columns);
  if (!named_source)
    for (const auto& [name, cols] : d.input_columns)
      for (const CsvColumn& c : cols)
        SG_REQUIRE(c.header.empty(), n.at("inputs"), ".", name, ": source \"", d.source, "\" has no header; ",
                   "give its X's columns by index, got '", c.header, "'");
  if (targets_by_name) parse_map(n, "targets", csv, d.target_members, d.target_columns);
  for (const char* k : {"functions", "sensors", "points"})
    SG_REQUIRE(d.source == "antiderivative" || !n.has(k), n.at(k), ": \"", k,
               "\" is a setting of source \"antiderivative\", not of \"", d.source, "\"");
  d.functions = n.integer("functions", d.functions, 1, 1 << 24);
  d.sensors = n.integer("sensors", d.sensors, 2, 1 << 16);
  d.points = n.integer("points", d.points, 1, 1 << 16);
  SG_REQUIRE(d.functions * d.points <= std::numeric_limits<int32_t>::max(), n.path(), ": functions x points = ",
             d.functions * d.points, " rows is too many (at most 2^31 - 1)");
}

}  // namespace sg::cfg

namespace sg {

NamedDataset load_named_data(const DataConfig& d, const std::vector<std::string>& inputs,
                             const std::vector<std::string>& targets) {
  NamedDataset out;
  out.name = d.source == "antiderivative" ? "antiderivative" : std::filesystem::path(d.path).filename().string();
  const bool csv = d.source == "csv";
  auto check_known = [](const auto& given, const std::vector<std::string>& names, const char* key, const char* what) {
    for (const auto& kv : given)
      SG_REQUIRE(std::find(names.begin(), names.end(), kv.first) != names.end(), "data.", key, ".", kv.first,
                 ": the model has no ", what, " '", kv.first, "' (", what, "s: ", joined(names), ")");
  };
  if (!csv && d.source != "npz" && d.source != "antiderivative") {
    check_known(d.input_columns, inputs, "inputs", "input");
    return cfg::split_columns(d, load_data(d), inputs, targets);
  }
  if (csv) {
    check_known(d.input_columns, inputs, "inputs", "input");
    check_known(d.target_columns, targets, "targets", "output with a loss");
    std::map<std::string, std::vector<CsvColumn>> groups;
    for (const std::string& name : inputs) {
      SG_REQUIRE(d.input_columns.count(name), "data.inputs.", name, ": missing; a CSV file needs the columns of every ",
                 "model input (e.g. \"inputs\": {\"", name, "\": [0, 1]})");
      groups["data.inputs." + name] = d.input_columns.at(name);
    }
    for (const std::string& name : targets) {
      SG_REQUIRE(d.target_columns.count(name), "data.targets.", name, ": missing; a CSV file needs the columns of the ",
                 "target of every output with a loss (e.g. \"targets\": {\"", name, "\": [-1]})");
      groups["data.targets." + name] = d.target_columns.at(name);
    }
    NamedArrays cols = load_csv_columns(d.path, groups, d.csv.missing);
    for (const std::string& name : inputs) out.inputs[name] = std::move(cols.at("data.inputs." + name));
    for (const std::string& name : targets) out.targets[name] = std::move(cols.at("data.targets." + name));
    return out;
  }
  check_known(d.input_members, inputs, "inputs", "input");
  check_known(d.target_members, targets, "targets", "output with a loss");
  std::string where;
  NamedArrays members = cfg::members_of(d, &where);
  std::vector<std::string> have;
  for (const auto& kv : members) have.push_back(kv.first);
  auto take = [&](const std::map<std::string, std::string>& given, const std::string& name, const char* key) {
    const auto it = given.find(name);
    const std::string member = it == given.end() ? name : it->second;
    SG_REQUIRE(members.count(member), where, " has no array '", member, "' for the ",
               std::string(key) == "inputs" ? "input '" : "target of output '", name, "' (it has: ", joined(have),
               "); set data.", key, ".", name, " to the array's name");
    return members.at(member);
  };
  for (const std::string& name : inputs) out.inputs[name] = take(d.input_members, name, "inputs");
  for (const std::string& name : targets) out.targets[name] = take(d.target_members, name, "targets");
  // Every array holds one row per sample.
  const int64_t N = out.size();
  for (const NamedArrays* m : {&out.inputs, &out.targets})
    for (const auto& [name, a] : *m)
      SG_REQUIRE(!a.shape().empty() && a.shape()[0] == N, where, ": the arrays hold different numbers of rows ('",
                 name, "' is ", shape_str(a.shape()), ", others have ", N, ")");
  SG_REQUIRE(N > 0, where, ": the arrays have no rows");
  return out;
}

}  // namespace sg
