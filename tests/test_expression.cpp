// The PINN expression compiler and evaluator: values against hand-computed numbers, precedence,
// and gradients against central finite differences (the compile errors: test_expression_errors.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "expression_test_util.h"
#include "pinn/expression.h"

namespace sg::pinn {
namespace {

using test::compile_error;
using test::value;
using test::with_caret;

const std::vector<std::string> kXY = {"x", "y"};

double value_xy(const std::string& text, double x, double y) { return value(text, kXY, {x, y}); }

std::vector<double> gradient(const Expression& e, const std::vector<double>& at, double* v = nullptr) {
  // Poisoned, so an entry eval_grad forgets to write shows up.
  std::vector<double> g(e.variables.size(), std::numeric_limits<double>::quiet_NaN());
  const double val = e.eval_grad(at.data(), g.data());
  if (v != nullptr) *v = val;
  return g;
}

// ---------------------------------------------------------------------------------------------
// Values

TEST(Expression, BinaryOperators) {
  EXPECT_DOUBLE_EQ(value_xy("x + y", 3, 5), 8);
  EXPECT_DOUBLE_EQ(value_xy("x - y", 3, 5), -2);
  EXPECT_DOUBLE_EQ(value_xy("x * y", 3, 5), 15);
  EXPECT_DOUBLE_EQ(value_xy("x / y", 3, 5), 0.6);
  EXPECT_DOUBLE_EQ(value_xy("x ^ y", 3, 5), 243);
  EXPECT_DOUBLE_EQ(value_xy("x ^ y", 4, 0.5), 2);
  EXPECT_DOUBLE_EQ(value_xy("x ^ y", -2, 3), -8);
  EXPECT_DOUBLE_EQ(value_xy("-x", 3, 5), -3);
  EXPECT_DOUBLE_EQ(value_xy("+x", 3, 5), 3);
  EXPECT_TRUE(std::isinf(value_xy("x / y", 1, 0)));
}

TEST(Expression, Functions) {
  EXPECT_NEAR(value_xy("sin(x)", 0.5, 0), 0.479425538604203, 1e-15);
  EXPECT_NEAR(value_xy("cos(x)", 0.5, 0), 0.8775825618903728, 1e-15);
  EXPECT_NEAR(value_xy("exp(x)", 0.5, 0), 1.6487212707001282, 1e-15);
  EXPECT_NEAR(value_xy("log(x)", 0.5, 0), -0.6931471805599453, 1e-15);
  EXPECT_NEAR(value_xy("tanh(x)", 0.5, 0), 0.46211715726000974, 1e-15);
  EXPECT_NEAR(value_xy("sqrt(x)", 0.5, 0), 0.7071067811865476, 1e-15);
  EXPECT_DOUBLE_EQ(value_xy("abs(x)", -2.5, 0), 2.5);
  EXPECT_DOUBLE_EQ(value_xy("abs(x)", 2.5, 0), 2.5);
  EXPECT_DOUBLE_EQ(value_xy("sqrt(x)", 16, 0), 4);
  // Invalid arguments give NaN, as IEEE does.
  EXPECT_TRUE(std::isnan(value_xy("log(x)", -1, 0)));
  EXPECT_TRUE(std::isnan(value_xy("sqrt(x)", -1, 0)));
  EXPECT_TRUE(std::isinf(value_xy("log(x)", 0, 0)));
}

TEST(Expression, Precedence) {
  EXPECT_DOUBLE_EQ(value_xy("-x^2", 3, 0), -9);  // -(x^2)
  EXPECT_DOUBLE_EQ(value_xy("-2^2", 0, 0), -4);
  EXPECT_DOUBLE_EQ(value_xy("(-2)^2", 0, 0), 4);
  EXPECT_DOUBLE_EQ(value_xy("2^3^2", 0, 0), 512);  // right associative
  EXPECT_DOUBLE_EQ(value_xy("(2^3)^2", 0, 0), 64);
  EXPECT_DOUBLE_EQ(value(" a - b - c", {"a", "b", "c"}, {10, 3, 2}), 5);
  EXPECT_DOUBLE_EQ(value("a/b/c", {"a", "b", "c"}, {12, 3, 2}), 2);
  EXPECT_DOUBLE_EQ(value("a-b+c", {"a", "b", "c"}, {10, 3, 2}), 9);
  EXPECT_DOUBLE_EQ(value("a/b*c", {"a", "b", "c"}, {12, 3, 2}), 8);
  EXPECT_DOUBLE_EQ(value_xy("2*-3", 0, 0), -6);
  EXPECT_DOUBLE_EQ(value_xy("2*-x", 3, 0), -6);
  EXPECT_DOUBLE_EQ(value_xy("--x", 3, 0), 3);
  EXPECT_DOUBLE_EQ(value_xy("-+-x", 3, 0), 3);
  EXPECT_DOUBLE_EQ(value_xy("- - -x", 3, 0), -3);
  EXPECT_DOUBLE_EQ(value_xy("1 - -1", 0, 0), 2);
  EXPECT_DOUBLE_EQ(value_xy("x - -y", 3, 4), 7);
  EXPECT_DOUBLE_EQ(value_xy("2^-1", 0, 0), 0.5);
  EXPECT_DOUBLE_EQ(value_xy("2^-x", 2, 0), 0.25);
  EXPECT_DOUBLE_EQ(value_xy("2^-x^2", 2, 0), 1.0 / 16);  // 2^(-(x^2))
  EXPECT_DOUBLE_EQ(value_xy("2^--2", 0, 0), 4);
  EXPECT_DOUBLE_EQ(value_xy("x^-y*3", 2, 1), 1.5);  // (x^(-y))*3
  EXPECT_DOUBLE_EQ(value_xy("1+2*3", 0, 0), 7);
  EXPECT_DOUBLE_EQ(value_xy("(1+2)*3", 0, 0), 9);
  EXPECT_DOUBLE_EQ(value_xy("2*3^2", 0, 0), 18);
  EXPECT_DOUBLE_EQ(value_xy("2^3*2", 0, 0), 16);
  EXPECT_DOUBLE_EQ(value_xy("6/2*3", 0, 0), 9);
  EXPECT_DOUBLE_EQ(value_xy("-x*y", 3, 4), -12);
  EXPECT_DOUBLE_EQ(value_xy("x*y^2+1", 3, 4), 49);
  EXPECT_DOUBLE_EQ(value_xy("((((x))))", 3, 4), 3);
  EXPECT_DOUBLE_EQ(value_xy("-(x + y) * 2", 3, 4), -14);
  EXPECT_DOUBLE_EQ(value_xy("-sin(x)^2", 0.5, 0), -0.479425538604203 * 0.479425538604203);
}

TEST(Expression, NestedFunctions) {
  EXPECT_DOUBLE_EQ(value_xy("sqrt(abs(-16))", 0, 0), 4);
  EXPECT_NEAR(value_xy("sin(cos(0))", 0, 0), 0.8414709848078965, 1e-15);
  EXPECT_NEAR(value_xy("exp(log(x))", 2.75, 0), 2.75, 1e-15);
  EXPECT_NEAR(value_xy("tanh(exp(sin(x)))", 0.5, 0), 0.9239169232629801, 1e-15);
  EXPECT_NEAR(value("exp(-t)*sin(pi*x)", {"x", "t"}, {0.25, 0.3}), 0.523837587470595, 1e-15);
  EXPECT_DOUBLE_EQ(value_xy("abs(x - abs(y))", 1, -4), 3);
}

TEST(Expression, Numbers) {
  EXPECT_DOUBLE_EQ(value_xy("1", 0, 0), 1);
  EXPECT_DOUBLE_EQ(value_xy(".5", 0, 0), 0.5);
  EXPECT_DOUBLE_EQ(value_xy("2.5e-3", 0, 0), 0.0025);
  EXPECT_DOUBLE_EQ(value_xy("1E3", 0, 0), 1000);
  EXPECT_DOUBLE_EQ(value_xy("1e+2", 0, 0), 100);
  EXPECT_DOUBLE_EQ(value_xy("3.", 0, 0), 3);
  EXPECT_DOUBLE_EQ(value_xy("007", 0, 0), 7);
  EXPECT_DOUBLE_EQ(value_xy("0.125", 0, 0), 0.125);
  EXPECT_DOUBLE_EQ(value_xy(".5e1", 0, 0), 5);
  EXPECT_EQ(value_xy("1e-400", 0, 0), 0.0);  // underflow rounds to zero
  EXPECT_DOUBLE_EQ(value_xy("x*2.5e-3", 4, 0), 0.01);
}

TEST(Expression, WhitespaceAnywhere) {
  EXPECT_DOUBLE_EQ(value_xy(" \t2 *\n x  ", 4, 0), 8);
  EXPECT_DOUBLE_EQ(value_xy("sin (\tx ) ^ 2 + cos( x )^ 2", 0.7, 0), 1);
  EXPECT_DOUBLE_EQ(value_xy("- x", 4, 0), -4);
}

TEST(Expression, Pi) {
  // Not declared: the constant, folded into the program.
  Expression c = compile_expression("pi", {"x"}, "f");
  const double x = 7;
  EXPECT_EQ(c.eval(&x), 3.141592653589793);
  EXPECT_EQ(c.uses(), std::vector<bool>({false}));
  EXPECT_NEAR(value("2*pi^2", {"x"}, {0}), 19.739208802178716, 1e-14);

  // Declared: the variable wins.
  Expression v = compile_expression("pi*x", {"pi", "x"}, "f");
  const std::vector<double> at = {2, 3};
  EXPECT_DOUBLE_EQ(v.eval(at.data()), 6);
  double val = 0;
  std::vector<double> g = gradient(v, at, &val);
  EXPECT_DOUBLE_EQ(val, 6);
  EXPECT_DOUBLE_EQ(g[0], 3);
  EXPECT_DOUBLE_EQ(g[1], 2);
  EXPECT_EQ(v.uses(), std::vector<bool>({true, true}));
}

TEST(Expression, EIsNotSpecial) {
  EXPECT_EQ(compile_error("2*e", {"x"}),
            with_caret("residual: unknown name 'e' at column 3 (known: x, pi)", "2*e", 3));
  EXPECT_DOUBLE_EQ(value("2*e", {"e"}, {1.5}), 3);
  EXPECT_DOUBLE_EQ(value("exp(1)", {}, {}), std::exp(1.0));
}

TEST(Expression, ConstantsFold) {
  EXPECT_EQ(compile_expression("2*pi^2", {"x"}, "f").code.size(), 1u);
  EXPECT_EQ(compile_expression("2^-1", {"x"}, "f").code.size(), 1u);
  EXPECT_EQ(compile_expression("-(1 + sqrt(4))", {"x"}, "f").code.size(), 1u);
  const Expression e = compile_expression("x * (1 + 2)", {"x"}, "f");
  ASSERT_EQ(e.code.size(), 3u);
  EXPECT_EQ(e.code[0].op, ExprOp::Var);
  EXPECT_EQ(e.code[1].op, ExprOp::Const);
  EXPECT_EQ(e.code[1].value, 3);
  EXPECT_EQ(e.code[2].op, ExprOp::Mul);
}

TEST(Expression, PostfixCodeAndStack) {
  const Expression e = compile_expression("x + y * x", kXY, "f");
  ASSERT_EQ(e.code.size(), 5u);
  EXPECT_EQ(e.code[0].op, ExprOp::Var);
  EXPECT_EQ(e.code[0].index, 0);
  EXPECT_EQ(e.code[1].op, ExprOp::Var);
  EXPECT_EQ(e.code[1].index, 1);
  EXPECT_EQ(e.code[2].op, ExprOp::Var);
  EXPECT_EQ(e.code[2].index, 0);
  EXPECT_EQ(e.code[3].op, ExprOp::Mul);
  EXPECT_EQ(e.code[4].op, ExprOp::Add);
  EXPECT_EQ(e.max_stack, 3);
  EXPECT_EQ(compile_expression("x * y + x", kXY, "f").max_stack, 2);
  EXPECT_EQ(compile_expression("x", kXY, "f").max_stack, 1);
  EXPECT_EQ(compile_expression("sin(x)", kXY, "f").max_stack, 1);
  EXPECT_EQ(e.text, "x + y * x");
  EXPECT_EQ(e.variables, kXY);
}

TEST(Expression, Uses) {
  const std::vector<std::string> vars = {"x", "y", "z", "t"};
  EXPECT_EQ(compile_expression("x*x + sin(z)", vars, "f").uses(),
            std::vector<bool>({true, false, true, false}));
  EXPECT_EQ(compile_expression("pi + 1", vars, "f").uses(), std::vector<bool>(4, false));
  EXPECT_EQ(compile_expression("t", vars, "f").uses(), std::vector<bool>({false, false, false, true}));
}

TEST(Expression, FoldSumsReadsASumOfOneClassAsOneVariable) {
  // Classes: u_xx, u_yy, u_zz of output 0; v_xx, v_yy of output 1; x and u in none.
  const std::vector<std::string> vars = {"x", "u", "u_xx", "u_yy", "u_zz", "v_xx", "v_yy"};
  const std::vector<int> cls = {-1, -1, 0, 0, 0, 1, 1};
  const double at[] = {0.3, 1.7, -2.0, 5.0, 0.25, 7.0, -3.0};
  struct Case {
    const char* text;
    std::vector<std::vector<int>> sums;
  };
  for (const Case& c : {Case{"-(u_xx + u_yy) - 2*pi^2*sin(x)", {{2, 3}}},
                        Case{"u_yy + u_xx + u_zz", {{2, 3, 4}}},        // any order and grouping
                        Case{"u_zz + (u_yy + u_xx)", {{2, 3, 4}}},
                        Case{"(u_xx + u_yy)*u + sin(u_yy + u_xx) + (v_xx + v_yy)", {{2, 3}, {5, 6}}},
                        Case{"u_xx + (x + u_yy)", {{2, 3}}},             // other terms in between
                        Case{"x - u_xx - u_yy", {{2, 3}}},               // the same sign
                        Case{"-(x*u_xx) - (u_yy*x + u)", {{2, 3}}},      // the same coefficient
                        Case{"u*x - u_zz/x + (-(u_xx/x) - u_yy/x)", {{2, 3, 4}}},
                        Case{"(-x)*u_xx - x*u_yy", {{2, 3}}},            // a negated coefficient
                        Case{"(-x)*u_xx + u_yy + u_zz", {{3, 4}}},       // one, left as written
                        Case{"u_yy + u_zz - (-x)*u_xx/x", {{3, 4}}},
                        Case{"2.5*u_xx + 2.5*u_yy + sin(v_xx + v_yy)", {{2, 3}, {5, 6}}},
                        Case{"x*u_xx + u*u_yy", {}},                     // different coefficients
                        Case{"x*u_xx + u_yy/x", {}},
                        Case{"u_xx + u_xx", {}},                         // 2 u_xx, not a Laplacian
                        Case{"x*u_xx + x*u_xx + x*u_yy", {}},
                        Case{"u_xx + v_yy", {}},                         // two outputs
                        Case{"u_xx - u_yy", {}},
                        Case{"u_xx*u_yy", {}}}) {
    SCOPED_TRACE(c.text);
    const Expression e = compile_expression(c.text, vars, "f");
    std::vector<std::vector<int>> sums;
    const Expression f = fold_sums(e, cls, &sums);
    EXPECT_EQ(sums, c.sums);
    ASSERT_EQ(f.variables.size(), vars.size() + sums.size());
    std::vector<double> ext(at, at + vars.size());
    for (const auto& s : sums) {
      double sum = 0;
      for (int v : s) sum += at[v];
      ext.push_back(sum);
    }
    // The same value (up to rounding: a folded sum is added in another order).
    EXPECT_NEAR(f.eval(ext.data()), e.eval(at), 1e-12 * (1.0 + std::fabs(e.eval(at))));
    // The summed variables are no longer read; the new ones are.
    const std::vector<bool> used = f.uses();
    for (size_t k = 0; k < sums.size(); ++k) {
      EXPECT_TRUE(used[vars.size() + k]);
      for (int v : sums[k]) EXPECT_FALSE(used[static_cast<size_t>(v)]) << vars[static_cast<size_t>(v)];
    }
  }
  std::vector<std::vector<int>> sums;
  EXPECT_EQ(fold_sums(compile_expression("u_yy + u_xx", vars, "f"), cls, &sums).variables.back(), "u_xx+u_yy");
}

// Random sums, products, quotients and negations of one class's variables, other variables and
// constants: the folded expression has the same value (up to rounding) wherever it folds.
TEST(Expression, FoldSumsKeepsTheValueOfRandomExpressions) {
  const std::vector<std::string> vars = {"x", "u", "u_xx", "u_yy", "u_zz", "v_xx", "v_yy"};
  const std::vector<int> cls = {-1, -1, 0, 0, 0, 1, 1};
  const double at[] = {0.3, 1.7, -2.0, 5.0, 0.25, 7.0, -3.0};
  std::mt19937 rng(5);
  std::function<std::string(int)> gen = [&](int depth) -> std::string {
    const int pick = static_cast<int>(rng() % (depth > 0 ? 9 : 3));
    const char* leaves[] = {"x", "u", "u_xx", "u_yy", "u_zz", "v_xx", "v_yy", "2", "0.5"};
    switch (pick) {
      case 0: case 1: case 2: return leaves[rng() % 9];
      case 3: return "(" + gen(depth - 1) + " + " + gen(depth - 1) + ")";
      case 4: return "(" + gen(depth - 1) + " - " + gen(depth - 1) + ")";
      case 5: return "(" + gen(depth - 1) + ")*" + leaves[rng() % 9];
      case 6: return std::string(leaves[rng() % 2]) + "*" + gen(depth - 1);
      case 7: return "(" + gen(depth - 1) + ")/x";
      default: return "-(" + gen(depth - 1) + ")";
    }
  };
  int folded = 0;
  for (int n = 0; n < 3000; ++n) {
    const std::string text = gen(4);
    SCOPED_TRACE(text);
    const Expression e = compile_expression(text, vars, "f");
    std::vector<std::vector<int>> sums;
    const Expression f = fold_sums(e, cls, &sums);
    std::vector<double> ext(at, at + vars.size());
    for (const auto& sum : sums) {
      double v = 0;
      for (int k : sum) v += at[k];
      ext.push_back(v);
    }
    folded += !sums.empty();
    const double want = e.eval(at);
    ASSERT_NEAR(f.eval(ext.data()), want, 1e-9 * (1.0 + std::fabs(want)));
  }
  EXPECT_GT(folded, 40);  // the generator does reach the folds (64 of 3000)
}

// ---------------------------------------------------------------------------------------------
// Gradients

TEST(ExpressionGrad, EachOperator) {
  const std::vector<double> at = {0.7, -1.3};
  const double x = at[0], y = at[1];
  struct Case {
    const char* text;
    double dx, dy;
  };
  const Case cases[] = {
      {"x + y", 1, 1},
      {"x - y", 1, -1},
      {"x * y", y, x},
      {"x / y", 1 / y, -x / (y * y)},
      {"-x", -1, 0},
      {"+y", 0, 1},
      {"sin(x)", std::cos(x), 0},
      {"cos(x)", -std::sin(x), 0},
      {"exp(y)", 0, std::exp(y)},
      {"log(x)", 1 / x, 0},
      {"tanh(y)", 0, 1 - std::tanh(y) * std::tanh(y)},
      {"sqrt(x)", 0.5 / std::sqrt(x), 0},
      {"abs(y)", 0, -1},
      {"abs(x)", 1, 0},
      {"x^3", 3 * x * x, 0},
      {"y^2", 0, 2 * y},
      {"y^3", 0, 3 * y * y},
      {"x^y", y * std::pow(x, y - 1), std::pow(x, y) * std::log(x)},
      {"2^y", 0, std::pow(2, y) * std::log(2.0)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const Expression e = compile_expression(c.text, kXY, "f");
    double v = 0;
    const std::vector<double> g = gradient(e, at, &v);
    EXPECT_DOUBLE_EQ(v, e.eval(at.data()));
    EXPECT_NEAR(g[0], c.dx, 1e-14 * std::max(1.0, std::abs(c.dx)));
    EXPECT_NEAR(g[1], c.dy, 1e-14 * std::max(1.0, std::abs(c.dy)));
  }
}

TEST(ExpressionGrad, VariableUsedSeveralTimesAccumulates) {
  const Expression e = compile_expression("x*x*x + 2*x - y", kXY, "f");
  double v = 0;
  std::vector<double> g = gradient(e, {1.5, 4}, &v);
  EXPECT_DOUBLE_EQ(v, 3.375 + 3 - 4);
  EXPECT_DOUBLE_EQ(g[0], 3 * 2.25 + 2);
  EXPECT_DOUBLE_EQ(g[1], -1);

  g = gradient(compile_expression("x + x - x + x", kXY, "f"), {1.5, 4});
  EXPECT_DOUBLE_EQ(g[0], 2);
  EXPECT_EQ(g[1], 0);  // unused: written as zero, not left alone

  g = gradient(compile_expression("sin(x)*x", kXY, "f"), {0.5, 0});
  EXPECT_NEAR(g[0], std::cos(0.5) * 0.5 + std::sin(0.5), 1e-15);
}

TEST(ExpressionGrad, GradIsOverwrittenNotAddedTo) {
  const Expression e = compile_expression("x*y", kXY, "f");
  const std::vector<double> at = {2, 3};
  std::vector<double> g = {100, 100};
  e.eval_grad(at.data(), g.data());
  EXPECT_EQ(g, std::vector<double>({3, 2}));
}

TEST(ExpressionGrad, PowerEdgeCases) {
  // A constant exponent over a base <= 0: no NaN from the d/d exponent term.
  std::vector<double> g = gradient(compile_expression("x^2", kXY, "f"), {0, 0});
  EXPECT_EQ(g[0], 0);
  double v = 0;
  g = gradient(compile_expression("x^3", kXY, "f"), {-2, 0}, &v);
  EXPECT_EQ(v, -8);
  EXPECT_EQ(g[0], 12);
  g = gradient(compile_expression("x^-2", kXY, "f"), {-1, 0}, &v);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(g[0], 2);
  g = gradient(compile_expression("x^0", kXY, "f"), {0, 0}, &v);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(g[0], 0);
  g = gradient(compile_expression("x^0.5", kXY, "f"), {0, 0});
  EXPECT_TRUE(std::isinf(g[0]));  // sqrt's slope at 0

  // Both vary: at a = 0 with b > 0, a^b is 0 for every nearby b.
  g = gradient(compile_expression("x^y", kXY, "f"), {0, 2}, &v);
  EXPECT_EQ(v, 0);
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[1], 0);
  // A negative base with a varying exponent has no real derivative in the exponent.
  g = gradient(compile_expression("x^y", kXY, "f"), {-2, 3}, &v);
  EXPECT_EQ(v, -8);
  EXPECT_EQ(g[0], 12);
  EXPECT_TRUE(std::isnan(g[1]));

  // A constant exponent that is not a single Const (a program built without folding): the
  // d/d exponent term is still skipped because the exponent depends on no variable.
  Expression e;
  e.text = "x^(1+2)";
  e.variables = {"x"};
  ExprInstr var{ExprOp::Var};
  ExprInstr one{ExprOp::Const};
  one.value = 1;
  ExprInstr two{ExprOp::Const};
  two.value = 2;
  e.code = {var, one, two, ExprInstr{ExprOp::Add}, ExprInstr{ExprOp::Pow}};
  e.max_stack = 3;
  const double x = -2;
  double gx = 0;
  EXPECT_EQ(e.eval(&x), -8);
  EXPECT_EQ(e.eval_grad(&x, &gx), -8);
  EXPECT_EQ(gx, 12);
}

TEST(ExpressionGrad, InvalidArgumentsGiveNaN) {
  std::vector<double> g = gradient(compile_expression("sqrt(x)", kXY, "f"), {-1, 0});
  EXPECT_TRUE(std::isnan(g[0]));
  double v = 0;
  g = gradient(compile_expression("log(x)", kXY, "f"), {-1, 0}, &v);
  EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(std::isnan(g[0]));
  g = gradient(compile_expression("abs(x)", kXY, "f"), {0, 0});
  EXPECT_EQ(g[0], 0);  // sign(0) = 0
}

// Central differences, relative tolerance 1e-6.
void expect_grad_matches_fd(const Expression& e, const std::vector<double>& at) {
  double v = 0;
  const std::vector<double> g = gradient(e, at, &v);
  EXPECT_DOUBLE_EQ(v, e.eval(at.data())) << e.text;
  for (size_t i = 0; i < at.size(); ++i) {
    std::vector<double> p = at, m = at;
    const double h = 1e-5 * std::max(1.0, std::abs(at[i]));
    p[i] += h;
    m[i] -= h;
    const double fd = (e.eval(p.data()) - e.eval(m.data())) / (2 * h);
    EXPECT_NEAR(g[i], fd, 1e-6 * std::max(1.0, std::abs(fd)))
        << e.text << " d/d" << e.variables[i] << " at point " << ::testing::PrintToString(at);
  }
}

TEST(ExpressionGrad, MatchesFiniteDifferences) {
  struct Case {
    const char* text;
    std::vector<std::string> vars;
    double lo, hi;  // random points in [lo, hi]^n
  };
  const std::vector<Case> cases = {
      {"u_t + u*u_x - nu*u_xx", {"u", "u_t", "u_x", "u_xx", "nu"}, -2, 2},
      {"-(u_xx + u_yy) - 2*pi^2*sin(pi*x)*sin(pi*y)", {"x", "y", "u_xx", "u_yy"}, -1, 1},
      {"exp(-t)*sin(pi*x)", {"x", "t"}, -1, 1},
      {"(u - x)^2 + tanh(y)/sqrt(1+x^2) + abs(x-y)", {"x", "y", "u"}, -2, 2},
      {"u^3 - 2^x", {"x", "u"}, -2, 2},
      {"x^y^z", {"x", "y", "z"}, 0.5, 1.5},
      {"log(x)*sqrt(y) - x/y/z", {"x", "y", "z"}, 0.5, 2},
      {"cos(x/(2+y)) - -x^2 + --y*-z", {"x", "y", "z"}, -1, 1},
      {"x*x*x - 3*x*y + y^2 - exp(x*y)/(1 + x^2*y^2)", {"x", "y"}, -1.5, 1.5},
  };
  std::mt19937_64 rng(12345);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const Expression e = compile_expression(c.text, c.vars, "f");
    std::uniform_real_distribution<double> dist(c.lo, c.hi);
    for (int trial = 0; trial < 8; ++trial) {
      std::vector<double> at(c.vars.size());
      for (double& a : at) a = dist(rng);
      // Keep abs(x - y) away from its kink.
      if (c.vars.size() == 3 && c.vars[2] == "u" && std::abs(at[0] - at[1]) < 1e-2) continue;
      expect_grad_matches_fd(e, at);
    }
  }
}

// Random smooth expressions over x, y, z, fully parenthesized; the test's own tree evaluator
// checks the parse, finite differences check the gradient.
struct Node {
  enum Kind { Var, Num, Bin, Fn } kind;
  int var = 0;
  double num = 0;
  char op = '+';
  std::string fn;
  std::unique_ptr<Node> a, b;
};

std::unique_ptr<Node> random_tree(std::mt19937_64& rng, int depth) {
  auto n = std::make_unique<Node>();
  std::uniform_int_distribution<int> pick(0, 9);
  const int k = depth <= 0 ? pick(rng) % 2 : pick(rng);
  if (k == 0) {
    n->kind = Node::Var;
    n->var = static_cast<int>(rng() % 3);
  } else if (k == 1) {
    n->kind = Node::Num;
    n->num = static_cast<double>(rng() % 7) / 4.0 + 0.25;
  } else if (k <= 6) {
    n->kind = Node::Bin;
    n->op = "+-*/^"[rng() % 5];
    n->a = random_tree(rng, depth - 1);
    n->b = random_tree(rng, depth - 1);
  } else {
    n->kind = Node::Fn;
    static const char* fns[] = {"sin", "cos", "tanh", "exp", "log", "sqrt"};
    n->fn = fns[rng() % 6];
    n->a = random_tree(rng, depth - 1);
  }
  return n;
}

// Division and powers take safe forms: a/(1.5 + sin(b)), (1 + a^2)^(cos(b)); log and sqrt
// see 1 + a^2; exp sees sin(a).
std::string print(const Node& n) {
  static const char* names[] = {"x", "y", "z"};
  switch (n.kind) {
    case Node::Var: return names[n.var];
    case Node::Num: return std::to_string(n.num);
    case Node::Bin:
      if (n.op == '/') return "(" + print(*n.a) + ")/(1.5 + sin(" + print(*n.b) + "))";
      if (n.op == '^') return "(1 + (" + print(*n.a) + ")^2)^(cos(" + print(*n.b) + "))";
      return "(" + print(*n.a) + ")" + n.op + "(" + print(*n.b) + ")";
    case Node::Fn:
      if (n.fn == "log" || n.fn == "sqrt") return n.fn + "(1 + (" + print(*n.a) + ")^2)";
      if (n.fn == "exp") return "exp(sin(" + print(*n.a) + "))";
      return n.fn + "(" + print(*n.a) + ")";
  }
  return "";
}

double tree_eval(const Node& n, const double* v) {
  switch (n.kind) {
    case Node::Var: return v[n.var];
    case Node::Num: return std::stod(std::to_string(n.num));
    case Node::Bin: {
      const double a = tree_eval(*n.a, v), b = tree_eval(*n.b, v);
      switch (n.op) {
        case '+': return a + b;
        case '-': return a - b;
        case '*': return a * b;
        case '/': return a / (1.5 + std::sin(b));
        default: return std::pow(1 + a * a, std::cos(b));
      }
    }
    case Node::Fn: {
      const double a = tree_eval(*n.a, v);
      if (n.fn == "sin") return std::sin(a);
      if (n.fn == "cos") return std::cos(a);
      if (n.fn == "tanh") return std::tanh(a);
      if (n.fn == "exp") return std::exp(std::sin(a));
      if (n.fn == "log") return std::log(1 + a * a);
      return std::sqrt(1 + a * a);
    }
  }
  return 0;
}

TEST(ExpressionGrad, RandomExpressions) {
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> dist(-1, 1);
  int checked = 0;
  for (int t = 0; t < 200; ++t) {
    const std::unique_ptr<Node> tree = random_tree(rng, 4);
    const std::string text = print(*tree);
    SCOPED_TRACE(text);
    Expression e;
    try {
      e = compile_expression(text, {"x", "y", "z"}, "f");
    } catch (const Error& err) {
      // Only the size limits may reject a generated expression.
      const std::string msg = err.what();
      EXPECT_NE(msg.find("too "), std::string::npos) << msg;
      continue;
    }
    for (int trial = 0; trial < 3; ++trial) {
      const std::vector<double> at = {dist(rng), dist(rng), dist(rng)};
      const double want = tree_eval(*tree, at.data());
      EXPECT_NEAR(e.eval(at.data()), want, 1e-12 * std::max(1.0, std::abs(want)));
      expect_grad_matches_fd(e, at);
    }
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace sg::pinn
