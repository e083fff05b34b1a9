// Expressions for physics-informed losses, written in a config: the PDE residual, boundary and
// initial conditions and exact solutions, over named variables (coordinates such as x, y, t; the
// network output's jet components such as u, u_x, u_xx, u_t; constants such as nu, pi).
//
//   "u_t + u*u_x - nu*u_xx"      "-(u_xx + u_yy) - 2*pi^2*sin(pi*x)*sin(pi*y)"
//
// Grammar: numbers (1, .5, 2.5, 1e-3, 1E3), names [A-Za-z_][A-Za-z0-9_]*, + - * / ^ (power,
// right associative, binds tighter than unary minus: -x^2 = -(x^2), 2^3^2 = 2^9; the exponent
// may carry a sign: 2^-1), unary + and -, parentheses, and the functions sin cos exp log tanh
// sqrt abs (exactly one argument, in parentheses). Whitespace is allowed anywhere between
// tokens. Names are the declared variables (exact match); `pi` is 3.141592653589793 unless a
// variable is named pi (the variable wins); `e` is not special. Parsed once into a flat program
// (bytecode) that is evaluated per point with no allocation; the same program runs in CUDA
// kernels later, so it is a plain array of POD instructions. Constant subexpressions are folded
// at compile time (2*pi^2 is one Const).
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

// An instruction with its operands resolved to instruction indices (postfix order: operands
// come first and each value has exactly one consumer) and whether it depends on a variable.
// The tape is what the per-point evaluators run, on the CPU and in CUDA kernels
// (src/pinn/expr_tape.h): plain data, no stack to track.
struct TapeInstr {
  ExprOp op;
  bool varying = false;
  int16_t lhs = -1, rhs = -1;
  int32_t index = 0;
  double value = 0.0;
};

// A compiled expression: postfix instructions over a fixed list of variable names. A compiled
// program has at most 256 instructions and needs a stack of at most 64 values (max_stack);
// eval and eval_grad keep their per-point state in fixed-size local arrays of those sizes and
// throw sg::Error on a program that breaks them (one not made by compile_expression).
struct Expression {
  std::string text;
  std::vector<std::string> variables;  // the names the program may read, in index order
  std::vector<ExprInstr> code;
  int max_stack = 0;

  // Value at one point; vars[i] is variables[i].
  double eval(const double* vars) const;
  // Value and d value / d vars[i] for every variable (reverse mode over the instructions);
  // grad must have variables.size() entries and is overwritten (unused variables get 0; a
  // variable used several times gets the sum). a^b: d/da = b a^(b-1) (0 when b == 0),
  // d/db = a^b log(a), skipped when b depends on no variable (x^2 at x <= 0 has no NaN) and 0
  // at a == 0 < b. Where the function is undefined (log, sqrt below 0) the derivative is NaN
  // like the value; abs'(0) = 0.
  double eval_grad(const double* vars, double* grad) const;
  // Which variables the expression actually uses.
  std::vector<bool> uses() const;
  // The program as a tape (at most 256 instructions); throws sg::Error on a malformed program.
  std::vector<TapeInstr> tape() const;
};

// Reads two or more distinct variables of one class that a sum adds with the same sign and the
// same coefficient as one new variable: cls[v] >= 0 puts variable v in class cls[v] (-1: in
// none). A sum is a tree of +, - and unary - read as signed terms (any order and grouping, other
// terms in between); a term is v, a * v, v * a or v / a with a any subexpression (the same
// program for every term of the group; a leading unary minus counts as the sign). So
// u_xx + u_yy, nu*u_xx + nu*u_yy + u_t and -u_yy/re - u_xx/re each fold, u_xx - u_yy and
// a*u_xx + b*u_yy do not. The sum is rebuilt with the group as one term at its first member's
// place (coefficient times the new variable); sums without such a group keep their shape. The
// new variables come after e.variables, one per distinct set of summed variables, named by
// joining the names with '+' (no parsed name contains '+'); (*sums)[k] lists the variables new
// variable k adds up, in index order. Returns e unchanged (and *sums empty) when nothing folds.
// This is how the PDE terms read a Laplacian as one jet component (src/pinn/problem.cpp).
// Number of operands an instruction pops; -1 for an op code outside the enum.
int arity(ExprOp op);

Expression fold_sums(const Expression& e, const std::vector<int>& cls, std::vector<std::vector<int>>* sums);

// Compiles `text` over `variables` (names must be distinct). Errors (unknown name, unknown
// function, a variable or pi called as a function, a function without parentheses, a missing
// operand, unbalanced parentheses, an unexpected character, trailing input, an empty or
// malformed number or expression) throw sg::Error as
//   "<where>: <message> at column <c>[ (<detail>)]\n  <text>\n  <caret under column c>"
// where columns are 1-based and count characters (UTF-8 aware; line breaks in the text are
// shown as spaces, tabs are kept in the caret line so it lines up), e.g.
//   problem.residual: unknown name 'uxx' at column 10 (known: x, y, u, u_x, u_xx, pi)
//     -(u_xx + uxx)
//              ^
// An unbalanced '(' points at the '(' never closed, an extra ')' at itself; a missing operand
// ("expected a number, name, '(' or function") at where it should start, possibly just past the
// end. Programs over the size limits are rejected with the text but no caret.
// `where` names the config field (e.g. "problem.residual"); empty leaves out the "<where>: ".
Expression compile_expression(const std::string& text, const std::vector<std::string>& variables,
                              const std::string& where);

}  // namespace sg::pinn
