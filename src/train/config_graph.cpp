// model.type "graph": a model graph from JSON (docs/configuration.md):
//   {"type": "graph", "inputs": {"x": 3, "t": 2},
//    "nodes": [{"name": "a", "type": "dense", "units": 8, "activation": "tanh", "input": "x"},
//              {"name": "b", "layer": "a", "input": "t2"},            // layer a again: shared weights
//              {"name": "c", "type": "concat", "inputs": ["a", "b"]}, ...],
//    "outputs": {"u": "u_head"}}
// Nodes may come in any order; a reference names an input or a node ("s:1": piece 1 of a split).
#include <cstdlib>
#include <functional>
#include <map>

#include "train/config_node.h"

namespace sg::cfg {

namespace {

const std::set<std::string> kOps = {"add", "sub", "mul", "div", "concat", "split", "slice", "sum", "mean",
                                    "activation", "scale_shift", "matmul", "transpose", "reshape"};

struct Graph {
  std::map<std::string, SymbolicTensor> inputs;
  std::map<std::string, size_t> index;  // node name -> its position in "nodes"
  std::vector<json> nodes;
  std::string path;                               // "model.nodes"
  std::map<std::string, std::vector<SymbolicTensor>> made;
  std::map<std::string, LayerPtr> layers;         // by the node that made them
  std::vector<std::string> visiting;              // for cycles
};

std::string node_path(const Graph& g, size_t i) { return cat(g.path, "[", i, "]"); }

std::vector<SymbolicTensor> make(Graph& g, const std::string& name, const std::string& from);

// A reference ("a", or "s:1") read at `where`.
SymbolicTensor ref(Graph& g, const json& v, const std::string& where) {
  SG_REQUIRE(v.is_string(), where, ": expected the name of an input or a node, got ", type_of(v));
  std::string name = v.get<std::string>();
  int piece = -1;
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos) {
    const std::string k = name.substr(colon + 1);
    SG_REQUIRE(!k.empty() && k.find_first_not_of("0123456789") == std::string::npos && k.size() < 6, where, ": '",
               name, "': after ':' comes a piece number");
    piece = std::stoi(k);
    name = name.substr(0, colon);
  }
  if (auto it = g.inputs.find(name); it != g.inputs.end()) {
    SG_REQUIRE(piece < 0, where, ": input '", name, "' has no pieces");
    return it->second;
  }
  SG_REQUIRE(g.index.count(name), where, ": '", name, "' is neither an input (", [&] {
    std::vector<std::string> in;
    for (const auto& [n, t] : g.inputs) in.push_back(n);
    return joined(in);
  }(), ") nor a node");
  const std::vector<SymbolicTensor>& outs = make(g, name, where);
  if (piece < 0) {
    SG_REQUIRE(outs.size() == 1, where, ": node '", name, "' has ", outs.size(), " pieces: name one ('", name, ":0')");
    return outs[0];
  }
  SG_REQUIRE(piece < static_cast<int>(outs.size()), where, ": node '", name, "' has ", outs.size(),
             " pieces, not ", piece + 1);
  return outs[static_cast<size_t>(piece)];
}

std::vector<SymbolicTensor> refs(Graph& g, const Node& n, const std::string& key) {
  SG_REQUIRE(n.has(key) && n.raw()[key].is_array() && !n.raw()[key].empty(), n.at(key),
             ": expected a list of input or node names");
  std::vector<SymbolicTensor> out;
  for (size_t i = 0; i < n.raw()[key].size(); ++i) out.push_back(ref(g, n.raw()[key][i], cat(n.at(key), "[", i, "]")));
  return out;
}

SymbolicTensor one_input(Graph& g, const Node& n) {
  SG_REQUIRE(n.has("input"), n.at("input"), ": missing (the input or node this one reads)");
  return ref(g, n.raw()["input"], n.at("input"));
}

std::vector<SymbolicTensor> make_op(Graph& g, const Node& n, const std::string& type, const std::string& name) {
  if (type == "add" || type == "sub" || type == "mul" || type == "div") {
    n.only({"name", "type", "inputs"});
    const auto in = refs(g, n, "inputs");
    SG_REQUIRE(in.size() == 2, n.at("inputs"), ": ", type, " takes two inputs, got ", in.size());
    const SymbolicTensor y = type == "add" ? in[0] + in[1] : type == "sub" ? in[0] - in[1]
                             : type == "mul" ? in[0] * in[1] : in[0] / in[1];
    return {named(y, name)};
  }
  if (type == "concat") {
    n.only({"name", "type", "inputs", "axis"});
    return {concat(refs(g, n, "inputs"), static_cast<int>(n.integer("axis", -1, -8, 8)), name)};
  }
  if (type == "split") {
    n.only({"name", "type", "input", "sizes", "axis"});
    SG_REQUIRE(n.has("sizes") && n.raw()["sizes"].is_array(), n.at("sizes"), ": expected a list of piece sizes");
    std::vector<int64_t> sizes;
    for (const json& s : n.raw()["sizes"]) {
      SG_REQUIRE(s.is_number_integer() && s.get<int64_t>() > 0, n.at("sizes"), ": expected positive integers, got ",
                 type_of(s));
      sizes.push_back(s.get<int64_t>());
    }
    return split(one_input(g, n), sizes, static_cast<int>(n.integer("axis", -1, -8, 8)), name);
  }
  if (type == "slice") {
    n.only({"name", "type", "input", "axis", "begin", "end"});
    SG_REQUIRE(n.has("end"), n.at("end"), ": missing (one past the last index)");
    return {named(one_input(g, n).slice(static_cast<int>(n.integer("axis", -1, -8, 8)), n.integer("begin", 0, 0),
                                        n.integer("end", 0, 1)),
                  name)};
  }
  if (type == "sum" || type == "mean") {
    n.only({"name", "type", "input", "axis", "keepdims"});
    const SymbolicTensor x = one_input(g, n);
    const int axis = static_cast<int>(n.integer("axis", -1, -8, 8));
    const bool keep = n.boolean("keepdims", false);
    return {named(type == "sum" ? x.sum(axis, keep) : x.mean(axis, keep), name)};
  }
  if (type == "matmul") {
    n.only({"name", "type", "inputs", "transpose_a", "transpose_b"});
    const auto in = refs(g, n, "inputs");
    SG_REQUIRE(in.size() == 2, n.at("inputs"), ": matmul takes two inputs, got ", in.size());
    return {matmul(in[0], in[1], n.boolean("transpose_a", false), n.boolean("transpose_b", false), name)};
  }
  if (type == "transpose") {
    n.only({"name", "type", "input", "axes"});
    const json& axes = n.raw().contains("axes") ? n.raw()["axes"] : json::array({-2, -1});
    SG_REQUIRE(axes.is_array() && axes.size() == 2 && axes[0].is_number_integer() && axes[1].is_number_integer() &&
                   std::abs(axes[0].get<int64_t>()) <= 8 && std::abs(axes[1].get<int64_t>()) <= 8,
               n.at("axes"), ": expected two feature axes, e.g. [-2, -1] (the default)");
    return {named(one_input(g, n).transpose(axes[0].get<int>(), axes[1].get<int>()), name)};
  }
  if (type == "reshape") {
    n.only({"name", "type", "input", "shape"});
    const json& sh = n.raw().contains("shape") ? n.raw()["shape"] : json();
    SG_REQUIRE(sh.is_array() && !sh.empty() && sh.size() <= 7, n.at("shape"),
               ": expected the per-sample shape, a list of sizes (one may be -1), e.g. [4, 8]");
    Shape shape;
    for (const json& d : sh) {
      SG_REQUIRE(d.is_number_integer() && d.get<int64_t>() >= -1 && d.get<int64_t>() != 0 && d.get<int64_t>() <= (1 << 24),
                 n.at("shape"), ": sizes must be positive integers or -1, got ", type_of(d));
      shape.push_back(d.get<int64_t>());
    }
    return {named(one_input(g, n).reshape(shape), name)};
  }
  if (type == "scale_shift") {
    n.only({"name", "type", "input", "scale", "shift"});
    return {scale_shift(one_input(g, n), n.number("scale", 1.0, -1e30, 1e30), n.number("shift", 0.0, -1e30, 1e30), name)};
  }
  n.only({"name", "type", "input", "activation", "negative_slope", "alpha"});
  SG_REQUIRE(n.has("activation"), n.at("activation"), ": missing (e.g. \"relu\")");
  ActivationAttrs a;
  a.act = n.activation("activation");
  a.negative_slope = n.number("negative_slope", 0.01, 0, 1e6);
  a.alpha = n.number("alpha", 1.0, 0, 1e6);
  return {activation(one_input(g, n), a, name)};
}

// A layer node: {"type": <layer>, ..., "input": ...}, or {"layer": <node>, "input": ...} to call
// the layer that node made again (shared weights).
std::vector<SymbolicTensor> make_layer(Graph& g, const Node& n, const std::string& name) {
  LayerPtr layer;
  if (n.has("layer")) {
    n.only({"name", "layer", "input"});
    const std::string& other = n.string("layer", "");
    SG_REQUIRE(g.index.count(other), n.at("layer"), ": '", other, "' is not a node");
    make(g, other, n.at("layer"));
    SG_REQUIRE(g.layers.count(other), n.at("layer"), ": node '", other, "' is not a layer (it is ",
               g.nodes[g.index.at(other)].value("type", "?"), ")");
    layer = g.layers.at(other);
  } else {
    json own = n.raw();
    own.erase("name");
    own.erase("input");
    layer = parse_layer(Node(own, n.path()));
    layer->set_name(name);
    g.layers[name] = layer;
  }
  return {call(layer, one_input(g, n))};
}

std::vector<SymbolicTensor> make(Graph& g, const std::string& name, const std::string& from) {
  if (auto it = g.made.find(name); it != g.made.end()) return it->second;
  const size_t i = g.index.at(name);
  if (std::find(g.visiting.begin(), g.visiting.end(), name) != g.visiting.end()) {
    std::string cycle;
    for (auto it = std::find(g.visiting.begin(), g.visiting.end(), name); it != g.visiting.end(); ++it) cycle += *it + " -> ";
    throw Error(cat(from, ": the nodes form a cycle: ", cycle, name));
  }
  g.visiting.push_back(name);
  const Node n(g.nodes[i], node_path(g, i));
  const std::string type = n.has("layer") ? "" : n.string("type", "");
  std::vector<SymbolicTensor> out;
  try {
    out = kOps.count(type) ? make_op(g, n, type, name) : make_layer(g, n, name);
  } catch (const Error& e) {
    const std::string what = e.what();
    // Errors of this node's own keys already say where; the graph's say which node.
    if (what.rfind(g.path, 0) == 0) throw;
    throw Error(cat(n.path(), " ('", name, "'): ", what));
  }
  g.visiting.pop_back();
  g.made[name] = out;
  return out;
}

}  // namespace

ModelPtr parse_graph_model(const Node& model) {
  model.only({"type", "inputs", "nodes", "outputs"});
  Graph g;
  g.path = model.at("nodes");
  SG_REQUIRE(model.has("inputs") && model.raw()["inputs"].is_object() && !model.raw()["inputs"].empty(),
             model.at("inputs"), ": expected an object of per-sample shapes by name, e.g. {\"x\": 3, \"t\": 2}");
  std::vector<SymbolicTensor> inputs;
  for (const auto& [name, v] : model.raw()["inputs"].items()) {
    const std::string at = model.at("inputs") + "." + name;
    Shape s;
    if (v.is_number_integer()) {
      s.push_back(v.get<int64_t>());
    } else {
      SG_REQUIRE(v.is_array() && !v.empty(), at, ": expected a size or a list of sizes, got ", type_of(v));
      for (const json& d : v) {
        SG_REQUIRE(d.is_number_integer(), at, ": expected integer sizes, got ", type_of(d));
        s.push_back(d.get<int64_t>());
      }
    }
    for (int64_t d : s) SG_REQUIRE(d > 0 && d <= (int64_t{1} << 24), at, ": sizes must be in [1, 2^24], got ", d);
    inputs.push_back(Input(s, name));
    g.inputs.emplace(name, inputs.back());
  }
  SG_REQUIRE(model.has("nodes") && model.raw()["nodes"].is_array() && !model.raw()["nodes"].empty(), g.path,
             ": expected a list of nodes");
  for (size_t i = 0; i < model.raw()["nodes"].size(); ++i) {
    const json& j = model.raw()["nodes"][i];
    const Node n(j, node_path(g, i));
    SG_REQUIRE(n.has("name"), n.at("name"), ": missing (every node is named, so others can read it)");
    const std::string name = n.string("name", "");
    SG_REQUIRE(!g.inputs.count(name), n.at("name"), ": '", name, "' is already an input");
    SG_REQUIRE(g.index.emplace(name, i).second, n.at("name"), ": '", name, "' names two nodes");
    SG_REQUIRE(n.has("type") || n.has("layer"), n.at("type"), ": missing (a layer type, an op: ", [] {
      std::vector<std::string> ops(kOps.begin(), kOps.end());
      return joined(ops);
    }(), "; or \"layer\": another layer node, to share its weights)");
    g.nodes.push_back(j);
  }
  SG_REQUIRE(model.has("outputs") && model.raw()["outputs"].is_object() && !model.raw()["outputs"].empty(),
             model.at("outputs"), ": expected an object of node names by output name, e.g. {\"u\": \"u_head\"}");
  // Every node is made, read or not, so a mistake in an unread one is still an error.
  for (const auto& [name, i] : g.index) make(g, name, node_path(g, i));
  std::vector<std::pair<std::string, SymbolicTensor>> outputs;
  for (const auto& [name, v] : model.raw()["outputs"].items())
    outputs.emplace_back(name, ref(g, v, model.at("outputs") + "." + name));
  return std::make_shared<Model>(std::move(inputs), std::move(outputs));
}

}  // namespace sg::cfg
