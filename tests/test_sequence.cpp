// Sequence ops on the CPU reference: attention forward and backward against direct formulas and
// finite differences (causal and not), embedding and layer norm values and errors, per-token
// cross-entropy with positions without a target.
#include "backend/cpu/cpu_kernels.h"
#include "stepgraph/trainer.h"
#include "test_util.h"

namespace sg::test {
namespace {

// Direct attention in double: O [B, S, H*D] and the log-sum-exp L [B, H, S].
struct DirectAttention {
  std::vector<double> O, L;
};
DirectAttention direct_attention(const std::vector<double>& Q, const std::vector<double>& K, const std::vector<double>& V,
                                 const cpu::AttentionShape& a) {
  DirectAttention r;
  r.O.assign(Q.size(), 0.0);
  r.L.assign(a.B * a.H * a.S, 0.0);
  auto at = [&](int64_t b, int64_t s, int64_t h) { return ((b * a.S + s) * a.H + h) * a.D; };
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h)
      for (int64_t i = 0; i < a.S; ++i) {
        std::vector<double> e(a.S, 0.0);
        double z = 0;
        for (int64_t j = 0; j <= (a.causal ? i : a.S - 1); ++j) {
          double s = 0;
          for (int64_t d = 0; d < a.D; ++d) s += Q[at(b, i, h) + d] * K[at(b, j, h) + d];
          e[j] = std::exp(a.scale * s);
          z += e[j];
        }
        r.L[(b * a.H + h) * a.S + i] = std::log(z);
        for (int64_t j = 0; j < a.S; ++j)
          for (int64_t d = 0; d < a.D; ++d) r.O[at(b, i, h) + d] += e[j] / z * V[at(b, j, h) + d];
      }
  return r;
}

std::vector<float> floats(const HostArray& a) { return std::vector<float>(a.data<float>(), a.data<float>() + a.numel()); }

TEST(Attention, ForwardMatchesSoftmaxFormulaCausalAndNot) {
  for (bool causal : {false, true}) {
    cpu::AttentionShape a{2, 5, 3, 4, causal, 0.5};
    const Shape s{a.B, a.S, a.H * a.D};
    HostArray Q = random_f32(s, 1), K = random_f32(s, 2), V = random_f32(s, 3);
    std::vector<float> O(numel(s), NAN), L(a.B * a.H * a.S, NAN);
    cpu::attention(Q.data<float>(), K.data<float>(), V.data<float>(), O.data(), L.data(), a);
    const DirectAttention d = direct_attention(to_double(Q), to_double(K), to_double(V), a);
    for (size_t i = 0; i < O.size(); ++i) ASSERT_TRUE(near(O[i], d.O[i], 1e-6, 1e-5)) << "O " << i;
    for (size_t i = 0; i < L.size(); ++i) ASSERT_TRUE(near(L[i], d.L[i], 1e-6, 1e-6)) << "L " << i;
    if (causal) {
      // The first query sees only the first key: its output is the first value row.
      for (int64_t h = 0; h < a.H; ++h)
        for (int64_t dd = 0; dd < a.D; ++dd) EXPECT_FLOAT_EQ(O[h * a.D + dd], V.data<float>()[h * a.D + dd]);
    }
  }
}

TEST(Attention, BackwardMatchesFiniteDifferencesCausalAndNot) {
  // f(Q, K, V) = sum(G * O) for a fixed random G: its gradients are what backward computes
  // for dO = G.
  for (bool causal : {false, true}) {
    cpu::AttentionShape a{2, 4, 2, 3, causal, 1 / std::sqrt(3.0)};
    const Shape s{a.B, a.S, a.H * a.D};
    HostArray Q = random_f32(s, 11), K = random_f32(s, 12), V = random_f32(s, 13), G = random_f32(s, 14);
    std::vector<float> O(numel(s)), L(a.B * a.H * a.S);
    cpu::attention(Q.data<float>(), K.data<float>(), V.data<float>(), O.data(), L.data(), a);
    // Accumulating into 0.25 checks the acc flags at the same time.
    std::vector<float> dQ(numel(s), 0.25f), dK(numel(s), 0.25f), dV(numel(s), 0.25f);
    cpu::attention_backward(G.data<float>(), Q.data<float>(), K.data<float>(), V.data<float>(), O.data(), L.data(),
                            dQ.data(), dK.data(), dV.data(), a, true, true, true);
    std::vector<double> q = to_double(Q), k = to_double(K), v = to_double(V), g = to_double(G);
    auto f = [&] {
      const DirectAttention d = direct_attention(q, k, v, a);
      double t = 0;
      for (size_t i = 0; i < g.size(); ++i) t += g[i] * d.O[i];
      return t;
    };
    const double h = 1e-6;
    for (auto [x, grad, what] : {std::make_tuple(&q, &dQ, "dQ"), std::make_tuple(&k, &dK, "dK"),
                                 std::make_tuple(&v, &dV, "dV")}) {
      for (size_t i = 0; i < x->size(); ++i) {
        const double keep = (*x)[i];
        (*x)[i] = keep + h;
        const double fp = f();
        (*x)[i] = keep - h;
        const double fm = f();
        (*x)[i] = keep;
        ASSERT_TRUE(near((*grad)[i] - 0.25, (fp - fm) / (2 * h), 1e-5, 1e-4))
            << what << "[" << i << "]" << (causal ? " causal" : "");
      }
    }
    if (causal) {
      // The last value row reaches only the last query: dV of it is that query's probability
      // of the last key times G of the last query.
      const int64_t i = a.S - 1;
      for (int64_t h2 = 0; h2 < a.H; ++h2) {
        double sc = 0;
        for (int64_t d = 0; d < a.D; ++d) sc += q[(i * a.H + h2) * a.D + d] * k[(i * a.H + h2) * a.D + d];
        const double prob = std::exp(a.scale * sc - L[h2 * a.S + i]);
        for (int64_t d = 0; d < a.D; ++d) {
          const int64_t at = (i * a.H + h2) * a.D + d;
          EXPECT_TRUE(near(dV[at] - 0.25, prob * g[at], 1e-6, 1e-5)) << "dV of the last position";
        }
      }
    }
  }
}

TEST(Attention, ShapeChecksNameTheTensors) {
  Program p;
  TensorId Q = p.add_tensor({"q", {2, 5, 6}, DType::F32, Role::Input});
  TensorId K = p.add_tensor({"k", {2, 5, 6}, DType::F32, Role::Input});
  TensorId K4 = p.add_tensor({"k4", {2, 4, 6}, DType::F32, Role::Input});
  TensorId O = p.add_tensor({"o", {2, 5, 6}, DType::F32, Role::Activation});
  TensorId L = p.add_tensor({"l", {2, 4, 5}, DType::F32, Role::Activation});
  Op op;
  op.kind = OpKind::Attention;
  op.name = "attn";
  op.attrs = AttentionAttrs{4, true, 0};
  op.in = {Q, K, K};
  op.out = {O, L};
  try {
    p.add_op(op);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("width 6 of 'q' [2, 5, 6] does not split into 4 heads"), std::string::npos)
        << e.what();
  }
  op.attrs = AttentionAttrs{3, true, 0};
  op.in = {Q, K4, K};
  EXPECT_THROW(p.add_op(op), Error);  // K has another length
  op.in = {Q, K, K};
  try {
    p.add_op(op);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("log-sum-exp 'l' [2, 4, 5] must be [2, 3, 5]"), std::string::npos) << e.what();
  }
}

TEST(Embedding, ValuesIdsOfBothTypesAndBadIds) {
  // vocab 3, dim 2; positions 4 (two used).
  const float table[] = {0, 1, 10, 11, 20, 21}, pos[] = {0.5f, 0.25f, -1, -2, 7, 7, 7, 7};
  const int32_t ids_i[] = {2, 0, 1, 1};
  const float ids_f[] = {2, 0, 1, 1};
  float Yi[8], Yf[8];
  cpu::embedding(ids_i, nullptr, table, pos, Yi, 2, 2, 3, 2);
  cpu::embedding(nullptr, ids_f, table, pos, Yf, 2, 2, 3, 2);
  EXPECT_EQ(std::vector<float>(Yi, Yi + 8), (std::vector<float>{20.5f, 21.25f, -1, -1, 10.5f, 11.25f, 9, 9}));
  EXPECT_EQ(std::vector<float>(Yf, Yf + 8), std::vector<float>(Yi, Yi + 8));
  // Backward: id 1 appears twice; position rows beyond the sequence get zero.
  const float dY[] = {1, 2, 3, 4, 5, 6, 7, 8};
  float dtable[6], dpos[8];
  cpu::embedding_backward(dY, ids_i, nullptr, dtable, dpos, 2, 2, 3, 4, 2, false, false);
  EXPECT_EQ(std::vector<float>(dtable, dtable + 6), (std::vector<float>{3, 4, 12, 14, 1, 2}));
  EXPECT_EQ(std::vector<float>(dpos, dpos + 8), (std::vector<float>{6, 8, 10, 12, 0, 0, 0, 0}));
  const float bad_f[] = {2, 0.5f, 1, 1};
  try {
    cpu::embedding(nullptr, bad_f, table, pos, Yf, 2, 2, 3, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 0.5 at batch row 0, position 1 is not an integer in [0, 3), the embedding's vocabulary"), std::string::npos)
        << e.what();
  }
  const int32_t bad_i[] = {2, 0, 3, 1};
  EXPECT_THROW(cpu::embedding(bad_i, nullptr, table, pos, Yi, 2, 2, 3, 2), Error);
}

TEST(LayerNorm, RowsAreNormalisedAndStatisticsKept) {
  const float X[] = {1, 2, 3, 4, -2, -2, -2, -2};
  const float g[] = {1, 2, 1, 1}, b[] = {0, 0, 0, 1};
  float Y[8], mean[2], rstd[2];
  cpu::layer_norm(X, g, b, Y, mean, rstd, 2, 4, 1e-5);
  EXPECT_FLOAT_EQ(mean[0], 2.5f);
  EXPECT_NEAR(rstd[0], 1 / std::sqrt(1.25 + 1e-5), 1e-6);
  EXPECT_NEAR(Y[1], -0.5 / std::sqrt(1.25 + 1e-5) * 2, 1e-6);
  EXPECT_NEAR(Y[3], 1.5 / std::sqrt(1.25 + 1e-5) + 1, 1e-6);
  // A constant row: zero variance, eps keeps it finite; the output is the shift.
  EXPECT_FLOAT_EQ(Y[4], 0.0f);
  EXPECT_FLOAT_EQ(Y[7], 1.0f);
}

TEST(TokenCrossEntropy, IgnoredPositionsHaveNoLossNoGradientAndAreNotCounted) {
  // B = 1, S = 3, C = 2: labels {-1, 1, 0}; only two tokens count.
  const float z[] = {5, -5, 0, 0, 1, 3};
  const int32_t y[] = {-1, 1, 0};
  float loss, dz[6];
  cpu::softmax_cross_entropy(z, y, nullptr, &loss, dz, 1, 2, Reduction::Mean, 3, true);
  const double l1 = std::log(2.0), l2 = std::log(std::exp(1.0) + std::exp(3.0)) - 1.0;
  EXPECT_NEAR(loss, (l1 + l2) / 2, 1e-6);
  EXPECT_EQ(dz[0], 0.0f);
  EXPECT_EQ(dz[1], 0.0f);
  EXPECT_NEAR(dz[3], (0.5 - 1) / 2, 1e-7);
  // A padded batch row (valid 0 of 1): nothing counts, the loss is 0 and every gradient zero.
  const int32_t valid = 0;
  cpu::softmax_cross_entropy(z, y, &valid, &loss, dz, 1, 2, Reduction::Mean, 3, true);
  EXPECT_EQ(loss, 0.0f);
  for (float v : dz) EXPECT_EQ(v, 0.0f);
  // Without ignore_negative a negative label is an error naming the row.
  EXPECT_THROW(cpu::softmax_cross_entropy(z, y, nullptr, &loss, dz, 1, 2, Reduction::Mean, 3, false), Error);
}

TEST(Sequence, LayersCheckTheirInputs) {
  Program p;
  GraphBuilder g(p);
  TensorId ids = g.tensor("input", {4, 9}, Role::Input);
  TensorId x3 = g.tensor("x3", {4, 9, 6}, Role::Input);
  EXPECT_THROW(embedding(10, 8, 8)->build(g, ids, "0"), Error);  // 9 tokens, 8 positions
  EXPECT_THROW(embedding(10, 8)->build(g, x3, "0"), Error);      // not ids [batch, positions]
  try {
    self_attention(4, true)->build(g, x3, "2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("self_attention layer '2': width 6 does not split into 4 heads"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(self_attention(2, true)->build(g, ids, "1"), Error);  // needs [batch, positions, features]
  TensorId y = self_attention(3, true)->build(g, x3, "1");
  EXPECT_EQ(p.tensor(y).shape, (Shape{4, 9, 6}));
  EXPECT_EQ(p.tensor(p.find("1.query.weight")).shape, (Shape{6, 6}));
  EXPECT_NE(print_program(p).find("attention(3 heads, causal)"), std::string::npos);
}

LayerPtr tiny_transformer(int64_t vocab, int64_t positions) {
  return sequential({embedding(vocab, 16, positions), transformer_block(2, true, 32), layer_norm(), dense(vocab)});
}

TEST(SequenceTrainer, LearnsTheReverseTaskAndEvaluatesPerLabelledToken) {
  const Dataset data = make_sequence_task("reverse", 600, 4, 6, 5);
  auto [train, val] = train_val_split(data, 0.2, 0);
  Trainer t(tiny_transformer(7, 8), std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(0.01), Device::CPU, 1);
  t.compile({32, 8});
  EXPECT_EQ(t.output_shape(), (Shape{32, 8, 7}));
  const EvalResult before = t.evaluate(val.X, val.y);
  BatchSampler sampler(train.size(), 32, true, 7);
  for (int64_t s = 0; s < 250; ++s) {
    Dataset b = gather(train, sampler.indices(s));
    t.one_step(b.X, b.y);
  }
  const EvalResult after = t.evaluate(val.X, val.y);
  EXPECT_GT(before.loss, 1.5);      // about log(7) untrained
  EXPECT_LT(after.loss, 0.2 * before.loss);
  EXPECT_GT(after.accuracy, 0.9);   // of the 4 answer tokens per sample; chance is 1/6
  // Evaluating in chunks of another size weights each chunk by its labelled tokens.
  Trainer u(tiny_transformer(7, 8), std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(0.01), Device::CPU, 1);
  u.compile({7, 8});
  u.set_params(t.params());
  const EvalResult chunked = u.evaluate(val.X, val.y);
  EXPECT_NEAR(chunked.loss, after.loss, 1e-5);
  EXPECT_DOUBLE_EQ(chunked.accuracy, after.accuracy);
  // predict keeps the per-position shape.
  EXPECT_EQ(t.predict(val.X).shape(), (Shape{val.size(), 8, 7}));
}

TEST(SequenceTrainer, BatchLabelsAreChecked) {
  Trainer t(tiny_transformer(7, 8), std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(0.01), Device::CPU, 1);
  t.compile({2, 8});
  HostArray X(DType::F32, {2, 8}), y(DType::I32, {2, 8});
  for (int64_t i = 0; i < 16; ++i) y.data<int32_t>()[i] = i % 2 ? -1 : 3;
  EXPECT_NO_THROW(t.one_step(X, y));
  y.data<int32_t>()[11] = -2;
  try {
    t.one_step(X, y);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label -2 at row 1, position 3 is outside [-1, 7)"), std::string::npos) << e.what();
  }
  y.data<int32_t>()[11] = 7;
  EXPECT_THROW(t.one_step(X, y), Error);
  EXPECT_THROW(t.one_step(X, HostArray(DType::I32, {2})), Error);  // one label per row is not per token
}

}  // namespace
}  // namespace sg::test
