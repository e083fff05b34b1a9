// The `stepgraph` command: train, eval, explain.
#include <CLI/CLI.hpp>

#include <charconv>
#include <filesystem>
#include <iostream>
#include <new>

#include "stepgraph/run.h"

namespace {

struct Common {
  std::string config, device, out, resume, checkpoint;
  int64_t steps = 0, batch = 0;
  uint64_t seed = 0;
  bool json = false;
};

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

// The output width of the compiled model (the live-out activation that is not the loss).
int64_t model_outputs(const sg::Trainer& t) {
  for (const sg::TensorInfo& info : t.program().tensors())
    if (info.live_out && info.role == sg::Role::Activation && info.name != "loss") return info.shape[1];
  return 0;
}

sg::RunOptions options_from(const Common& c, const CLI::App& cmd) {
  sg::RunOptions o;
  if (given(cmd, "--steps")) o.steps = c.steps;
  if (given(cmd, "--device")) o.device = c.device;
  if (given(cmd, "--seed")) o.seed = c.seed;
  o.json = c.json;
  o.resume = c.resume;
  o.out_dir = c.out;
  return o;
}

std::string default_out(const std::string& config) {
  std::string stem = config.empty() ? "default" : std::filesystem::path(config).stem().string();
  return (std::filesystem::path("runs") / stem).string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stepgraph: whole-step training of small and medium neural networks"};
  app.require_subcommand(1);
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
  train->add_flag("--json", c.json, "Print every line as a JSON object; the last is the summary");

  auto* eval = app.add_subcommand("eval", "Evaluate a checkpoint on the config's validation split");
  eval->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  eval->add_option("--checkpoint", c.checkpoint, "Checkpoint to evaluate")->required()->check(CLI::ExistingFile);
  eval->add_option("--device", c.device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  eval->add_flag("--json", c.json, "Print the result as a JSON object");

  auto* explain = app.add_subcommand("explain", "Show the step program, shapes, memory plan and loss scale");
  explain->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  explain->add_option("--batch", c.batch, "Batch size (default: train.batch_size)")->check(integer_at_least(1));
  explain->add_option("--device", c.device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));

  CLI11_PARSE(app, argc, argv);

  try {
    sg::RunConfig cfg = config_from(c.config);
    if (train->parsed()) {
      sg::RunOptions o = options_from(c, *train);
      if (o.out_dir.empty()) o.out_dir = default_out(c.config);
      sg::train_run(cfg, o);
    } else if (eval->parsed()) {
      sg::eval_run(cfg, c.checkpoint, options_from(c, *eval));
    } else {
      std::string note;
      sg::Device d = sg::choose_device(explain->count("--device") ? c.device : cfg.train.device, &note);
      if (!note.empty()) std::cout << note << "\n";
      sg::Dataset data = sg::load_data(cfg.data);
      sg::Trainer t(cfg.model, cfg.loss, cfg.optimizer, d, cfg.train.seed);
      t.compile({c.batch ? c.batch : cfg.train.batch_size, data.features()});
      sg::check_data_fits(cfg, data, model_outputs(t));
      std::cout << t.explain();
    }
  } catch (const std::bad_alloc&) {
    const char* msg = "out of memory: the model or the data is too large for this machine";
    if (c.json) std::cout << nlohmann::json{{"event", "error"}, {"message", msg}}.dump() << "\n";
    std::cerr << "stepgraph: error: " << msg << "\n";
    return 1;
  } catch (const std::exception& e) {
    if (c.json) std::cout << nlohmann::json{{"event", "error"}, {"message", e.what()}}.dump() << "\n";
    std::cerr << "stepgraph: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
