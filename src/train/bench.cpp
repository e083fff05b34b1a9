#include "stepgraph/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>

#include "stepgraph/rng.h"
#include "stepgraph/run.h"
#include "train/run_data.h"

namespace sg {

using nlohmann::json;

json BenchResult::to_json() const {
  // The lowering's cuDNN summary lines (plans loaded or built, compile and autotune times, the
  // compile history): the rest of the lowering is in `--explain`.
  json cudnn = json::array();
  std::istringstream in(lowering);
  for (std::string l; std::getline(in, l);) {
    const size_t b = l.find_first_not_of(' ');
    if (b != std::string::npos && (l.compare(b, 12, "cuDNN plans:") == 0 || l.compare(b, 17, "cuDNN SDPA plans:") == 0 ||
                                     l.compare(b, 8, "compile ") == 0))
      cudnn.push_back(l.substr(b));
  }
  return {{"event", "bench"},          {"config", config},
          {"device", device},          {"gpu", gpu},
          {"batch", batch},            {"steps", steps},
          {"eager_us_per_step", eager_us_per_step},
          {"graph_us_per_step", graph_us_per_step},
          {"graph_nodes", graph_nodes}, {"peak_device_bytes", peak_device_bytes},
          {"arena_bytes", arena_bytes}, {"tf32", tf32}, {"precision", precision}, {"attention", attention}, {"deterministic", deterministic},
          {"fusion", fusion},           {"concurrent", concurrent},
          {"per_op_us", per_op_us},
          {"cudnn_plans", cudnn},       {"ranks", ranks},             {"rank_graph_us_per_step", rank_graph_us}};
}

json VerifyResult::to_json() const {
  return {{"event", "verify"},          {"steps", steps},
          {"graph_vs_eager", graph_vs_eager}, {"graph_vs_eager_at", graph_vs_eager_at},
          {"gpu_vs_cpu", gpu_vs_cpu},   {"gpu_vs_cpu_at", gpu_vs_cpu_at},
          {"tolerance", tolerance},     {"ok", ok}};
}

namespace {

TrainerOptions options_for(const RunConfig& cfg, ExecMode mode) {
  TrainerOptions o = cfg.trainer;
  o.mode = mode;
  return o;
}

// Median over 5 repeats of (time of `steps` launches) / steps, after a warm-up. Data parallel:
// the end of the steps is waited for through loss() (bounded by the collective timeout).
double time_steps(Trainer& t, int64_t steps, bool collectives) {
  auto finish = [&] {
    if (collectives) t.loss();
    else t.backend().synchronize();
  };
  for (int i = 0; i < 20; ++i) t.launch();
  finish();
  std::vector<double> us;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < steps; ++i) t.launch();
    finish();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                 static_cast<double>(steps));
  }
  std::sort(us.begin(), us.end());
  return us[2];
}

double rel_l2(const HostArray& a, const HostArray& b) {
  double d2 = 0, r2 = 0;
  for (int64_t k = 0; k < a.numel(); ++k) {
    double x = a.dtype() == DType::F32 ? a.data<float>()[k] : a.data<int32_t>()[k];
    double y = b.dtype() == DType::F32 ? b.data<float>()[k] : b.data<int32_t>()[k];
    if (!std::isfinite(y) || !std::isfinite(x)) return INFINITY;
    d2 += (x - y) * (x - y);
    r2 += x * x;
  }
  return r2 == 0 ? std::sqrt(d2) : std::sqrt(d2 / r2);
}

}  // namespace

BenchResult bench_run(const RunConfig& cfg, const RunOptions& opt, int64_t steps, const std::string& name) {
  SG_REQUIRE(steps > 0, "bench: --steps must be positive, got ", steps);
  std::string note;
  dist::World world;
  const std::shared_ptr<dist::Communicator> comm = start_data_parallel(cfg, opt.device.value_or("cuda"), &world);
  const Device device = comm ? Device::CUDA : choose_device(opt.device.value_or("cuda"), &note);
  if (!note.empty()) std::cerr << "stepgraph: " << note << "\n";
  const int64_t B = cfg.train.batch_size;
  // A physics-informed step makes its own points; other configs time one fixed batch.
  const RunData data = cfg.problem ? RunData{} : prepare_data(cfg, false);
  BenchResult r;
  r.config = name;
  r.device = device_name(device);
  r.batch = B;
  r.steps = steps;
  r.tf32 = cfg.trainer.lower.precision == Precision::TF32;
  r.precision = precision_name(cfg.trainer.lower.precision);
  r.attention = attention_mode_name(cfg.trainer.lower.attention);
  r.deterministic = cfg.trainer.lower.deterministic;
  r.fusion = cfg.trainer.lower.fusion;
  r.concurrent = cfg.trainer.lower.concurrent;
  r.ranks = world.size;
  r.rank = world.rank;
  for (ExecMode mode : {ExecMode::Eager, ExecMode::Graph}) {
    TrainerOptions topt = options_for(cfg, mode);
    topt.lower.comm = comm;
    topt.lower.bucket_bytes = static_cast<int64_t>(cfg.train.bucket_mb * 1048576.0);
    std::unique_ptr<Trainer> tp = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), topt);
    if (cfg.problem) {
      r.batch = cfg.problem->terms[0].points;
    } else {
      compile_for(*tp, cfg, data, B);
      set_first_rows(*tp, data, B);
    }
    Trainer& t = *tp;
    const double us = time_steps(t, steps, comm != nullptr);
    SG_REQUIRE(std::isfinite(t.loss()), "bench: the loss is not finite after timing (", t.loss(), ")");
    if (mode == ExecMode::Eager) {
      r.eager_us_per_step = us;
    } else {
      r.graph_us_per_step = us;
      if (comm) {  // every rank's time; the job runs at the slowest rank's pace
        uint64_t bits = 0;
        std::memcpy(&bits, &us, sizeof(us));
        for (uint64_t b : comm->all_gather(bits, "the bench timings")) {
          double x = 0;
          std::memcpy(&x, &b, sizeof(x));
          r.rank_graph_us.push_back(x);
        }
        r.graph_us_per_step = *std::max_element(r.rank_graph_us.begin(), r.rank_graph_us.end());
      }
      r.graph_nodes = t.graph_nodes();
      r.peak_device_bytes = t.backend().peak_allocated_bytes();
      r.arena_bytes = t.plan().peak_bytes();
      if (t.backend().peak_allocated_bytes() == 0) r.peak_device_bytes = r.arena_bytes;  // the CPU does not track
      r.gpu = t.backend().describe();
      if (!comm) r.per_op_us = t.profile(100);  // ops alone, out of order: not with collectives
      r.lowering = t.explain();
    }
  }
  return r;
}

VerifyResult verify_run(const RunConfig& cfg, const RunOptions& opt, int64_t steps, double tolerance) {
  std::string why;
  SG_REQUIRE(cuda_available(&why), "--mode verify compares the CUDA backend with the CPU and needs a GPU: ", why);
  const uint64_t seed = opt.seed.value_or(cfg.train.seed);
  // A physics-informed step draws its own points from (seed, step): the three trainers see the
  // same ones. Other configs get the same batches from the data set.
  auto trainer = [&](Device d, ExecMode m) { return trainer_from_config(cfg, d, seed, options_for(cfg, m)); };
  std::unique_ptr<Trainer> pe = trainer(Device::CUDA, ExecMode::Eager), pg = trainer(Device::CUDA, ExecMode::Graph),
                           pc = trainer(Device::CPU, ExecMode::Eager);
  Trainer &eager = *pe, &graph = *pg, &cpu = *pc;
  const int64_t B = cfg.train.batch_size;
  const RunData data = cfg.problem ? RunData{} : prepare_data(cfg, false);
  std::unique_ptr<BatchSampler> sampler;
  if (!cfg.problem) {
    SG_REQUIRE(data.train_size() >= B, "train.batch_size ", B, " is larger than the data set (", data.train_size(), ")");
    for (Trainer* t : {&eager, &graph, &cpu}) compile_for(*t, cfg, data, B);
    sampler = std::make_unique<BatchSampler>(data.train_size(), B, cfg.data.shuffle, mix_seed(seed, "data"), LastBatch::Drop);
  }
  auto step = [&](Trainer& t, const std::vector<int64_t>& rows) -> double {
    if (!cfg.problem) return train_rows(t, data, rows);
    t.launch();
    return t.loss();
  };
  VerifyResult r;
  r.steps = steps;
  r.tolerance = tolerance;
  // Keeps the largest difference and where it was, so a failure names the tensor or step.
  auto note = [](double& worst, std::string& at, double d, const std::string& where) {
    if (d > worst || at.empty()) worst = std::max(worst, d), at = where;
  };
  // Eager and graph run free (they must stay bitwise equal however long they run). The CPU
  // reference starts every step from the graph trainer's state, through a checkpoint, so each
  // step's comparison measures that step's arithmetic: two free-running trajectories drift apart
  // after a few Adam steps (a gradient near zero whose sign differs moves its weight by 2 lr).
  const std::filesystem::path sync = std::filesystem::temp_directory_path() /
                                     ("stepgraph_verify_" + std::to_string(std::random_device{}()) + "_" +
                                      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
                                      ".safetensors");
  struct Remove {
    std::filesystem::path p;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  } remove_sync{sync};
  for (int64_t s = 0; s < steps; ++s) {
    const std::vector<int64_t> b = cfg.problem ? std::vector<int64_t>{} : sampler->indices(s);
    if (s > 0) {
      graph.save(sync.string());
      cpu.load(sync.string());
    }
    const double le = step(eager, b), lg = step(graph, b), lc = step(cpu, b);
    const std::string at = " at step " + std::to_string(s + 1);
    note(r.graph_vs_eager, r.graph_vs_eager_at, std::fabs(lg - le) / std::max(std::fabs(le), 1e-12), "loss" + at);
    note(r.gpu_vs_cpu, r.gpu_vs_cpu_at, std::fabs(lg - lc) / std::max(std::fabs(lc), 1e-12), "loss" + at);
    const auto sg_ = graph.state(), sc = cpu.state();
    for (const auto& [name, a] : sc) note(r.gpu_vs_cpu, r.gpu_vs_cpu_at, rel_l2(a, sg_.at(name)), name + at);
  }
  const auto se = eager.state(), sg_ = graph.state();
  for (const auto& [name, a] : sg_) note(r.graph_vs_eager, r.graph_vs_eager_at, rel_l2(se.at(name), a), name);
  r.ok = r.graph_vs_eager <= 1e-6 && r.gpu_vs_cpu <= tolerance;
  return r;
}

}  // namespace sg
