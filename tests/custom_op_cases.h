// The op-table cases of the user-defined kinds (Custom, CustomLoss) over the tests' user ops and
// loss (custom_test_ops.h), and their float64 forward. op_cases.h includes it at its end and lists
// the cases in all_op_cases().
#pragma once

#include <vector>

#include "custom_test_ops.h"
#include "op_cases.h"
#include "ops/custom_loss_ops.h"
#include "ops/custom_ops.h"

namespace sg::test {

inline std::vector<OpCase> custom_cases() {
  register_test_ops();
  std::vector<OpCase> v;
  {
    CaseBuilder b(OpKind::Custom, "test_cube [5, 4]", 3100);
    const TensorId X = b.random("X", {5, 4});
    const TensorId Y = b.output("Y", {5, 4});
    b.op({X}, {Y}, CustomAttrs{custom_op_id("test_cube"), false, 1, 1});
    v.push_back(b.gradient(Y));
  }
  {
    // Two inputs, two outputs; the seeded one is the first (the second's gradient is zero).
    CaseBuilder b(OpKind::Custom, "test_mix [3, 2, 2], first output seeded", 3101);
    const TensorId A = b.random("A", {3, 2, 2}), B = b.random("B", {3, 2, 2});
    const TensorId P = b.output("P", {3, 2, 2}), S = b.output("S", {3, 2, 2});
    b.op({A, B}, {P, S}, CustomAttrs{custom_op_id("test_mix"), false, 2, 2});
    v.push_back(b.gradient(P));
  }
  return v;
}

// A user-defined loss (custom_loss.h): log cosh, a padded batch.
inline std::vector<OpCase> custom_loss_cases() {
  register_test_loss();
  CaseBuilder b(OpKind::CustomLoss, "test_log_cosh [5, 3], 4 valid rows", 3200);
  const TensorId pred = b.random("pred", {5, 3}, Role::Input), target = b.random("target", {5, 3}, Role::Input);
  const TensorId valid = b.i32("valid", {1}, {4});
  const TensorId loss = b.output("loss", {1}), dp = b.output("dpred", {5, 3});
  b.op({pred, target, valid}, {loss, dp}, CustomLossAttrs{custom_loss_id("test_log_cosh")});
  std::vector<OpCase> v;
  v.push_back(b.loss({loss}, {{pred, dp}}));
  return v;
}

inline void eval_custom_double(const Program& p, const Op& op, Values& v) {
  std::vector<std::vector<double>> in;
  for (TensorId t : op.in) in.push_back(v.at(p.tensor(t).name));
  const auto out = test_op_reference(custom_op_def(op.attr<CustomAttrs>().id).name, in);
  for (size_t k = 0; k < op.out.size(); ++k) v[p.tensor(op.out[k]).name] = out[k];
}

}  // namespace sg::test
