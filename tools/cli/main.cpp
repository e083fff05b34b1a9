// The `stepgraph` command: train, launch, eval, predict, export, explain, bench, plot, completion.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>
#include <sys/wait.h>
#include <vector>

#include "stepgraph/bench.h"
#include "op_bench.h"
#include "usage.h"
#include "stepgraph/distributed.h"
#include "stepgraph/run.h"

namespace {

struct Common {
  std::string config, device, out, resume, checkpoint, mode, autotune, precision, attention, plan_cache;
  std::string input, output;  // predict, export
  std::string format = "torch";  // export
  std::string tensorboard, on_nan;  // train
  int64_t steps = 0, batch = 0, then_batch = 0, check_params = 0;
  uint64_t seed = 0;
  double tolerance = 1e-3;
  bool json = false;
  bool nondeterministic = false, no_fusion = false, no_concurrent = false;
  bool overwrite = false, weights_only = false;
};

// Command-line overrides of the config's train.mode / autotune / precision / attention /
// deterministic / fusion / concurrent / plan_cache.
void apply_overrides(const Common& c, sg::RunConfig& cfg) {
  if (!c.mode.empty() && c.mode != "verify") cfg.trainer.mode = sg::parse_exec_mode(c.mode);
  if (!c.autotune.empty()) cfg.trainer.lower.autotune = sg::parse_autotune(c.autotune);
  if (!c.precision.empty()) cfg.trainer.lower.precision = sg::parse_precision(c.precision);
  if (!c.attention.empty()) cfg.trainer.lower.attention = sg::parse_attention_mode(c.attention);
  if (!c.plan_cache.empty()) cfg.trainer.lower.plan_cache = c.plan_cache;
  if (c.nondeterministic) cfg.trainer.lower.deterministic = false;
  if (c.no_fusion) cfg.trainer.lower.fusion = false;
  if (c.no_concurrent) cfg.trainer.lower.concurrent = false;
  if (!c.on_nan.empty()) cfg.trainer.on_nan = sg::parse_nan_policy(c.on_nan);
}

void add_tuning_options(CLI::App* cmd, Common& c) {
  cmd->add_option("--autotune", c.autotune, "off | heuristic | exhaustive (default: the config's train.autotune)")
      ->check(CLI::IsMember({"off", "heuristic", "exhaustive"}));
  cmd->add_option("--precision", c.precision, "fp32 | tf32 | tf32x3 for dense layers (tf32x3: fp32 accuracy on tensor cores; default: the config's train.precision)")
      ->check(CLI::IsMember({"fp32", "tf32", "tf32x3"}));
  cmd->add_option("--attention", c.attention,
                  "fp32 | cudnn_bf16: self-attention on CUDA with our fp32 kernels, or cuDNN's fused SDPA in bf16 "
                  "(default: the config's train.attention)")
      ->check(CLI::IsMember({"fp32", "cudnn_bf16"}));
  cmd->add_flag("--nondeterministic", c.nondeterministic,
               "let cuDNN pick nondeterministic (atomic) engines, as PyTorch does by default "
               "(sets train.deterministic false)");
  cmd->add_flag("--no-fusion", c.no_fusion,
                "every op in its own launches: no cuBLASLt epilogues or cross-op fusions, for debugging "
                "numerics (sets train.fusion false)");
  cmd->add_flag("--no-concurrent", c.no_concurrent,
                "run the step on one stream, independent branches too (sets train.concurrent false)");
  cmd->add_option("--plan-cache", c.plan_cache,
                  "folder of the cuDNN plan cache, or off (default: the config's train.plan_cache, else "
                  "$SG_PLAN_CACHE, else ~/.cache/stepgraph/cudnn)");
}

void add_execution_options(CLI::App* cmd, Common& c, bool verify) {
  cmd->add_option("--mode", c.mode,
                  verify ? "graph (default) | eager | verify: eager, graph and the CPU on the same data, compared"
                         : "graph (default) | eager")
      ->check(verify ? CLI::IsMember({"graph", "eager", "verify"}) : CLI::IsMember({"graph", "eager"}));
  add_tuning_options(cmd, c);
}

sg::RunConfig config_from(const std::string& path) {
  if (path.empty()) return sg::parse_config(sg::default_config());
  return sg::load_config(path);
}

// Whether `cmd` has the option and it was given (eval has no --steps or --seed).
bool given(const CLI::App& cmd, const char* name) {
  const CLI::Option* opt = cmd.get_option_no_throw(name);
  return opt && opt->count() > 0;
}

// An integer >= min_value (CLI11's PositiveNumber prints a huge floating-point range, and a
// negative --seed would silently wrap around).
CLI::Validator integer_at_least(int64_t min_value) {
  return CLI::Validator(
      [min_value](std::string& s) -> std::string {
        int64_t v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || ptr != s.data() + s.size() || v < min_value)
          return "expected an integer >= " + std::to_string(min_value) + ", got '" + s + "'";
        return std::string();
      },
      "INT>=" + std::to_string(min_value));
}

sg::RunOptions options_from(const Common& c, const CLI::App& cmd) {
  sg::RunOptions o;
  if (given(cmd, "--steps")) o.steps = c.steps;
  if (given(cmd, "--device")) o.device = c.device;
  if (given(cmd, "--seed")) o.seed = c.seed;
  if (given(cmd, "--check-params")) o.check_params = c.check_params;
  o.json = c.json;
  o.resume = c.resume;
  o.out_dir = c.out;
  o.overwrite = c.overwrite;
  o.weights_only = c.weights_only;
  o.tensorboard = c.tensorboard;
  return o;
}

// Runs `python3 -m stepgraph ARGS` (the python3 beside this executable first, an installed
// package's venv, else PATH's) for what the Python package does: plots, ONNX export. `install`
// says how to get what it needs, when that python3 cannot import the package.
int run_python_package(const std::vector<std::string>& args, const std::string& install) {
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
  };
  std::string python = "python3";
  std::error_code ec;
  const auto here = std::filesystem::canonical("/proc/self/exe", ec).parent_path() / "python3";
  if (!ec && std::filesystem::exists(here)) python = here.string();
  const int found = std::system((quote(python) + " -c 'import stepgraph' > /dev/null 2>&1").c_str());
  if (found != 0) {
    std::cerr << "stepgraph " << args[0] << ": error: this needs the Python package, which " << python
              << (WIFEXITED(found) && WEXITSTATUS(found) == 127 ? " is not there to run" : " cannot import")
              << " (" << install << ")\n";
    return 1;
  }
  std::string cmd = quote(python) + " -m stepgraph";
  for (const std::string& a : args) cmd += " " + quote(a);
  const int rc = std::system(cmd.c_str());  // its errors and usage messages it prints itself
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

std::string default_out(const std::string& config) {
  std::string stem = config.empty() ? "default" : std::filesystem::path(config).stem().string();
  return (std::filesystem::path("runs") / stem).string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stepgraph: whole-step training of small and medium neural networks"};
  app.require_subcommand(1);
#ifdef STEPGRAPH_HAVE_CUDA
  app.set_version_flag("--version", std::string("stepgraph ") + STEPGRAPH_VERSION + " (CUDA backend built in)");
#else
  app.set_version_flag("--version", std::string("stepgraph ") + STEPGRAPH_VERSION + " (CPU only: built without CUDA)");
#endif
  Common c;

  auto* train = app.add_subcommand("train", "Train a model (no CONFIG: the embedded MLP on digits)");
  train->add_option("config", c.config, "Configuration JSON file")->check(CLI::ExistingFile);
  train->add_option("--device", c.device, "auto | cpu | cuda (default: the config's train.device)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  train->add_option("--steps", c.steps, "Total optimizer steps (overrides train.steps)")->check(integer_at_least(1));
  train->add_option("--out", c.out, "Output folder for metrics, checkpoint and config (default runs/<config name>)");
  train->add_option("--seed", c.seed, "Seed for initialization and shuffling (overrides train.seed)")
      ->check(integer_at_least(0));
  train->add_option("--resume", c.resume, "Checkpoint to continue from")->check(CLI::ExistingFile);
  train->add_flag("--overwrite", c.overwrite,
                  "Replace the run in --out (an existing run folder is otherwise refused unless --resume continues it)");
  train->add_flag("--weights-only", c.weights_only,
                  "With --resume: take only the checkpoint's parameters, into a setup that may differ; training "
                  "starts at step 0")
      ->needs("--resume");
  train->add_flag("--json", c.json, "Print every line as a JSON object; the last is the summary");
  train->add_option("--tensorboard", c.tensorboard,
                    "Also write the progress and eval records as TensorBoard scalars into this folder");
  train->add_option("--on-nan", c.on_nan,
                    "stop | skip | continue: what a step with a NaN or inf loss does (default: the config's "
                    "train.on_nan, stop)")
      ->check(CLI::IsMember({"stop", "skip", "continue"}));
  add_execution_options(train, c, true);
  train->add_option("--tolerance", c.tolerance, "--mode verify: largest allowed relative difference to the CPU");
  train->add_option("--check-params", c.check_params,
                    "Data-parallel runs: every K steps all ranks compare parameter checksums (default train.check_params; "
                    "they are always compared at the start and the end)")
      ->check(integer_at_least(0));

  sg::dist::LaunchOptions lo;
  auto* launch = app.add_subcommand(
      "launch", "Data-parallel training on this host: run `train CONFIG [options]` (or `bench`) as N processes, one per GPU "
                "(torchrun's environment, NCCL all-reduce inside each step graph)");
  launch->add_option("--gpus", lo.nprocs, "Processes to start, one per GPU (device LOCAL_RANK)")
      ->required()->check(integer_at_least(1));
  launch->add_option("--master-port", lo.master_port, "Rendezvous port on 127.0.0.1 (default: a free one)")
      ->check(CLI::Range(1, 65535));
  launch->prefix_command();  // from the first positional on: the command each rank runs
  launch->footer("Example: stepgraph launch --gpus 2 train configs/digits_mlp.json --steps 1000\n"
                 "Ranks > 0 print only errors, prefixed [rank r]; the exit status is the first failing rank's.\n");

  auto* eval = app.add_subcommand("eval", "Evaluate a checkpoint on the config's validation split");
  eval->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  eval->add_option("--checkpoint", c.checkpoint, "Checkpoint to evaluate")->required()->check(CLI::ExistingFile);
  eval->add_option("--device", c.device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  eval->add_flag("--json", c.json, "Print the result as a JSON object");
  eval->add_flag("--weights-only", c.weights_only,
                 "Take only the checkpoint's parameters (the config's model may differ in activations)");

  auto* predict = app.add_subcommand("predict", "Write a checkpoint's predictions for the rows of an .npy file");
  predict->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  predict->add_option("--checkpoint", c.checkpoint, "Checkpoint to predict with")->required()->check(CLI::ExistingFile);
  predict->add_option("--input", c.input, "Rows to predict: .npy, f32 or f64 [rows, features] (PINNs: [points, coordinates]; "
                      "graph models by name: .npz, an array per model input)")
      ->required()
      ->check(CLI::ExistingFile);
  predict->add_option("--output", c.output, "Where the predictions go: .npy, f32 [rows, outputs] (graph models by name: "
                      ".npz, an array per output)")->required();
  predict->add_option("--device", c.device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  predict->add_flag("--overwrite", c.overwrite, "Replace an existing output file");
  predict->add_flag("--json", c.json, "Print the result as a JSON object");
  predict->add_flag("--weights-only", c.weights_only,
                    "Take only the checkpoint's parameters (the config's model may differ in activations)");

  auto* exp = app.add_subcommand("export", "Write a checkpoint's weights for another tool (PyTorch: load_state_dict)");
  exp->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  exp->add_option("--checkpoint", c.checkpoint, "Checkpoint to export")->required()->check(CLI::ExistingFile);
  exp->add_option("--output", c.output, "Where the weights go: a .safetensors file (--format onnx: an .onnx file)")->required();
  exp->add_option("--format", c.format,
                  "torch (the names of the matching torch.nn.Sequential, printed) | safetensors (stepgraph's names, "
                  "parameters only) | onnx (the inference graph, written by the Python package with onnx)")
      ->check(CLI::IsMember({"torch", "safetensors", "onnx"}));
  exp->add_flag("--overwrite", c.overwrite, "Replace an existing output file");
  exp->add_flag("--json", c.json, "Print the result as a JSON object");
  exp->add_flag("--weights-only", c.weights_only,
                "Take only the checkpoint's parameters (the config's model may differ in activations)");

  auto* explain = app.add_subcommand("explain", "Show the step program, shapes, memory plan and loss scale");
  explain->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  explain->add_option("--batch", c.batch, "Batch size (default: train.batch_size)")->check(integer_at_least(1));
  explain->add_option("--device", c.device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  explain->add_option("--then-batch", c.then_batch,
                      "Then compile this batch size too and explain it (a second shape: cuDNN reuses kernels)")
      ->check(integer_at_least(1));
  add_tuning_options(explain, c);

  auto* bench = app.add_subcommand("bench", "Time eager steps and graph replays of a config on the GPU");
  bench->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  bench->add_option("--steps", c.steps, "Steps per timed repeat (default 1000)")->check(integer_at_least(1));
  bench->add_option("--device", c.device, "cuda (default) | cpu")->check(CLI::IsMember({"cpu", "cuda"}));
  bench->add_flag("--json", c.json, "Print the result as a JSON object");
  bench->add_flag("--explain", "Also print the program, its lowering and the memory plan");
  add_execution_options(bench, c, false);

  sg::SdpaBench sdpa;
  sg::ConvBench conv;
  bool no_causal = false, nondeterministic = false, no_bias = false, no_relu = false, op_json = false;
  int64_t op_batch = 0;
  int op_iters = 50;
  std::string op_name, conv_autotune = "heuristic";
  auto* bench_op = app.add_subcommand(
      "bench-op", "Time one cuDNN op alone on the GPU (sdpa: fused attention in bf16; conv: conv + bias + relu in bf16)");
  bench_op->add_option("op", op_name, "The op: sdpa | conv")->required()->check(CLI::IsMember({"sdpa", "conv"}));
  bench_op->add_option("--batch", op_batch, "Batch (default: sdpa 4, conv 32)")->check(integer_at_least(1));
  bench_op->add_option("--iters", op_iters, "Calls per timed repeat (default 50)")->check(integer_at_least(1));
  bench_op->add_flag("--json", op_json, "Print the result as a JSON object");
  // sdpa's options, then conv's; each op refuses the other's.
  const std::vector<std::string> sdpa_only = {"--heads", "--seq", "--dim", "--no-causal", "--nondeterministic"};
  bench_op->add_option("--heads", sdpa.heads, "sdpa: heads (default 16)")->check(integer_at_least(1));
  bench_op->add_option("--seq", sdpa.seq, "sdpa: sequence length (default 1024)")->check(integer_at_least(1));
  bench_op->add_option("--dim", sdpa.dim, "sdpa: head size (default 64)")->check(integer_at_least(1));
  bench_op->add_flag("--no-causal", no_causal, "sdpa: every query attends to every key (default: causal mask)");
  bench_op->add_flag("--nondeterministic", nondeterministic,
                     "sdpa: let cuDNN pick a backward engine that may sum dQ in any order (default: deterministic)");
  const std::vector<std::string> conv_only = {"--channels", "--height", "--width",   "--filters",  "--kernel",
                                              "--pad",      "--stride", "--no-bias", "--no-relu", "--autotune"};
  bench_op->add_option("--channels", conv.channels, "conv: input channels C (default 128)")->check(integer_at_least(1));
  bench_op->add_option("--height", conv.height, "conv: image height H (default 56)")->check(integer_at_least(1));
  bench_op->add_option("--width", conv.width, "conv: image width W (default 56)")->check(integer_at_least(1));
  bench_op->add_option("--filters", conv.filters, "conv: output channels K (default 256)")->check(integer_at_least(1));
  bench_op->add_option("--kernel", conv.kernel, "conv: square kernel size R = S (default 3)")->check(integer_at_least(1));
  bench_op->add_option("--pad", conv.pad, "conv: zero padding on every side (default 1)")->check(integer_at_least(0));
  bench_op->add_option("--stride", conv.stride, "conv: stride (default 1)")->check(integer_at_least(1));
  bench_op->add_flag("--no-bias", no_bias, "conv: no bias add in the graph");
  bench_op->add_flag("--no-relu", no_relu, "conv: no ReLU in the graph");
  bench_op->add_option("--autotune", conv_autotune, "conv: how the plan is chosen: off | heuristic (default) | exhaustive")
      ->check(CLI::IsMember({"off", "heuristic", "exhaustive"}));

  std::string shell;
  auto* completion = app.add_subcommand("completion", "Print a shell completion script: source <(stepgraph completion bash)");
  completion->add_option("shell", shell, "The shell: bash")->required()->check(CLI::IsMember({"bash"}));

  std::string plot_dir, plot_out;
  auto* plot = app.add_subcommand("plot", "Plot a run's loss curve (needs the Python package and matplotlib)");
  plot->add_option("run_dir", plot_dir, "A run's output folder (with metrics.jsonl)")->required()->check(CLI::ExistingDirectory);
  plot->add_option("--out", plot_out, "Image file to write (default RUN_DIR/loss.png)");

  if (const auto rc = sg::cli::parse_command_line(app, argc, argv)) return *rc;

  if (launch->parsed()) {
    std::vector<std::string> rest = launch->remaining();
    if (rest.empty() || (rest[0] != "train" && rest[0] != "bench")) {
      std::cerr << "stepgraph launch: expected the command to run, `train CONFIG [options]` or `bench CONFIG [options]`"
                << (rest.empty() ? std::string() : ", got '" + rest[0] + "'") << "\n";
      return 2;
    }
    std::error_code ec;
    const auto self = std::filesystem::canonical("/proc/self/exe", ec);
    std::vector<std::string> cmd = {ec ? std::string(argv[0]) : self.string()};
    cmd.insert(cmd.end(), rest.begin(), rest.end());
    try {
      return sg::dist::launch_local(lo, cmd, std::cout, std::cerr);
    } catch (const std::exception& e) {
      std::cerr << "stepgraph launch: error: " << e.what() << "\n";
      return 1;
    }
  }

  if (plot->parsed()) {  // the plot lives in the Python package (matplotlib)
    std::vector<std::string> args = {"plot", plot_dir};
    if (!plot_out.empty()) args.insert(args.end(), {"--out", plot_out});
    return run_python_package(args, "pip install .[plot]");
  }
  if (exp->parsed() && c.format == "onnx") {  // ONNX is written by the Python package (the onnx package)
    std::vector<std::string> args = {"export"};
    if (!c.config.empty()) args.push_back(c.config);
    args.insert(args.end(), {"--checkpoint", c.checkpoint, "--output", c.output, "--format", "onnx"});
    if (c.overwrite) args.push_back("--overwrite");
    if (c.weights_only) args.push_back("--weights-only");
    if (c.json) args.push_back("--json");
    return run_python_package(args, "pip install .[onnx]");
  }
  if (completion->parsed()) {
    std::cout << sg::cli::bash_completion(app);
    return 0;
  }

  if (bench_op->parsed()) {
    for (const std::string& name : op_name == "sdpa" ? conv_only : sdpa_only)
      if (given(*bench_op, name.c_str())) {
        std::cerr << "stepgraph bench-op " << op_name << ": " << name << " is an option of bench-op "
                  << (op_name == "sdpa" ? "conv" : "sdpa") << " only\n";
        return 2;
      }
    try {
      if (op_name == "conv") {
        if (given(*bench_op, "--batch")) conv.batch = op_batch;
        conv.iters = op_iters;
        conv.bias = !no_bias;
        conv.relu = !no_relu;
        conv.autotune = sg::parse_autotune(conv_autotune);
        const nlohmann::json r = sg::bench_conv(conv);
        if (op_json) {
          std::cout << r.dump() << "\n";
        } else {
          std::cout << "bench-op conv on " << r["gpu"].get<std::string>() << ": N " << conv.batch << ", C "
                    << conv.channels << ", " << conv.height << "x" << conv.width << " -> K " << conv.filters << ", "
                    << conv.kernel << "x" << conv.kernel << " pad " << conv.pad << " stride " << conv.stride
                    << " (output " << r["out_height"].get<int64_t>() << "x" << r["out_width"].get<int64_t>() << ")"
                    << (conv.bias ? " + bias" : "") << (conv.relu ? " + relu" : "") << ", bf16 NHWC\n"
                    << "  checked: " << r["checked_points"].get<int64_t>()
                    << " sampled outputs against a double-precision reference (largest difference "
                    << r["max_abs_error"].get<double>() << ")\n"
                    << "  eager:            " << r["eager_us"].get<double>() << " us ("
                    << r["eager_tflops"].get<double>() << " TFLOP/s)\n"
                    << "  as a CUDA graph:  " << r["graph_us"].get<double>() << " us ("
                    << r["graph_tflops"].get<double>() << " TFLOP/s)\n"
                    << "  engine: " << r["engine"].get<std::string>() << "\n"
                    << "  " << r["plan"].get<std::string>() << "\n";
        }
        return 0;
      }
      if (given(*bench_op, "--batch")) sdpa.batch = op_batch;
      sdpa.iters = op_iters;
      sdpa.causal = !no_causal;
      sdpa.deterministic = !nondeterministic;
      const nlohmann::json r = sg::bench_sdpa(sdpa);
      if (op_json) {
        std::cout << r.dump() << "\n";
      } else {
        std::cout << "bench-op sdpa on " << r["gpu"].get<std::string>() << ": B " << sdpa.batch << ", H " << sdpa.heads
                  << ", S " << sdpa.seq << ", D " << sdpa.dim << (sdpa.causal ? ", causal" : "") << ", bf16\n"
                  << "  forward:  " << r["forward_us"].get<double>() << " us (" << r["forward_tflops"].get<double>()
                  << " TFLOP/s)\n"
                  << "  backward: " << r["backward_us"].get<double>() << " us (" << r["backward_tflops"].get<double>()
                  << " TFLOP/s)\n"
                  << "  forward + backward as one CUDA graph: " << r["forward_backward_graph_us"].get<double>() << " us\n";
        for (const auto& p : r["plans"]) std::cout << "  " << p.get<std::string>() << "\n";
      }
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "stepgraph: error: " << e.what() << "\n";
      return 1;
    }
  }

  try {
    sg::RunConfig cfg = config_from(c.config);
    apply_overrides(c, cfg);
    if (train->parsed() && c.mode == "verify") {
      sg::RunOptions o = options_from(c, *train);
      const int64_t steps = o.steps.value_or(std::min<int64_t>(cfg.train.steps, 50));
      sg::VerifyResult r = sg::verify_run(cfg, o, steps, c.tolerance);
      if (c.json) std::cout << r.to_json().dump() << "\n";
      else
        std::cout << "verify: " << r.steps << " steps; graph vs eager: largest relative difference "
                  << r.graph_vs_eager << " (expected 0; " << r.graph_vs_eager_at << "); cuda vs cpu: "
                  << r.gpu_vs_cpu << " (" << r.gpu_vs_cpu_at << "; tolerance " << r.tolerance
                  << "): " << (r.ok ? "OK" : "FAILED") << "\n";
      return r.ok ? 0 : 1;
    } else if (train->parsed()) {
      sg::RunOptions o = options_from(c, *train);
      if (o.out_dir.empty()) o.out_dir = default_out(c.config);
      sg::train_run(cfg, o);
    } else if (bench->parsed()) {
      sg::RunOptions o = options_from(c, *bench);
      sg::BenchResult r = sg::bench_run(cfg, o, given(*bench, "--steps") ? c.steps : 1000,
                                        c.config.empty() ? "default" : c.config);
      if (r.rank != 0) {
        // data parallel: rank 0 reports for every rank
      } else if (c.json) {
        std::cout << r.to_json().dump() << "\n";
      } else {
        if (r.ranks > 1) {
          std::cout << "data-parallel: " << r.ranks << " ranks, graph us/step per rank:";
          for (double us : r.rank_graph_us) std::cout << " " << us;
          std::cout << " (the figures below are the slowest rank's graph time and rank 0's)\n";
        }
        std::cout << "bench " << r.config << " on " << r.gpu << ", batch " << r.batch << ":\n"
                  << "  eager: " << r.eager_us_per_step << " us/step\n"
                  << "  graph: " << r.graph_us_per_step << " us/step (" << r.graph_nodes << " nodes per step)\n"
                  << "  memory: peak " << r.peak_device_bytes / 1048576.0 << " MiB allocated, step plan "
                  << r.arena_bytes / 1048576.0 << " MiB\n";
        if (!r.per_op_us.empty()) {
          double total = 0;
          std::cout << "  each op alone (eager, us):\n";
          for (const auto& [name, us] : r.per_op_us) {
            std::cout << "    " << us << "  " << name << "\n";
            total += us;
          }
          std::cout << "    " << total << "  total\n";
        }
        if (given(*bench, "--explain")) std::cout << r.lowering;
      }
    } else if (eval->parsed()) {
      sg::eval_run(cfg, c.checkpoint, options_from(c, *eval));
    } else if (predict->parsed()) {
      sg::predict_run(cfg, c.checkpoint, c.input, c.output, options_from(c, *predict));
    } else if (exp->parsed()) {
      sg::export_run(cfg, c.checkpoint, c.output, sg::parse_export_format(c.format), options_from(c, *exp));
    } else {
      std::string note;
      sg::Device d = sg::choose_device(explain->count("--device") ? c.device : cfg.train.device, &note);
      if (!note.empty()) std::cout << note << "\n";
      std::cout << sg::explain_run(cfg, d, c.batch, c.then_batch);
    }
  } catch (const std::bad_alloc&) {
    const char* msg = "out of memory: the model or the data is too large for this machine";
    if (c.json) std::cout << nlohmann::json{{"event", "error"}, {"message", msg}}.dump() << "\n";
    std::cerr << "stepgraph: error: " << msg << "\n";
    return 1;
  } catch (const std::exception& e) {
    if (c.json) std::cout << nlohmann::json{{"event", "error"}, {"message", e.what()}}.dump() << "\n";
    std::cerr << "stepgraph: error: " << e.what() << "\n";
    if (sg::dist::aborts_left_running() > 0) {
      // A data-parallel rank whose peer hangs: NCCL's abort still waits for it, and the normal
      // exit would tear CUDA down under that thread. The error is out; leave at once.
      std::cout.flush(), std::cerr.flush();
      std::_Exit(1);
    }
    return 1;
  }
  return 0;
}
