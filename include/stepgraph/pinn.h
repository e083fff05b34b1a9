// Physics-informed problems: a PDE residual and boundary/initial conditions written as
// expressions over coordinates and the network output's jet components, point sets drawn in
// the step, and the relative L2 error against a known solution.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepgraph/core.h"
#include "stepgraph/step.h"

namespace sg {
class Trainer;  // trainer.h
}

namespace sg::pinn {

// A loss term on a point set: the interior (the PDE residual) or a face of the domain box.
struct Term {
  std::string label;     // "residual", "x=0", "boundary", ...
  std::string residual;  // expression that should vanish on these points
  double weight = 1.0;
  int64_t points = 1024;
  int32_t face_dim = -1;  // -1 interior, -2 every face of the box, else a coordinate
  double face_value = 0;  // the face's coordinate value (face_dim >= 0)
};

// Measurements of the solution (an inverse problem's data): one loss term per observed output,
// weight * mean over the points of (output - value)^2, the points fed to the network as given.
struct Observation {
  std::string label;                 // its terms' label; empty: "data" (or "data2", ... for the
                                     // second and later); several outputs: "<label> <output>"
  HostArray points;                  // f32 [N, dim], any coordinates (inside the domain or not)
  HostArray values;                  // f32 [N, k]: column j observes output outputs[j]
  std::vector<std::string> outputs;  // empty: the problem's outputs, in order
  double weight = 1.0;
};

struct Problem {
  std::string name;
  std::vector<std::string> coords;                 // e.g. {"x", "y"} or {"t", "x"}
  std::vector<std::pair<double, double>> domain;   // per coordinate
  std::vector<std::string> outputs = {"u"};
  std::vector<std::pair<std::string, double>> constants;
  std::vector<Term> terms;                         // terms[0] is the PDE residual
  std::vector<Observation> observations;           // data terms, after `terms`
  // Trainable PDE coefficients (inverse problems): names the residuals and conditions read like
  // constants, learned with the network from these initial values (parameters
  // "coefficient.<name>", in checkpoints). One may share its name with a constant: the
  // expressions then read the coefficient, and the exact solution (the truth the observations
  // may come from) keeps the constant's value.
  std::vector<std::pair<std::string, double>> coefficients;
  std::string exact;                               // expression for the solution (may be empty)
  std::function<double(const double*)> exact_fn;   // or a function (Burgers: Cole-Hopf)
  int64_t resample_every = 0;                      // 0: fixed points
  uint64_t seed = 0;
  int64_t eval_points = 16384;                     // evaluation grid size (about)

  int64_t dim() const { return static_cast<int64_t>(coords.size()); }
};

// poisson2d: -(u_xx + u_yy) = 2 pi^2 sin(pi x) sin(pi y) on the unit square, u = 0 on its
//            boundary; u = sin(pi x) sin(pi y).
// heat1d:    u_t = alpha u_xx on t in [0, 1], x in [0, 1], alpha = 0.1, u(0, x) = sin(pi x),
//            u(t, 0) = u(t, 1) = 0; u = exp(-alpha pi^2 t) sin(pi x).
// burgers1d: u_t + u u_x = nu u_xx, nu = 0.01 / pi, x in [-1, 1], t in [0, 1],
//            u(0, x) = -sin(pi x), u(t, +-1) = 0; reference by the Cole-Hopf formula.
Problem builtin_problem(const std::string& name);

// Checks what make_step relies on: distinct names, observations' shapes and outputs, finite
// values; errors name the problem's field.
void check_problem(const Problem& p);

// Every loss term's label, in the step's order: the problem's terms, then the observations'.
std::vector<std::string> term_labels(const Problem& p);

// `count` noise-free observations of every output of the exact solution at points drawn
// uniformly in the domain (seeded): a known solution's data for an inverse problem.
Observation exact_observations(const Problem& p, int64_t count, uint64_t seed);

// From the config's "problem" section: {"type": "poisson2d" | "heat1d" | "burgers1d"} (with
// optional overrides), or a custom problem:
//   {"coordinates": ["x", "y"], "domain": [[0, 1], [0, 1]], "outputs": ["u"],
//    "constants": {"k": 2}, "residual": "...", "conditions": [{"on": "x=0" | "boundary",
//    "residual": "u - 0", "weight": 1, "points": 256}], "exact": "...",
//    "interior_points": 8192, "residual_weight": 1, "resample_every": 0, "seed": 0}
// and, with either, "coefficients": {"nu": 0.05} and "observations": [{"points": [[t, x], ...],
// "values": [[u], ...] | [u, ...], "outputs": ["u"], "weight": 1, "label": "data"}, or
// {"file": "obs.npz", "points": "X", "values": "u"} (npz members, default "points" and
// "values"; a relative path resolves against base_dir, the config file's folder), or {"sample_exact": 2000, "seed": 0} (exact_observations)].
// Errors name the JSON path; expression errors point at the character.
Problem parse_problem(const nlohmann::json& j, const std::string& base_dir = "");

// The step: point sets drawn in the step, the model on each (as jets where derivatives are
// used), one expression loss per term.
StepBuilder make_step(const Problem& p);

// Points of the evaluation grid (about eval_points, regular in every coordinate).
HostArray evaluation_grid(const Problem& p);
// The known solution at `points` (f32 [M, d]), one column per output.
HostArray exact_solution(const Problem& p, const HostArray& points);
// ||u - u*|| / ||u*|| over the evaluation grid.
double relative_l2_error(Trainer& t, const Problem& p);

}  // namespace sg::pinn
