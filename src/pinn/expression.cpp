// Expressions for physics-informed losses: a precedence-climbing parser into postfix code, and
// an allocation-free evaluator (value, and value plus gradient by reverse mode).
#include "pinn/expression.h"
#include "pinn/expr_tape.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace sg::pinn {

namespace {

// Limits of a compiled program. eval and eval_grad keep their per-point state in fixed-size
// local arrays of these sizes, so compile_expression rejects anything larger.
constexpr int kMaxStack = 64;
constexpr int kMaxInstructions = 256;
// Parentheses and unary signs nest recursion in the parser (every level of either passes
// through parse_unary); this bounds it.
constexpr int kMaxDepth = 200;
constexpr double kPi = 3.141592653589793;

struct Function {
  const char* name;
  ExprOp op;
};
constexpr Function kFunctions[] = {
    {"sin", ExprOp::Sin},   {"cos", ExprOp::Cos},   {"exp", ExprOp::Exp}, {"log", ExprOp::Log},
    {"tanh", ExprOp::Tanh}, {"sqrt", ExprOp::Sqrt}, {"abs", ExprOp::Abs},
};

const char* kFunctionList = "sin, cos, exp, log, tanh, sqrt, abs";


// A program that did not come from compile_expression (or was edited afterwards) and would
// read or write outside the fixed-size evaluation arrays.
[[noreturn]] void malformed(const Expression& e, const char* what) {
  throw Error(cat("expression '", e.text, "': malformed program (", what,
                  "); build expressions with compile_expression"));
}

// ---------------------------------------------------------------------------------------------
// Parser

enum class Tok { Number, Name, Plus, Minus, Star, Slash, Caret, LParen, RParen, Comma, End };

struct Token {
  Tok kind = Tok::End;
  size_t pos = 0;  // byte offset of the first character in the text
  size_t len = 0;
  double value = 0.0;  // Number
};

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
// UTF-8 continuation bytes do not start a character: they take no column.
bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

class Parser {
 public:
  Parser(const std::string& text, const std::vector<std::string>& variables, const std::string& where)
      : text_(text), vars_(variables), where_(where) {}

  Expression run() {
    for (size_t i = 0; i < vars_.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (vars_[i] == vars_[j])
          throw Error(cat(prefix(), "variable '", vars_[i], "' is declared twice (positions ", j,
                          " and ", i, ") for expression '", text_, "'"));

    advance();
    if (cur_.kind == Tok::End) fail(0, "empty expression");
    parse_expr();
    if (cur_.kind == Tok::RParen) fail(cur_.pos, "unbalanced parentheses: ')' has no matching '('");
    if (cur_.kind != Tok::End)
      fail(cur_.pos, cat("trailing input ", describe(cur_)),
           " (expected an operator or the end of the expression)");

    Expression e;
    e.text = text_;
    e.variables = vars_;
    e.code = std::move(code_);
    if (e.code.size() > static_cast<size_t>(kMaxInstructions))
      fail_whole(cat("expression is too large: it compiles to ", e.code.size(),
                     " instructions and the limit is ", kMaxInstructions,
                     " (split it into several terms)"));
    int depth = 0;
    for (const ExprInstr& in : e.code) {
      depth += 1 - arity(in.op);
      if (depth > e.max_stack) e.max_stack = depth;
    }
    SG_ASSERT(depth == 1);
    if (e.max_stack > kMaxStack)
      fail_whole(cat("expression is nested too deeply to evaluate: it needs a stack of ",
                     e.max_stack, " values and the limit is ", kMaxStack,
                     " (reorder it, e.g. a+(b+(c+...)) as a+b+c+...)"));
    return e;
  }

 private:
  // ---- errors

  std::string prefix() const { return where_.empty() ? std::string() : where_ + ": "; }

  size_t column(size_t pos) const {
    size_t col = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i)
      if (!is_continuation(text_[i])) ++col;
    if (pos > text_.size()) col += pos - text_.size();
    return col;
  }

  // The text on one line (line breaks shown as spaces) and, when `with_caret`, a caret line
  // under byte offset `pos`; both indented by two spaces.
  std::string show(size_t pos, bool with_caret) const {
    std::string line = text_;
    for (char& c : line)
      if (c == '\n' || c == '\r' || c == '\f' || c == '\v') c = ' ';
    std::string out = "\n  " + line;
    if (with_caret) {
      std::string caret = "\n  ";
      for (size_t i = 0; i < pos && i < line.size(); ++i) {
        if (is_continuation(line[i])) continue;
        caret += line[i] == '\t' ? '\t' : ' ';
      }
      if (pos > line.size()) caret.append(pos - line.size(), ' ');
      out += caret + "^";
    }
    return out;
  }

  // "<where>: <message> at column <c><extra>", the text, and a caret under byte offset `pos`.
  [[noreturn]] void fail(size_t pos, const std::string& message, const std::string& extra = "") const {
    throw Error(cat(prefix(), message, " at column ", column(pos), extra, show(pos, true)));
  }
  // An error about the expression as a whole (no single offending character).
  [[noreturn]] void fail_whole(const std::string& message) const {
    throw Error(cat(prefix(), message, show(0, false)));
  }

  static std::string quote_char(const std::string& s) {
    bool printable = true;
    for (char c : s) {
      unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) printable = false;
    }
    if (printable) return "'" + s + "'";
    static const char* hex = "0123456789abcdef";
    std::string out = "'";
    for (char c : s) {
      unsigned char u = static_cast<unsigned char>(c);
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
    return out + "'";
  }

  std::string token_text(const Token& t) const { return text_.substr(t.pos, t.len); }

  std::string describe(const Token& t) const {
    if (t.kind == Tok::End) return "end of input";
    return "'" + token_text(t) + "'";
  }

  // ---- lexer

  void advance() {
    prev_ = cur_;
    size_t i = next_;
    while (i < text_.size() && is_space(text_[i])) ++i;
    Token t;
    t.pos = i;
    if (i >= text_.size()) {
      t.kind = Tok::End;
      t.pos = text_.size();
      cur_ = t;
      next_ = i;
      return;
    }
    const char c = text_[i];
    if (is_digit(c) || (c == '.' && i + 1 < text_.size() && is_digit(text_[i + 1]))) {
      lex_number(i, t);
    } else if (is_name_start(c)) {
      size_t j = i;
      while (j < text_.size() && is_name_char(text_[j])) ++j;
      t.kind = Tok::Name;
      t.len = j - i;
    } else {
      t.len = 1;
      switch (c) {
        case '+': t.kind = Tok::Plus; break;
        case '-': t.kind = Tok::Minus; break;
        case '*': t.kind = Tok::Star; break;
        case '/': t.kind = Tok::Slash; break;
        case '^': t.kind = Tok::Caret; break;
        case '(': t.kind = Tok::LParen; break;
        case ')': t.kind = Tok::RParen; break;
        case ',': t.kind = Tok::Comma; break;
        default: {
          size_t j = i + 1;
          if (static_cast<unsigned char>(c) >= 0xC0)  // the whole UTF-8 sequence
            while (j < text_.size() && is_continuation(text_[j])) ++j;
          fail(i, cat("unexpected character ", quote_char(text_.substr(i, j - i))));
        }
      }
    }
    cur_ = t;
    next_ = i + t.len;
  }

  // digits [. digits] [(e|E) [+|-] digits], or . digits [...]
  void lex_number(size_t i, Token& t) {
    size_t j = i;
    while (j < text_.size() && is_digit(text_[j])) ++j;
    if (j < text_.size() && text_[j] == '.') {
      ++j;
      while (j < text_.size() && is_digit(text_[j])) ++j;
    }
    if (j < text_.size() && (text_[j] == 'e' || text_[j] == 'E')) {
      size_t k = j + 1;
      if (k < text_.size() && (text_[k] == '+' || text_[k] == '-')) ++k;
      if (k >= text_.size() || !is_digit(text_[k]))
        fail(i, cat("malformed number '", text_.substr(i, k - i), "'"),
             " (the exponent needs digits, e.g. 1e-3)");
      while (k < text_.size() && is_digit(text_[k])) ++k;
      j = k;
    }
    t.kind = Tok::Number;
    t.len = j - i;
    const char* first = text_.data() + i;
    const char* last = text_.data() + j;
    double v = 0.0;
    auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec == std::errc::result_out_of_range && ptr == last) {
      // Underflow is harmless (the value rounds to 0 or a subnormal); overflow is not.
      const std::string s(first, last);
      v = std::strtod(s.c_str(), nullptr);
      if (std::isinf(v)) fail(i, cat("number '", s, "' is out of range"));
    } else if (ec != std::errc() || ptr != last) {
      fail(i, cat("malformed number '", std::string(first, last), "'"));
    }
    t.value = v;
  }

  // ---- grammar
  //   expr    := term (('+' | '-') term)*
  //   term    := unary (('*' | '/') unary)*
  //   unary   := ('+' | '-') unary | power
  //   power   := primary ('^' unary)?          right associative; the exponent may be signed
  //   primary := number | name | function '(' expr ')' | '(' expr ')'

  struct DepthGuard {
    Parser& p;
    DepthGuard(Parser& parser, size_t pos) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        p.fail(pos, cat("expression is nested too deeply (more than ", kMaxDepth, " levels)"));
    }
    ~DepthGuard() { --p.depth_; }
  };

  void parse_expr() {
    parse_term();
    while (cur_.kind == Tok::Plus || cur_.kind == Tok::Minus) {
      const ExprOp op = cur_.kind == Tok::Plus ? ExprOp::Add : ExprOp::Sub;
      advance();
      parse_term();
      emit_binary(op);
    }
  }

  void parse_term() {
    parse_unary();
    while (cur_.kind == Tok::Star || cur_.kind == Tok::Slash) {
      const ExprOp op = cur_.kind == Tok::Star ? ExprOp::Mul : ExprOp::Div;
      advance();
      parse_unary();
      emit_binary(op);
    }
  }

  void parse_unary() {
    DepthGuard guard(*this, cur_.pos);
    if (cur_.kind == Tok::Minus) {
      advance();
      parse_unary();
      emit_unary(ExprOp::Neg);
    } else if (cur_.kind == Tok::Plus) {
      advance();
      parse_unary();
    } else {
      parse_power();
    }
  }

  void parse_power() {
    parse_primary();
    if (cur_.kind == Tok::Caret) {
      advance();
      parse_unary();
      emit_binary(ExprOp::Pow);
    }
  }

  void parse_primary() {
    switch (cur_.kind) {
      case Tok::Number: {
        emit_const(cur_.value);
        advance();
        return;
      }
      case Tok::LParen: {
        const size_t open = cur_.pos;
        advance();
        parse_expr();
        expect_close(open, nullptr);
        return;
      }
      case Tok::Name: {
        parse_name();
        return;
      }
      default: {
        std::string hint;
        if (cur_.kind == Tok::Star && prev_.kind == Tok::Star && cur_.pos == prev_.pos + 1)
          hint = " (use ^ for powers)";
        fail(cur_.pos, "expected a number, name, '(' or function", hint);
      }
    }
  }

  void parse_name() {
    const Token name_tok = cur_;
    const std::string name = token_text(name_tok);
    advance();
    const Function* fn = nullptr;
    for (const Function& f : kFunctions)
      if (name == f.name) fn = &f;
    int var = -1;
    for (size_t i = 0; i < vars_.size(); ++i)
      if (vars_[i] == name) {
        var = static_cast<int>(i);
        break;
      }

    if (cur_.kind == Tok::LParen) {
      if (fn != nullptr) {
        const size_t open = cur_.pos;
        advance();
        parse_expr();
        expect_close(open, fn->name);
        emit_unary(fn->op);
        return;
      }
      if (var >= 0)
        fail(name_tok.pos, cat("'", name, "' is a variable, not a function"),
             cat(" (write ", name, "*(...) for a product)"));
      if (name == "pi")
        fail(name_tok.pos, "'pi' is a constant, not a function", " (write pi*(...) for a product)");
      fail(name_tok.pos, cat("unknown function '", name, "'"), cat(" (functions: ", kFunctionList, ")"));
    }

    if (var >= 0) {
      ExprInstr in{ExprOp::Var};
      in.index = var;
      code_.push_back(in);
      return;
    }
    if (name == "pi") {
      emit_const(kPi);
      return;
    }
    if (fn != nullptr)
      fail(name_tok.pos, cat("function '", name, "' needs its argument in parentheses"),
           cat(" (e.g. ", name, "(x))"));
    std::string known;
    bool pi_declared = false;
    for (const std::string& v : vars_) {
      known += (known.empty() ? "" : ", ") + v;
      if (v == "pi") pi_declared = true;
    }
    if (!pi_declared) known += known.empty() ? "pi" : ", pi";  // the constant
    fail(name_tok.pos, cat("unknown name '", name, "'"), cat(" (known: ", known, ")"));
  }

  // After the argument of a function or a parenthesized expression: the ')' that closes the
  // '(' at `open`.
  void expect_close(size_t open, const char* function) {
    if (cur_.kind == Tok::RParen) {
      advance();
      return;
    }
    if (cur_.kind == Tok::End) fail(open, "unbalanced parentheses: '(' is never closed");
    if (cur_.kind == Tok::Comma && function != nullptr)
      fail(cur_.pos, cat("function '", function, "' takes exactly one argument"));
    fail(cur_.pos, cat("unexpected ", describe(cur_)), " (expected an operator or ')')");
  }

  // ---- code generation, folding operations whose operands are all constants

  void emit_const(double v) {
    ExprInstr in{ExprOp::Const};
    in.value = v;
    code_.push_back(in);
  }

  void emit_unary(ExprOp op) {
    if (!code_.empty() && code_.back().op == ExprOp::Const) {
      code_.back().value = tape_unary(op, code_.back().value);
      return;
    }
    code_.push_back(ExprInstr{op});
  }

  // A postfix operand that ends in a Const is exactly that Const (it takes no operands), so
  // two trailing Consts are the two operands.
  void emit_binary(ExprOp op) {
    const size_t n = code_.size();
    if (n >= 2 && code_[n - 1].op == ExprOp::Const && code_[n - 2].op == ExprOp::Const) {
      code_[n - 2].value = tape_binary(op, code_[n - 2].value, code_[n - 1].value);
      code_.pop_back();
      return;
    }
    code_.push_back(ExprInstr{op});
  }

  const std::string& text_;
  const std::vector<std::string>& vars_;
  const std::string& where_;
  std::vector<ExprInstr> code_;
  Token cur_, prev_;
  size_t next_ = 0;  // where the lexer continues after cur_
  int depth_ = 0;
};

}  // namespace

int arity(ExprOp op) {
  switch (op) {
    case ExprOp::Const:
    case ExprOp::Var: return 0;
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Div:
    case ExprOp::Pow: return 2;
    case ExprOp::Neg:
    case ExprOp::Sin:
    case ExprOp::Cos:
    case ExprOp::Exp:
    case ExprOp::Log:
    case ExprOp::Tanh:
    case ExprOp::Sqrt:
    case ExprOp::Abs: return 1;
  }
  return -1;
}

Expression compile_expression(const std::string& text, const std::vector<std::string>& variables,
                              const std::string& where) {
  return Parser(text, variables, where).run();
}

// ---------------------------------------------------------------------------------------------
// Evaluation

double Expression::eval(const double* vars) const {
  const size_t n = code.size();
  if (n == 0 || n > static_cast<size_t>(kMaxInstructions)) malformed(*this, "instruction count");
  std::array<double, kMaxStack> st;
  int sp = 0;
  for (const ExprInstr& in : code) {
    switch (arity(in.op)) {
      case 0:
        if (sp >= kMaxStack) malformed(*this, "stack overflow");
        if (in.op == ExprOp::Const) {
          st[sp++] = in.value;
        } else {
          if (in.index < 0 || static_cast<size_t>(in.index) >= variables.size())
            malformed(*this, "variable index out of range");
          st[sp++] = vars[in.index];
        }
        break;
      case 1:
        if (sp < 1) malformed(*this, "stack underflow");
        st[sp - 1] = tape_unary(in.op, st[sp - 1]);
        break;
      case 2:
        if (sp < 2) malformed(*this, "stack underflow");
        --sp;
        st[sp - 1] = tape_binary(in.op, st[sp - 1], st[sp]);
        break;
      default: malformed(*this, "unknown op code");
    }
  }
  if (sp != 1) malformed(*this, "the program leaves more than one value");
  return st[0];
}

std::vector<TapeInstr> Expression::tape() const {
  const int n = static_cast<int>(code.size());
  if (code.empty() || code.size() > static_cast<size_t>(kMaxInstructions))
    malformed(*this, "instruction count");
  std::vector<TapeInstr> t(code.size());
  std::array<int16_t, kMaxStack> st;  // instruction indices of the values on the stack
  int sp = 0;
  for (int i = 0; i < n; ++i) {
    const ExprInstr& in = code[static_cast<size_t>(i)];
    TapeInstr& o = t[static_cast<size_t>(i)];
    o.op = in.op;
    switch (arity(in.op)) {
      case 0:
        if (sp >= kMaxStack) malformed(*this, "stack overflow");
        if (in.op == ExprOp::Var) {
          if (in.index < 0 || static_cast<size_t>(in.index) >= variables.size())
            malformed(*this, "variable index out of range");
          o.index = in.index;
          o.varying = true;
        } else {
          o.value = in.value;
        }
        st[sp++] = static_cast<int16_t>(i);
        break;
      case 1:
        if (sp < 1) malformed(*this, "stack underflow");
        o.lhs = st[sp - 1];
        o.varying = t[o.lhs].varying;
        st[sp - 1] = static_cast<int16_t>(i);
        break;
      case 2:
        if (sp < 2) malformed(*this, "stack underflow");
        o.rhs = st[--sp];
        o.lhs = st[sp - 1];
        o.varying = t[o.lhs].varying || t[o.rhs].varying;
        st[sp - 1] = static_cast<int16_t>(i);
        break;
      default: malformed(*this, "unknown op code");
    }
  }
  if (sp != 1) malformed(*this, "the program leaves more than one value");
  return t;
}

double Expression::eval_grad(const double* vars, double* grad) const {
  const std::vector<TapeInstr> t = tape();
  std::array<double, kMaxInstructions> val, adj;
  for (size_t v = 0; v < variables.size(); ++v) grad[v] = 0.0;
  return tape_eval_grad(
      t.data(), static_cast<int>(t.size()), [&](int v) { return vars[v]; }, [&](int v, double g) { grad[v] += g; },
      val.data(), adj.data());
}

std::vector<bool> Expression::uses() const {
  std::vector<bool> used(variables.size(), false);
  for (const ExprInstr& in : code)
    if (in.op == ExprOp::Var && in.index >= 0 && static_cast<size_t>(in.index) < variables.size())
      used[static_cast<size_t>(in.index)] = true;
  return used;
}

}  // namespace sg::pinn
