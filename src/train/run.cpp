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

class Reporter {
 public:
  // quiet: ranks other than 0 of a data-parallel run print nothing (errors still reach stderr).
  Reporter(const RunOptions& opt, const std::string& metrics_path, bool quiet = false)
      : os_(quiet ? null_ : opt.out ? *opt.out : std::cout), json_(opt.json), metrics_path_(metrics_path) {
    if (metrics_path.empty()) return;
    metrics_ = std::fopen(metrics_path.c_str(), "a");
    SG_REQUIRE(metrics_, "cannot write metrics file '", metrics_path, "': ", errno_text(errno));
  }
  ~Reporter() {
    if (metrics_) std::fclose(metrics_);
  }
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  void info(const std::string& msg) {
    if (json_) os_ << json{{"event", "info"}, {"message", msg}}.dump() << "\n";
    else os_ << msg << "\n";
    os_.flush();
  }
  // A progress line for the screen only (RunOptions::progress_seconds).
  void screen(const json& j, const std::string& text) {
    if (json_) os_ << j.dump() << "\n";
    else os_ << text << "\n";
    os_.flush();
  }
  // A record for the metrics file (flushed at once: a run killed later keeps it) and the screen.
  void record(const json& j, const std::string& text) {
    if (metrics_) {
      const std::string line = j.dump() + "\n";
      if (std::fwrite(line.data(), 1, line.size(), metrics_) != line.size() || std::fflush(metrics_) != 0)
        throw Error(cat("cannot write metrics file '", metrics_path_, "': ", errno_text(errno)));
    }
    if (json_) os_ << j.dump() << "\n";
    else if (!text.empty()) os_ << text << "\n";
    os_.flush();
  }

 private:
  std::ostream null_{nullptr};  // a stream without a buffer writes nothing
  std::ostream& os_;
  bool json_;
  std::string metrics_path_;
  FILE* metrics_ = nullptr;
};

// Whether a screen-only progress line is due: `seconds` since the last progress line (0: never).
class Heartbeat {
 public:
  using clock = std::chrono::steady_clock;
  explicit Heartbeat(double seconds) : seconds_(seconds) {}
  bool due() const {
    return seconds_ > 0 && std::chrono::duration<double>(clock::now() - last_).count() >= seconds_;
  }
  void beat() { last_ = clock::now(); }

 private:
  double seconds_;
  clock::time_point last_ = clock::now();
};

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

// The run's output files, in a folder taken (RunFolder) only once every input has been checked.
struct OutputFiles {
  std::unique_ptr<RunFolder> folder;
  std::string metrics, checkpoint;
};
OutputFiles open_output(const RunConfig& cfg, const RunOptions& opt, int64_t start_step) {
  OutputFiles f;
  if (opt.out_dir.empty()) return f;
  f.folder = std::make_unique<RunFolder>(opt, cfg.json, start_step);
  f.metrics = f.folder->file("metrics.jsonl");
  f.checkpoint = f.folder->file("checkpoint.safetensors");
  return f;
}

// The checkpoints a run wrote, for the message when it fails later.
class Checkpoints {
 public:
  Checkpoints(const RunOptions& opt, std::string path, int64_t start) : path_(std::move(path)), start_(start) {
    std::error_code ec;
    resumed_here_ = !opt.resume.empty() && !opt.weights_only && !path_.empty() &&
                    std::filesystem::equivalent(opt.resume, path_, ec);
  }
  void save(Trainer& t) {
    if (path_.empty()) return;
    t.save(path_);
    last_ = t.step();
  }
  // "the last checkpoint, 'runs/x/checkpoint.safetensors', is from step 300"
  std::string status() const {
    if (last_ >= 0) return cat("the last checkpoint, '", path_, "', is from step ", last_);
    if (resumed_here_) return cat("the checkpoint '", path_, "' is still the one resumed from (step ", start_, ")");
    return "no checkpoint was written";
  }

 private:
  std::string path_;
  int64_t start_;
  int64_t last_ = -1;
  bool resumed_here_ = false;
};

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

}  // namespace

namespace {

std::string coefficients_text(const std::map<std::string, float>& c) {
  std::string out;
  for (const auto& [name, value] : c) out += cat(out.empty() ? ", learned " : ", ", name, " = ", value);
  return out;
}

// Physics-informed training: the step draws its own points; progress reports each loss term and
// the relative L2 error against the known solution.
RunSummary train_problem(const RunConfig& cfg, const RunOptions& opt) {
  using clock = std::chrono::steady_clock;
  const pinn::Problem& prob = *cfg.problem;
  start_data_parallel(cfg, "cuda", nullptr);  // refuses a data-parallel launch with a clear message
  const int64_t total = opt.steps.value_or(cfg.train.steps);
  SG_REQUIRE(total > 0, "--steps must be positive, got ", total);
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
  Heartbeat heartbeat(opt.progress_seconds);
  for (int64_t s = start; s < total; ++s) {
    t.launch();
    const int64_t done = s + 1;
    const bool report = (cfg.train.log_every && done % cfg.train.log_every == 0) || done == total;
    const bool save = cfg.train.checkpoint_every && done % cfg.train.checkpoint_every == 0;
    const bool beat = !report && heartbeat.due();
    if (!report && !save && !beat) continue;
    loss = t.loss();  // a checkpoint too is only written from a finite step
    SG_REQUIRE(std::isfinite(loss), "loss became ", loss, " at step ", done,
               ": training diverged (try a smaller learning rate); ", ckpt.status());
    if (report || beat) {
      heartbeat.beat();
      const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
      const double rate = static_cast<double>(done - start) / std::max(elapsed, 1e-9);
      const double eta = static_cast<double>(total - done) / rate;
      json j = {{"event", "progress"}, {"step", done}, {"loss", loss}, {"steps_per_s", rate},
                {"eta_s", eta}, {"loss_terms", t.loss_terms()}};
      const std::string timing = cat("  ", fixed(rate, 1), " steps/s  ETA ", fixed(eta, 1), "s");
      std::string text = cat("step ", done, "/", total, "  loss ", loss);
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
  }
  const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  sum.steps = t.step();
  sum.final_loss = std::isfinite(loss) ? loss : t.loss();
  sum.amax = t.amax();
  sum.us_per_step = total > start ? 1e6 * elapsed / static_cast<double>(total - start) : 0.0;
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
  auto evaluate_val = [&](int64_t step) {
    if (data.val_size() == 0 || !par.leader()) return;  // every rank holds the same parameters
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
  Heartbeat heartbeat(par.on() ? 0.0 : opt.progress_seconds);
  for (int64_t s = start; s < total; ++s) {
    const int64_t done = s + 1;
    const bool logged = cfg.train.log_every && (done % cfg.train.log_every == 0 || done == total);
    const bool beat = !logged && heartbeat.due();
    const bool report = logged || beat || (cfg.train.checkpoint_every && done % cfg.train.checkpoint_every == 0) ||
                        done == total;
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
    const bool have_loss = !resident || report;
    SG_REQUIRE(!have_loss || std::isfinite(loss), "loss became ", loss, " at step ", s + 1,
               ": training diverged (try a smaller learning rate); ", ckpt.status());
    const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
    const double rate = static_cast<double>(done - start) / std::max(elapsed, 1e-9);
    if (logged || beat) {
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
      const auto amax = t.amax();
      if (!amax.empty()) {
        j["amax"] = amax;
        for (const auto& [name, v] : amax) text += cat("  ", name, " ", fixed(v, 3));
      }
      if (logged) rep.record(j, text);
      else rep.screen(j, text);
    }
    if (cfg.train.eval_every && done % cfg.train.eval_every == 0 && done != total) evaluate_val(done);
    if (cfg.train.checkpoint_every && done % cfg.train.checkpoint_every == 0) ckpt.save(t);
  }
  if (par.on()) t.loss();  // the last step has finished on this rank (bounded wait)
  const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  if (par.on()) check_same_params(t, *par.comm, total);
  sum.steps = t.step();
  sum.final_loss = std::isfinite(loss) ? loss : t.loss();
  sum.amax = t.amax();
  sum.us_per_step = total > start ? 1e6 * elapsed / static_cast<double>(total - start) : 0.0;
  if (data.named) sum.loss_terms = t.loss_terms();
  evaluate_val(sum.steps);
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

namespace {

// A graph model by name: the inputs from an .npz (a member per model input), every output into
// an .npz (a member per output).
Shape predict_named(const RunConfig& cfg, const std::string& checkpoint, const std::string& input,
                    const std::string& output, const RunOptions& opt) {
  NamedArrays inputs = read_npz(input);
  const std::vector<std::string>& names = cfg.graph->input_names();
  for (const std::string& n : names)
    SG_REQUIRE(inputs.count(n), "predict: the input '", input, "' has no array '", n, "' for the model's input '", n,
               "' (it has: ", [&] {
                 std::vector<std::string> have;
                 for (const auto& kv : inputs) have.push_back(kv.first);
                 return joined(have);
               }(), "; the model's inputs: ", joined(names), ")");
  for (auto it = inputs.begin(); it != inputs.end();)  // other members are not the model's
    it = std::find(names.begin(), names.end(), it->first) == names.end() ? inputs.erase(it) : std::next(it);
  const RunData data = prepare_data(cfg);  // with data.standardize, the training split's scaling
  for (auto& [name, a] : inputs)
    if (data.scaling.count(name) && a.dtype() == DType::F32) data.scaling.at(name).apply(a);
  std::string note;
  const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
  Reporter rep(opt, "");
  if (!note.empty()) rep.info(note);
  std::unique_ptr<Trainer> t = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  const int64_t rows = inputs.begin()->second.shape().empty() ? 0 : inputs.begin()->second.shape()[0];
  SG_REQUIRE(rows > 0, "predict: the input '", input, "' has no rows");
  t->compile({std::min<int64_t>(cfg.train.batch_size, rows)});
  t->load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
  const NamedArrays y = t->predict(inputs);
  write_npz(output, y);
  json shapes = json::object();
  for (const auto& [name, a] : y) shapes[name] = a.shape();
  rep.record({{"event", "predict"}, {"input", input}, {"output", output}, {"rows", rows}, {"outputs", shapes},
              {"checkpoint", checkpoint}, {"steps", t->step()}},
             cat("predicted ", y.size(), " output", y.size() == 1 ? "" : "s", " of ", rows, " rows from '", input,
                 "' with '", checkpoint, "' (step ", t->step(), "): ", output));
  return {rows};
}

}  // namespace

Shape predict_run(const RunConfig& cfg, const std::string& checkpoint, const std::string& input,
                  const std::string& output, const RunOptions& opt) {
  SG_REQUIRE(opt.overwrite || !std::filesystem::exists(output), "predict: the output '", output,
             "' exists; choose another path or pass --overwrite");
  if (cfg.named()) return predict_named(cfg, checkpoint, input, output, opt);
  HostArray X = read_npy(input);
  SG_REQUIRE(X.dtype() == DType::F32 && X.shape().size() == 2 && X.shape()[0] > 0,
             "predict: the input '", input, "' must hold f32 or f64 [rows, features] (rows > 0), got ",
             dtype_name(X.dtype()), " ", shape_str(X.shape()));
  std::string note;
  const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
  Reporter rep(opt, "");
  if (!note.empty()) rep.info(note);
  std::unique_ptr<Trainer> t = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  if (!cfg.problem) {
    const RunData data = prepare_data(cfg);  // the features' count and, with data.standardize, their scaling
    SG_REQUIRE(X.shape()[1] == data.train.features(), "predict: the input '", input, "' has ", X.shape()[1],
               " features per row; the model was trained on ", data.train.features(), " (", data.train.name, ")");
    if (data.scaling.count("X")) data.scaling.at("X").apply(X);
    t->compile({std::min<int64_t>(cfg.train.batch_size, X.shape()[0]), X.shape()[1]});
  }
  t->load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
  const HostArray y = t->predict(X);
  write_npy(output, y);
  json j = {{"event", "predict"}, {"input", input}, {"output", output}, {"rows", y.shape()[0]},
            {"outputs", y.shape().size() > 1 ? y.shape()[1] : 1}, {"checkpoint", checkpoint}, {"steps", t->step()}};
  rep.record(j, cat("predicted ", shape_str(y.shape()), " from '", input, "' with '", checkpoint, "' (step ",
                    t->step(), "): ", output));
  return y.shape();
}

RunSummary eval_run(const RunConfig& cfg, const std::string& checkpoint, const RunOptions& opt) {
  if (cfg.problem) {
    std::string note;
    const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
    Reporter rep(opt, "");
    if (!note.empty()) rep.info(note);
    std::unique_ptr<Trainer> owned = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
    Trainer& t = *owned;
    t.load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
    RunSummary sum;
    sum.task = "physics-informed";
    sum.device = device_name(device);
    sum.steps = t.step();
    const bool has_exact = !cfg.problem->exact.empty() || static_cast<bool>(cfg.problem->exact_fn);
    if (has_exact) sum.rel_l2_error = pinn::relative_l2_error(t, *cfg.problem);
    sum.coefficients = t.coefficients();
    const std::string learned = coefficients_text(sum.coefficients);
    rep.record(sum.to_json(), cat("eval of '", checkpoint, "' (step ", sum.steps, ")",
                                  has_exact ? cat(": relative L2 error ", sum.rel_l2_error) : std::string(),
                                  learned.empty() ? "" : (has_exact ? learned : ": " + learned.substr(2))));
    return sum;
  }
  std::string note;
  const Device device = choose_device(opt.device.value_or(cfg.train.device), &note);
  Reporter rep(opt, "");
  if (!note.empty()) rep.info(note);
  const RunData data = prepare_data(cfg);
  const int64_t B = std::min<int64_t>(cfg.train.batch_size, std::max<int64_t>(data.train_size(), 1));
  std::unique_ptr<Trainer> owned = trainer_from_config(cfg, device, opt.seed.value_or(cfg.train.seed), cfg.trainer);
  Trainer& t = *owned;
  compile_for(t, cfg, data, B);
  t.load(checkpoint, opt.weights_only ? LoadMode::WeightsOnly : LoadMode::Evaluate);
  const bool classes = !data.named && data.train.task == Task::Classification;
  const bool on_val = data.val_size() > 0;
  RunSummary sum;
  sum.task = data.named ? "graph" : task_name(data.train.task);
  sum.device = device_name(device);
  sum.steps = t.step();
  EvalResult r = evaluate_split(t, data, on_val);
  sum.val_loss = r.loss;
  sum.final_loss = r.loss;
  sum.val_accuracy = r.accuracy;
  sum.val_terms = r.terms;
  sum.val_size = on_val ? data.val_size() : data.train_size();
  if (classes) sum.train_accuracy = evaluate_split(t, data, false).accuracy;
  std::string text = cat("eval of '", checkpoint, "' (step ", sum.steps, ") on ", on_val ? "validation" : "training",
                         " split of ", sum.val_size, ": loss ", fixed(r.loss, 4), terms_text(r.terms));
  if (classes) text += cat(", accuracy ", fixed(100 * r.accuracy, 2), "%");
  rep.record(sum.to_json(), text);
  return sum;
}

}  // namespace sg
