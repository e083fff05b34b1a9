#include "stepgraph/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <cstring>
#include <iostream>

#include "core/environment.h"
#include "core/files.h"
#include "stepgraph/distributed.h"
#include "stepgraph/rng.h"
#include "train/run_data.h"
#include "train/run_folder.h"
#include "train/run_output.h"

namespace sg {

using nlohmann::json;

json RunSummary::to_json() const {
  json j = {{"event", "summary"}, {"steps", steps}, {"final_loss", final_loss},
            {"us_per_step", us_per_step}, {"task", task}, {"val_loss", val_loss},
            {"val_size", val_size}, {"device", device}};
  if (task == "classification") {
    j["accuracy"] = val_accuracy;
    j["train_accuracy"] = train_accuracy;
  }
  if (!checkpoint.empty()) j["checkpoint"] = checkpoint;
  if (rel_l2_error >= 0) j["rel_l2_error"] = rel_l2_error;
  if (!loss_terms.empty()) j["loss_terms"] = loss_terms;
  if (!val_terms.empty()) j["val_terms"] = val_terms;
  if (!amax.empty()) j["amax"] = amax;
  if (!coefficients.empty()) j["coefficients"] = coefficients;
  if (!stopped_by.empty()) j["stopped_by"] = stopped_by;
  if (best_step) j["best_step"] = best_step;
  if (nonfinite.count) {
    j["nonfinite_steps"] = nonfinite.count;
    j["first_nonfinite_step"] = nonfinite.first;
  }
  return j;
}

Device choose_device(const std::string& requested, std::string* note) {
  std::string why;
  if (requested == "cpu") return Device::CPU;
  if (requested == "cuda") {
    SG_REQUIRE(cuda_available(&why), "--device cuda: ", why);
    return Device::CUDA;
  }
  SG_REQUIRE(requested == "auto", "unknown device '", requested, "': expected auto, cpu or cuda");
  if (cuda_available(&why)) return Device::CUDA;
  if (note) *note = "no usable GPU: " + why + "; falling back to the CPU backend";
  return Device::CPU;
}

namespace {

// Data-parallel training: this process's rank, its NCCL communicator on device LOCAL_RANK, or
// nothing for a plain single-process run.
struct Parallel {
  dist::World world;
  std::shared_ptr<dist::Communicator> comm;
  bool on() const { return comm != nullptr; }
  bool leader() const { return world.rank == 0; }
};

Parallel start_parallel(const RunConfig& cfg, const std::string& requested_device) {
  Parallel par;
  par.comm = start_data_parallel(cfg, requested_device, &par.world);
  return par;
}

// Every rank's parameter checksum must equal rank 0's (all ranks call this at the same steps).
void check_same_params(const Trainer& t, dist::Communicator& comm, int64_t step) {
  uint64_t h = dist::kChecksumStart;
  for (const auto& [name, a] : t.params()) {
    h = dist::checksum(name.data(), name.size(), h);
    h = dist::checksum(a.raw(), a.nbytes(), h);
  }
  const std::vector<uint64_t> all = comm.all_gather(h, cat("the parameter checksum at step ", step));
  for (size_t r = 1; r < all.size(); ++r)
    SG_REQUIRE(all[r] == all[0], "data-parallel: the parameters differ across ranks at step ", step, ": rank ", r,
               "'s checksum ", std::hex, all[r], " differs from rank 0's ", all[0], std::dec,
               " (the ranks must train identical copies: same config, seed and checkpoint on every rank)");
}

// The mean over ranks of a value every rank has (the reported loss).
double mean_over_ranks(dist::Communicator& comm, double v, const std::string& what) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(v));
  double sum = 0;
  for (uint64_t b : comm.all_gather(bits, what)) {
    double x = 0;
    std::memcpy(&x, &b, sizeof(x));
    sum += x;
  }
  return sum / comm.size();
}

// train.early_stopping needs evaluations (train.eval_every, a validation split) of its metric.
void check_early_stopping(const RunConfig& cfg, const RunData& data) {
  const EarlyStopping& es = cfg.train.early_stopping;
  SG_REQUIRE(cfg.train.eval_every > 0, "train.early_stopping: needs train.eval_every > 0 (the evaluations it watches)");
  SG_REQUIRE(data.val_size() > 0, "train.early_stopping: needs a validation split (data.validation_split > 0)");
  std::vector<std::string> metrics = {"val_loss"};
  if (!data.named && data.train.task == Task::Classification) metrics.push_back("val_accuracy");
  if (data.named)
    for (const LossTerm& term : cfg.loss_terms) metrics.push_back("val_" + term.output);
  SG_REQUIRE(std::find(metrics.begin(), metrics.end(), es.metric) != metrics.end(), "train.early_stopping.metric: \"",
             es.metric, "\" is not a metric of this run; it has: ", joined(metrics));
}

// Every rank's watch: the earliest first step and the most steps any rank saw (so that every
// rank takes the same decision).
NonFiniteSteps nonfinite_over_ranks(dist::Communicator& comm, const NonFiniteSteps& w, int64_t step) {
  NonFiniteSteps all;
  const std::vector<uint64_t> firsts = comm.all_gather(static_cast<uint64_t>(w.first), cat("the watch of step ", step));
  const std::vector<uint64_t> counts = comm.all_gather(static_cast<uint64_t>(w.count), cat("the watch of step ", step));
  for (size_t r = 0; r < firsts.size(); ++r) {
    const auto first = static_cast<int64_t>(firsts[r]), count = static_cast<int64_t>(counts[r]);
    if (count > 0 && (all.first == 0 || first < all.first)) all.first = first;
    all.count = std::max(all.count, count);
  }
  return all;
}

}  // namespace

std::shared_ptr<dist::Communicator> start_data_parallel(const RunConfig& cfg, const std::string& requested_device,
                                                       dist::World* world_out) {
  const dist::World world = dist::world_from_env();
  if (world_out) *world_out = world;
  const char* forced = env::get("SG_DISTRIBUTED");
  SG_REQUIRE(!forced || std::string(forced) == "nccl" || std::string(forced) == "auto",
             "environment: SG_DISTRIBUTED='", forced, "': expected nccl or auto");
  const bool want = world.size > 1 || cfg.train.distributed == "nccl" || (forced && std::string(forced) == "nccl");
  if (!want) return nullptr;
  const std::string who =
      cat("data-parallel training (rank ", world.rank, " of ", world.size, ", ", world.launcher, " launch)");
  SG_REQUIRE(!cfg.problem, who, " of physics-informed problems is not supported (every rank would draw the same "
             "collocation points); train '", cfg.problem ? cfg.problem->name : "", "' in one process");
  SG_REQUIRE(requested_device != "cpu", who, " runs on CUDA devices; the device asked for is cpu");
  std::string why;
  SG_REQUIRE(cuda_available(&why), who, " needs a CUDA device: ", why);
  SG_REQUIRE(dist::nccl_available(&why), who, ": ", why);
  dist::use_device(world.local_rank);
  return dist::Communicator::create(world, dist::timeout_from_env());
}

RunSummary train_run(const RunConfig& cfg, const RunOptions& opt) {
  if (cfg.problem) return train_problem(cfg, opt);
  using clock = std::chrono::steady_clock;
  const int64_t total = opt.steps.value_or(cfg.train.steps);
  SG_REQUIRE(total > 0, "--steps must be positive, got ", total);
  const uint64_t seed = opt.seed.value_or(cfg.train.seed);
  std::string note;
  const std::string requested = opt.device.value_or(cfg.train.device);
  // Data parallel: device LOCAL_RANK and the communicator before anything is made on a device.
  const Parallel par = start_parallel(cfg, requested);
  if (par.leader()) check_run_folder(opt);
  const Device device = par.on() ? Device::CUDA : choose_device(requested, &note);
  const int ranks = par.world.size;

  // Every input (data, model fit, checkpoint to resume) is checked before anything in out_dir is
  // written: a bad input leaves a previous run's files there as they were.
  const RunData data = prepare_data(cfg);
  SG_REQUIRE(!par.on() || (!opt.callback && !cfg.train.early_stopping.on),
             "data-parallel training takes no callback and no train.early_stopping (every rank must stop at the same step)");
  if (cfg.train.early_stopping.on) check_early_stopping(cfg, data);
  // B rows per rank; every rank draws the same global batch of ranks * B rows (dist::shard_of).
  const int64_t B = cfg.train.batch_size, G = B * ranks;
  SG_REQUIRE(G <= data.train_size(), "train.batch_size ", B, par.on() ? cat(" times ", ranks, " ranks") : "",
             " is larger than the training split (", data.train_size(), " samples of '", data.name(), "')");
  SG_REQUIRE(!par.on() || cfg.data.last_batch == LastBatch::Drop,
             "data.last_batch \"partial\" is not supported with data-parallel training (the ranks' shards of the "
             "last batch would differ in size); use \"drop\"");
  TrainerOptions topt = cfg.trainer;
  topt.lower.comm = par.comm;
  topt.lower.bucket_bytes = static_cast<int64_t>(cfg.train.bucket_mb * 1048576.0);
  std::unique_ptr<Trainer> owned = trainer_from_config(cfg, device, seed, topt);
  Trainer& t = *owned;
  compile_for(t, cfg, data, B);
  if (!opt.resume.empty()) t.load(opt.resume, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Resume);
  const int64_t start = t.step();
  SG_REQUIRE(start <= total, "the checkpoint '", opt.resume, "' is at step ", start,
             ", beyond the requested total of ", total, " steps");
  const int64_t check_every = opt.check_params.value_or(cfg.train.check_params);
  if (par.on()) check_same_params(t, *par.comm, start);

  // Only rank 0 writes files and progress.
  const OutputFiles files = par.leader() ? open_output(cfg, opt, start) : OutputFiles{};
  Checkpoints ckpt(opt, files.checkpoint, start);
  const std::string& ckpt_path = files.checkpoint;
  Reporter rep(opt, files.metrics, !par.leader());
  if (!note.empty()) rep.info(note);

  rep.info(cat("stepgraph: training on ", device_name(device), ": ", cfg.model->describe(), "; ",
               data.name(), " ", data.train_size(), " train / ", data.val_size(), " validation; ",
               total - start, " steps of batch ", B, start ? cat(" (resuming at step ", start, ")") : ""));
  if (par.on())
    rep.info(cat("data-parallel: ", ranks, " rank", ranks == 1 ? "" : "s", " (", par.comm->describe(),
                 "), global batch ", G, " = ", ranks, " x ", B, "; gradients averaged in the step graph"));

  BatchSampler sampler(data.train_size(), G, cfg.data.shuffle, mix_seed(t.seed(), "data"),
                       cfg.data.last_batch);
  const dist::Shard shard = dist::shard_of(B, par.world);
  const bool classes = !data.named && data.train.task == Task::Classification;
  RunSummary sum;
  sum.task = data.named ? "graph" : task_name(data.train.task);
  sum.device = device_name(device);
  auto evaluate_val = [&](int64_t step) -> EvalResult {
    if (data.val_size() == 0 || !par.leader()) return {};  // every rank holds the same parameters
    EvalResult r = evaluate_split(t, data, true);
    sum.val_loss = r.loss;
    sum.val_accuracy = r.accuracy;
    sum.val_terms = r.terms;
    json j = {{"event", "eval"}, {"step", step}, {"val_loss", r.loss}};
    std::string text = cat("  eval  step ", step, "  val_loss ", fixed(r.loss, 4));
    if (!r.terms.empty()) {
      j["val_terms"] = r.terms;
      text += terms_text(r.terms);
    }
    if (classes) {
      j["val_accuracy"] = r.accuracy;
      text += cat("  val_accuracy ", fixed(100 * r.accuracy, 2), "%");
    }
    rep.record(j, text);
    return r;
  };

  const bool resident = cfg.data.device_resident;
  // Uploaded once; every step gathers and shuffles its own batch (its shard) on the device.
  if (resident && data.named)
    t.set_dataset(data.named_train.inputs, data.named_train.targets, B, cfg.data.shuffle, cfg.data.last_batch,
                  mix_seed(t.seed(), "data"), par.world.rank, ranks);
  else if (resident)
    t.set_dataset(data.train.X, data.train.y, B, cfg.data.shuffle, cfg.data.last_batch, mix_seed(t.seed(), "data"),
                  par.world.rank, ranks);
  const auto t0 = clock::now();
  float loss = NAN;
  int64_t last = start;  // the last step taken (a callback or early stopping may end the run early)
  int64_t evaluated_at = -1;  // the step of the last evaluation in the loop
  std::optional<EarlyStopper> early;
  if (cfg.train.early_stopping.on) early.emplace(cfg.train.early_stopping);
  Heartbeat heartbeat(opt.progress_seconds);
  for (int64_t s = start; s < total; ++s) {
    const int64_t done = s + 1;
    const bool logged = cfg.train.log_every && (done % cfg.train.log_every == 0 || done == total);
    // A beat falls due at a different step on each rank, while a data-parallel report is a
    // collective (the loss averaged, the watch combined): there the beat is the leader's own line,
    // without the loss, and no report.
    const bool beat = !logged && par.leader() && heartbeat.due();
    const bool report = logged || (beat && !par.on()) ||
                        (cfg.train.checkpoint_every && done % cfg.train.checkpoint_every == 0) || done == total;
    if (resident) {
      t.launch();  // no host work, no synchronization: the loss is read only when reported
      if (report) loss = t.loss();
    } else {
      std::vector<int64_t> rows = sampler.indices(s);
      if (par.on()) rows = std::vector<int64_t>(rows.begin() + shard.begin, rows.begin() + shard.end);
      loss = train_rows(t, data, rows);
    }
    if (par.on() && logged) loss = static_cast<float>(mean_over_ranks(*par.comm, loss, cat("the loss of step ", done)));
    if (par.on() && check_every && done % check_every == 0) check_same_params(t, *par.comm, done);
    // The watch, where the loss is read: at report points (the same steps on every rank), and at
    // once when a host-fed step's loss shows it.
    NonFiniteSteps bad;
    if (report || (!par.on() && !resident && !std::isfinite(loss))) {
      bad = t.nonfinite_steps();
      if (par.on()) bad = nonfinite_over_ranks(*par.comm, bad, done);
      stop_if_nonfinite(cfg.trainer.on_nan, bad, done, ckpt);
    }
    const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
    const double rate = static_cast<double>(done - start) / std::max(elapsed, 1e-9);
    if (beat && par.on()) {
      heartbeat.beat();
      const double eta = static_cast<double>(total - done) / rate;
      rep.screen({{"event", "progress"}, {"step", done}, {"steps_per_s", rate}, {"eta_s", eta}, {"lr", t.lr()}},
                 cat("step ", done, "/", total, "  ", fixed(rate, 1), " steps/s  ETA ", fixed(eta, 1), "s"));
    } else if (logged || beat) {
      heartbeat.beat();
      const double eta = static_cast<double>(total - done) / rate;
      json j = {{"event", "progress"}, {"step", done}, {"loss", loss}, {"steps_per_s", rate},
                {"eta_s", eta}, {"lr", t.lr()}};
      std::string text = cat("step ", done, "/", total, "  loss ", fixed(loss, 4), "  ", fixed(rate, 1),
                             " steps/s  ETA ", fixed(eta, 1), "s");
      if (data.named) {
        const auto terms = t.loss_terms();
        j["loss_terms"] = terms;
        text += terms_text({terms.begin(), terms.end()});
      }
      report_nonfinite(cfg.trainer.on_nan, bad, j, text);
      const auto amax = t.amax();
      if (!amax.empty()) {
        j["amax"] = amax;
        for (const auto& [name, v] : amax) text += cat("  ", name, " ", fixed(v, 3));
      }
      if (logged) rep.record(j, text);
      else rep.screen(j, text);
    }
    bool stop = rep.stop_requested();
    if (!stop && cfg.train.eval_every && done % cfg.train.eval_every == 0 && done != total) {  // else the final one
      const EvalResult r = evaluate_val(done);
      evaluated_at = done;
      if (early && early->update(r, done, t)) {
        sum.stopped_by = "early_stopping";
        rep.info(cat("early stopping at step ", done, ": ", cfg.train.early_stopping.metric, " has not improved on ",
                     early->best(), " (step ", early->best_step(), ") for ", cfg.train.early_stopping.patience,
                     " evaluations"));
      }
      stop = stop || !sum.stopped_by.empty();
    }
    if (cfg.train.checkpoint_every && done % cfg.train.checkpoint_every == 0) ckpt.save(t);
    last = done;
    if (stop) {
      if (sum.stopped_by.empty()) sum.stopped_by = "callback";
      break;
    }
  }
  if (par.on()) t.loss();  // the last step has finished on this rank (bounded wait)
  const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  if (par.on()) check_same_params(t, *par.comm, total);
  sum.steps = t.step();
  sum.nonfinite = t.nonfinite_steps();
  sum.final_loss = std::isfinite(loss) ? loss : t.loss();
  sum.amax = t.amax();
  sum.us_per_step = last > start ? 1e6 * elapsed / static_cast<double>(last - start) : 0.0;
  if (data.named) sum.loss_terms = t.loss_terms();
  // The state the run ends with is a candidate too (as Keras's last epoch is): evaluated once
  // here, then the best one's parameters come back and its figures are the summary's.
  if (early) {
    if (evaluated_at != last) early->update(evaluate_val(last), last, t);
    sum.best_step = early->best_step();
    if (early->restore(t, last)) {
      const EvalResult& b = early->best_result();
      sum.val_loss = b.loss, sum.val_accuracy = b.accuracy, sum.val_terms = b.terms;
      rep.info(cat("restored the parameters of step ", sum.best_step, ", the best ", cfg.train.early_stopping.metric,
                   " (", early->best(), ")"));
    }
  } else {
    evaluate_val(sum.steps);
  }
  sum.val_size = data.val_size();
  if (classes && par.leader()) sum.train_accuracy = evaluate_split(t, data, false).accuracy;
  if (!ckpt_path.empty()) {
    ckpt.save(t);
    sum.checkpoint = ckpt_path;
  }
  std::string text = cat("done: ", sum.steps, " steps, final loss ", fixed(sum.final_loss, 4), ", ",
                         fixed(sum.us_per_step, 1), " us/step on ", sum.device);
  if (data.val_size()) {
    text += cat(", val_loss ", fixed(sum.val_loss, 4));
    if (!sum.val_terms.empty()) text += cat(" (", terms_text(sum.val_terms).substr(2), ")");
    if (classes)
      text += cat(", validation accuracy ", fixed(100 * sum.val_accuracy, 2), "%");
  }
  if (!sum.checkpoint.empty()) text += cat("; checkpoint ", sum.checkpoint);
  rep.record(sum.to_json(), text);
  if (opt.keep_trainer) *opt.keep_trainer = std::move(owned);
  return sum;
}

std::unique_ptr<Trainer> trainer_from_config(const RunConfig& cfg, Device device, uint64_t seed,
                                             const TrainerOptions& options) {
  if (cfg.problem) {
    auto t = std::make_unique<Trainer>(cfg.model, pinn::make_step(*cfg.problem), cfg.optimizer, device, seed, options);
    t->compile_custom();
    return t;
  }
  if (cfg.named()) return std::make_unique<Trainer>(cfg.graph, cfg.loss_terms, cfg.optimizer, device, seed, options);
  return std::make_unique<Trainer>(cfg.model, cfg.loss, cfg.optimizer, device, seed, options);
}

std::unique_ptr<Trainer> trainer_from_config(const RunConfig& cfg, const std::string& device,
                                             std::optional<uint64_t> seed) {
  return trainer_from_config(cfg, choose_device(device.empty() ? cfg.train.device : device, nullptr),
                             seed.value_or(cfg.train.seed), cfg.trainer);
}

std::string explain_run(const RunConfig& cfg, Device device, int64_t batch, int64_t then_batch) {
  if (cfg.problem) return trainer_from_config(cfg, device, cfg.train.seed, cfg.trainer)->explain();
  const RunData data = prepare_data(cfg, false);
  std::unique_ptr<Trainer> t = trainer_from_config(cfg, device, cfg.train.seed, cfg.trainer);
  compile_for(*t, cfg, data, batch ? batch : cfg.train.batch_size);
  if (then_batch) compile_for(*t, cfg, data, then_batch);
  return t->explain();
}

}  // namespace sg
