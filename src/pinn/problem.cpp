#include "stepgraph/pinn.h"
#include "stepgraph/trainer.h"

#include <cmath>
#include <algorithm>
#include <map>
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

// Names an expression may use: coordinates, constants, each output's jet components (u, u_x,
// u_xx, u_xy and u_yx for every coordinate pair), the trainable coefficients (read as extra
// output columns: the step appends them to U, see with_coefficients) and, in an observation's
// terms, its values (obs_cols columns after the coordinates of the points the loss reads).
struct Names {
  std::vector<std::string> names;
  std::vector<ExprVar> sources;
};

bool is_coefficient(const Problem& p, const std::string& name) {
  for (const auto& c : p.coefficients)
    if (c.first == name) return true;
  return false;
}

// The name of an observation's value column j inside its terms' expressions (no coordinate,
// constant or output can spell it: names never start with two underscores there, see check_problem).
std::string observed_name(size_t j) { return cat("__observed", j); }

Names available_names(const Problem& p, std::vector<std::pair<int, int>>* pair_of_name_index, int obs_cols = 0) {
  Names n;
  const int d = static_cast<int>(p.dim());
  auto add = [&](const std::string& name, ExprVar v, std::pair<int, int> pair = {-1, -1}) {
    n.names.push_back(name);
    n.sources.push_back(v);
    pair_of_name_index->push_back(pair);
  };
  for (int i = 0; i < d; ++i) add(p.coords[i], {ExprVar::Kind::Coordinate, i, 0, 0.0});
  for (const auto& [name, value] : p.constants)
    if (!is_coefficient(p, name)) add(name, {ExprVar::Kind::Constant, 0, 0, value});
  const int O = static_cast<int>(p.outputs.size());
  for (int o = 0; o < O; ++o) {
    const std::string& u = p.outputs[o];
    add(u, {ExprVar::Kind::Jet, 0, o, 0.0});
    for (int i = 0; i < d; ++i) add(u + "_" + p.coords[i], {ExprVar::Kind::Jet, 1 + i, o, 0.0});
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j)  // component fixed once pairs are known
        add(u + "_" + p.coords[i] + p.coords[j], {ExprVar::Kind::Jet, -1, o, 0.0}, {std::min(i, j), std::max(i, j)});
  }
  for (size_t k = 0; k < p.coefficients.size(); ++k)
    add(p.coefficients[k].first, {ExprVar::Kind::Jet, 0, O + static_cast<int32_t>(k), 0.0});
  for (int j = 0; j < obs_cols; ++j) add(observed_name(static_cast<size_t>(j)), {ExprVar::Kind::Coordinate, d + j, 0, 0.0});
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
CompiledTerm compile_term(const Problem& p, const Term& t, const std::string& where, int obs_cols = 0) {
  std::vector<std::pair<int, int>> pairs_of;
  Names n = available_names(p, &pairs_of, obs_cols);
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

// One loss term of the step: a Term of the problem, or an observed output of an Observation.
struct StepTerm {
  const Term* term = nullptr;  // a problem term (points drawn by SamplePoints)
  Term data;                   // else an observed output: its label, residual and weight
  int observation = -1, columns = 0;
  const Term& t() const { return term ? *term : data; }
};

std::string observation_label(const Problem& p, size_t i) {
  const Observation& ob = p.observations[i];
  return !ob.label.empty() ? ob.label : i == 0 ? std::string("data") : cat("data", i + 1);
}

const std::vector<std::string>& observed_outputs(const Problem& p, const Observation& ob) {
  return ob.outputs.empty() ? p.outputs : ob.outputs;
}

std::vector<StepTerm> step_terms(const Problem& p) {
  std::vector<StepTerm> out;
  for (const Term& t : p.terms) out.push_back(StepTerm{&t, {}, -1, 0});
  for (size_t i = 0; i < p.observations.size(); ++i) {
    const std::vector<std::string>& outs = observed_outputs(p, p.observations[i]);
    const std::string label = observation_label(p, i);
    for (size_t j = 0; j < outs.size(); ++j) {
      StepTerm s;
      s.data.label = outs.size() == 1 ? label : cat(label, " ", outs[j]);
      s.data.residual = cat(outs[j], " - ", observed_name(j));
      s.data.weight = p.observations[i].weight;
      s.data.points = p.observations[i].points.shape()[0];
      s.observation = static_cast<int>(i);
      s.columns = static_cast<int>(outs.size());
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::string term_where(const StepTerm& s, size_t k) {
  if (s.observation >= 0) return cat("problem.observations[", s.observation, "]");
  return k == 0 ? std::string("problem.residual") : cat("problem.conditions[", k - 1, "].residual");
}

// U [R, O] followed by one column per coefficient, each the coefficient's value on every row:
// ones = 0 * input[:, 0:1] + 1 (from the pass's input points, which need no gradient), then
// coefficient * ones per coefficient, concatenated after U. The gradient of each coefficient is
// then the sum of its column of dU, by the broadcast product's backward.
TensorId with_coefficients(GraphBuilder& g, const Problem& p, TensorId U, TensorId input,
                           const std::vector<TensorId>& coefficients) {
  Program& pr = g.program();
  const int64_t R = pr.tensor(U).shape[0];
  auto add = [&](OpKind kind, const std::string& name, std::vector<TensorId> in, TensorId out, OpAttrs attrs) {
    Op op;
    op.kind = kind;
    op.name = name;
    op.in = std::move(in);
    op.out = {out};
    op.attrs = std::move(attrs);
    pr.add_op(std::move(op));
  };
  const TensorId first = g.tensor("coefficients.first", {R, 1}, Role::Activation);
  add(OpKind::Slice, "coefficients: a column of the points", {input}, first, SliceAttrs{1, 0, 1});
  const TensorId ones = g.tensor("coefficients.ones", {R, 1}, Role::Activation);
  add(OpKind::ScaleShift, "coefficients: ones", {first}, ones, ScaleShiftAttrs{0.0, 1.0});
  std::vector<TensorId> parts = {U};
  for (size_t k = 0; k < coefficients.size(); ++k) {
    const TensorId col = g.tensor("coefficients." + p.coefficients[k].first, {R, 1}, Role::Activation);
    add(OpKind::Mul, "coefficient " + p.coefficients[k].first, {ones, coefficients[k]}, col, std::monostate{});
    parts.push_back(col);
  }
  const TensorId full = g.tensor("u.with_coefficients", {R, pr.tensor(U).shape[1] + static_cast<int64_t>(coefficients.size())},
                                 Role::Activation);
  add(OpKind::Concat, "coefficients: beside the outputs", parts, full, ConcatAttrs{1});
  return full;
}

}  // namespace

void check_problem(const Problem& p) {
  const int64_t d = p.dim();
  SG_REQUIRE(d >= 1 && d <= kMaxJetDim, "problem.coordinates: expected 1 to ", kMaxJetDim, " names, got ", d);
  SG_REQUIRE(p.domain.size() == p.coords.size(), "problem.domain: expected one [low, high] per coordinate (", d,
             "), got ", p.domain.size());
  SG_REQUIRE(!p.outputs.empty(), "problem.outputs: expected at least one name");
  SG_REQUIRE(!p.terms.empty(), "problem.residual: missing (the PDE residual is the first term)");
  std::map<std::string, std::string> kind_of;  // name -> what it names
  auto declare = [&](const std::string& name, const std::string& kind, const std::string& where) {
    SG_REQUIRE(!name.empty() && name.rfind("__", 0) != 0, where, ": '", name,
               "' is not a usable name (names must not be empty or start with two underscores)");
    const auto [it, fresh] = kind_of.insert({name, kind});
    SG_REQUIRE(fresh, where, ": '", name, "' names both a ", it->second, " and a ", kind);
  };
  for (const std::string& c : p.coords) declare(c, "coordinate", "problem.coordinates");
  for (const std::string& o : p.outputs) declare(o, "output", "problem.outputs");
  for (const auto& c : p.constants) declare(c.first, "constant", "problem.constants");
  std::set<std::string> coefficient_names;
  for (const auto& [name, init] : p.coefficients) {
    const std::string where = "problem.coefficients." + name;
    SG_REQUIRE(std::isfinite(init), where, ": the initial value must be finite, got ", init);
    SG_REQUIRE(coefficient_names.insert(name).second, where, ": given twice");
    const auto it = kind_of.find(name);
    // A coefficient may take a constant's place in the expressions (the constant stays the truth).
    if (it == kind_of.end() || it->second != "constant") declare(name, "coefficient", where);
  }
  std::set<std::string> labels;
  for (size_t k = 0; k < p.terms.size(); ++k) {
    const std::string where = k == 0 ? std::string("problem.residual") : cat("problem.conditions[", k - 1, "].residual");
    SG_REQUIRE(std::isfinite(p.terms[k].weight) && p.terms[k].weight >= 0, where, ": the weight must be finite and >= 0, got ",
               p.terms[k].weight);
    compile_term(p, p.terms[k], where);
    labels.insert(p.terms[k].label);
  }
  for (size_t i = 0; i < p.observations.size(); ++i) {
    const Observation& ob = p.observations[i];
    const std::string where = cat("problem.observations[", i, "]");
    const Shape &ps = ob.points.shape(), &vs = ob.values.shape();
    SG_REQUIRE(ob.points.dtype() == DType::F32 && ps.size() == 2 && ps[0] >= 1 && ps[1] == d, where,
               ".points: expected f32 [N, ", d, "] (one row of ", d, " coordinates per observation), got ",
               dtype_name(ob.points.dtype()), " ", shape_str(ps));
    const std::vector<std::string>& outs = observed_outputs(p, ob);
    SG_REQUIRE(ob.values.dtype() == DType::F32 && vs.size() == 2 && vs[0] == ps[0] &&
                   vs[1] == static_cast<int64_t>(outs.size()),
               where, ".values: expected f32 [", ps[0], ", ", outs.size(), "] (a value of ", joined(outs),
               " at each point), got ", dtype_name(ob.values.dtype()), " ", shape_str(vs));
    std::set<std::string> seen;
    for (const std::string& o : outs) {
      SG_REQUIRE(std::find(p.outputs.begin(), p.outputs.end(), o) != p.outputs.end(), where, ".outputs: '", o,
                 "' is not an output of the problem (", joined(p.outputs), ")");
      SG_REQUIRE(seen.insert(o).second, where, ".outputs: '", o, "' is given twice");
    }
    for (const HostArray* a : {&ob.points, &ob.values})
      for (int64_t e = 0; e < a->numel(); ++e)
        SG_REQUIRE(std::isfinite(a->data<float>()[e]), where, a == &ob.points ? ".points" : ".values", ": row ",
                   e / a->shape()[1], " holds ", a->data<float>()[e], " (observations must be finite)");
    SG_REQUIRE(std::isfinite(ob.weight) && ob.weight >= 0, where, ".weight: expected a finite number >= 0, got ",
               ob.weight);
  }
  for (const StepTerm& s : step_terms(p)) {
    if (s.observation < 0) continue;
    SG_REQUIRE(labels.insert(s.data.label).second, "problem.observations[", s.observation, "]: the term label '",
               s.data.label, "' is taken (give the observation another \"label\")");
    compile_term(p, s.data, cat("problem.observations[", s.observation, "]"), s.columns);
  }
  if (!p.exact.empty()) {
    std::vector<std::string> names = p.coords;
    for (const auto& c : p.constants) names.push_back(c.first);
    compile_expression(p.exact, names, "problem.exact");
  }
}

std::vector<std::string> term_labels(const Problem& p) {
  std::vector<std::string> out;
  for (const StepTerm& s : step_terms(p)) out.push_back(s.t().label);
  return out;
}

Observation exact_observations(const Problem& p, int64_t count, uint64_t seed) {
  SG_REQUIRE(count >= 1, "exact observations: the count must be positive, got ", count);
  SG_REQUIRE(p.outputs.size() == 1, "exact observations: the exact solution gives one output, the problem has ",
             p.outputs.size());
  const int64_t d = p.dim();
  HostArray points(DType::F32, {count, d});
  Rng rng(mix_seed(seed, "observations"));
  for (int64_t n = 0; n < count; ++n)
    for (int64_t i = 0; i < d; ++i)
      points.data<float>()[n * d + i] = static_cast<float>(rng.uniform(p.domain[i].first, p.domain[i].second));
  Observation ob;
  ob.values = exact_solution(p, points);
  ob.points = std::move(points);
  return ob;
}

StepBuilder make_step(const Problem& problem) {
  check_problem(problem);
  return [prob = problem](GraphBuilder& g, Layer& model) {
    Program& pr = g.program();
    const int64_t d = prob.dim();
    CustomStep cs;
    cs.input_dim = d;
    TensorId step = g.tensor(kStepTensor, {1}, Role::StepScalar, DType::I32);
    const std::vector<StepTerm> terms = step_terms(prob);
    struct Set {
      TensorId X = kNone;   // the points the network takes
      TensorId LX = kNone;  // the points the loss reads (an observation's: with its values)
      TensorId U = kNone, dU = kNone;
      CompiledTerm c;
      int64_t row0 = 0;  // the term's first row of U
    };
    std::vector<Set> sets(terms.size());
    std::vector<std::pair<TensorId, TensorId>> observed(prob.observations.size(), {kNone, kNone});
    // The observations' tables first: fixed, they are part of the step-invariant prefix (ir.h).
    for (size_t i = 0; i < prob.observations.size(); ++i) {
      const Observation& ob = prob.observations[i];
      const int64_t N = ob.points.shape()[0], w = d + ob.values.shape()[1];
      auto table = std::make_shared<std::vector<float>>(static_cast<size_t>(N * w));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < w; ++c)
          (*table)[n * w + c] = c < d ? ob.points.data<float>()[n * d + c] : ob.values.data<float>()[n * (w - d) + c - d];
      observed[i] = {g.tensor(cat("observed.", i), {N, d}, Role::Activation),
                     g.tensor(cat("observed.", i, ".values"), {N, w}, Role::Activation)};
      Op op;
      op.kind = OpKind::ObservedPoints;
      op.name = "observations " + observation_label(prob, i);
      op.out = {observed[i].first, observed[i].second};
      op.attrs = ObservedAttrs{table};
      pr.add_op(std::move(op));
    }
    for (size_t k = 0; k < terms.size(); ++k) {
      const Term& t = terms[k].t();
      Set& s = sets[k];
      s.c = compile_term(prob, t, term_where(terms[k], k), terms[k].columns);
      if (const int i = terms[k].observation; i >= 0) {  // one table per observation, read by each of its terms
        s.X = observed[i].first;
        s.LX = observed[i].second;
        continue;
      }
      s.X = s.LX = g.tensor(cat("points.", k), {t.points, d}, Role::Activation);
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
    std::vector<TensorId> coefficients;
    for (const auto& [name, init] : prob.coefficients)
      coefficients.push_back(g.parameter(&prob, name, "coefficient." + name, {1, 1}, Init::constant(init), 1, 1));
    // One network pass per jet term. Terms that need no derivatives (boundary and initial values,
    // observations) ride along in the first jet term's pass as its head rows: one chain of larger
    // kernels instead of a second chain of small ones. Without a jet term each set of points has
    // its own plain pass. (An observation of several outputs has a term per output, each with
    // its own rows: a loss op writes the whole of its rows of dU.)
    int host = -1;
    for (size_t k = 0; k < sets.size() && host < 0; ++k)
      if (sets[k].c.needs_jet) host = static_cast<int>(k);
    for (size_t k = 0; k < sets.size(); ++k) {
      Set& s = sets[k];
      if (host >= 0 && !s.c.needs_jet) continue;  // in the host's pass
      const Term& t = terms[k].t();
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
            head += terms[r].t().points;
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
      if (!coefficients.empty()) s.U = with_coefficients(g, prob, s.U, input, coefficients);
      s.dU = g.tensor("d.u." + std::to_string(k), pr.tensor(s.U).shape, Role::Temporary);
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
      const Term& t = terms[k].t();
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
      op.in = {sets[k].U, sets[k].LX};
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
    for (size_t k = 0; k < coefficients.size(); ++k) cs.coefficients.push_back({prob.coefficients[k].first, coefficients[k]});
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
