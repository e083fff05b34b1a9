// Physics-informed training from a configuration (train_run's problem case).
#include "stepgraph/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/files.h"
#include "train/run_data.h"
#include "train/run_output.h"

namespace sg {

using nlohmann::json;

// The step draws its own points; progress reports each loss term and the relative L2 error
// against the known solution.
RunSummary train_problem(const RunConfig& cfg, const RunOptions& opt) {
  using clock = std::chrono::steady_clock;
  const pinn::Problem& prob = *cfg.problem;
  start_data_parallel(cfg, "cuda", nullptr);  // refuses a data-parallel launch with a clear message
  const int64_t total = opt.steps.value_or(cfg.train.steps);
  SG_REQUIRE(total > 0, "--steps must be positive, got ", total);
  SG_REQUIRE(!cfg.train.early_stopping.on, "train.early_stopping: a physics-informed problem has no validation split ",
             "to watch; stop on its loss with a callback, or set the steps");
  check_run_folder(opt);
  std::string note;
  const std::string requested = opt.device.value_or(cfg.train.device);
  const Device device = choose_device(requested, &note);
  std::unique_ptr<Trainer> owned = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  Trainer& t = *owned;
  if (!opt.resume.empty()) t.load(opt.resume, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Resume);
  const int64_t start = t.step();
  SG_REQUIRE(start <= total, "the checkpoint '", opt.resume, "' is at step ", start, ", beyond ", total, " steps");

  const OutputFiles files = open_output(cfg, opt, start);
  Checkpoints ckpt(opt, files.checkpoint, start);
  const std::string& ckpt_path = files.checkpoint;
  Reporter rep(opt, files.metrics);
  if (!note.empty()) rep.info(note);
  rep.info(cat("stepgraph: physics-informed training of '", prob.name, "' on ", device_name(device), ": ",
               cfg.model->describe(), "; ", pinn::term_labels(prob).size(), " loss terms; ", total - start, " steps"));
  const bool has_exact = !prob.exact.empty() || static_cast<bool>(prob.exact_fn);
  RunSummary sum;
  sum.task = "physics-informed";
  sum.device = device_name(device);
  const auto t0 = clock::now();
  float loss = NAN;
  int64_t last = start;  // the last step taken (a callback may end the run early)
  Heartbeat heartbeat(opt.progress_seconds);
  for (int64_t s = start; s < total; ++s) {
    t.launch();
    const int64_t done = s + 1;
    const bool report = (cfg.train.log_every && done % cfg.train.log_every == 0) || done == total;
    const bool save = cfg.train.checkpoint_every && done % cfg.train.checkpoint_every == 0;
    const bool beat = !report && heartbeat.due();
    if (!report && !save && !beat) continue;
    loss = t.loss();  // a checkpoint too is only written after the watch's check
    const NonFiniteSteps bad = t.nonfinite_steps();
    stop_if_nonfinite(cfg.trainer.on_nan, bad, done, ckpt);
    if (report || beat) {
      heartbeat.beat();
      const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
      const double rate = static_cast<double>(done - start) / std::max(elapsed, 1e-9);
      const double eta = static_cast<double>(total - done) / rate;
      json j = {{"event", "progress"}, {"step", done}, {"loss", loss}, {"steps_per_s", rate},
                {"eta_s", eta}, {"lr", t.lr()}, {"loss_terms", t.loss_terms()}};
      const std::string timing = cat("  ", fixed(rate, 1), " steps/s  ETA ", fixed(eta, 1), "s");
      std::string text = cat("step ", done, "/", total, "  loss ", loss);
      report_nonfinite(cfg.trainer.on_nan, bad, j, text);
      if (!prob.coefficients.empty()) {  // the learned coefficients, by name (a few bytes read back)
        const auto coefficients = t.coefficients();
        j["coefficients"] = coefficients;
        for (const auto& [name, value] : coefficients) text += cat("  ", name, " ", value);
      }
      if (report && has_exact) {  // a heartbeat stays cheap: no error evaluation
        const double err = pinn::relative_l2_error(t, prob);
        j["rel_l2_error"] = err;
        text += cat("  rel_l2_error ", err);
      }
      if (report) rep.record(j, text + timing);
      else rep.screen(j, text + timing);
    }
    if (save) ckpt.save(t);
    last = done;
    if (rep.stop_requested()) {
      sum.stopped_by = "callback";
      break;
    }
  }
  const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  sum.steps = t.step();
  sum.final_loss = std::isfinite(loss) ? loss : t.loss();
  sum.amax = t.amax();
  sum.us_per_step = last > start ? 1e6 * elapsed / static_cast<double>(last - start) : 0.0;
  sum.nonfinite = t.nonfinite_steps();
  sum.loss_terms = t.loss_terms();
  sum.coefficients = t.coefficients();
  sum.rel_l2_error = has_exact ? pinn::relative_l2_error(t, prob) : -1;
  if (!ckpt_path.empty()) {
    ckpt.save(t);
    sum.checkpoint = ckpt_path;
    // The solution on the evaluation grid, for plots (stepgraph plot draws solution.png from it).
    const auto dir = std::filesystem::path(opt.out_dir);
    const HostArray grid = pinn::evaluation_grid(prob);
    write_npy((dir / "eval_points.npy").string(), grid);
    write_npy((dir / "prediction.npy").string(), t.predict(grid));
    if (has_exact) write_npy((dir / "exact.npy").string(), pinn::exact_solution(prob, grid));
  }
  json summary = sum.to_json();
  summary["coordinates"] = prob.coords;
  rep.record(summary, cat("done: ", sum.steps, " steps, final loss ", sum.final_loss, ", ",
                                fixed(sum.us_per_step, 1), " us/step on ", sum.device,
                                has_exact ? cat(", relative L2 error ", sum.rel_l2_error) : std::string(),
                                coefficients_text(sum.coefficients),
                                sum.checkpoint.empty() ? "" : "; checkpoint " + sum.checkpoint));
  if (opt.keep_trainer) *opt.keep_trainer = std::move(owned);
  return sum;
}


}  // namespace sg
