// The exact text of every PINN expression compile error (message, column and the caret under the
// offending character) and the compiler's limits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expression_test_util.h"
#include "pinn/expression.h"

namespace sg::pinn {
namespace {

using test::compile_error;
using test::value;
using test::with_caret;

// Checks the caret line independently of with_caret: the column in the first line, and the
// character above the caret.
void expect_caret_under(const std::string& msg, size_t column, char expected) {
  SCOPED_TRACE(msg);
  const size_t nl1 = msg.find('\n');
  ASSERT_NE(nl1, std::string::npos);
  const size_t nl2 = msg.find('\n', nl1 + 1);
  ASSERT_NE(nl2, std::string::npos);
  const std::string first = msg.substr(0, nl1);
  const std::string text_line = msg.substr(nl1 + 1, nl2 - nl1 - 1);
  const std::string caret_line = msg.substr(nl2 + 1);
  EXPECT_NE(first.find(" at column " + std::to_string(column)), std::string::npos);
  ASSERT_EQ(caret_line.find_first_not_of(' '), caret_line.size() - 1);
  ASSERT_EQ(caret_line.back(), '^');
  ASSERT_EQ(caret_line.size() - 1, 2 + column - 1);
  ASSERT_EQ(text_line.substr(0, 2), "  ");
  if (expected == '\0') {
    EXPECT_EQ(text_line.size(), caret_line.size() - 1) << "caret should sit just past the text";
  } else {
    ASSERT_LT(caret_line.size() - 1, text_line.size());
    EXPECT_EQ(text_line[caret_line.size() - 1], expected);
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

const std::vector<std::string> kJet = {"x", "y", "u", "u_x", "u_xx"};

TEST(ExpressionErrors, UnknownName) {
  const std::string msg = compile_error("-(u_xx + uxx)", kJet);
  EXPECT_EQ(msg,
            "residual: unknown name 'uxx' at column 10 (known: x, y, u, u_x, u_xx, pi)\n"
            "  -(u_xx + uxx)\n"
            "           ^");
  expect_caret_under(msg, 10, 'u');
  EXPECT_EQ(compile_error("z", {}), with_caret("residual: unknown name 'z' at column 1 (known: pi)", "z", 1));
  // A declared `pi` is listed once, as a variable.
  EXPECT_EQ(compile_error("q + x", {"x", "pi"}),
            with_caret("residual: unknown name 'q' at column 1 (known: x, pi)", "q + x", 1));
  // Names match exactly.
  EXPECT_EQ(compile_error("U", {"u"}), with_caret("residual: unknown name 'U' at column 1 (known: u, pi)", "U", 1));
}

TEST(ExpressionErrors, UnknownFunction) {
  const std::string msg = compile_error("u + sinh(x)", kJet);
  EXPECT_EQ(msg, with_caret("residual: unknown function 'sinh' at column 5 (functions: sin, cos, exp, "
                            "log, tanh, sqrt, abs)",
                            "u + sinh(x)", 5));
  expect_caret_under(msg, 5, 's');
}

TEST(ExpressionErrors, NameUsedAsFunction) {
  std::string msg = compile_error("1 + u(x)", kJet);
  EXPECT_EQ(msg, with_caret("residual: 'u' is a variable, not a function at column 5 (write u*(...) "
                            "for a product)",
                            "1 + u(x)", 5));
  expect_caret_under(msg, 5, 'u');
  msg = compile_error("x*pi (x)", kJet);
  EXPECT_EQ(msg, with_caret("residual: 'pi' is a constant, not a function at column 3 (write pi*(...) "
                            "for a product)",
                            "x*pi (x)", 3));
  expect_caret_under(msg, 3, 'p');
}

TEST(ExpressionErrors, FunctionWithoutParentheses) {
  std::string msg = compile_error("2 * sin x", kJet);
  EXPECT_EQ(msg, with_caret("residual: function 'sin' needs its argument in parentheses at column 5 "
                            "(e.g. sin(x))",
                            "2 * sin x", 5));
  expect_caret_under(msg, 5, 's');
  msg = compile_error("sqrt", kJet);
  EXPECT_EQ(msg, with_caret("residual: function 'sqrt' needs its argument in parentheses at column 1 "
                            "(e.g. sqrt(x))",
                            "sqrt", 1));
  msg = compile_error("x + sin^2(x)", kJet);
  expect_caret_under(msg, 5, 's');
  EXPECT_NE(msg.find("function 'sin' needs its argument in parentheses"), std::string::npos);
}

TEST(ExpressionErrors, MissingOperand) {
  const std::string expected = "residual: expected a number, name, '(' or function at column ";
  std::string msg = compile_error("x * (y - )", kJet);
  EXPECT_EQ(msg, with_caret(expected + "10", "x * (y - )", 10));
  expect_caret_under(msg, 10, ')');
  // At the end of the text the caret sits just past it.
  msg = compile_error("x +", kJet);
  EXPECT_EQ(msg, with_caret(expected + "4", "x +", 4));
  expect_caret_under(msg, 4, '\0');
  EXPECT_EQ(compile_error("()", kJet), with_caret(expected + "2", "()", 2));
  EXPECT_EQ(compile_error("sin()", kJet), with_caret(expected + "5", "sin()", 5));
  EXPECT_EQ(compile_error("* x", kJet), with_caret(expected + "1", "* x", 1));
  EXPECT_EQ(compile_error("x ^", kJet), with_caret(expected + "4", "x ^", 4));
  EXPECT_EQ(compile_error("-", kJet), with_caret(expected + "2", "-", 2));
  EXPECT_EQ(compile_error("x / / y", kJet), with_caret(expected + "5", "x / / y", 5));
  EXPECT_EQ(compile_error("x**2", kJet), with_caret(expected + "3 (use ^ for powers)", "x**2", 3));
}

TEST(ExpressionErrors, UnbalancedParentheses) {
  const std::string open = "residual: unbalanced parentheses: '(' is never closed at column ";
  const std::string close = "residual: unbalanced parentheses: ')' has no matching '(' at column ";
  std::string msg = compile_error("(x + 1", kJet);
  EXPECT_EQ(msg, with_caret(open + "1", "(x + 1", 1));
  expect_caret_under(msg, 1, '(');
  // The innermost '(' still open: here the function's.
  msg = compile_error("2*sin(x + (y)", kJet);
  EXPECT_EQ(msg, with_caret(open + "6", "2*sin(x + (y)", 6));
  expect_caret_under(msg, 6, '(');
  msg = compile_error("((x)", kJet);
  EXPECT_EQ(msg, with_caret(open + "1", "((x)", 1));
  msg = compile_error("x + 1)", kJet);
  EXPECT_EQ(msg, with_caret(close + "6", "x + 1)", 6));
  expect_caret_under(msg, 6, ')');
  msg = compile_error("(x)) * 2", kJet);
  EXPECT_EQ(msg, with_caret(close + "4", "(x)) * 2", 4));
  expect_caret_under(msg, 4, ')');
}

TEST(ExpressionErrors, UnexpectedCharacter) {
  std::string msg = compile_error("x $ y", kJet);
  EXPECT_EQ(msg, with_caret("residual: unexpected character '$' at column 3", "x $ y", 3));
  expect_caret_under(msg, 3, '$');
  EXPECT_EQ(compile_error("u_x = 0", kJet),
            with_caret("residual: unexpected character '=' at column 5", "u_x = 0", 5));
  EXPECT_EQ(compile_error("x + .", kJet), with_caret("residual: unexpected character '.' at column 5", "x + .", 5));
  EXPECT_EQ(compile_error("x[0]", kJet), with_caret("residual: unexpected character '[' at column 2", "x[0]", 2));
  // A control character is shown escaped.
  EXPECT_EQ(compile_error(std::string("x \x01"), kJet),
            with_caret("residual: unexpected character '\\x01' at column 3", "x \x01", 3));
  // Columns count characters, not UTF-8 bytes; the caret line keeps tabs so it lines up.
  EXPECT_EQ(compile_error("\xC3\xA9 + x", kJet),
            "residual: unexpected character '\xC3\xA9' at column 1\n  \xC3\xA9 + x\n  ^");
  EXPECT_EQ(compile_error("x + \xC3\xA9 $", kJet),
            "residual: unexpected character '\xC3\xA9' at column 5\n  x + \xC3\xA9 $\n      ^");
  EXPECT_EQ(compile_error("\xC3\xA9", {"x"}), "residual: unexpected character '\xC3\xA9' at column 1\n  \xC3\xA9\n  ^");
  EXPECT_EQ(compile_error("x\t+ $", kJet), "residual: unexpected character '$' at column 5\n  x\t+ $\n   \t  ^");
}

TEST(ExpressionErrors, TrailingInput) {
  const std::string tail = " (expected an operator or the end of the expression)";
  std::string msg = compile_error("x y", kJet);
  EXPECT_EQ(msg, with_caret("residual: trailing input 'y' at column 3" + tail, "x y", 3));
  expect_caret_under(msg, 3, 'y');
  msg = compile_error("2x", kJet);
  EXPECT_EQ(msg, with_caret("residual: trailing input 'x' at column 2" + tail, "2x", 2));
  expect_caret_under(msg, 2, 'x');
  EXPECT_EQ(compile_error("u_x 2.5e3", kJet), with_caret("residual: trailing input '2.5e3' at column 5" + tail, "u_x 2.5e3", 5));
  EXPECT_EQ(compile_error("sin(x) (y)", kJet), with_caret("residual: trailing input '(' at column 8" + tail, "sin(x) (y)", 8));
  EXPECT_EQ(compile_error("x, y", kJet), with_caret("residual: trailing input ',' at column 2" + tail, "x, y", 2));
  // Inside parentheses the ')' is also acceptable.
  msg = compile_error("(x y)", kJet);
  EXPECT_EQ(msg, with_caret("residual: unexpected 'y' at column 4 (expected an operator or ')')", "(x y)", 4));
  expect_caret_under(msg, 4, 'y');
}

TEST(ExpressionErrors, FunctionTakesOneArgument) {
  const std::string msg = compile_error("sin(x, y)", kJet);
  EXPECT_EQ(msg, with_caret("residual: function 'sin' takes exactly one argument at column 6", "sin(x, y)", 6));
  expect_caret_under(msg, 6, ',');
}

TEST(ExpressionErrors, EmptyExpression) {
  EXPECT_EQ(compile_error("", kJet), "residual: empty expression at column 1\n  \n  ^");
  EXPECT_EQ(compile_error("  \t ", kJet), "residual: empty expression at column 1\n    \t \n  ^");
}

TEST(ExpressionErrors, MalformedNumbers) {
  std::string msg = compile_error("1e+ 2", kJet);
  EXPECT_EQ(msg, with_caret("residual: malformed number '1e+' at column 1 (the exponent needs digits, e.g. 1e-3)",
                            "1e+ 2", 1));
  msg = compile_error("x*2E", kJet);
  EXPECT_EQ(msg, with_caret("residual: malformed number '2E' at column 3 (the exponent needs digits, e.g. 1e-3)",
                            "x*2E", 3));
  expect_caret_under(msg, 3, '2');
  EXPECT_EQ(compile_error("x + 1e999", kJet),
            with_caret("residual: number '1e999' is out of range at column 5", "x + 1e999", 5));
}

TEST(ExpressionErrors, NoWhereGivesNoPrefix) {
  EXPECT_EQ(compile_error("x $", {"x"}, ""), "unexpected character '$' at column 3\n  x $\n    ^");
}

TEST(ExpressionErrors, LineBreaksShownAsSpaces) {
  // A multi-line config string still shows on one line, with the caret under the character.
  EXPECT_EQ(compile_error("x +\n  $", {"x"}), "residual: unexpected character '$' at column 7\n  x +   $\n        ^");
}

TEST(ExpressionErrors, DuplicateVariables) {
  EXPECT_EQ(compile_error("x", {"x", "y", "x"}),
            "residual: variable 'x' is declared twice (positions 0 and 2) for expression 'x'");
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ExpressionLimits, InstructionCount) {
  // k terms compile to 2k - 1 instructions.
  const std::string ok = "x" + repeat("+x", 127);
  const Expression e = compile_expression(ok, {"x"}, "f");
  EXPECT_EQ(e.code.size(), 255u);
  const double x = 0.5;
  EXPECT_DOUBLE_EQ(e.eval(&x), 64);
  double g = 0;
  EXPECT_DOUBLE_EQ(e.eval_grad(&x, &g), 64);
  EXPECT_DOUBLE_EQ(g, 128);

  const std::string big = "x" + repeat("+x", 128);
  EXPECT_EQ(compile_error(big, {"x"}),
            "residual: expression is too large: it compiles to 257 instructions and the limit is 256 "
            "(split it into several terms)\n  " + big);
  // Constants fold, so a long constant expression is fine.
  EXPECT_DOUBLE_EQ(value("1" + repeat("+1", 500) + "+x", {"x"}, {0.5}), 501.5);
}

TEST(ExpressionLimits, StackDepth) {
  // x+(x+(x+...)) pushes every x before the first add.
  auto nested = [](int k) { return repeat("x+(", k - 1) + "x" + repeat(")", k - 1); };
  const Expression e = compile_expression(nested(64), {"x"}, "f");
  EXPECT_EQ(e.max_stack, 64);
  const double x = 0.25;
  EXPECT_DOUBLE_EQ(e.eval(&x), 16);
  double g = 0;
  e.eval_grad(&x, &g);
  EXPECT_DOUBLE_EQ(g, 64);
  EXPECT_EQ(compile_error(nested(65), {"x"}),
            "residual: expression is nested too deeply to evaluate: it needs a stack of 65 values and "
            "the limit is 64 (reorder it, e.g. a+(b+(c+...)) as a+b+c+...)\n  " + nested(65));
}

TEST(ExpressionLimits, ParserNesting) {
  EXPECT_DOUBLE_EQ(value(repeat("-", 150) + "x", {"x"}, {2}), 2);
  const std::string deep = repeat("(", 300) + "x" + repeat(")", 300);
  const std::string msg = compile_error(deep, {"x"});
  EXPECT_EQ(msg.rfind("residual: expression is nested too deeply (more than 200 levels) at column 201\n", 0), 0u)
      << msg;
}

TEST(ExpressionLimits, MalformedProgramsAreRejected) {
  Expression e;
  e.text = "bad";
  e.variables = {"x"};
  const double x = 1;
  double g = 0;
  e.code = {ExprInstr{ExprOp::Var}};
  e.code[0].index = 3;
  EXPECT_THROW(e.eval(&x), Error);
  EXPECT_THROW(e.eval_grad(&x, &g), Error);
  e.code = {ExprInstr{ExprOp::Var}, ExprInstr{ExprOp::Add}};
  EXPECT_THROW(e.eval(&x), Error);
  EXPECT_THROW(e.eval_grad(&x, &g), Error);
  e.code = {ExprInstr{ExprOp::Var}, ExprInstr{ExprOp::Var}};
  EXPECT_THROW(e.eval(&x), Error);
  e.code.clear();
  EXPECT_THROW(e.eval(&x), Error);
  EXPECT_THROW(e.eval_grad(&x, &g), Error);
}

}  // namespace
}  // namespace sg::pinn
