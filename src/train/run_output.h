// Internal: what a training run writes as it goes, shared by train_run (run.cpp), physics-informed
// training (run_problem.cpp), eval and predict (run_eval.cpp): the screen and metrics records
// (reporter.h), the screen's heartbeat, the run folder's files, the checkpoints written, and the
// non-finite watch's check (NanCheck).
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "stepgraph/run.h"
#include "train/reporter.h"
#include "train/run_folder.h"

namespace sg {

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

// The run's output files, in a folder taken (RunFolder) only once every input has been checked.
struct OutputFiles {
  std::unique_ptr<RunFolder> folder;
  std::string metrics, checkpoint;
};
inline OutputFiles open_output(const RunConfig& cfg, const RunOptions& opt, int64_t start_step) {
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

inline std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

inline std::string coefficients_text(const std::map<std::string, float>& c) {
  std::string out;
  for (const auto& [name, value] : c) out += cat(out.empty() ? ", learned " : ", ", name, " = ", value);
  return out;
}

// The non-finite watch (Trainer::nonfinite_steps), read where a run reads its loss. Under
// train.on_nan "stop", an Error naming the first such step and the last checkpoint (which is
// from before it: checkpoints are written only after this check).
inline void stop_if_nonfinite(NanPolicy on_nan, const NonFiniteSteps& w, int64_t now, const Checkpoints& ckpt) {
  if (on_nan != NanPolicy::Stop || w.count == 0) return;
  throw Error(cat("the loss or gradient norm became NaN or inf at step ", w.first,
                  now != w.first ? cat(" (seen at step ", now, ")") : std::string(),
                  ": training diverged (try a smaller learning rate or optimizer.clip_norm; train.on_nan \"skip\" ",
                  "leaves such steps out); ", ckpt.status()));
}
// Under "skip" and "continue": how many steps were non-finite, in a progress record and its line.
inline void report_nonfinite(NanPolicy on_nan, const NonFiniteSteps& w, nlohmann::json& j, std::string& text) {
  if (w.count == 0) return;
  j["nonfinite_steps"] = w.count;
  j["first_nonfinite_step"] = w.first;
  text += cat("  ", on_nan == NanPolicy::Skip ? "skipped " : "", w.count, " non-finite step", w.count == 1 ? "" : "s",
              " (first ", w.first, ")");
}

// train.early_stopping: the best evaluation so far (its parameters kept in host memory when
// restore_best) and whether `patience` evaluations in a row have not improved on it.
class EarlyStopper {
 public:
  explicit EarlyStopper(const EarlyStopping& es) : es_(es) {}
  // The metric of an evaluation (checked by check_early_stopping before the run).
  double metric(const EvalResult& r) const {
    if (es_.metric == "val_loss") return r.loss;
    if (es_.metric == "val_accuracy") return r.accuracy;
    return r.terms.at(es_.metric.substr(4));
  }
  // Whether to stop after this evaluation at `step`.
  bool update(const EvalResult& r, int64_t step, const Trainer& t) {
    const double v = metric(r);
    const bool better = best_step_ == 0 || (es_.mode == "min" ? v < best_ - es_.min_delta : v > best_ + es_.min_delta);
    if (better) {
      best_ = v, best_step_ = step, best_result_ = r, waited_ = 0;
      if (es_.restore_best) best_params_ = t.params();
      return false;
    }
    return ++waited_ >= es_.patience;
  }
  // restore_best: the best evaluation's parameters back into the trainer (when it has them and
  // they are not the ones it holds, those of `last`). Whether it did.
  bool restore(Trainer& t, int64_t last) const {
    if (!es_.restore_best || best_params_.empty() || best_step_ == last) return false;
    t.set_params(best_params_);
    return true;
  }
  int64_t best_step() const { return best_step_; }
  double best() const { return best_; }
  const EvalResult& best_result() const { return best_result_; }

 private:
  const EarlyStopping& es_;
  double best_ = 0;
  int64_t best_step_ = 0, waited_ = 0;
  EvalResult best_result_;
  std::map<std::string, HostArray> best_params_;
};

// Physics-informed training (run_problem.cpp): train_run's case for a config with a problem.
RunSummary train_problem(const RunConfig& cfg, const RunOptions& opt);

}  // namespace sg
