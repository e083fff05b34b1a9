// fold_sums (expression.h): sums of like terms folded into one class variable each, so a PDE
// that reads only u_xx + u_yy needs one jet component for the sum (see pinn::compile_term).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pinn/expr_tape.h"
#include "pinn/expression.h"

namespace sg::pinn {

namespace {

// One term of a flattened sum: sign * (subtree `node`). When var >= 0 (a variable of a class) it
// is also fold_sign * coef(var): var alone (coef < 0), coef * var (div false) or var / coef (div
// true), coef being the subtree at instruction `coef` with its leading unary minuses moved into
// fold_sign.
struct SumTerm {
  int sign = 1, fold_sign = 1, node = -1, var = -1, coef = -1;
  bool div = false;
  std::string key;  // what terms must share to fold: sign, class, coefficient (its program)
};

// The program of subtree i, as text: equal texts compute the same value.
std::string subtree_key(const std::vector<TapeInstr>& t, int i) {
  const TapeInstr& in = t[static_cast<size_t>(i)];
  std::string k;
  if (in.lhs >= 0) k += subtree_key(t, in.lhs);
  if (in.rhs >= 0) k += subtree_key(t, in.rhs);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%d:%d:%a;", static_cast<int>(in.op), in.op == ExprOp::Var ? in.index : 0,
                in.op == ExprOp::Const ? in.value : 0.0);
  return k + buf;
}

}  // namespace

Expression fold_sums(const Expression& e, const std::vector<int>& cls, std::vector<std::vector<int>>* sums) {
  sums->clear();
  const std::vector<TapeInstr> t = e.tape();
  auto class_of = [&](int i) {
    const TapeInstr& in = t[static_cast<size_t>(i)];
    return in.op == ExprOp::Var && in.index < static_cast<int>(cls.size()) ? cls[static_cast<size_t>(in.index)] : -1;
  };
  auto is_sum = [&](int i) {
    const ExprOp op = t[static_cast<size_t>(i)].op;
    return op == ExprOp::Add || op == ExprOp::Sub || op == ExprOp::Neg;
  };
  // The terms of the sum (+, -, unary -) rooted at i, with their signs, left to right.
  std::function<void(int, int, std::vector<SumTerm>&)> flatten = [&](int i, int sign, std::vector<SumTerm>& out) {
    const TapeInstr& in = t[static_cast<size_t>(i)];
    if (in.op == ExprOp::Add || in.op == ExprOp::Sub) {
      flatten(in.lhs, sign, out);
      flatten(in.rhs, in.op == ExprOp::Sub ? -sign : sign, out);
      return;
    }
    if (in.op == ExprOp::Neg) return flatten(in.lhs, -sign, out);
    SumTerm s;
    s.sign = sign, s.node = i;
    int var = -1, coef = -1;
    if (class_of(i) >= 0) {
      var = i;
    } else if (in.op == ExprOp::Mul && class_of(in.rhs) >= 0) {  // a * u_xx
      var = in.rhs, coef = in.lhs;
    } else if ((in.op == ExprOp::Mul || in.op == ExprOp::Div) && class_of(in.lhs) >= 0) {  // u_xx * a, u_xx / a
      var = in.lhs, coef = in.rhs, s.div = in.op == ExprOp::Div;
    }
    if (var >= 0) {
      s.fold_sign = sign;
      while (coef >= 0 && t[static_cast<size_t>(coef)].op == ExprOp::Neg) {  // (-a) u_xx: - a u_xx
        s.fold_sign = -s.fold_sign;
        coef = t[static_cast<size_t>(coef)].lhs;
      }
      s.var = t[static_cast<size_t>(var)].index, s.coef = coef;
      s.key = cat(s.fold_sign, "|", class_of(var), "|", s.div ? "/" : "*", "|",
                  coef >= 0 ? subtree_key(t, coef) : std::string());
    }
    out.push_back(s);
  };

  Expression out;
  out.text = e.text;
  out.variables = e.variables;
  auto push = [&](ExprOp op, int32_t index = 0) {
    ExprInstr in{op};
    in.index = index;
    out.code.push_back(in);
  };
  // Emits subtree i. A sum whose terms include two or more distinct variables of one class with
  // the same sign and coefficient is rebuilt with those as one term: coefficient times a new
  // variable (their sum), at the first one's place; other sums keep their shape.
  std::function<void(int)> emit = [&](int i) {
    const TapeInstr& in = t[static_cast<size_t>(i)];
    if (is_sum(i)) {
      std::vector<SumTerm> terms;
      flatten(i, 1, terms);
      std::vector<std::vector<int>> group_vars(terms.size());  // per term: its group's variables (at the first)
      std::vector<int> first_of(terms.size(), -1);
      bool folds = false;
      for (size_t a = 0; a < terms.size(); ++a) {
        if (terms[a].var < 0) continue;
        for (size_t b = 0; b < a; ++b)
          if (first_of[b] == static_cast<int>(b) && terms[b].key == terms[a].key) first_of[a] = static_cast<int>(b);
        if (first_of[a] < 0) first_of[a] = static_cast<int>(a);
        group_vars[static_cast<size_t>(first_of[a])].push_back(terms[a].var);
      }
      std::vector<bool> fold(terms.size(), false);  // per first term: its group folds
      for (size_t a = 0; a < terms.size(); ++a) {
        std::vector<int> v = group_vars[a];
        std::sort(v.begin(), v.end());
        // Two or more, all distinct (u_xx + u_xx is 2 u_xx, not a Laplacian).
        fold[a] = v.size() >= 2 && std::adjacent_find(v.begin(), v.end()) == v.end();
        if (fold[a]) group_vars[a] = v;
        folds = folds || fold[a];
      }
      if (folds) {
        bool first = true;
        for (size_t a = 0; a < terms.size(); ++a) {
          const SumTerm& s = terms[a];
          const bool grouped = s.var >= 0 && fold[static_cast<size_t>(first_of[a])];
          if (grouped && first_of[a] != static_cast<int>(a)) continue;  // folded into the first
          if (grouped) {
            const std::vector<int>& vars = group_vars[a];
            size_t k = static_cast<size_t>(std::find(sums->begin(), sums->end(), vars) - sums->begin());
            if (k == sums->size()) {
              std::string name;
              for (int v : vars) name += (name.empty() ? "" : "+") + e.variables[static_cast<size_t>(v)];
              out.variables.push_back(name);
              sums->push_back(vars);
            }
            if (s.coef >= 0 && !s.div) emit(s.coef);
            push(ExprOp::Var, static_cast<int32_t>(e.variables.size() + k));
            if (s.coef >= 0) {
              if (s.div) emit(s.coef);
              push(s.div ? ExprOp::Div : ExprOp::Mul);
            }
          } else {
            emit(s.node);
          }
          const int sign = grouped ? s.fold_sign : s.sign;  // a folded group's coefficient lost its minuses
          if (first) {
            if (sign < 0) push(ExprOp::Neg);
          } else {
            push(sign < 0 ? ExprOp::Sub : ExprOp::Add);
          }
          first = false;
        }
        return;
      }
    }
    if (in.lhs >= 0) emit(in.lhs);
    if (in.rhs >= 0) emit(in.rhs);
    out.code.push_back(e.code[static_cast<size_t>(i)]);
  };
  emit(static_cast<int>(t.size()) - 1);
  if (sums->empty()) return e;
  int depth = 0;
  for (const ExprInstr& in : out.code) {
    depth += 1 - arity(in.op);
    out.max_stack = std::max(out.max_stack, depth);
  }
  return out;
}

}  // namespace sg::pinn
