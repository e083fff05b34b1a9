// Fuzzes the PDE expression compiler (src/pinn/expression.h) over a fixed variable list, then
// runs what it compiled: the value, the gradient, the tape and the Laplacian folding. Beyond
// crashes and sanitizer reports it checks one property: eval and eval_grad compute the value
// by the same per-op functions, so they must agree bit for bit (or both be NaN).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pinn/expression.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> kVars = {"x", "y", "t", "u", "u_x", "u_xx", "u_t", "nu"};
  // A point away from the special values (0, 1) so that most programs evaluate to finite numbers.
  static const double kPoint[8] = {0.3, -0.7, 1.25, 0.4, -1.5, 2.5, 0.125, 0.01};
  const std::string text(reinterpret_cast<const char*>(data), size);
  sg::pinn::Expression e;
  try {
    e = sg::pinn::compile_expression(text, kVars, "fuzz");
  } catch (const sg::Error&) {
    return 0;
  }
  const double value = e.eval(kPoint);
  double grad[8];
  const double value_g = e.eval_grad(kPoint, grad);
  if (!(std::isnan(value) && std::isnan(value_g)) && std::memcmp(&value, &value_g, sizeof value) != 0) {
    std::fprintf(stderr, "eval %.17g != eval_grad %.17g for '%s'\n", value, value_g, text.c_str());
    std::abort();
  }
  (void)e.uses();
  // u_x, u_xx and u_t in one class: sums of them fold (as problem.cpp folds u_xx + u_yy).
  const std::vector<int> cls = {-1, -1, -1, -1, 0, 0, 0, -1};
  std::vector<std::vector<int>> sums;
  const sg::pinn::Expression folded = sg::pinn::fold_sums(e, cls, &sums);
  std::vector<double> point(kPoint, kPoint + 8);
  for (const std::vector<int>& s : sums) {
    double v = 0;
    for (int i : s) v += kPoint[i];
    point.push_back(v);
  }
  if (folded.variables.size() != point.size()) std::abort();
  (void)folded.eval(point.data());
  return 0;
}
