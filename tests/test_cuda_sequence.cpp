// The sequence ops on the CUDA backend (layer norm, embedding, attention, dense and
// cross-entropy over [batch, positions, ...] tensors) against the CPU reference, graph replay
// against eager execution, and the refusals. The GPU tests skip (saying why) without a usable
// GPU; the host-side checks run everywhere.
#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>

#include "stepgraph/bench.h"
#include "stepgraph/config.h"
#include "stepgraph/data.h"
#include "stepgraph/graph.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_util.h"
#ifdef STEPGRAPH_HAVE_CUDA
#include "backend/cuda/kernels/sequence_kernels.cuh"
#include "backend/cuda/lower/lowerings.h"
#include "backend/cuda/lower/sequence.h"
#endif

namespace sg::test {
namespace {

// A training step (model, token cross-entropy with a valid_rows input, optimizer) on token ids
// "input" [B, S].
Built seq_train_program(Layer& model, const Loss& loss, Shape in, const Optimizer& opt) {
  Built b;
  GraphBuilder g(b.p);
  TensorId X = g.tensor("input", in, Role::Input);
  b.pred = model.build(g, X, "");
  TensorId y = g.tensor("target", loss.target_shape(b.p.tensor(b.pred).shape), Role::Input, loss.target_dtype());
  TensorId valid = g.tensor("valid_rows", {1}, Role::Input, DType::I32);
  LossOutputs lo = loss.build(g, b.pred, y, valid);
  b.loss = lo.loss;
  b.grads = append_backward(b.p, b.pred, lo.dpred);
  b.specs = g.param_specs();
  opt.build(g, b.grads);
  return b;
}

struct SeqCase {
  std::string what;
  LayerPtr model;
  int64_t B, S, vocab;
  double ignored = 0.3;  // share of positions without a target
  int32_t valid = -1;    // valid batch rows (-1: all)
  Reduction reduction = Reduction::Mean;
  int steps = 2;
  double tol = 1e-4;
  double label_smoothing = 0;
  std::vector<float> class_weights = {};  // empty: none
};

// The CPU and the GPU run `c`'s training step from the same random state on the same fresh
// batches; every tensor a step writes (activations, statistics, log-sum-exps, logits, loss,
// gradients, updated parameters and optimizer state) must match, and none may be left unwritten.
void compare_sequence_step(const SeqCase& c, uint64_t seed) {
  Built b = seq_train_program(*c.model, SoftmaxCrossEntropy(c.reduction, c.label_smoothing, c.class_weights), {c.B, c.S},
                              AdamW(1e-3, 0.9, 0.999, 1e-8, 1e-2));
  Program prog = b.p;
  keep_results(prog);
  PoisonedRun cpu(Device::CPU, prog), gpu(Device::CUDA, prog);
  set_random_state(cpu, gpu, prog, b.specs, seed);
  auto set_both = [&](const std::string& name, const HostArray& a) {
    cpu.set(name, a);
    gpu.set(name, a);
  };
  const int64_t classes = prog.tensor(b.pred).shape.back();
  for (int step = 0; step < c.steps; ++step) {
    set_both("input", token_ids(c.B, c.S, c.vocab, seed + 100 * step + 1));
    set_both("target", token_labels(c.B, c.S, classes, c.ignored, seed + 100 * step + 2));
    set_both("valid_rows", HostArray::i32({1}, {c.valid < 0 ? static_cast<int32_t>(c.B) : c.valid}));
    cpu.exe->run();
    gpu.exe->run();
  }
  expect_same_results(prog, cpu, gpu, c.what, c.tol);
}

TEST(CudaSequence, LayerNormEmbeddingAndTokenLossMatchCpu) {
  REQUIRE_GPU();
  const std::vector<SeqCase> cases = {
      {"embedding with positions, layer norm, dense", sequential({embedding(11, 8, 6), layer_norm(), dense(5)}), 3, 5, 11},
      {"embedding without positions", sequential({embedding(7, 5), dense(9)}), 4, 3, 7},
      // 1200 rows: the gain/shift gradients are summed in row chunks, then in chunk order.
      {"layer norm over 1200 rows of 40, relu dense", sequential({embedding(30, 40, 64), layer_norm(), dense(24, Activation::ReLU), layer_norm(), dense(17)}),
       20, 60, 30},
      // Widths above a warp and not a multiple of 32; a vocabulary of 300 over 2000 tokens.
      {"width 130, vocabulary 300", sequential({embedding(300, 130, 40), layer_norm(1e-3), dense(300)}), 50, 40, 300},
      {"sum reduction", sequential({embedding(9, 16, 8), layer_norm(), dense(9)}), 5, 8, 9, 0.3, -1, Reduction::Sum},
      {"padded batch rows (valid 3 of 5)", sequential({embedding(9, 16, 8), layer_norm(), dense(9)}), 5, 8, 9, 0.3, 3},
      {"no position has a target", sequential({embedding(9, 16, 8), layer_norm(), dense(9)}), 5, 8, 9, 1.0},
      {"every position has a target", sequential({embedding(9, 16, 8), layer_norm(), dense(9)}), 5, 8, 9, 0.0},
      // Above kCountInBlockRows label rows the targets are counted by a kernel of their own first.
      {"5120 token rows", sequential({embedding(9, 16, 64), layer_norm(), dense(9)}), 80, 64, 9, 0.4, 70},
  };
  for (size_t i = 0; i < cases.size(); ++i) compare_sequence_step(cases[i], 500 + 10 * i);
}

// Label smoothing and class weights: their own kernel (the last dense layer is then not fused
// into the loss); past kCountInBlockRows label rows the targets' count, or their summed weights,
// come from a kernel of their own first.
TEST(CudaSequence, SmoothedAndWeightedTokenLossMatchCpu) {
  REQUIRE_GPU();
  const std::vector<float> w = {0.5f, 2.0f, 0.0f, 1.0f, 1.5f, 0.25f, 1.0f, 3.0f, 0.75f};
  auto small = [] { return sequential({embedding(9, 16, 8), layer_norm(), dense(9)}); };
  auto big = [] { return sequential({embedding(9, 16, 64), layer_norm(), dense(9)}); };
  std::vector<SeqCase> cases = {
      {"smoothing", small(), 5, 8, 9, 0.3, 3, Reduction::Mean, 2, 1e-4, 0.1},
      {"weights, sum", small(), 5, 8, 9, 0.3, -1, Reduction::Sum, 2, 1e-4, 0.0, w},
      {"smoothing and weights", small(), 5, 8, 9, 0.3, 4, Reduction::Mean, 2, 1e-4, 0.2, w},
      {"smoothing, 5120 token rows", big(), 80, 64, 9, 0.4, 70, Reduction::Mean, 2, 1e-4, 0.1},
      {"smoothing and weights, 5120 token rows", big(), 80, 64, 9, 0.4, 70, Reduction::Mean, 2, 1e-4, 0.1, w},
  };
  for (size_t i = 0; i < cases.size(); ++i) compare_sequence_step(cases[i], 1500 + 10 * i);
}

TEST(CudaSequence, AttentionMatchesCpuCausalAndNot) {
  REQUIRE_GPU();
  // Lengths below, at and past the 64-row tiles (1, 5, 64, 65, 130); head dimensions 1 .. 64
  // (each kernel variant: 8, 16, 32, 64, and widths that are not multiples of them).
  struct A {
    int64_t S, width, heads;
  };
  for (bool causal : {true, false})
    for (A a : {A{1, 4, 1}, A{5, 12, 4}, A{5, 6, 6}, A{24, 32, 4}, A{64, 64, 4}, A{65, 48, 2}, A{130, 33, 1},
                A{17, 64, 1}, A{70, 128, 2}}) {
      for (bool bias : {true, false}) {
        SeqCase c{cat("attention S", a.S, " width ", a.width, " heads ", a.heads, causal ? " causal" : "", bias ? "" : " no bias"),
                  sequential({embedding(13, a.width, a.S), self_attention(a.heads, causal, bias), dense(7)}),
                  3, a.S, 13};
        compare_sequence_step(c, 700 + a.S + a.width + causal);
      }
    }
}

LayerPtr tiny_transformer(int64_t vocab, int64_t width, int64_t positions, int64_t heads, int64_t mlp) {
  return sequential({embedding(vocab, width, positions), transformer_block(heads, true, mlp),
                     transformer_block(heads, true, mlp), layer_norm(), dense(vocab)});
}

TEST(CudaSequence, TransformerStepsMatchCpu) {
  REQUIRE_GPU();
  // The example configs' shapes: reverse (vocabulary 21, width 32, 4 heads, 24 positions, batch
  // 64) and text (256, 64, 4 heads, 64 positions, batch 32: the products go to cuBLASLt).
  compare_sequence_step({"reverse-task transformer, 3 steps", tiny_transformer(21, 32, 24, 4, 64), 64, 24, 21, 0.5, -1,
                         Reduction::Mean, 3, 2e-4},
                        901);
  compare_sequence_step({"text transformer, 2 steps", tiny_transformer(256, 64, 64, 4, 128), 32, 64, 256, 0.0, -1,
                         Reduction::Mean, 2, 2e-4},
                        902);
}

std::unique_ptr<Trainer> seq_trainer(Device d, ExecMode mode) {
  TrainerOptions o;
  o.mode = mode;
  auto t = std::make_unique<Trainer>(tiny_transformer(21, 32, 24, 4, 64), std::make_shared<SoftmaxCrossEntropy>(),
                                     std::make_shared<AdamW>(3e-3, 0.9, 0.999, 1e-8, 1e-2), d, 5, o);
  t->compile({64, 24});
  return t;
}

TEST(CudaSequence, GraphReplayEqualsEagerBitwiseFor20Steps) {
  REQUIRE_GPU();
  auto graph = seq_trainer(Device::CUDA, ExecMode::Graph), eager = seq_trainer(Device::CUDA, ExecMode::Eager);
  for (int s = 0; s < 20; ++s) {
    HostArray X = token_ids(64, 24, 21, 9000 + s), y = token_labels(64, 24, 21, 0.5, 9100 + s);
    const float lg = graph->one_step(X, y), le = eager->one_step(X, y);
    ASSERT_EQ(std::memcmp(&lg, &le, 4), 0) << "step " << s << ": " << lg << " vs " << le;
  }
  EXPECT_EQ(graph->capture_count(), 1);
  EXPECT_GT(graph->graph_nodes(), 0u);
  auto a = graph->state(), b = eager->state();
  for (auto& [name, v] : a) EXPECT_EQ(std::memcmp(v.raw(), b.at(name).raw(), v.nbytes()), 0) << name << " differs";
  const std::string s = graph->explain();
  for (const char* want : {"layer norm kernel", "embedding gather kernel", "attention kernel", "attention backward",
                           "embedding backward", "labels < 0 have no target", "graph captures: 1"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
}

TEST(CudaSequence, TrainerInGraphMatchesCpuFor10Steps) {
  REQUIRE_GPU();
  auto gpu = seq_trainer(Device::CUDA, ExecMode::Graph), cpu = seq_trainer(Device::CPU, ExecMode::Eager);
  for (int s = 0; s < 10; ++s) {
    HostArray X = token_ids(64, 24, 21, 9200 + s), y = token_labels(64, 24, 21, 0.5, 9300 + s);
    const float lg = gpu->one_step(X, y), lc = cpu->one_step(X, y);
    EXPECT_TRUE(near(lg, lc, 1e-5, 1e-4)) << "step " << s << ": " << lg << " vs " << lc;
  }
  // As the CNN test: Adam turns tiny gradient differences on near-zero gradients into steps of
  // up to lr, so tensors are compared as a whole and elementwise only to within a few steps.
  expect_params_close(gpu->params(), cpu->params(), 1e-3, 1e-2);
  // Evaluation (forward + loss only) agrees too.
  HostArray X = token_ids(40, 24, 21, 9400), y = token_labels(40, 24, 21, 0.5, 9401);
  const EvalResult eg = gpu->evaluate(X, y), ec = cpu->evaluate(X, y);
  EXPECT_TRUE(near(eg.loss, ec.loss, 1e-5, 1e-3)) << eg.loss << " vs " << ec.loss;
}

TEST(CudaSequence, ResidentTokenDataTrainsInGraphLikeEager) {
  REQUIRE_GPU();
  const Dataset data = make_sequence_task("reverse", 700, 12, 20, 3);  // [700, 24] ids and labels, vocabulary 21
  auto graph = seq_trainer(Device::CUDA, ExecMode::Graph), eager = seq_trainer(Device::CUDA, ExecMode::Eager);
  for (Trainer* t : {graph.get(), eager.get()}) t->set_dataset(data.X, data.y, 64, true, LastBatch::Partial, 3);
  for (int s = 0; s < 15; ++s) {  // 11 batches per epoch, the last padded
    graph->launch();
    eager->launch();
  }
  const float lg = graph->loss(), le = eager->loss();
  EXPECT_EQ(std::memcmp(&lg, &le, 4), 0) << lg << " vs " << le;
  EXPECT_TRUE(std::isfinite(lg));
  EXPECT_EQ(graph->capture_count(), 1);
}

TEST(CudaSequence, ExampleConfigsTrainOnTheGpu) {
  REQUIRE_GPU();
  {
    RunConfig cfg = load_config(std::string(SG_SOURCE_DIR) + "/configs/reverse_transformer.json");
    RunOptions opt;
    opt.device = "cuda";
    opt.steps = 150;
    std::ostringstream out;
    opt.out = &out;
    RunSummary r = train_run(cfg, opt);
    EXPECT_NE(r.device.find("cuda"), std::string::npos) << r.device;
    EXPECT_GE(r.val_accuracy, 0.95) << out.str();  // the CPU run's bar (tests/cli_tests.cmake)
    EXPECT_LE(r.val_loss, 0.2) << out.str();
    std::cout << "[ reverse  ] cuda: " << r.to_json().dump() << "\n";
  }
  {
    RunConfig cfg = load_config(std::string(SG_SOURCE_DIR) + "/configs/text_transformer.json");
    RunOptions opt;
    opt.device = "cuda";
    opt.steps = 40;
    std::ostringstream out;
    opt.out = &out;
    RunSummary r = train_run(cfg, opt);
    EXPECT_LE(r.final_loss, 4.0) << out.str();  // the CPU run's bar (tests/cli_tests.cmake)
    std::cout << "[ text     ] cuda: " << r.to_json().dump() << "\n";
  }
}

TEST(CudaSequence, VerifyModePassesOnTheReverseTransformer) {
  REQUIRE_GPU();
  RunConfig cfg = load_config(std::string(SG_SOURCE_DIR) + "/configs/reverse_transformer.json");
  RunOptions opt;
  const VerifyResult r = verify_run(cfg, opt, 20, 1e-3);
  std::cout << "[ verify   ] " << r.to_json().dump() << "\n";
  EXPECT_EQ(r.graph_vs_eager, 0.0);
  EXPECT_TRUE(r.ok) << r.to_json().dump();
}

// A batch's token ids are checked on the host before the step, on either backend, with the CPU
// kernel's message (the CUDA kernels cannot stop a step; they would write NaN rows).
TEST(CudaSequence, BadTokenIdsAreRefusedBeforeTheStep) {
  std::vector<Device> devices = {Device::CPU};
  std::string why;
  if (cuda_available(&why)) devices.push_back(Device::CUDA);
  for (Device d : devices) {
    auto t = seq_trainer(d, ExecMode::Graph);
    HostArray X = token_ids(64, 24, 21, 1), y = token_labels(64, 24, 21, 0.5, 2);
    EXPECT_NO_THROW(t->one_step(X, y));
    for (float bad : {21.0f, -1.0f, 2.5f, NAN}) {
      X.data<float>()[3 * 24 + 5] = bad;
      try {
        t->one_step(X, y);
        FAIL() << "token id " << bad << " accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("at batch row 3, position 5 is not an integer in [0, 21), the embedding's vocabulary"),
                  std::string::npos)
            << e.what();
      }
      EXPECT_THROW(t->predict(X), Error);
    }
    EXPECT_EQ(t->step(), 1);  // no step ran with a bad id
  }
}

#ifdef STEPGRAPH_HAVE_CUDA
// Shapes beyond the kernels' limits are refused before anything is planned, naming the op, the
// shape and the limit (a host-side check: runs without a GPU).
TEST(CudaSequence, UnsupportedShapesAreRefusedWithAMessage) {
  auto model = sequential({embedding(10, 160, 8), self_attention(2, true), dense(10)});  // head dimension 80
  Built b = seq_train_program(*model, SoftmaxCrossEntropy(), {2, 8}, AdamW());
  int refused = 0;
  // The refusals are the CUDA lowering table's (lower/lowerings.cpp).
  for (const Op& op : b.p.ops()) {
    const auto refuse = cuda::cuda_lowering(op.kind).refuse;
    if (!refuse) continue;
    if (op.kind != OpKind::Attention && op.kind != OpKind::AttentionBackward) {
      EXPECT_NO_THROW(refuse(b.p, op, LowerOptions{})) << op.name;
      continue;
    }
    try {
      refuse(b.p, op, LowerOptions{});
      ADD_FAILURE() << op.name << " accepted";
    } catch (const Error& e) {
      ++refused;
      const std::string m = e.what();
      for (const std::string want : {"op '" + op.name + "'", std::string("head dimension 80"), std::string("[2, 8, 160]"),
                                     std::string("limit of 64"), std::string("--device cpu")})
        EXPECT_NE(m.find(want), std::string::npos) << want << " not in: " << m;
    }
  }
  EXPECT_EQ(refused, 2);  // forward and backward
  // 64 is supported.
  auto ok = sequential({embedding(10, 128, 8), self_attention(2, true), dense(10)});
  Built c = seq_train_program(*ok, SoftmaxCrossEntropy(), {2, 8}, AdamW());
  for (const Op& op : c.p.ops())
    if (const auto refuse = cuda::cuda_lowering(op.kind).refuse) EXPECT_NO_THROW(refuse(c.p, op, LowerOptions{}));
  EXPECT_TRUE(cuda::embedding_backward_supported(50000, 65536));
  EXPECT_FALSE(cuda::embedding_backward_supported(100000, 65536));
}

TEST(CudaSequence, UnsupportedAttentionIsRefusedByTheTrainer) {
  REQUIRE_GPU();
  Trainer t(sequential({embedding(10, 160, 8), self_attention(2, true), dense(10)}),
            std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<AdamW>(), Device::CUDA);
  try {
    t.compile({2, 8});
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head dimension 80"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("limit of 64"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace sg::test
