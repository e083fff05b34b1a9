// Helpers of the PINN expression tests (test_expression.cpp, test_expression_errors.cpp): a
// compiled expression's value and the exact text of a compile error.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pinn/expression.h"

namespace sg::pinn::test {

inline double value(const std::string& text, const std::vector<std::string>& vars, const std::vector<double>& at) {
  Expression e = compile_expression(text, vars, "test");
  EXPECT_EQ(at.size(), vars.size());
  return e.eval(at.data());
}

inline std::string compile_error(const std::string& text, const std::vector<std::string>& vars,
                                 const std::string& where = "residual") {
  try {
    compile_expression(text, vars, where);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// The full message an error at 1-based `column` must have: the first line, the text indented
// by two spaces, and a caret under the column (the text here is ASCII without tabs).
inline std::string with_caret(const std::string& first_line, const std::string& text, size_t column) {
  return first_line + "\n  " + text + "\n" + std::string(2 + column - 1, ' ') + "^";
}

}  // namespace sg::pinn::test
