// stepgraph.pinn.Problem in the engine: its configuration text checked and made into a trainer,
// and what a physics-informed trainer reports beyond its loss (its coefficients, the error
// against the exact solution).
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>

#include "common.h"

namespace sgpy {

using namespace nb::literals;

namespace {

sg::pinn::Problem problem_of(const std::string& text) {
  return as_input_error([&] {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) throw sg::Error("problem: not valid JSON");
    return sg::pinn::parse_problem(j);
  });
}

}  // namespace

void new_problem_trainer(PyTrainer* self, sg::LayerPtr model, const std::string& problem_json, sg::OptimizerPtr opt,
                         sg::Device d, uint64_t seed, sg::TrainerOptions o) {
  auto problem = std::make_shared<const sg::pinn::Problem>(problem_of(problem_json));
  std::unique_ptr<sg::Trainer> t;
  {
    nb::gil_scoped_release r;
    t = std::make_unique<sg::Trainer>(std::move(model), sg::pinn::make_step(*problem), std::move(opt), d, seed, o);
    t->compile_custom();
  }
  new (self) PyTrainer(std::move(t));
  self->problem = std::move(problem);
}

void bind_problem(nb::module_& m) {
  m.def("_check_problem", [](const std::string& text) { problem_of(text); }, "problem_json"_a,
        "Checks a configuration's problem section (stepgraph.pinn.Problem does at construction).");
  m.def("_coefficients",
        [](PyTrainer& s) { return locked(s, [](sg::Trainer& t) { return t.coefficients(); }); }, "trainer"_a,
        "A physics-informed trainer's learned coefficients by name (Trainer.coefficients).");
  m.def("_relative_l2_error",
        [](PyTrainer& s) {
          if (!s.problem)
            throw InputError("relative_l2_error: this trainer has no physics-informed problem (make it from a "
                             "stepgraph.pinn.Problem or a configuration with a \"problem\")");
          const sg::pinn::Problem& p = *s.problem;
          if (p.exact.empty() && !p.exact_fn)
            throw InputError("relative_l2_error: the problem '" + p.name + "' has no exact solution");
          return locked(s, [&](sg::Trainer& t) { return sg::pinn::relative_l2_error(t, p); });
        },
        "trainer"_a, "||u - u*|| / ||u*|| over the problem's evaluation grid (Trainer.relative_l2_error).");
}

}  // namespace sgpy
