// Internal: where a run's records go. Every progress, eval and summary record goes to the screen
// (text or JSON lines) and to metrics.jsonl; progress and eval records also to metrics.csv (a row
// each, a column per number), to TensorBoard scalars (--tensorboard) and to the user's callback.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepgraph/run.h"
#include "train/tensorboard.h"

namespace sg {

// A record's numbers by column name: "loss", "lr", nested maps as "loss_terms/u" (event and
// step are the row's own columns).
std::map<std::string, double> record_numbers(const nlohmann::json& j);

// metrics.csv: a header row, then one row per record (RFC 4180; an empty cell where a record has
// no such number). A new column rewrites the file (atomically); otherwise rows are appended.
class CsvLog {
 public:
  explicit CsvLog(std::string path) : path_(std::move(path)) {}
  ~CsvLog();
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;
  void add(const nlohmann::json& record, bool write = true);
  void write_all();

 private:
  struct Row {
    std::string event;
    int64_t step;
    std::map<std::string, double> values;
  };
  std::string line(const Row& r) const;
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<Row> rows_;
  FILE* f_ = nullptr;
};

class Reporter {
 public:
  // quiet: ranks other than 0 of a data-parallel run print nothing (errors still reach stderr).
  // With a metrics path, metrics.csv goes beside it (rebuilt from the records it holds: a resumed
  // run's), and opt.tensorboard's folder gets the scalars.
  Reporter(const RunOptions& opt, const std::string& metrics_path, bool quiet = false);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  void info(const std::string& msg);
  // A progress line for the screen only (RunOptions::progress_seconds).
  void screen(const nlohmann::json& j, const std::string& text);
  // A record for the metrics files (flushed at once: a run killed later keeps it) and the screen.
  void record(const nlohmann::json& j, const std::string& text);
  // Whether the callback asked the run to stop (it returned false).
  bool stop_requested() const { return stop_; }

 private:
  std::ostream null_{nullptr};  // a stream without a buffer writes nothing
  std::ostream& os_;
  bool json_;
  std::string metrics_path_;
  FILE* metrics_ = nullptr;
  std::unique_ptr<CsvLog> csv_;
  std::unique_ptr<TensorBoardWriter> tb_;
  // The run's callback, not a copy (a Python one may only be copied holding the GIL).
  const std::function<bool(const nlohmann::json&)>* callback_ = nullptr;
  bool stop_ = false;
};

}  // namespace sg
