// The `stepgraph` command: train, eval, explain.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

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

sg::RunOptions options_from(const Common& c, const CLI::App& cmd) {
  sg::RunOptions o;
  if (cmd.count("--steps")) o.steps = c.steps;
  if (cmd.count("--device")) o.device = c.device;
  if (cmd.count("--seed")) o.seed = c.seed;
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
  train->add_option("--steps", c.steps, "Total optimizer steps (overrides train.steps)")->check(CLI::PositiveNumber);
  train->add_option("--out", c.out, "Output folder for metrics, checkpoint and config (default runs/<config name>)");
  train->add_option("--seed", c.seed, "Seed for initialization and shuffling (overrides train.seed)");
  train->add_option("--resume", c.resume, "Checkpoint to continue from")->check(CLI::ExistingFile);
  train->add_flag("--json", c.json, "Print every line as a JSON object; the last is the summary");

  auto* eval = app.add_subcommand("eval", "Evaluate a checkpoint on the config's validation split");
  eval->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  eval->add_option("--checkpoint", c.checkpoint, "Checkpoint to evaluate")->required()->check(CLI::ExistingFile);
  eval->add_option("--device", c.device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  eval->add_flag("--json", c.json, "Print the result as a JSON object");

  auto* explain = app.add_subcommand("explain", "Show the step program, shapes, memory plan and loss scale");
  explain->add_option("config", c.config, "Configuration JSON file (default: the embedded one)")->check(CLI::ExistingFile);
  explain->add_option("--batch", c.batch, "Batch size (default: train.batch_size)")->check(CLI::PositiveNumber);
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
      std::cout << t.explain();
    }
  } catch (const std::exception& e) {
    if (c.json) std::cout << nlohmann::json{{"event", "error"}, {"message", e.what()}}.dump() << "\n";
    std::cerr << "stepgraph: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
