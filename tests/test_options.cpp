// Options, not environment: what changes how a step is lowered is a validated option
// (LowerOptions, the config's train.*, the CLI's flags) that explain lists, and on the GPU the
// options change the lowering and nothing else (results still match the CPU reference). The
// library reads only the environment variables it documents, in one file
// (src/core/environment.cpp).
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/environment.h"
#include "stepgraph/config.h"
#include "stepgraph/trainer.h"
#include "test_backends.h"
#include "test_errors.h"
#include "test_util.h"

namespace sg::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json small_config() {
  return json::parse(R"({
    "model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 10}]},
    "train": {"steps": 2, "batch_size": 16, "log_every": 0, "device": "cpu"}
  })");
}

TEST(Options, ConfigTakesFusionAndConcurrent) {
  json j = small_config();
  const RunConfig defaults = parse_config(j);
  EXPECT_TRUE(defaults.trainer.lower.fusion);
  EXPECT_TRUE(defaults.trainer.lower.concurrent);
  const LowerOptions lower;
  EXPECT_TRUE(lower.fusion && lower.concurrent) << "today's lowering is the default";
  j["train"]["fusion"] = false;
  j["train"]["concurrent"] = false;
  const RunConfig off = parse_config(j);
  EXPECT_FALSE(off.trainer.lower.fusion);
  EXPECT_FALSE(off.trainer.lower.concurrent);
  j["train"]["fusion"] = true;
  EXPECT_TRUE(parse_config(j).trainer.lower.fusion);
  EXPECT_FALSE(parse_config(j).trainer.lower.concurrent);
}

TEST(Options, WrongFusionOrConcurrentValuesNameThePathAndTheChoice) {
  for (const char* key : {"fusion", "concurrent"}) {
    const std::vector<std::pair<json, std::string>> bad = {
        {json("off"), "got the string \"off\""}, {json(0), "got the integer 0"}, {json::array(), "got an array"}};
    for (const auto& [value, got] : bad) {
      json j = small_config();
      j["train"][key] = value;
      EXPECT_ERROR(parse_config(j), cat("train.", key, ": "), "expected true or false", got);
    }
  }
  // A misspelt key lists the options among the allowed ones.
  json j = small_config();
  j["train"]["fuse"] = false;
  EXPECT_ERROR(parse_config(j), "train.fuse: unknown key", "deterministic, fusion, concurrent, plan_cache");
}

// Trainer::explain (and so `stepgraph explain`) ends with one line of the options in force.
TEST(Options, ExplainListsTheOptionsInForce) {
  auto make = [](bool fusion, bool concurrent) {
    TrainerOptions o;
    o.lower.fusion = fusion;
    o.lower.concurrent = concurrent;
    auto t = std::make_unique<Trainer>(sequential({dense(8, Activation::ReLU), dense(3)}),
                                       std::make_shared<SoftmaxCrossEntropy>(), std::make_shared<Adam>(1e-3),
                                       Device::CPU, 1, o);
    t->compile({4, 5});
    return t->explain();
  };
  EXPECT_NE(make(true, true).find("precision fp32, attention fp32, deterministic, fusion on, concurrent branches on\n"),
            std::string::npos)
      << make(true, true);
  EXPECT_NE(make(false, true).find("deterministic, fusion off, concurrent branches on\n"), std::string::npos);
  EXPECT_NE(make(true, false).find("deterministic, fusion on, concurrent branches off\n"), std::string::npos);
}

// The CPU reference has no fusions or streams: the options do not change its results.
TEST(Options, TheCpuComputesTheSameWithEveryOption) {
  Built b = train_program(*sequential({dense(12, Activation::GELU), dense(4)}), SoftmaxCrossEntropy(), {6, 7},
                          Adam(1e-3));
  LowerOptions off;
  off.fusion = false, off.concurrent = false;
  PoisonedRun a(Device::CPU, b.p), c(Device::CPU, b.p, off);
  set_random_state(a, c, b.p, b.specs, 5);
  for (const TensorInfo& info : b.p.tensors()) {
    if (info.role != Role::Input) continue;
    const HostArray v = info.name == "valid_rows" ? HostArray::i32({1}, {static_cast<int32_t>(info.shape[0])})
                        : info.dtype == DType::I32 ? random_labels(info.shape[0], 4, 6)
                                                   : random_f32(info.shape, 6);
    a.set(info.name, v);
    c.set(info.name, v);
  }
  a.exe->run();
  c.exe->run();
  for (size_t t = 0; t < b.p.num_tensors(); ++t) {
    const HostArray x = a.get(static_cast<TensorId>(t)), y = c.get(static_cast<TensorId>(t));
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << b.p.tensor(static_cast<TensorId>(t)).name;
  }
}

TEST(Environment, OnlyDocumentedVariablesAreRead) {
  EXPECT_ERROR(env::get("SG_ONCE"), "environment variable 'SG_ONCE' is not one the library documents");
  EXPECT_ERROR(env::set_default("SG_CONCURRENT", "0"), "'SG_CONCURRENT' is not one");
  const char* saved = std::getenv("SG_DIST_TIMEOUT");
  const std::string keep = saved ? saved : "";
  setenv("SG_DIST_TIMEOUT", "12.5", 1);
  ASSERT_NE(env::get("SG_DIST_TIMEOUT"), nullptr);
  EXPECT_STREQ(env::get("SG_DIST_TIMEOUT"), "12.5");
  env::set_default("SG_DIST_TIMEOUT", "99");  // set already: kept
  EXPECT_STREQ(env::get("SG_DIST_TIMEOUT"), "12.5");
  bool seen = false;
  for (const std::string& kv : env::snapshot()) seen = seen || kv == "SG_DIST_TIMEOUT=12.5";
  EXPECT_TRUE(seen);
  unsetenv("SG_DIST_TIMEOUT");
  EXPECT_EQ(env::get("SG_DIST_TIMEOUT"), nullptr);
  if (saved) setenv("SG_DIST_TIMEOUT", keep.c_str(), 1);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A tripwire: the library's sources read the environment only through env::get, and the
// configuration reference (docs/configuration.md) documents every variable it reads.
TEST(Environment, OneFileReadsItAndTheDocsDocumentEveryVariable) {
  const fs::path root = SG_SOURCE_DIR;
  const fs::path allowed = root / "src" / "core" / "environment.cpp";
  int files = 0;
  for (const char* dir : {"src", "include"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file() || fs::equivalent(e.path(), allowed)) continue;
      const std::string text = read_text(e.path());
      ++files;
      for (const char* read : {"getenv(", "secure_getenv(", "environ;", "environ)"})
        EXPECT_EQ(text.find(read), std::string::npos) << e.path() << " reads the environment (" << read << ")";
    }
  EXPECT_GT(files, 50);
  const std::string doc = read_text(root / "docs" / "configuration.md");
  const size_t section = doc.find("## Environment variables");
  ASSERT_NE(section, std::string::npos) << "docs/configuration.md has no section \"Environment variables\"";
  for (const std::string& name : env::documented())
    EXPECT_NE(doc.find("`" + name, section), std::string::npos)
        << name << " is not in docs/configuration.md's Environment variables";
}

// ---- On the GPU: the options change the lowering, and results still match the CPU. ----------

// Fusion off: an MLP classifier's last layer is not computed in the loss kernel, no input
// gradient applies the previous layer's activation derivative in its epilogue, the schedule is
// not folded into the optimizer's launch.
TEST(CudaOptions, FusionOffLowersEveryDenseOpOnItsOwnAndMatchesTheCpu) {
  REQUIRE_GPU();
  Built b = train_program(*sequential({dense(48, Activation::ReLU), dense(32, Activation::GELU), dense(10)}),
                          SoftmaxCrossEntropy(), {64, 20}, AdamW(1e-3));
  const std::string fused = compare_backends(b.p, b.specs, 61, "MLP, fusion on", 2);
  EXPECT_NE(fused.find("fused into the next op's loss kernel"), std::string::npos) << fused;
  LowerOptions o;
  o.fusion = false;
  const std::string plain = compare_backends(b.p, b.specs, 61, "MLP, fusion off", 2, 1e-4, o);
  for (const char* fusion : {"fused into", "fused epilogue", "done by '", "'s dX ("})
    EXPECT_EQ(plain.find(fusion), std::string::npos) << fusion << "\n" << plain;
}

// Larger layers take cuBLASLt, whose epilogues (bias, relu with its mask, bias gradients) are
// fusions too: off, the products are plain and the project's kernels do the rest.
TEST(CudaOptions, FusionOffTurnsTheCublasLtEpiloguesOff) {
  REQUIRE_GPU();
  Built b = train_program(*sequential({dense(512, Activation::ReLU), dense(512, Activation::GELU), dense(64)}),
                          SoftmaxCrossEntropy(), {2048, 512}, Adam(1e-3));
  const std::vector<std::string> epilogues = {"epilogue BIAS",  "epilogue RELU",  "epilogue GELU",
                                              "epilogue DRELU", "epilogue DGELU", "epilogue BGRAD"};
  const std::string fused = compare_backends(b.p, b.specs, 62, "wide MLP, fusion on");
  bool any = false;
  for (const std::string& e : epilogues) any = any || fused.find(e) != std::string::npos;
  EXPECT_TRUE(any) << fused;
  LowerOptions o;
  o.fusion = false;
  const std::string plain = compare_backends(b.p, b.specs, 62, "wide MLP, fusion off", 1, 1e-4, o);
  EXPECT_NE(plain.find("epilogue none"), std::string::npos) << plain;
  for (const std::string& e : epilogues) EXPECT_EQ(plain.find(e), std::string::npos) << e << "\n" << plain;
}

}  // namespace
}  // namespace sg::test
