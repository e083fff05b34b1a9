// Each CPU reference op against hand-checked values.
#include "backend/cpu/cpu_kernels.h"
#include "stepgraph/optim.h"
#include "test_util.h"

namespace sg::test {
namespace {

TEST(Ops, DenseForwardHandChecked) {
  // X [2,3], W [2,3], b [2]: Y = X W^T + b.
  const float X[] = {1, 2, 3, -1, 0, 2};
  const float W[] = {0.5f, -1, 2, 1, 1, -1};
  const float b[] = {0.25f, -3};
  float Y[4], Z[4];
  cpu::dense_forward(X, W, b, Y, Z, 2, 3, 2, Activation::None, 2);
  EXPECT_FLOAT_EQ(Y[0], 0.5f - 2 + 6 + 0.25f);
  EXPECT_FLOAT_EQ(Y[1], 1 + 2 - 3 - 3);
  EXPECT_FLOAT_EQ(Y[2], -0.5f + 0 + 4 + 0.25f);
  EXPECT_FLOAT_EQ(Y[3], -1 + 0 - 2 - 3);
  cpu::dense_forward(X, W, b, Y, Z, 2, 3, 2, Activation::ReLU, 2);
  EXPECT_FLOAT_EQ(Y[0], 4.75f);
  EXPECT_FLOAT_EQ(Y[1], 0.0f);
  EXPECT_FLOAT_EQ(Z[1], -3.0f);  // pre-activation kept
}

TEST(Ops, ActivationValuesHandChecked) {
  struct V {
    Activation a;
    float z, y;
  };
  // Reference values from the closed forms (gelu: tanh approximation).
  for (V v : {V{Activation::GELU, 1.0f, 0.8411920f}, V{Activation::GELU, -2.0f, -0.0454023f},
              V{Activation::Tanh, 0.5f, 0.4621172f}, V{Activation::Sigmoid, 0.0f, 0.5f},
              V{Activation::Sigmoid, 2.0f, 0.8807971f}, V{Activation::Sin, 1.0f, 0.8414710f},
              V{Activation::ReLU, -0.5f, 0.0f}, V{Activation::None, -0.5f, -0.5f}}) {
    const float X[] = {v.z}, W[] = {1.0f};
    float Y, Z;
    cpu::dense_forward(X, W, nullptr, &Y, &Z, 1, 1, 1, v.a, 1);
    EXPECT_NEAR(Y, v.y, 2e-6) << activation_name(v.a) << "(" << v.z << ")";
  }
}

TEST(Ops, DenseBackwardHandCheckedAndAccumulates) {
  // One row, I = 2, O = 1, no activation: dW = dY * X, db = dY, dX = dY * W.
  const float X[] = {2, -3}, W[] = {0.5f, 4}, Y[] = {0}, dY[] = {1.5f};
  float dX[2] = {10, 10}, dW[2] = {100, 100}, db[1] = {1000};
  cpu::dense_backward(dY, X, W, Y, nullptr, dX, dW, db, 1, 2, 1, Activation::None, false, true, true, 1);
  EXPECT_FLOAT_EQ(dX[0], 0.75f);
  EXPECT_FLOAT_EQ(dX[1], 6.0f);
  EXPECT_FLOAT_EQ(dW[0], 103.0f);  // accumulated into 100
  EXPECT_FLOAT_EQ(dW[1], 95.5f);
  EXPECT_FLOAT_EQ(db[0], 1001.5f);
}

TEST(Ops, AddAndBackward) {
  const float A[] = {1, 2}, B[] = {0.5f, -4};
  float Y[2], dA[2] = {1, 1}, dB[2];
  cpu::add(A, B, Y, 2);
  EXPECT_FLOAT_EQ(Y[0], 1.5f);
  EXPECT_FLOAT_EQ(Y[1], -2.0f);
  const float dY[] = {3, -1};
  cpu::add_backward(dY, dA, dB, 2, true, false);
  EXPECT_FLOAT_EQ(dA[0], 4.0f);
  EXPECT_FLOAT_EQ(dB[1], -1.0f);
}

TEST(Ops, SoftmaxCrossEntropyHandChecked) {
  const float z[] = {1, 2, 3, 0, 0, 0};
  const int32_t y[] = {2, 0};
  float loss, dz[6];
  cpu::softmax_cross_entropy(z, y, nullptr, &loss, dz, 2, 3, Reduction::Mean);
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;  // 0.40760596
  const double l1 = std::log(3.0);
  EXPECT_NEAR(loss, (l0 + l1) / 2, 1e-6);
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(dz[0], std::exp(1.0) / s / 2, 1e-7);
  EXPECT_NEAR(dz[2], (std::exp(3.0) / s - 1) / 2, 1e-7);
  EXPECT_NEAR(dz[3], (1.0 / 3 - 1) / 2, 1e-7);
  cpu::softmax_cross_entropy(z, y, nullptr, &loss, dz, 2, 3, Reduction::Sum);
  EXPECT_NEAR(loss, l0 + l1, 1e-6);
  EXPECT_NEAR(dz[4], 1.0 / 3, 1e-7);
  // Large logits stay finite (log-sum-exp with the max subtracted).
  const float big[] = {1000, 0, -1000};
  const int32_t y0[] = {0};
  cpu::softmax_cross_entropy(big, y0, nullptr, &loss, dz, 1, 3, Reduction::Mean);
  EXPECT_NEAR(loss, 0.0, 1e-6);
  const int32_t bad[] = {3};
  EXPECT_THROW(cpu::softmax_cross_entropy(big, bad, nullptr, &loss, dz, 1, 3, Reduction::Mean), Error);
}

TEST(Ops, MeanSquaredErrorHandChecked) {
  const float p[] = {1, 2, 3, 4}, t[] = {0, 2, 5, 4};
  float loss, dp[4];
  cpu::mean_squared_error(p, t, nullptr, &loss, dp, 2, 2, Reduction::Mean);
  EXPECT_FLOAT_EQ(loss, (1 + 0 + 4 + 0) / 4.0f);
  EXPECT_FLOAT_EQ(dp[0], 2 * 1 / 4.0f);
  EXPECT_FLOAT_EQ(dp[2], 2 * -2 / 4.0f);
  cpu::mean_squared_error(p, t, nullptr, &loss, dp, 2, 2, Reduction::Sum);
  EXPECT_FLOAT_EQ(loss, 5.0f);
  EXPECT_FLOAT_EQ(dp[2], -4.0f);
  // Only the first row is valid: padding rows get no loss and no gradient.
  const int32_t one = 1;
  dp[2] = dp[3] = 99;
  cpu::mean_squared_error(p, t, &one, &loss, dp, 2, 2, Reduction::Mean);
  EXPECT_FLOAT_EQ(loss, 1 / 2.0f);
  EXPECT_FLOAT_EQ(dp[0], 2 * 1 / 2.0f);
  EXPECT_FLOAT_EQ(dp[2], 0.0f);
  EXPECT_FLOAT_EQ(dp[3], 0.0f);
}

TEST(Ops, SoftmaxCrossEntropyIgnoresPaddingRows) {
  const float z[] = {1, 2, 3, 0, 0, 0};
  const int32_t y[] = {2, 0}, one = 1;
  float loss, dz[6];
  std::fill(dz, dz + 6, 99.0f);
  cpu::softmax_cross_entropy(z, y, &one, &loss, dz, 2, 3, Reduction::Mean);
  EXPECT_NEAR(loss, std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, 1e-6);
  for (int c = 3; c < 6; ++c) EXPECT_EQ(dz[c], 0.0f);
  const int32_t too_many = 3;
  EXPECT_THROW(cpu::softmax_cross_entropy(z, y, &too_many, &loss, dz, 2, 3, Reduction::Mean), Error);
}

TEST(Ops, ScheduleFromTheStepCounter) {
  const float hyper[] = {0.1f, 0.0f};
  auto lr_after = [&](ScheduleAttrs a, int steps) {
    int32_t step = 0;
    float sched[sched::kSize];
    for (int i = 0; i < steps; ++i) cpu::schedule(&step, hyper, sched, a);
    EXPECT_EQ(step, steps);
    EXPECT_FLOAT_EQ(sched[sched::kStep], static_cast<float>(steps));
    return sched[sched::kLr];
  };
  ScheduleAttrs st;
  st.kind = ScheduleKind::Step;
  st.step_size = 10;
  st.gamma = 0.5;
  EXPECT_FLOAT_EQ(lr_after(st, 10), 0.1f);
  EXPECT_FLOAT_EQ(lr_after(st, 11), 0.05f);
  EXPECT_FLOAT_EQ(lr_after(st, 25), 0.025f);
  ScheduleAttrs cos;
  cos.kind = ScheduleKind::Cosine;
  cos.warmup_steps = 10;
  cos.total_steps = 110;
  cos.min_lr_ratio = 0.1;
  EXPECT_FLOAT_EQ(lr_after(cos, 5), 0.05f);    // warm-up ramp
  EXPECT_FLOAT_EQ(lr_after(cos, 10), 0.1f);
  EXPECT_NEAR(lr_after(cos, 60), 0.01 + 0.09 * 0.5, 1e-7);  // halfway
  EXPECT_NEAR(lr_after(cos, 110), 0.01, 1e-8);
  EXPECT_NEAR(lr_after(cos, 500), 0.01, 1e-8);  // stays at the floor
  // The host formula agrees.
  Schedule hs = Schedule::cosine(10, 110, 0.1);
  EXPECT_NEAR(hs.lr_at(0.1, 60), 0.055, 1e-12);
  // Adam bias corrections.
  ScheduleAttrs adam;
  adam.beta1 = 0.9;
  adam.beta2 = 0.999;
  int32_t step = 2;
  float sched[sched::kSize];
  cpu::schedule(&step, hyper, sched, adam);
  EXPECT_NEAR(sched[sched::kBias1], 1 - std::pow(0.9, 3), 1e-7);
  EXPECT_NEAR(sched[sched::kBias2], 1 - std::pow(0.999, 3), 1e-7);
}

}  // namespace
}  // namespace sg::test
