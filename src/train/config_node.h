// The config parser's JSON reader: an object with its path, so every error can say where it
// is; shared by the files that parse parts of a configuration (config.cpp, config_graph.cpp).
#pragma once

#include <initializer_list>
#include <limits>
#include <set>
#include <string>

#include "core/json_text.h"
#include "stepgraph/model.h"

namespace sg {
struct DataConfig;
}

namespace sg::cfg {

using nlohmann::json;

inline std::string type_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return cat("the integer ", v.dump());
  if (v.is_number()) return cat("the number ", v.dump());
  if (v.is_string()) return cat("the string ", v.dump());
  if (v.is_array()) return "an array";
  return "an object";
}

// A JSON object together with its path, so every error can say where it is.
class Node {
 public:
  Node(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    SG_REQUIRE(j_.is_object(), path_.empty() ? "the top level" : path_, ": expected an object, got ",
               type_of(j_));
  }
  const json& raw() const { return j_; }
  const std::string& path() const { return path_; }
  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }

  // Every key must be one of `allowed`.
  void only(std::initializer_list<const char*> allowed) const {
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (ok.count(it.key())) continue;
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw Error(cat(at(it.key()), ": unknown key; allowed keys here: ", list));
    }
  }

  Node object(const std::string& key) const { return Node(j_.at(key), at(key)); }

  int64_t integer(const std::string& key, int64_t def, int64_t min_value,
                  int64_t max_value = std::numeric_limits<int64_t>::max()) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    const std::string expected =
        max_value < std::numeric_limits<int64_t>::max()
            ? cat("an integer in [", min_value, ", ", max_value, "]")
            : min_value == 1 ? std::string("a positive integer") : cat("an integer >= ", min_value);
    SG_REQUIRE(v.is_number_integer() || v.is_number_unsigned(), at(key), ": expected ", expected,
               ", got ", type_of(v));
    // Unsigned values above the int64 range would wrap to negative numbers.
    SG_REQUIRE(!v.is_number_unsigned() ||
                   v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
               at(key), ": expected ", expected, ", got ", v.dump());
    int64_t x = v.get<int64_t>();
    SG_REQUIRE(x >= min_value && x <= max_value, at(key), ": expected ", expected, ", got ", x);
    return x;
  }
  // An activation by name (none when absent); an unknown one lists the names.
  Activation activation(const std::string& key) const {
    if (!has(key)) return Activation::None;
    SG_REQUIRE(j_[key].is_string(), at(key), ": expected an activation name (one of ", joined(activation_names()),
               "), got ", type_of(j_[key]));
    try {
      return parse_activation(j_[key].get<std::string>());
    } catch (const Error& e) {
      throw Error(cat(at(key), ": ", e.what()));
    }
  }
  double number(const std::string& key, double def, double lo, double hi) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    SG_REQUIRE(v.is_number(), at(key), ": expected a number, got ", type_of(v));
    double x = v.get<double>();
    SG_REQUIRE(x >= lo && x <= hi, at(key), ": expected a number in [", lo, ", ", hi, "], got ", x);
    return x;
  }
  bool boolean(const std::string& key, bool def) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    SG_REQUIRE(v.is_boolean(), at(key), ": expected true or false, got ", type_of(v));
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& def,
                     std::initializer_list<const char*> allowed = {}) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    SG_REQUIRE(v.is_string(), at(key), ": expected a string", list.empty() ? "" : " (one of " + list + ")",
               ", got ", type_of(v));
    std::string s = v.get<std::string>();
    if (allowed.size()) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || s == a;
      SG_REQUIRE(ok, at(key), ": unknown value \"", s, "\"; allowed: ", list);
    }
    return s;
  }

 private:
  const json& j_;
  std::string path_;
};

// Caps that keep element counts far from int64 overflow (a larger value is a typo, not a data set).
constexpr int64_t kMaxSamples = int64_t{1} << 28;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // synthetic features, classes, targets

// One layer object ({"type": "dense", ...}); config.cpp.
LayerPtr parse_layer(const Node& n);
// model.type "graph": inputs, nodes and outputs (config_graph.cpp).
ModelPtr parse_graph_model(const Node& model);
// The data section (config_data.cpp).
DataConfig parse_data(const Node& n);
// data.inputs, data.targets and the antiderivative source's settings (config_named.cpp).
void parse_named_data(const Node& n, DataConfig& d);

}  // namespace sg::cfg
