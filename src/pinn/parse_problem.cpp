// The config's "problem" section (pinn.h parse_problem): a built-in problem with overrides, or a
// custom one; trainable coefficients and observation terms with either. Errors name the JSON path.
#include "stepgraph/data.h"
#include "stepgraph/pinn.h"

#include <filesystem>
#include <set>

namespace sg::pinn {

using nlohmann::json;

namespace {

std::string at(const std::string& path, const std::string& key) { return path + "." + key; }

double number_at(const json& j, const std::string& key, double def, const std::string& path) {
  if (!j.contains(key)) return def;
  SG_REQUIRE(j[key].is_number(), at(path, key), ": expected a number, got ", j[key].dump());
  return j[key].get<double>();
}

int64_t count_at(const json& j, const std::string& key, int64_t def, const std::string& path) {
  if (!j.contains(key)) return def;
  SG_REQUIRE(j[key].is_number_integer() && j[key].get<int64_t>() > 0 && j[key].get<int64_t>() <= (int64_t{1} << 24),
             at(path, key), ": expected a positive integer (at most 2^24), got ", j[key].dump());
  return j[key].get<int64_t>();
}

std::string text_at(const json& j, const std::string& key, const std::string& path) {
  SG_REQUIRE(j.contains(key) && j[key].is_string(), at(path, key), ": expected an expression string");
  return j[key].get<std::string>();
}

void only(const json& j, std::initializer_list<const char*> keys, const std::string& path) {
  std::set<std::string> ok(keys.begin(), keys.end());
  std::string list;
  for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
  for (auto it = j.begin(); it != j.end(); ++it)
    SG_REQUIRE(ok.count(it.key()), at(path, it.key()), ": unknown key; allowed keys here: ", list);
}

std::vector<std::string> names_at(const json& j, const std::string& path) {
  SG_REQUIRE(j.is_array(), path, ": expected a list of names, got ", j.dump());
  std::vector<std::string> out;
  for (const json& o : j) {
    SG_REQUIRE(o.is_string(), path, ": expected names, got ", o.dump());
    out.push_back(o.get<std::string>());
  }
  return out;
}

// "x=0", "t=0", "boundary" -> (face_dim, face_value)
void parse_face(const Problem& p, const std::string& on, const std::string& where, Term* t) {
  if (on == "boundary") {
    t->face_dim = -2;
    return;
  }
  const auto eq = on.find('=');
  SG_REQUIRE(eq != std::string::npos, where, ": expected \"boundary\" or \"<coordinate>=<value>\", got \"", on, "\"");
  const std::string name = on.substr(0, eq);
  for (int i = 0; i < static_cast<int>(p.coords.size()); ++i) {
    if (p.coords[i] != name) continue;
    char* end = nullptr;
    const double v = std::strtod(on.c_str() + eq + 1, &end);
    SG_REQUIRE(end && *end == '\0' && end != on.c_str() + eq + 1, where, ": \"", on.substr(eq + 1),
               "\" is not a number");
    SG_REQUIRE(v >= p.domain[i].first && v <= p.domain[i].second, where, ": ", name, "=", v,
               " is outside the domain [", p.domain[i].first, ", ", p.domain[i].second, "]");
    t->face_dim = i;
    t->face_value = v;
    return;
  }
  throw Error(cat(where, ": '", name, "' is not a coordinate"));
}

// A list of rows of numbers (or, with `flat_ok`, a list of numbers: one column) as f32 [N, width].
HostArray table_at(const json& j, const std::string& path, bool flat_ok) {
  SG_REQUIRE(j.is_array() && !j.empty(), path, ": expected a non-empty list of rows of numbers");
  const bool flat = j[0].is_number();
  SG_REQUIRE(!flat || flat_ok, path, ": expected rows (lists of numbers), got ", j[0].dump());
  const size_t width = flat ? 1 : (j[0].is_array() ? j[0].size() : 0);
  SG_REQUIRE(width > 0, path, "[0]: expected a list of numbers, got ", j[0].dump());
  HostArray a(DType::F32, {static_cast<int64_t>(j.size()), static_cast<int64_t>(width)});
  float* v = a.data<float>();
  for (size_t r = 0; r < j.size(); ++r) {
    const json& row = j[r];
    if (flat) {
      SG_REQUIRE(row.is_number(), path, "[", r, "]: expected a number, got ", row.dump());
      v[r] = row.get<float>();
      continue;
    }
    SG_REQUIRE(row.is_array() && row.size() == width, path, "[", r, "]: expected ", width, " numbers (as row 0), got ",
               row.dump());
    for (size_t c = 0; c < width; ++c) {
      SG_REQUIRE(row[c].is_number(), path, "[", r, "][", c, "]: expected a number, got ", row[c].dump());
      v[r * width + c] = row[c].get<float>();
    }
  }
  return a;
}

HostArray member_at(const std::map<std::string, HostArray>& npz, const std::string& file, const std::string& name,
                    const std::string& path) {
  const auto it = npz.find(name);
  std::string have;
  for (const auto& [k, a] : npz) have += (have.empty() ? "" : ", ") + k + " " + shape_str(a.shape());
  SG_REQUIRE(it != npz.end(), path, ": '", file, "' has no member '", name, "' (it has ", have, ")");
  SG_REQUIRE(it->second.dtype() == DType::F32, path, ": member '", name, "' of '", file, "' must be floating point");
  const Shape& s = it->second.shape();
  SG_REQUIRE(s.size() == 1 || s.size() == 2, path, ": member '", name, "' of '", file, "' is ", shape_str(s),
             ", expected [N, columns] (or [N])");
  return s.size() == 1 ? it->second.reshaped({s[0], 1}) : it->second;
}

Observation parse_observation(const Problem& p, const json& o, const std::string& path, const std::string& base_dir) {
  SG_REQUIRE(o.is_object(), path, ": expected an object");
  Observation ob;
  if (o.contains("sample_exact")) {
    only(o, {"sample_exact", "seed", "weight", "label"}, path);
    SG_REQUIRE(!p.exact.empty() || p.exact_fn, path, ".sample_exact: the problem has no exact solution (\"exact\") to ",
               "observe");
    ob = exact_observations(p, count_at(o, "sample_exact", 1, path), static_cast<uint64_t>(number_at(o, "seed", 0, path)));
  } else if (o.contains("file")) {
    only(o, {"file", "points", "values", "outputs", "weight", "label"}, path);
    SG_REQUIRE(o["file"].is_string(), path, ".file: expected a path to an .npz file");
    std::string file = o["file"].get<std::string>();
    if (!base_dir.empty() && std::filesystem::path(file).is_relative()) file = (std::filesystem::path(base_dir) / file).string();
    auto member = [&](const char* key, const char* def) {
      if (!o.contains(key)) return std::string(def);
      SG_REQUIRE(o[key].is_string(), at(path, key), ": expected the name of a member of '", file, "'");
      return o[key].get<std::string>();
    };
    const auto npz = read_npz(file);
    ob.points = member_at(npz, file, member("points", "points"), at(path, "points"));
    ob.values = member_at(npz, file, member("values", "values"), at(path, "values"));
  } else {
    only(o, {"points", "values", "outputs", "weight", "label"}, path);
    SG_REQUIRE(o.contains("points") && o.contains("values"), path,
               ": expected \"points\" and \"values\" (or \"file\", or \"sample_exact\")");
    ob.points = table_at(o["points"], at(path, "points"), p.dim() == 1);
    ob.values = table_at(o["values"], at(path, "values"), true);
  }
  if (o.contains("outputs")) ob.outputs = names_at(o["outputs"], at(path, "outputs"));
  ob.weight = number_at(o, "weight", 1.0, path);
  if (o.contains("label")) {
    SG_REQUIRE(o["label"].is_string() && !o["label"].get<std::string>().empty(), path, ".label: expected a name");
    ob.label = o["label"].get<std::string>();
  }
  return ob;
}

}  // namespace

Problem parse_problem(const json& j, const std::string& base_dir) {
  const std::string path = "problem";
  SG_REQUIRE(j.is_object(), path, ": expected an object");
  Problem p;
  if (j.contains("type") && j["type"] != "custom") {
    SG_REQUIRE(j["type"].is_string(), "problem.type: expected a string");
    only(j, {"type", "interior_points", "boundary_points", "resample_every", "seed", "residual_weight",
             "boundary_weight", "eval_points", "coefficients", "observations"},
         path);
    p = builtin_problem(j["type"].get<std::string>());
    p.terms[0].points = count_at(j, "interior_points", p.terms[0].points, path);
    p.terms[0].weight = number_at(j, "residual_weight", 1.0, path);
    for (size_t k = 1; k < p.terms.size(); ++k) {
      if (j.contains("boundary_points"))
        p.terms[k].points = std::max<int64_t>(1, count_at(j, "boundary_points", 1, path) / static_cast<int64_t>(p.terms.size() - 1));
      p.terms[k].weight = number_at(j, "boundary_weight", 1.0, path);
    }
  } else {
    only(j, {"type", "coordinates", "domain", "outputs", "constants", "residual", "conditions", "exact",
             "interior_points", "residual_weight", "resample_every", "seed", "eval_points", "coefficients",
             "observations"},
         path);
    p.name = "custom";
    SG_REQUIRE(j.contains("coordinates") && j["coordinates"].is_array() && !j["coordinates"].empty() &&
                   j["coordinates"].size() <= static_cast<size_t>(kMaxJetDim),
               "problem.coordinates: expected a list of 1 to ", kMaxJetDim, " names");
    p.coords = names_at(j["coordinates"], "problem.coordinates");
    SG_REQUIRE(j.contains("domain") && j["domain"].is_array() && j["domain"].size() == p.coords.size(),
               "problem.domain: expected one [low, high] per coordinate (", p.coords.size(), ")");
    for (size_t i = 0; i < p.coords.size(); ++i) {
      const json& d = j["domain"][i];
      SG_REQUIRE(d.is_array() && d.size() == 2 && d[0].is_number() && d[1].is_number() && d[0] < d[1],
                 "problem.domain[", i, "]: expected [low, high] with low < high, got ", d.dump());
      p.domain.push_back({d[0].get<double>(), d[1].get<double>()});
    }
    if (j.contains("outputs")) p.outputs = names_at(j["outputs"], "problem.outputs");
    if (j.contains("constants")) {
      SG_REQUIRE(j["constants"].is_object(), "problem.constants: expected an object of numbers");
      for (auto it = j["constants"].begin(); it != j["constants"].end(); ++it) {
        SG_REQUIRE(it.value().is_number(), "problem.constants.", it.key(), ": expected a number");
        p.constants.push_back({it.key(), it.value().get<double>()});
      }
    }
    p.terms.push_back(Term{"residual", text_at(j, "residual", path), number_at(j, "residual_weight", 1.0, path),
                           count_at(j, "interior_points", 4096, path), -1, 0});
    if (j.contains("conditions")) {
      SG_REQUIRE(j["conditions"].is_array(), "problem.conditions: expected a list");
      for (size_t k = 0; k < j["conditions"].size(); ++k) {
        const json& c = j["conditions"][k];
        const std::string cp = cat("problem.conditions[", k, "]");
        SG_REQUIRE(c.is_object(), cp, ": expected an object");
        only(c, {"on", "residual", "weight", "points"}, cp);
        Term t;
        SG_REQUIRE(c.contains("on") && c["on"].is_string(), cp, ".on: expected \"boundary\" or e.g. \"x=0\"");
        t.label = c["on"].get<std::string>();
        parse_face(p, t.label, cp + ".on", &t);
        t.residual = text_at(c, "residual", cp);
        t.weight = number_at(c, "weight", 1.0, cp);
        t.points = count_at(c, "points", 512, cp);
        p.terms.push_back(t);
      }
    }
    if (j.contains("exact")) p.exact = text_at(j, "exact", path);
  }
  p.resample_every = j.contains("resample_every") ? count_at(j, "resample_every", 1, path) : 0;
  p.seed = static_cast<uint64_t>(number_at(j, "seed", 0, path));
  p.eval_points = count_at(j, "eval_points", p.eval_points, path);
  if (j.contains("coefficients")) {
    SG_REQUIRE(j["coefficients"].is_object() && !j["coefficients"].empty(),
               "problem.coefficients: expected an object of initial values, e.g. {\"nu\": 0.05}");
    for (auto it = j["coefficients"].begin(); it != j["coefficients"].end(); ++it) {
      SG_REQUIRE(it.value().is_number(), "problem.coefficients.", it.key(), ": expected an initial value, got ",
                 it.value().dump());
      p.coefficients.push_back({it.key(), it.value().get<double>()});
    }
  }
  if (j.contains("observations")) {
    SG_REQUIRE(j["observations"].is_array() && !j["observations"].empty(), "problem.observations: expected a list");
    for (size_t k = 0; k < j["observations"].size(); ++k)
      p.observations.push_back(parse_observation(p, j["observations"][k], cat("problem.observations[", k, "]"), base_dir));
  }
  // Every expression compiles now, so errors show before anything runs.
  check_problem(p);
  return p;
}

}  // namespace sg::pinn
