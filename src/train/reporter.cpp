#include "train/reporter.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/files.h"

namespace sg {

using nlohmann::json;

std::map<std::string, double> record_numbers(const json& j) {
  std::map<std::string, double> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "step" || it.key() == "event") continue;
    if (it->is_number()) out[it.key()] = it->get<double>();
    else if (it->is_object())
      for (auto sub = it->begin(); sub != it->end(); ++sub)
        if (sub->is_number()) out[it.key() + "/" + sub.key()] = sub->get<double>();
  }
  return out;
}

namespace {

bool logged_event(const json& j) {
  const auto e = j.find("event");
  return e != j.end() && e->is_string() && (*e == "progress" || *e == "eval");
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Column names are tags like "loss_terms/u"; one with a comma or a quote is quoted (RFC 4180).
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

CsvLog::~CsvLog() {
  if (f_) std::fclose(f_);
}

std::string CsvLog::line(const Row& r) const {
  std::string s = csv_field(r.event) + "," + std::to_string(r.step);
  for (const std::string& c : columns_) {
    const auto it = r.values.find(c);
    s += "," + (it == r.values.end() ? std::string() : csv_number(it->second));
  }
  return s + "\n";
}

void CsvLog::write_all() {
  if (f_) std::fclose(f_), f_ = nullptr;
  std::string text = "event,step";
  for (const std::string& c : columns_) text += "," + csv_field(c);
  text += "\n";
  for (const Row& r : rows_) text += line(r);
  write_file_atomically(path_, text, "metrics file");
  f_ = std::fopen(path_.c_str(), "a");
  SG_REQUIRE(f_, "cannot write metrics file '", path_, "': ", errno_text(errno));
}

void CsvLog::add(const json& j, bool write) {
  Row r{j.value("event", std::string()), j.value("step", int64_t{0}), record_numbers(j)};
  bool new_column = false;
  for (const auto& [name, v] : r.values)
    if (std::find(columns_.begin(), columns_.end(), name) == columns_.end()) columns_.push_back(name), new_column = true;
  rows_.push_back(std::move(r));
  if (!write) return;
  if (new_column || !f_) return write_all();
  const std::string s = line(rows_.back());
  if (std::fwrite(s.data(), 1, s.size(), f_) != s.size() || std::fflush(f_) != 0)
    throw Error(cat("cannot write metrics file '", path_, "': ", errno_text(errno)));
}

Reporter::Reporter(const RunOptions& opt, const std::string& metrics_path, bool quiet)
    : os_(quiet ? null_ : opt.out ? *opt.out : std::cout), json_(opt.json), metrics_path_(metrics_path),
      callback_(quiet || !opt.callback ? nullptr : &opt.callback) {
  if (!quiet && !opt.tensorboard.empty()) tb_ = std::make_unique<TensorBoardWriter>(opt.tensorboard);
  if (metrics_path.empty()) return;
  metrics_ = std::fopen(metrics_path.c_str(), "a");
  SG_REQUIRE(metrics_, "cannot write metrics file '", metrics_path, "': ", errno_text(errno));
  csv_ = std::make_unique<CsvLog>((std::filesystem::path(metrics_path).parent_path() / "metrics.csv").string());
  // A resumed run's records (RunFolder dropped those past its checkpoint); a file, not a device.
  std::error_code ec;
  std::ifstream earlier;
  if (std::filesystem::is_regular_file(metrics_path, ec)) earlier.open(metrics_path);
  for (std::string l; earlier.is_open() && std::getline(earlier, l);) {
    const json j = json::parse(l, nullptr, false);
    if (!j.is_discarded() && logged_event(j)) csv_->add(j, false);
  }
  csv_->write_all();
}

Reporter::~Reporter() {
  if (metrics_) std::fclose(metrics_);
}

void Reporter::info(const std::string& msg) {
  if (json_) os_ << json{{"event", "info"}, {"message", msg}}.dump() << "\n";
  else os_ << msg << "\n";
  os_.flush();
}

void Reporter::screen(const json& j, const std::string& text) {
  if (json_) os_ << j.dump() << "\n";
  else os_ << text << "\n";
  os_.flush();
}

void Reporter::record(const json& j, const std::string& text) {
  if (metrics_) {
    const std::string line = j.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), metrics_) != line.size() || std::fflush(metrics_) != 0)
      throw Error(cat("cannot write metrics file '", metrics_path_, "': ", errno_text(errno)));
  }
  if (json_) os_ << j.dump() << "\n";
  else if (!text.empty()) os_ << text << "\n";
  os_.flush();
  if (!logged_event(j)) return;
  if (csv_) csv_->add(j);
  if (tb_) {
    tb_->scalars(j.value("step", int64_t{0}), record_numbers(j));
    tb_->flush();
  }
  if (callback_ && !(*callback_)(j)) stop_ = true;
}

}  // namespace sg
