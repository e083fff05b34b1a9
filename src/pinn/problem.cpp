#include "stepgraph/pinn.h"
#include "stepgraph/trainer.h"

#include <cmath>
#include <set>

#include "pinn/expression.h"
#include "stepgraph/rng.h"

namespace sg::pinn {

using nlohmann::json;

namespace {

constexpr double kPi = 3.141592653589793;

// Burgers' reference by Cole-Hopf: u = -I1 / I0 with
// I_k = int g_k(x - 2 sqrt(nu t) z) exp(-z^2) dz, g_0 = f, g_1 = sin(pi y) f,
// f(y) = exp(-cos(pi y) / (2 pi nu)); the exponent is shifted by its maximum for range.
double burgers_exact(double t, double x, double nu) {
  if (t <= 0) return -std::sin(kPi * x);
  const double s = 2 * std::sqrt(nu * t), c = 1 / (2 * kPi * nu);
  constexpr int n = 4000;
  constexpr double zmax = 8.0;
  const double dz = 2 * zmax / n;
  double shift = -1e300;
  for (int k = 0; k <= n; ++k) {
    const double z = -zmax + k * dz, y = x - s * z;
    shift = std::max(shift, -c * std::cos(kPi * y) - z * z);
  }
  double i0 = 0, i1 = 0;
  for (int k = 0; k <= n; ++k) {
    const double z = -zmax + k * dz, y = x - s * z;
    const double w = (k == 0 || k == n ? 0.5 : 1.0) * std::exp(-c * std::cos(kPi * y) - z * z - shift);
    i0 += w;
    i1 += w * std::sin(kPi * y);
  }
  return -i1 / i0;
}

Term face(const std::string& label, const std::string& residual, int64_t points, int32_t dim, double value,
          double weight = 1.0) {
  return Term{label, residual, weight, points, dim, value};
}

// Names an expression may use: coordinates, constants, and each output's jet components
// (u, u_x, u_xx, u_xy and u_yx for every coordinate pair).
struct Names {
  std::vector<std::string> names;
  std::vector<ExprVar> sources;
};

Names available_names(const Problem& p, std::vector<std::pair<int, int>>* pair_of_name_index) {
  Names n;
  const int d = static_cast<int>(p.dim());
  for (int i = 0; i < d; ++i) {
    n.names.push_back(p.coords[i]);
    n.sources.push_back({ExprVar::Kind::Coordinate, i, 0, 0.0});
    pair_of_name_index->push_back({-1, -1});
  }
  for (const auto& [name, value] : p.constants) {
    n.names.push_back(name);
    n.sources.push_back({ExprVar::Kind::Constant, 0, 0, value});
    pair_of_name_index->push_back({-1, -1});
  }
  for (int o = 0; o < static_cast<int>(p.outputs.size()); ++o) {
    const std::string& u = p.outputs[o];
    n.names.push_back(u);
    n.sources.push_back({ExprVar::Kind::Jet, 0, o, 0.0});
    pair_of_name_index->push_back({-1, -1});
    for (int i = 0; i < d; ++i) {
      n.names.push_back(u + "_" + p.coords[i]);
      n.sources.push_back({ExprVar::Kind::Jet, 1 + i, o, 0.0});
      pair_of_name_index->push_back({-1, -1});
    }
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) {
        n.names.push_back(u + "_" + p.coords[i] + p.coords[j]);
        n.sources.push_back({ExprVar::Kind::Jet, -1, o, 0.0});  // component fixed once pairs are known
        pair_of_name_index->push_back({std::min(i, j), std::max(i, j)});
      }
  }
  return n;
}

// A term compiled: its expression, the jet it needs and where each variable comes from.
struct CompiledTerm {
  std::shared_ptr<Expression> expr;
  JetSpec jet;
  bool needs_jet = false;
  std::vector<ExprVar> vars;
};

// The jet and variable sources for `e` over the names `n` followed by one Laplacian per entry of
// `sums` (the diagonal second derivatives of one output that fold_sums found added up).
CompiledTerm term_for(const Problem& p, Expression e, const Names& n, const std::vector<std::pair<int, int>>& pairs_of,
                      const std::vector<std::vector<int>>& sums, const std::string& where) {
  CompiledTerm c;
  c.expr = std::make_shared<Expression>(std::move(e));
  std::vector<ExprVar> sources = n.sources;
  std::vector<uint32_t> trace(n.names.size(), 0);  // per variable: its Laplacian's inputs
  for (const std::vector<int>& sum : sums) {
    uint32_t mask = 0;
    for (int v : sum) mask |= 1u << pairs_of[static_cast<size_t>(v)].first;
    sources.push_back(n.sources[static_cast<size_t>(sum[0])]);
    trace.push_back(mask);
  }
  const std::vector<bool> used = c.expr->uses();
  c.jet.d = static_cast<int32_t>(p.dim());
  // The second-derivative component of variable v (-1: none).
  auto component = [&](size_t v) {
    if (trace[v] != 0) return c.jet.trace_index(trace[v]);
    return v < pairs_of.size() && pairs_of[v].first >= 0 ? c.jet.pair_index(pairs_of[v].first, pairs_of[v].second) : -1;
  };
  for (size_t v = 0; v < used.size(); ++v) {
    if (!used[v] || sources[v].kind != ExprVar::Kind::Jet) continue;
    const bool second = trace[v] != 0 || pairs_of[v].first >= 0;
    if (sources[v].index != 0 || second) c.needs_jet = true;
    if (!second || component(v) >= 0) continue;
    SG_REQUIRE(c.jet.npairs < kMaxJetPairs, where, ": more than ", kMaxJetPairs, " second derivatives");
    JetSpec& js = c.jet;
    js.trace[js.npairs] = static_cast<uint8_t>(trace[v]);
    js.pi[js.npairs] = static_cast<int8_t>(trace[v] ? -1 : pairs_of[v].first);
    js.pj[js.npairs] = static_cast<int8_t>(trace[v] ? -1 : pairs_of[v].second);
    ++js.npairs;
  }
  if (!c.needs_jet) c.jet = JetSpec{};  // values only: the plain network
  for (size_t v = 0; v < sources.size(); ++v) {
    ExprVar s = sources[v];
    if (s.kind == ExprVar::Kind::Jet && (trace[v] != 0 || pairs_of[v].first >= 0)) {
      const int32_t pi = component(v);
      s.index = pi < 0 ? 0 : 1 + c.jet.d + pi;  // unused names: any valid component
    } else if (s.kind == ExprVar::Kind::Jet && !c.needs_jet) {
      s.index = 0;
    }
    c.vars.push_back(s);
  }
  return c;
}

// Compiles a term. A PDE that reads its second derivatives only as a Laplacian (u_xx + u_yy,
// in any order and grouping) gets one component for the sum where it would need one per
// input: the jets, and every product and kernel over them, shrink by that many rows per point.
// The term keeps whichever form needs fewer components (a term that also reads u_xx alone
// stays as written).
CompiledTerm compile_term(const Problem& p, const Term& t, const std::string& where) {
  std::vector<std::pair<int, int>> pairs_of;
  Names n = available_names(p, &pairs_of);
  Expression e = compile_expression(t.residual, n.names, where);
  std::vector<int> cls(n.names.size(), -1);  // diagonal second derivatives: by output
  for (size_t v = 0; v < n.names.size(); ++v)
    if (n.sources[v].kind == ExprVar::Kind::Jet && pairs_of[v].first >= 0 && pairs_of[v].first == pairs_of[v].second)
      cls[v] = n.sources[v].output;
  std::vector<std::vector<int>> sums;
  Expression folded = fold_sums(e, cls, &sums);
  CompiledTerm plain = term_for(p, std::move(e), n, pairs_of, {}, where);
  if (sums.empty()) return plain;
  CompiledTerm laplacian = term_for(p, std::move(folded), n, pairs_of, sums, where);
  return laplacian.jet.npairs < plain.jet.npairs ? laplacian : plain;
}

}  // namespace

Problem builtin_problem(const std::string& name) {
  Problem p;
  p.name = name;
  if (name == "poisson2d") {
    p.coords = {"x", "y"};
    p.domain = {{0, 1}, {0, 1}};
    p.terms = {Term{"residual", "-(u_xx + u_yy) - 2*pi^2*sin(pi*x)*sin(pi*y)", 1.0, 8192, -1, 0},
               face("boundary", "u", 1024, -2, 0)};
    p.exact = "sin(pi*x)*sin(pi*y)";
  } else if (name == "heat1d") {
    p.coords = {"t", "x"};
    p.domain = {{0, 1}, {0, 1}};
    p.constants = {{"alpha", 0.1}};
    p.terms = {Term{"residual", "u_t - alpha*u_xx", 1.0, 4096, -1, 0}, face("initial t=0", "u - sin(pi*x)", 512, 0, 0),
               face("x=0", "u", 256, 1, 0), face("x=1", "u", 256, 1, 1)};
    p.exact = "exp(-alpha*pi^2*t)*sin(pi*x)";
  } else if (name == "burgers1d") {
    const double nu = 0.01 / kPi;
    p.coords = {"t", "x"};
    p.domain = {{0, 1}, {-1, 1}};
    p.constants = {{"nu", nu}};
    p.terms = {Term{"residual", "u_t + u*u_x - nu*u_xx", 1.0, 8192, -1, 0},
               face("initial t=0", "u + sin(pi*x)", 512, 0, 0), face("x=-1", "u", 256, 1, -1),
               face("x=1", "u", 256, 1, 1)};
    p.exact_fn = [nu](const double* c) { return burgers_exact(c[0], c[1], nu); };
  } else {
    throw Error(cat("unknown problem '", name, "': expected poisson2d, heat1d, burgers1d, or a custom problem"));
  }
  return p;
}

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

}  // namespace

Problem parse_problem(const json& j) {
  const std::string path = "problem";
  SG_REQUIRE(j.is_object(), path, ": expected an object");
  Problem p;
  if (j.contains("type") && j["type"] != "custom") {
    SG_REQUIRE(j["type"].is_string(), "problem.type: expected a string");
    only(j, {"type", "interior_points", "boundary_points", "resample_every", "seed", "residual_weight",
             "boundary_weight", "eval_points"},
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
             "interior_points", "residual_weight", "resample_every", "seed", "eval_points"},
         path);
    p.name = "custom";
    SG_REQUIRE(j.contains("coordinates") && j["coordinates"].is_array() && !j["coordinates"].empty() &&
                   j["coordinates"].size() <= static_cast<size_t>(kMaxJetDim),
               "problem.coordinates: expected a list of 1 to ", kMaxJetDim, " names");
    for (const json& c : j["coordinates"]) {
      SG_REQUIRE(c.is_string(), "problem.coordinates: expected names, got ", c.dump());
      p.coords.push_back(c.get<std::string>());
    }
    SG_REQUIRE(j.contains("domain") && j["domain"].is_array() && j["domain"].size() == p.coords.size(),
               "problem.domain: expected one [low, high] per coordinate (", p.coords.size(), ")");
    for (size_t i = 0; i < p.coords.size(); ++i) {
      const json& d = j["domain"][i];
      SG_REQUIRE(d.is_array() && d.size() == 2 && d[0].is_number() && d[1].is_number() && d[0] < d[1],
                 "problem.domain[", i, "]: expected [low, high] with low < high, got ", d.dump());
      p.domain.push_back({d[0].get<double>(), d[1].get<double>()});
    }
    if (j.contains("outputs")) {
      p.outputs.clear();
      for (const json& o : j["outputs"]) {
        SG_REQUIRE(o.is_string(), "problem.outputs: expected names, got ", o.dump());
        p.outputs.push_back(o.get<std::string>());
      }
    }
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
  // Compile every expression now, so errors show before anything runs.
  for (size_t k = 0; k < p.terms.size(); ++k)
    compile_term(p, p.terms[k], k == 0 ? "problem.residual" : cat("problem.conditions[", k - 1, "].residual"));
  if (!p.exact.empty()) {
    std::vector<std::string> names = p.coords;
    for (const auto& c : p.constants) names.push_back(c.first);
    compile_expression(p.exact, names, "problem.exact");
  }
  return p;
}

StepBuilder make_step(const Problem& prob) {
  return [prob](GraphBuilder& g, Layer& model) {
    Program& pr = g.program();
    const int64_t d = prob.dim();
    CustomStep cs;
    cs.input_dim = d;
    TensorId step = g.tensor(kStepTensor, {1}, Role::StepScalar, DType::I32);
    struct Set {
      TensorId X = kNone, U = kNone, dU = kNone;
      CompiledTerm c;
      int64_t row0 = 0;  // the term's first row of U
    };
    std::vector<Set> sets(prob.terms.size());
    for (size_t k = 0; k < prob.terms.size(); ++k) {
      const Term& t = prob.terms[k];
      Set& s = sets[k];
      s.c = compile_term(prob, t, k == 0 ? "problem.residual" : "problem.conditions");
      s.X = g.tensor(cat("points.", k), {t.points, d}, Role::Activation);
      SampleAttrs sa;
      sa.seed = mix_seed(prob.seed, cat("points ", k));
      sa.every = prob.resample_every;
      for (int64_t i = 0; i < d; ++i) sa.lo[i] = prob.domain[i].first, sa.hi[i] = prob.domain[i].second;
      sa.face_dim = t.face_dim;
      sa.face_value = t.face_value;
      Op op;
      op.kind = OpKind::SamplePoints;
      op.name = "sample " + t.label;
      op.in = {step};
      op.out = {s.X};
      op.attrs = sa;
      pr.add_op(std::move(op));
      // Kept to the end of the step (small): what the loss saw can be read back and plotted.
      pr.tensor(s.X).live_out = true;
    }
    // One network pass per jet term. Terms that need no derivatives (boundary and initial values)
    // ride along in the first jet term's pass as its head rows: one chain of larger kernels
    // instead of a second chain of small ones (on an H200 the Poisson step's 1024 boundary points
    // cost ~60 us as a concurrent chain). Without a jet term each term has its own plain pass.
    int host = -1;
    for (size_t k = 0; k < sets.size() && host < 0; ++k)
      if (sets[k].c.needs_jet) host = static_cast<int>(k);
    for (size_t k = 0; k < sets.size(); ++k) {
      Set& s = sets[k];
      if (host >= 0 && !s.c.needs_jet) continue;  // in the host's pass
      const Term& t = prob.terms[k];
      TensorId input = s.X;
      std::vector<size_t> riders;
      if (s.c.needs_jet) {
        Op j;
        j.kind = OpKind::JetInput;
        j.name = "jet " + t.label;
        j.in = {s.X};
        int64_t head = 0;
        if (static_cast<int>(k) == host) {
          for (size_t r = 0; r < sets.size(); ++r) {
            if (sets[r].c.needs_jet) continue;
            riders.push_back(r);
            sets[r].row0 = head;
            head += prob.terms[r].points;
            j.in.push_back(sets[r].X);
          }
        }
        s.row0 = head;
        input = g.tensor(cat("points.", k, ".jet"), {head + s.c.jet.K() * t.points, d}, Role::Activation);
        j.out = {input};
        j.attrs = JetAttrs{s.c.jet, Activation::None, head};
        pr.add_op(std::move(j));
        g.set_jet(&s.c.jet, t.points, head);
      } else {
        g.set_jet(nullptr, 0);
      }
      s.U = model.build(g, input, "");
      g.set_jet(nullptr, 0);
      pr.tensor(s.U).live_out = true;
      const Shape us = pr.tensor(s.U).shape;
      SG_REQUIRE(us[1] == static_cast<int64_t>(prob.outputs.size()), "the model has ", us[1],
                 " outputs but the problem names ", prob.outputs.size());
      s.dU = g.tensor("d.u." + std::to_string(k), us, Role::Temporary);
      cs.seeds.push_back({s.U, s.dU});
      for (size_t r : riders) sets[r].U = s.U, sets[r].dU = s.dU;
    }
    cs.num_forward_ops = pr.ops().size();
    cs.loss = g.tensor("loss", {1}, Role::Activation);
    // With several terms each loss op writes only its own term (and its own rows of dU), and an
    // Add after it sums it onto the earlier terms: terms in different passes share nothing, so
    // the CUDA step can run such a pass's whole chain (points, network, loss, backward)
    // concurrently, and each Add right after its loss is done by that loss's kernel.
    const bool one = sets.size() == 1;
    TensorId sum = kNone;  // loss = term 0 + term 1 + ... in order (partial sums in their own scalars)
    for (size_t k = 0; k < sets.size(); ++k) {
      const Term& t = prob.terms[k];
      TensorId term = g.tensor("loss." + t.label, {1}, Role::Activation);
      ExprLossAttrs a;
      a.expr = sets[k].c.expr;
      a.vars = sets[k].c.vars;
      a.K = sets[k].c.needs_jet ? sets[k].c.jet.K() : 1;
      a.row0 = sets[k].row0;
      a.weight = t.weight;
      a.label = t.label;
      Op op;
      op.kind = OpKind::ExpressionLoss;
      op.name = "loss " + t.label;
      op.in = {sets[k].U, sets[k].X};
      op.out = {one ? cs.loss : kNone, term, sets[k].dU};
      op.attrs = a;
      pr.add_op(std::move(op));
      cs.terms.push_back({t.label, term});
      if (k == 0) {
        sum = term;
        continue;
      }
      const TensorId out = k + 1 == sets.size() ? cs.loss : g.tensor(cat("loss.sum.", k), {1}, Role::Activation);
      Op add;
      add.kind = OpKind::Add;
      add.name = "loss total";
      add.in = {sum, term};
      add.out = {out};
      pr.add_op(std::move(add));
      sum = out;
    }
    return cs;
  };
}

HostArray evaluation_grid(const Problem& p) {
  const int64_t d = p.dim();
  const int64_t per = std::max<int64_t>(2, static_cast<int64_t>(std::llround(std::pow(static_cast<double>(p.eval_points), 1.0 / d))));
  int64_t total = 1;
  for (int64_t i = 0; i < d; ++i) total *= per;
  HostArray g(DType::F32, {total, d});
  for (int64_t n = 0; n < total; ++n) {
    int64_t r = n;
    for (int64_t i = d - 1; i >= 0; --i) {
      const int64_t k = r % per;
      r /= per;
      g.data<float>()[n * d + i] =
          static_cast<float>(p.domain[i].first + (p.domain[i].second - p.domain[i].first) * k / (per - 1));
    }
  }
  return g;
}

HostArray exact_solution(const Problem& p, const HostArray& pts) {
  SG_REQUIRE(!p.exact.empty() || p.exact_fn, "problem '", p.name, "' has no exact solution to compare with");
  const int64_t M = pts.shape()[0], d = p.dim();
  HostArray u(DType::F32, {M, 1});
  std::vector<std::string> names = p.coords;
  std::vector<double> vars(d + p.constants.size());
  for (size_t c = 0; c < p.constants.size(); ++c) names.push_back(p.constants[c].first), vars[d + c] = p.constants[c].second;
  Expression e;
  if (!p.exact_fn) e = compile_expression(p.exact, names, "problem.exact");
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t i = 0; i < d; ++i) vars[i] = pts.data<float>()[m * d + i];
    u.data<float>()[m] = static_cast<float>(p.exact_fn ? p.exact_fn(vars.data()) : e.eval(vars.data()));
  }
  return u;
}

double relative_l2_error(Trainer& t, const Problem& p) {
  HostArray grid = evaluation_grid(p);
  HostArray pred = t.predict(grid), ref = exact_solution(p, grid);
  const int64_t O = pred.shape()[1];
  double num = 0, den = 0;
  for (int64_t m = 0; m < ref.shape()[0]; ++m) {
    const double e = pred.data<float>()[m * O] - ref.data<float>()[m];
    num += e * e;
    den += static_cast<double>(ref.data<float>()[m]) * ref.data<float>()[m];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace sg::pinn
