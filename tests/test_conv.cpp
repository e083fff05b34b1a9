// Convolution, pooling and reshape on the CPU reference: against direct loops written here,
// hand-checked tie and padding rules, and the shape checks' messages.
#include "backend/cpu/cpu_kernels.h"
#include "test_util.h"

namespace sg::test {
namespace {

struct Geometry {
  int64_t N, H, W, C, K, R, S;
  ConvAttrs a;
  int64_t P() const { return conv_output_size(H, R, a.pad_h, a.stride_h, a.dil_h); }
  int64_t Q() const { return conv_output_size(W, S, a.pad_w, a.stride_w, a.dil_w); }
};

ConvAttrs attrs(int ph, int pw, int sh, int sw, int dh, int dw, Activation act) {
  ConvAttrs a;
  a.pad_h = ph, a.pad_w = pw, a.stride_h = sh, a.stride_w = sw, a.dil_h = dh, a.dil_w = dw, a.act = act;
  return a;
}

// The program {X, W, b} -> conv2d -> Y, with X, W, b as inputs.
Program conv_program(const Geometry& g, bool bias) {
  Program p;
  TensorId X = p.add_tensor({"X", {g.N, g.H, g.W, g.C}, DType::F32, Role::Input});
  TensorId W = p.add_tensor({"W", {g.K, g.R, g.S, g.C}, DType::F32, Role::Input});
  TensorId b = bias ? p.add_tensor({"b", {g.K}, DType::F32, Role::Input}) : kNone;
  TensorId Y = p.add_tensor({"Y", {g.N, g.P(), g.Q(), g.K}, DType::F32, Role::Activation});
  p.tensor(Y).live_out = true;
  Op op;
  op.kind = OpKind::Conv2d;
  op.name = "conv";
  op.in = {X, W, b};
  op.out = {Y};
  op.attrs = g.a;
  p.add_op(std::move(op));
  return p;
}

// Direct loops over every (output, tap) pair: Z (pre-activation) and, for a given dZ, the three
// gradients by scattering.
struct Direct {
  std::vector<double> Z, dX, dW, db;
};
Direct direct(const Geometry& g, const float* X, const float* W, const float* b, const std::vector<double>& dZ) {
  const int64_t P = g.P(), Q = g.Q();
  Direct d;
  d.Z.assign(g.N * P * Q * g.K, 0.0);
  d.dX.assign(g.N * g.H * g.W * g.C, 0.0);
  d.dW.assign(g.K * g.R * g.S * g.C, 0.0);
  d.db.assign(g.K, 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t i = 0; i < P; ++i)
      for (int64_t j = 0; j < Q; ++j)
        for (int64_t k = 0; k < g.K; ++k) {
          const int64_t o = ((n * P + i) * Q + j) * g.K + k;
          d.Z[o] = b ? b[k] : 0.0;
          if (!dZ.empty()) d.db[k] += dZ[o];
          for (int64_t r = 0; r < g.R; ++r)
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t h = i * g.a.stride_h - g.a.pad_h + r * g.a.dil_h;
              const int64_t w = j * g.a.stride_w - g.a.pad_w + s * g.a.dil_w;
              if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
              for (int64_t c = 0; c < g.C; ++c) {
                const int64_t xi = ((n * g.H + h) * g.W + w) * g.C + c, wi = ((k * g.R + r) * g.S + s) * g.C + c;
                d.Z[o] += static_cast<double>(X[xi]) * W[wi];
                if (!dZ.empty()) {
                  d.dX[xi] += dZ[o] * W[wi];
                  d.dW[wi] += dZ[o] * X[xi];
                }
              }
            }
        }
  return d;
}

const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> g = {
      {2, 5, 6, 3, 4, 3, 3, attrs(1, 1, 1, 1, 1, 1, Activation::ReLU)},   // same padding
      {2, 7, 5, 2, 3, 3, 3, attrs(1, 1, 2, 2, 1, 1, Activation::None)},   // stride 2
      {1, 9, 8, 3, 2, 3, 3, attrs(2, 2, 1, 1, 2, 2, Activation::ReLU)},   // dilation 2
      {3, 6, 7, 1, 5, 2, 3, attrs(0, 1, 1, 2, 1, 1, Activation::None)},   // rectangular, per-dimension attrs
      {2, 4, 4, 5, 6, 1, 1, attrs(0, 0, 1, 1, 1, 1, Activation::ReLU)},   // 1x1: a dense layer per pixel
      {8, 16, 16, 8, 16, 3, 3, attrs(1, 1, 1, 1, 1, 1, Activation::ReLU)},  // large enough to use threads
  };
  return g;
}

TEST(Conv, ForwardMatchesDirectLoops) {
  int seed = 0;
  for (const Geometry& g : geometries()) {
    for (bool bias : {true, false}) {
      Runner run(conv_program(g, bias));
      HostArray X = random_f32({g.N, g.H, g.W, g.C}, ++seed), W = random_f32({g.K, g.R, g.S, g.C}, ++seed, 0.5),
                b = random_f32({g.K}, ++seed);
      run.set("X", X);
      run.set("W", W);
      if (bias) run.set("b", b);
      run.run();
      const Direct d = direct(g, X.data<float>(), W.data<float>(), bias ? b.data<float>() : nullptr, {});
      HostArray Y = run.get("Y");
      ASSERT_EQ(Y.numel(), static_cast<int64_t>(d.Z.size()));
      int relu_zeros = 0;
      for (int64_t i = 0; i < Y.numel(); ++i) {
        const double want = g.a.act == Activation::ReLU ? std::max(d.Z[i], 0.0) : d.Z[i];
        relu_zeros += want == 0.0;
        ASSERT_TRUE(near(Y.data<float>()[i], want, 1e-5, 1e-5)) << "geometry " << &g - &geometries()[0] << " element " << i;
      }
      if (g.a.act == Activation::ReLU) EXPECT_GT(relu_zeros, 0);  // the relu did something
    }
  }
}

TEST(Conv, BackwardMatchesDirectLoopsAndAccumulates) {
  int seed = 100;
  for (const Geometry& g : geometries()) {
    cpu::ConvShape s{g.N, g.H, g.W, g.C, g.K, g.R, g.S, g.P(), g.Q(), g.a.pad_h, g.a.pad_w,
                     g.a.stride_h, g.a.stride_w, g.a.dil_h, g.a.dil_w};
    HostArray X = random_f32({g.N, g.H, g.W, g.C}, ++seed), W = random_f32({g.K, g.R, g.S, g.C}, ++seed, 0.5),
              b = random_f32({g.K}, ++seed), dY = random_f32({g.N, g.P(), g.Q(), g.K}, ++seed);
    HostArray Y(DType::F32, dY.shape());
    cpu::conv2d_forward(X.data<float>(), W.data<float>(), b.data<float>(), Y.data<float>(), s, g.a.act);
    std::vector<double> dZ(dY.numel());
    for (int64_t i = 0; i < dY.numel(); ++i)
      dZ[i] = g.a.act == Activation::ReLU && Y.data<float>()[i] <= 0 ? 0.0 : dY.data<float>()[i];
    const Direct d = direct(g, X.data<float>(), W.data<float>(), b.data<float>(), dZ);
    for (bool acc : {false, true}) {
      // Accumulating adds to what is there (0.5); overwriting ignores it.
      std::vector<float> dX(X.numel(), 0.5f), dW(W.numel(), 0.5f), db(g.K, 0.5f);
      cpu::conv2d_backward(dY.data<float>(), X.data<float>(), W.data<float>(), Y.data<float>(), dX.data(), dW.data(),
                           db.data(), s, g.a.act, acc, acc, acc);
      const double base = acc ? 0.5 : 0.0;
      for (size_t i = 0; i < dX.size(); ++i) ASSERT_TRUE(near(dX[i], base + d.dX[i], 1e-5, 1e-5)) << "dX " << i;
      for (size_t i = 0; i < dW.size(); ++i) ASSERT_TRUE(near(dW[i], base + d.dW[i], 1e-4, 1e-5)) << "dW " << i;
      for (size_t i = 0; i < db.size(); ++i) ASSERT_TRUE(near(db[i], base + d.db[i], 1e-4, 1e-5)) << "db " << i;
    }
  }
}

TEST(Conv, OptionalGradientsAreSkipped) {
  const Geometry& g = geometries()[0];
  cpu::ConvShape s{g.N, g.H, g.W, g.C, g.K, g.R, g.S, g.P(), g.Q(), 1, 1, 1, 1, 1, 1};
  HostArray X = random_f32({g.N, g.H, g.W, g.C}, 1), W = random_f32({g.K, g.R, g.S, g.C}, 2),
            dY = random_f32({g.N, g.P(), g.Q(), g.K}, 3), Y = random_f32(dY.shape(), 4);
  std::vector<float> dW(W.numel());
  cpu::conv2d_backward(dY.data<float>(), X.data<float>(), W.data<float>(), Y.data<float>(), nullptr, dW.data(),
                       nullptr, s, Activation::None, false, false, false);
  double norm = 0;
  for (float v : dW) norm += v * v;
  EXPECT_GT(norm, 0.0);
}

TEST(Pool, MaxPoolTiesGoToTheFirstMaximumAndOverlapsAccumulate) {
  // One 3x3 single-channel image; 2x2 windows with stride 1 overlap.
  //   1 5 5
  //   5 2 0
  //   3 3 3
  const float X[] = {1, 5, 5, 5, 2, 0, 3, 3, 3};
  cpu::ConvShape s{1, 3, 3, 1, 1, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1};
  float Y[4];
  cpu::max_pool2d(X, Y, s);
  EXPECT_EQ(std::vector<float>(Y, Y + 4), (std::vector<float>{5, 5, 5, 3}));
  const float dY[] = {1, 10, 100, 1000};
  float dX[9];
  cpu::max_pool2d_backward(dY, X, dX, s, false);
  // Window (0,0) {1,5,5,2}: the first 5 is (0,1). Window (0,1) {5,5,2,0}: (0,1) again.
  // Window (1,0) {5,2,3,3}: (1,0). Window (1,1) {2,0,3,3}: the first 3 is (2,1).
  EXPECT_EQ(std::vector<float>(dX, dX + 9), (std::vector<float>{0, 11, 0, 100, 0, 0, 0, 1000, 0}));
}

TEST(Pool, MaxPoolPaddingNeverWins) {
  // All values negative: with padding 1, a zero pad would win if padding were zeros.
  const float X[] = {-4, -3, -2, -1};
  cpu::ConvShape s{1, 2, 2, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1};
  float Y[4];
  cpu::max_pool2d(X, Y, s);
  EXPECT_EQ(std::vector<float>(Y, Y + 4), (std::vector<float>{-4, -3, -2, -1}));
}

TEST(Pool, GlobalAvgPoolAndBackward) {
  // N=1, 2x2, C=2: channel 0 = {1,2,3,4}, channel 1 = {10,20,30,40}.
  const float X[] = {1, 10, 2, 20, 3, 30, 4, 40};
  float Y[2];
  cpu::global_avg_pool(X, Y, 1, 4, 2);
  EXPECT_FLOAT_EQ(Y[0], 2.5f);
  EXPECT_FLOAT_EQ(Y[1], 25.0f);
  const float dY[] = {4, -8};
  float dX[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  cpu::global_avg_pool_backward(dY, dX, 1, 4, 2, true);
  EXPECT_EQ(std::vector<float>(dX, dX + 8), (std::vector<float>{2, -1, 2, -1, 2, -1, 2, -1}));
}

// The message of the Error that adding `op` to `p` raises ("" if none).
std::string add_error(Program& p, Op op) {
  try {
    p.add_op(std::move(op));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Conv, ShapeChecksNameTheTensors) {
  Program p;
  TensorId X = p.add_tensor({"img", {2, 8, 8, 3}, DType::F32, Role::Input});
  TensorId W = p.add_tensor({"filt", {4, 3, 3, 2}, DType::F32, Role::Parameter});
  TensorId W9 = p.add_tensor({"big", {4, 11, 11, 3}, DType::F32, Role::Parameter});
  TensorId W3 = p.add_tensor({"ok", {4, 3, 3, 3}, DType::F32, Role::Parameter});
  TensorId Y = p.add_tensor({"y", {2, 8, 8, 4}, DType::F32, Role::Activation});
  TensorId Ybad = p.add_tensor({"ybad", {2, 6, 6, 4}, DType::F32, Role::Activation});
  Op op;
  op.kind = OpKind::Conv2d;
  op.name = "c";
  op.attrs = attrs(1, 1, 1, 1, 1, 1, Activation::None);
  op.in = {X, W, kNone};
  op.out = {Y};
  EXPECT_NE(add_error(p, op).find("input 'img' [2, 8, 8, 3] has 3 channels but filter 'filt' [4, 3, 3, 2] (KRSC) expects 2"),
            std::string::npos);
  op.in = {X, W9, kNone};
  EXPECT_NE(add_error(p, op).find("a 11x11 filter with dilation (1, 1) and padding (1, 1) does not fit the 8x8 input"),
            std::string::npos);
  op.in = {X, W3, kNone};
  op.out = {Ybad};
  EXPECT_NE(add_error(p, op).find("output 'ybad' [2, 6, 6, 4] must be [2, 8, 8, 4]"), std::string::npos);
  op.out = {Y};
  op.attrs = attrs(1, 1, 1, 1, 1, 1, Activation::GELU);
  EXPECT_NE(add_error(p, op).find("activation gelu is not fused: conv2d takes none or relu"), std::string::npos);
  op.attrs = attrs(1, 1, 0, 1, 1, 1, Activation::None);
  EXPECT_NE(add_error(p, op).find("must be >= 1"), std::string::npos);
  op.attrs = attrs(1, 1, 1, 1, 1, 1, Activation::ReLU);
  EXPECT_EQ(add_error(p, op), "");

  Op pool;
  pool.kind = OpKind::MaxPool2d;
  pool.name = "pool";
  PoolAttrs pa;
  pa.window_h = pa.window_w = 2;
  pa.pad_h = 2;
  pool.attrs = pa;
  pool.in = {X};
  pool.out = {Ybad};
  EXPECT_NE(add_error(p, pool).find("padding (2, 0) must be in [0, window / 2]"), std::string::npos);
}

TEST(Conv, LayersSayWhatInputTheyExpect) {
  Program p;
  GraphBuilder g(p);
  TensorId x = g.tensor("input", {4, 64}, Role::Input);
  try {
    conv2d(8)->build(g, x, "0");
    FAIL() << "a conv on feature rows must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d layer '0' expects NHWC images [batch, height, width, channels], got "
                                         "[4, 64]; give the model an input_shape"),
              std::string::npos)
        << e.what();
  }
  auto model = sequential({conv2d(8, {3, 1, 1, 1, Activation::ReLU})});
  model->set_input_shape({7, 7, 1});
  EXPECT_THROW(
      {
        try {
          model->build(g, x, "");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("input shape [7, 7, 1] holds 49 values per sample, but the input is [4, 64]"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(conv2d(8, {3, 1, 1, 1, Activation::Tanh}), Error);
  EXPECT_THROW(max_pool2d(2, 2, 2), Error);  // padding > window / 2
  // A 5x5 kernel does not fit a 4x4 image without padding.
  model = sequential({conv2d(2, {5})});
  model->set_input_shape({4, 4, 4});
  EXPECT_THROW(model->build(g, x, "m"), Error);
}

TEST(Conv, ImageModelShapesAndParameters) {
  // 8x8 digits: conv 3x3 same -> 8x8x16, conv 3x3 stride 2 -> 4x4x32, pool 2 -> 2x2x32,
  // flatten -> 128, dense 10.
  Program p;
  GraphBuilder g(p);
  TensorId x = g.tensor("input", {5, 64}, Role::Input);
  auto model = sequential({conv2d(16, {3, 1, 1, 1, Activation::ReLU}), conv2d(32, {3, 2, 1, 1, Activation::ReLU}),
                           max_pool2d(2), flatten(), dense(10)});
  model->set_input_shape({8, 8, 1});
  TensorId y = model->build(g, x, "");
  EXPECT_EQ(p.tensor(y).shape, (Shape{5, 10}));
  EXPECT_EQ(p.tensor(p.find("0.weight")).shape, (Shape{16, 3, 3, 1}));
  EXPECT_EQ(p.tensor(p.find("1.weight")).shape, (Shape{32, 3, 3, 16}));
  EXPECT_EQ(p.tensor(p.find("1.out")).shape, (Shape{5, 4, 4, 32}));
  EXPECT_EQ(p.tensor(p.find("4.weight")).shape, (Shape{10, 128}));
  // he init with fan_in = 3 * 3 * 16 for the second conv.
  for (const ParamSpec& s : g.param_specs())
    if (s.name == "1.weight") EXPECT_EQ(s.fan_in, 144);
  EXPECT_EQ(model->describe(),
            "sequential(input_shape=[8, 8, 1], conv2d(16, 3x3, stride 1, padding 1, dilation 1, relu, init=he, bias), "
            "conv2d(32, 3x3, stride 2, padding 1, dilation 1, relu, init=he, bias), max_pool2d(2x2, stride 2, padding 0), "
            "flatten, dense(10, none, init=xavier, bias))");
}

}  // namespace
}  // namespace sg::test
