// train.attention "cudnn_bf16": the Attention op of a training step through cuDNN's fused SDPA in
// bf16 (sequence_lowering.cpp). On the host (every build): the CPU ignores the option, and shapes
// cuDNN cannot take are refused before planning, naming the op, its shape and the way out. On a
// GPU with cuDNN (skipped, saying why, without one): the conversion kernels round to nearest
// even; the op's O, L and gradients (causal and not, accumulating) against the CPU reference
// within bf16 tolerance; whole training steps against the fp32 path; graph replay equal to eager
// bit for bit; verify mode with a bf16 tolerance.
#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>

#include "stepgraph/config.h"
#include "stepgraph/bench.h"
#include "stepgraph/run.h"
#include "stepgraph/trainer.h"
#include "test_bf16.h"  // REQUIRE_GPU_AND_CUDNN
#include "test_util.h"
#ifdef STEPGRAPH_HAVE_CUDA
#include "backend/cuda/kernels/bf16_kernels.cuh"
#include "backend/cuda/runtime/cuda_check.h"
#include "backend/cuda/lower/sequence.h"
#endif
#ifdef STEPGRAPH_HAVE_CUDNN
#include "backend/cuda/libs/cudnn_conv.h"  // cudnn_loadable
#endif

namespace sg::test {
namespace {

LayerPtr small_transformer(int64_t width, int64_t heads) {
  return sequential({embedding(21, width, 24), transformer_block(heads, true, 2 * width),
                     transformer_block(heads, true, 2 * width), layer_norm(), dense(21)});
}

std::unique_ptr<Trainer> trainer_with(Device d, ExecMode mode, AttentionMode attention, int64_t width = 64,
                                      int64_t heads = 2) {
  TrainerOptions o;
  o.mode = mode;
  o.lower.attention = attention;
  auto t = std::make_unique<Trainer>(small_transformer(width, heads), std::make_shared<SoftmaxCrossEntropy>(),
                                     std::make_shared<AdamW>(3e-3, 0.9, 0.999, 1e-8, 1e-2), d, 5, o);
  t->compile({64, 24});
  return t;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The CPU has one attention: the option changes nothing there, bit for bit.
TEST(CudnnAttention, TheCpuRunsFp32WhateverTheOption) {
  auto fp32 = trainer_with(Device::CPU, ExecMode::Eager, AttentionMode::FP32);
  auto bf16 = trainer_with(Device::CPU, ExecMode::Eager, AttentionMode::CudnnBF16);
  for (int s = 0; s < 2; ++s) {
    HostArray X = token_ids(64, 24, 21, 300 + s), y = token_labels(64, 24, 21, 0.5, 400 + s);
    const float a = fp32->one_step(X, y), b = bf16->one_step(X, y);
    EXPECT_EQ(std::memcmp(&a, &b, 4), 0) << "step " << s << ": " << a << " vs " << b;
  }
  EXPECT_TRUE(contains(bf16->explain(), "attention cudnn_bf16")) << bf16->explain();
}

// bench/cnn_configs/tiny_gpt_bf16.json is tiny_gpt.json with train.attention "cudnn_bf16".
TEST(CudnnAttention, TheBenchConfigIsTinyGptInBf16) {
  const std::string dir = std::string(SG_SOURCE_DIR) + "/bench/cnn_configs/";
  RunConfig bf16 = load_config(dir + "tiny_gpt_bf16.json"), fp32 = load_config(dir + "tiny_gpt.json");
  EXPECT_EQ(bf16.trainer.lower.attention, AttentionMode::CudnnBF16);
  EXPECT_EQ(fp32.trainer.lower.attention, AttentionMode::FP32);
  nlohmann::json a = bf16.json, b = fp32.json;
  a["train"].erase("attention");
  EXPECT_EQ(a, b);
}

#ifdef STEPGRAPH_HAVE_CUDA

// The attention ops of a training step of `model` on token ids [B, S].
std::vector<Op> attention_ops(LayerPtr model, int64_t B, int64_t S, Program* keep) {
  Built b = build(*model, SoftmaxCrossEntropy(), {B, S}, true);
  *keep = b.p;
  std::vector<Op> ops;
  for (const Op& op : keep->ops())
    if (op.kind == OpKind::Attention || op.kind == OpKind::AttentionBackward) ops.push_back(op);
  EXPECT_EQ(ops.size(), 2u);
  return ops;
}

// Host-side checks before planning (no GPU needed).
TEST(CudnnAttention, ShapesCudnnCannotTakeAreRefusedBeforePlanning) {
  Program p;
  // Head size 12: not a multiple of 8.
  for (const Op& op : attention_ops(sequential({embedding(10, 24, 8), self_attention(2, true), dense(10)}), 2, 8, &p)) {
    try {
      cuda::SequenceLowering::check_supported(p, op, AttentionMode::CudnnBF16);
      ADD_FAILURE() << op.name << " accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      for (const std::string& want : {"op '" + op.name + "'", std::string("queries [2, 8, 24]"),
                                     std::string("2 heads of 12, causal"), std::string("train.attention \"cudnn_bf16\""),
                                     std::string("train.attention \"fp32\""), std::string("--attention fp32")})
        EXPECT_TRUE(contains(m, want)) << want << " not in: " << m;
#ifdef STEPGRAPH_HAVE_CUDNN
      EXPECT_TRUE(contains(m, "multiple of 8, at most 256 (got 12)")) << m;
#else
      EXPECT_TRUE(contains(m, "this build has no cuDNN")) << m;
#endif
    }
    EXPECT_NO_THROW(cuda::SequenceLowering::check_supported(p, op, AttentionMode::FP32));  // our kernels take 12
  }
  // Head size 80: above our kernels' 64, a size cuDNN takes; the fp32 refusal points to it.
  for (const Op& op : attention_ops(sequential({embedding(10, 160, 8), self_attention(2, false), dense(10)}), 2, 8, &p)) {
#ifdef STEPGRAPH_HAVE_CUDNN
    EXPECT_NO_THROW(cuda::SequenceLowering::check_supported(p, op, AttentionMode::CudnnBF16));
    try {
      cuda::SequenceLowering::check_supported(p, op, AttentionMode::FP32);
      ADD_FAILURE() << op.name << " accepted in fp32";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "limit of 64; use more heads, train.attention \"cudnn_bf16\", or --device cpu"))
          << e.what();
    }
#else
    EXPECT_THROW(cuda::SequenceLowering::check_supported(p, op, AttentionMode::CudnnBF16), Error);
#endif
  }
  // Head size 264: above 256.
  for (const Op& op : attention_ops(sequential({embedding(10, 264, 8), self_attention(1, true), dense(10)}), 1, 8, &p))
    EXPECT_THROW(cuda::SequenceLowering::check_supported(p, op, AttentionMode::CudnnBF16), Error);
}

// bf16_bits / bf16_value (test_bf16.h, cuDNN builds): round to nearest even, finite and infinite inputs.
#ifdef STEPGRAPH_HAVE_CUDNN
TEST(CudnnAttention, Bf16ConversionRoundsToNearestEvenAndAccumulates) {
  REQUIRE_GPU();
  std::vector<float> x = {1.0f, 1.0f + 0x1p-8f,  // a tie: down to the even 1.0
                          1.0f + 3 * 0x1p-8f,    // a tie: up to the even 1 + 2^-6
                          -(1.0f + 0x1p-8f), 1.0f + 0x1p-8f + 0x1p-20f, 3.0e38f, 3.4e38f /* -> inf */, -INFINITY,
                          1e-39f /* subnormal */, 0.0f, -0.0f, NAN};
  HostArray r = random_f32({3000}, 77, 3.0);
  for (int64_t i = 0; i < r.numel(); ++i) x.push_back(r.data<float>()[i]);
  const int64_t n = static_cast<int64_t>(x.size());
  float *src = nullptr, *back = nullptr;
  __nv_bfloat16* mid = nullptr;
  CUDA_CHECK(cudaMalloc(&src, n * 4));
  CUDA_CHECK(cudaMalloc(&back, n * 4));
  CUDA_CHECK(cudaMalloc(&mid, n * 2));
  CUDA_CHECK(cudaMemcpy(src, x.data(), n * 4, cudaMemcpyHostToDevice));
  std::vector<float> base(x.size());
  for (size_t i = 0; i < base.size(); ++i) base[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  CUDA_CHECK(cudaMemcpy(back, base.data(), n * 4, cudaMemcpyHostToDevice));
  cuda::Bf16Pairs to, from;
  to.count = from.count = 1;
  to.f32_in[0] = src, to.bf16_out[0] = mid;
  from.bf16_in[0] = mid, from.f32_out[0] = back, from.accumulate[0] = true;
  cuda::to_bf16(to, n, nullptr);
  cuda::from_bf16(from, n, nullptr);
  std::vector<uint16_t> bits(x.size());
  std::vector<float> sum(x.size());
  CUDA_CHECK(cudaMemcpy(bits.data(), mid, n * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(sum.data(), back, n * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(bf16_value(bits[i])) && std::isnan(sum[i])) << "NaN at " << i;
      continue;
    }
    ASSERT_EQ(bits[i], bf16_bits(x[i])) << "element " << i << ": " << x[i];
    const float want = base[i] + bf16_value(bits[i]);
    ASSERT_EQ(std::memcmp(&sum[i], &want, 4), 0) << "element " << i << ": " << sum[i] << " vs " << want;
  }
  EXPECT_EQ(bits[1], 0x3f80);  // 1 + 2^-8 -> 1
  EXPECT_EQ(bits[2], 0x3f82);  // 1 + 3 * 2^-8 -> 1 + 2^-6
  EXPECT_EQ(bits[6], 0x7f80);  // inf
  CUDA_CHECK(cudaFree(src));
  CUDA_CHECK(cudaFree(back));
  CUDA_CHECK(cudaFree(mid));
}
#endif  // STEPGRAPH_HAVE_CUDNN

#endif  // STEPGRAPH_HAVE_CUDA

#ifdef STEPGRAPH_HAVE_CUDNN

LowerOptions bf16_options() {
  LowerOptions o;
  o.attention = AttentionMode::CudnnBF16;
  return o;
}

struct OpCase {
  int64_t B, S, H, D;
  bool causal;
  bool with_dq = true;  // false: the backward has no dQ output
};

// Attention and its backward alone on inputs Q, K, V, dO [B, S, H*D]; dK accumulates onto
// "dK_before" (copied in by a reshape first), so the accumulate flag is exercised.
Program attention_program(const OpCase& c) {
  Program p;
  const Shape s{c.B, c.S, c.H * c.D};
  auto input = [&](const char* n) { return p.add_tensor({n, s, DType::F32, Role::Input, false}); };
  auto output = [&](const char* n, Shape sh) { return p.add_tensor({n, std::move(sh), DType::F32, Role::Activation, true}); };
  const TensorId Q = input("Q"), K = input("K"), V = input("V"), dO = input("dO"), dK0 = input("dK_before");
  const TensorId O = output("O", s), L = output("L", {c.B, c.H, c.S});
  const TensorId dQ = c.with_dq ? output("dQ", s) : kNone, dK = output("dK", s), dV = output("dV", s);
  Op fwd;
  fwd.kind = OpKind::Attention;
  fwd.name = "attn";
  fwd.in = {Q, K, V};
  fwd.out = {O, L};
  fwd.attrs = AttentionAttrs{static_cast<int32_t>(c.H), c.causal, 0.0};
  p.add_op(fwd);
  Op init;
  init.kind = OpKind::Reshape;
  init.name = "dK before";
  init.in = {dK0};
  init.out = {dK};
  p.add_op(init);
  Op bwd;
  bwd.kind = OpKind::AttentionBackward;
  bwd.name = "attn backward";
  bwd.in = {dO, Q, K, V, O, L};
  bwd.out = {dQ, dK, dV};
  bwd.accumulate = {0, 1, 0};
  bwd.attrs = fwd.attrs;
  p.add_op(bwd);
  return p;
}

// Returns false (having checked the message) when cuDNN has no engine for the case.
bool compare_op(const OpCase& c, uint64_t seed) {
  const std::string what = cat("B ", c.B, " S ", c.S, " H ", c.H, " D ", c.D, c.causal ? " causal" : "",
                               c.with_dq ? "" : " without dQ");
  SCOPED_TRACE(what);
  const Program p = attention_program(c);
  PoisonedRun cpu(Device::CPU, p);
  std::unique_ptr<PoisonedRun> gpu;
  try {
    gpu = std::make_unique<PoisonedRun>(Device::CUDA, p, bf16_options());
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const std::string& want : {std::string("op 'attn"), shape_str({c.B, c.S, c.H * c.D}), std::string("train.attention \"fp32\"")})
      EXPECT_TRUE(contains(m, want)) << want << " not in: " << m;
    std::cout << "[ refused  ] " << what << ": " << m << "\n";
    return false;
  }
  const Shape s{c.B, c.S, c.H * c.D};
  for (const char* n : {"Q", "K", "V", "dO", "dK_before"}) {
    const HostArray a = random_f32(s, mix_seed(seed, n), 1.0);
    cpu.set(n, a);
    gpu->set(n, a);
  }
  cpu.exe->run();
  gpu->exe->run();
  // bf16 keeps 8 significant bits (relative rounding 2^-9 per element): inputs, O and dO are
  // rounded, products accumulate in fp32. The log-sum-exp is fp32 from bf16 scores.
  struct Want {
    const char* name;
    double tol;
  };
  for (Want w : {Want{"O", 1e-2}, Want{"L", 2e-3}, Want{"dQ", 3e-2}, Want{"dK", 3e-2}, Want{"dV", 3e-2}}) {
    const TensorId t = p.find(w.name);
    if (t == kNone) continue;
    const ArrayDiff d = array_diff(cpu.get(t), gpu->get(t));
    EXPECT_LT(d.unwritten, 0) << w.name << "[" << d.unwritten << "] not written";
    EXPECT_LT(d.rel, w.tol) << w.name << ": rel L2 " << d.rel << ", max diff / max " << d.relmax;
    std::cout << "[ bf16 op  ] " << what << ": " << w.name << " rel L2 " << d.rel << "\n";
  }
  const std::string notes = gpu->exe->describe();
  for (const char* want : {"cuDNN fused SDPA (bf16", "engine", "cuDNN fused SDPA backward (bf16", "deterministic",
                           "the forward's bf16 Q, K, V, O", "(dK accumulate)", "cuDNN SDPA plans: 2"})
    EXPECT_TRUE(contains(notes, want)) << want << " not in:\n" << notes;
  return true;
}

TEST(CudnnAttention, OpMatchesCpuReferenceCausalAndNot) {
  REQUIRE_GPU_AND_CUDNN();
  int ran = 0;
  for (bool causal : {false, true}) {
    // Head sizes 32 and 64 must run (as in test_cudnn_sdpa.cpp); 100 positions are no multiple
    // of the tiles.
    EXPECT_TRUE(compare_op({2, 64, 2, 64, causal}, 11 + causal));
    EXPECT_TRUE(compare_op({1, 100, 3, 32, causal}, 13 + causal));
    EXPECT_TRUE(compare_op({2, 24, 2, 32, causal, false}, 15 + causal));
    ran += 3;
    // Smaller head sizes are cuDNN's call: run, or refused clearly.
    ran += compare_op({3, 24, 4, 8, causal}, 17 + causal);
    ran += compare_op({2, 40, 4, 16, causal}, 19 + causal);
  }
  std::cout << "[ bf16 op  ] " << ran << " of 10 cases ran\n";
}

TEST(CudnnAttention, TrainingTracksTheFp32PathAndReplayEqualsEager) {
  REQUIRE_GPU_AND_CUDNN();
  auto fp32 = trainer_with(Device::CUDA, ExecMode::Graph, AttentionMode::FP32);
  auto graph = trainer_with(Device::CUDA, ExecMode::Graph, AttentionMode::CudnnBF16);
  auto eager = trainer_with(Device::CUDA, ExecMode::Eager, AttentionMode::CudnnBF16);
  for (int s = 0; s < 12; ++s) {
    HostArray X = token_ids(64, 24, 21, 9500 + s), y = token_labels(64, 24, 21, 0.5, 9600 + s);
    const float lf = fp32->one_step(X, y), lg = graph->one_step(X, y), le = eager->one_step(X, y);
    ASSERT_EQ(std::memcmp(&lg, &le, 4), 0) << "step " << s << ": graph " << lg << " vs eager " << le;
    EXPECT_LT(std::fabs(lg - lf), 2e-2 * std::fabs(lf)) << "step " << s << ": bf16 " << lg << " vs fp32 " << lf;
    if (s == 0 || s == 11) std::cout << "[ bf16 run ] step " << s << ": loss bf16 " << lg << ", fp32 " << lf << "\n";
  }
  EXPECT_EQ(graph->capture_count(), 1);
  auto a = graph->state(), b = eager->state();
  for (auto& [name, v] : a) EXPECT_EQ(std::memcmp(v.raw(), b.at(name).raw(), v.nbytes()), 0) << name << " differs";
  const std::string ex = graph->explain();
  for (const char* want : {"cuDNN fused SDPA (bf16", "engine", "cuDNN fused SDPA backward (bf16", "cuDNN SDPA plans: 4",
                           "attention cudnn_bf16", "graph captures: 1"})
    EXPECT_TRUE(contains(ex, want)) << want << " not in:\n" << ex;
  // Evaluation (forward only) runs the bf16 forward too.
  HostArray X = token_ids(40, 24, 21, 9700), y = token_labels(40, 24, 21, 0.5, 9701);
  const EvalResult eg = graph->evaluate(X, y), ef = fp32->evaluate(X, y);
  EXPECT_LT(std::fabs(eg.loss - ef.loss), 2e-2 * std::fabs(ef.loss)) << eg.loss << " vs " << ef.loss;
}

nlohmann::json reverse_config(int64_t width, int64_t heads) {
  return nlohmann::json::parse(cat(R"({
    "model": {"layers": [
      {"type": "embedding", "vocab": 21, "dim": )", width, R"(, "positions": 24},
      {"type": "transformer_block", "heads": )", heads, R"(, "causal": true, "mlp": 128},
      {"type": "transformer_block", "heads": )", heads, R"(, "causal": true, "mlp": 128},
      {"type": "layer_norm"},
      {"type": "dense", "units": 21, "init": "xavier"}]},
    "optimizer": {"type": "adamw", "lr": 0.003, "weight_decay": 0.01,
                  "schedule": {"type": "cosine", "warmup_steps": 100, "min_lr_ratio": 0.05}},
    "data": {"source": "sequence_task", "kind": "reverse", "length": 12, "symbols": 20, "samples": 10000,
             "validation_split": 0.1, "seed": 0},
    "train": {"steps": 150, "batch_size": 64, "log_every": 0, "device": "cuda", "attention": "cudnn_bf16"}
  })"));
}

TEST(CudnnAttention, VerifyModePassesWithABf16Tolerance) {
  REQUIRE_GPU_AND_CUDNN();
  RunConfig cfg = parse_config(reverse_config(64, 2));
  const VerifyResult r = verify_run(cfg, RunOptions{}, 5, 5e-2);
  std::cout << "[ verify   ] bf16 attention: " << r.to_json().dump() << "\n";
  EXPECT_EQ(r.graph_vs_eager, 0.0);
  EXPECT_TRUE(r.ok) << r.to_json().dump();
}

// configs/reverse_transformer.json in bf16 (150 steps, as the fp32 GPU test; its bar 0.95 less a
// little), at head size 32 and at the example's 8 (32 wide, 4 heads), which is cuDNN's call: it
// learns the task, or the step is refused before training with the op, its shape and the way out.
TEST(CudnnAttention, ReverseTransformerLearnsOrIsRefusedClearly) {
  REQUIRE_GPU_AND_CUDNN();
  for (auto [width, heads] : {std::pair<int64_t, int64_t>{64, 2}, {32, 4}}) {
    RunConfig cfg = parse_config(reverse_config(width, heads));
    RunOptions opt;
    std::ostringstream out;
    opt.out = &out;
    try {
      RunSummary r = train_run(cfg, opt);
      std::cout << "[ reverse  ] bf16 attention, width " << width << ", " << heads << " heads: " << r.to_json().dump()
                << "\n";
      EXPECT_GE(r.val_accuracy, 0.9) << out.str();
    } catch (const Error& e) {
      const std::string m = e.what();
      std::cout << "[ reverse  ] bf16 attention, width " << width << " refused: " << m << "\n";
      EXPECT_EQ(width, 32) << "head size 32 must run: " << m;
      EXPECT_TRUE(contains(m, "heads of 8") && contains(m, "train.attention \"fp32\"")) << m;
    }
  }
}

#endif  // STEPGRAPH_HAVE_CUDNN

}  // namespace
}  // namespace sg::test
