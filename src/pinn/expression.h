// Expressions for physics-informed losses, written in a config: the PDE residual, boundary and
// initial conditions and exact solutions, over named variables (coordinates such as x, y, t; the
// network output's jet components such as u, u_x, u_xx, u_t; constants such as nu, pi).
//
//   "u_t + u*u_x - nu*u_xx"      "-(u_xx + u_yy) - 2*pi^2*sin(pi*x)*sin(pi*y)"
//
// Grammar: numbers (1, 2.5, 1e-3), names [A-Za-z_][A-Za-z0-9_]*, + - * / ^ (power, right
// associative, binds tighter than unary minus: -x^2 = -(x^2)), unary + and -, parentheses, and
// the functions sin cos exp log tanh sqrt abs. Parsed once into a flat program (bytecode) that
// is evaluated per point with no allocation; the same program runs in CUDA kernels later, so it
// is a plain array of POD instructions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepgraph/core.h"

namespace sg::pinn {

enum class ExprOp : uint8_t {
  Const,  // push constant `value`
  Var,    // push variable `index`
  Add, Sub, Mul, Div, Pow, Neg,
  Sin, Cos, Exp, Log, Tanh, Sqrt, Abs,
};

struct ExprInstr {
  ExprOp op;
  int32_t index = 0;   // Var: index into the variable list
  double value = 0.0;  // Const
};

// A compiled expression: postfix instructions over a fixed list of variable names.
struct Expression {
  std::string text;
  std::vector<std::string> variables;  // the names the program may read, in index order
  std::vector<ExprInstr> code;
  int max_stack = 0;

  // Value at one point; vars[i] is variables[i].
  double eval(const double* vars) const;
  // Value and d value / d vars[i] for every variable (reverse mode over the instructions);
  // grad must have variables.size() entries.
  double eval_grad(const double* vars, double* grad) const;
  // Which variables the expression actually uses.
  std::vector<bool> uses() const;
};

// Compiles `text` over `variables`. Errors (unknown name, unknown function, unbalanced
// parentheses, a missing operand, trailing input) throw sg::Error with the message, the text,
// and a caret under the offending character, e.g.
//   problem.residual: unknown name 'uxx' at column 9 (known: x, y, u, u_x, u_xx, ...)
//     -(u_xx + uxx)
//              ^
// `where` names the config field (e.g. "problem.residual").
Expression compile_expression(const std::string& text, const std::vector<std::string>& variables,
                              const std::string& where);

}  // namespace sg::pinn
