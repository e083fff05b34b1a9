#include "train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>
#include <vector>

#include "core/files.h"
#include "stepgraph/run.h"

namespace sg {

namespace {

namespace fs = std::filesystem;

// What runs write (`stepgraph plot` adds the pictures): --overwrite removes these and nothing else.
const char* const kRunFiles[] = {"config.json",     "metrics.jsonl",  "metrics.csv", "checkpoint.safetensors",
                                 "best.safetensors", "eval_points.npy", "prediction.npy", "exact.npy", "loss.png",
                                 "solution.png"};
// A folder with one of these holds a run.
const char* const kRunMarks[] = {"config.json", "metrics.jsonl", "checkpoint.safetensors"};

std::vector<std::string> marks_in(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* m : kRunMarks)
    if (fs::exists(dir / m, ec)) found.push_back(m);
  return found;
}

bool from_own_checkpoint(const RunOptions& opt, const fs::path& dir) {
  std::error_code ec;
  return !opt.resume.empty() && fs::equivalent(fs::path(opt.resume), dir / "checkpoint.safetensors", ec);
}

// This run continues the run in `dir`: it resumes from that folder's own checkpoint (a
// weights-only start is a new run, at step 0).
bool continues(const RunOptions& opt, const fs::path& dir) { return !opt.weights_only && from_own_checkpoint(opt, dir); }

// The folder does not exist yet: its nearest existing ancestor must be a folder we can write.
void check_creatable(const fs::path& dir) {
  std::error_code ec;
  fs::path up = fs::absolute(dir, ec).parent_path();
  while (!up.empty() && !fs::exists(up, ec) && up != up.root_path()) up = up.parent_path();
  if (up.empty()) return;
  SG_REQUIRE(fs::is_directory(up, ec), "cannot create output folder '", dir.string(), "': '", up.string(),
             "' is a file, not a folder");
  SG_REQUIRE(::access(up.c_str(), W_OK | X_OK) == 0, "cannot create output folder '", dir.string(), "' in '",
             up.string(), "': ", errno_text(errno));
}

// Drops the records of steps after `step` (a resumed run redoes them) and any line a kill cut short.
void drop_records_after(const fs::path& path, int64_t step) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return;  // absent, or a link to a device: leave it to the writes
  const std::string text = read_file(path.string(), "metrics file");
  std::string kept;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const auto at = j.find(j.contains("step") ? "step" : "steps");
    if (at != j.end() && at->is_number_integer() && at->get<int64_t>() > step) continue;
    kept += line + "\n";
  }
  if (kept != text) write_file_atomically(path.string(), kept, "metrics file");
}

}  // namespace

void check_run_folder(const RunOptions& opt) {
  if (opt.out_dir.empty()) return;
  const fs::path dir(opt.out_dir);
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return check_creatable(dir);
  SG_REQUIRE(fs::is_directory(st), "output folder '", opt.out_dir, "' is a file, not a folder");
  SG_REQUIRE(::access(dir.c_str(), W_OK | X_OK) == 0, "cannot write to output folder '", opt.out_dir, "': ",
             errno_text(errno));
  const std::vector<std::string> marks = marks_in(dir);
  if (marks.empty() || opt.overwrite || continues(opt, dir)) return;
  std::string files;
  for (const std::string& m : marks) files += (files.empty() ? "" : ", ") + m;
  const std::string ckpt = (dir / "checkpoint.safetensors").string();
  const std::string holds =
      opt.resume.empty() || (opt.weights_only && from_own_checkpoint(opt, dir))
          ? "an earlier run"
          : cat("another run than the checkpoint '", opt.resume, "'");
  throw Error(cat("output folder '", opt.out_dir, "' holds ", holds, " (", files, "); ",
                  opt.weights_only ? "a weights-only start is a new run: " : "", "continue it with --resume ", ckpt,
                  ", replace it with --overwrite (Python: overwrite=True), or choose another output folder"));
}

RunFolder::RunFolder(const RunOptions& opt, const nlohmann::json& config, int64_t start_step) : dir_(opt.out_dir) {
  check_run_folder(opt);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  SG_REQUIRE(!ec, "cannot create output folder '", dir_, "': ", ec.message());
  lock_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  SG_REQUIRE(lock_fd_ >= 0, "cannot open output folder '", dir_, "': ", errno_text(errno));
  try {
    // A folder lock ends with its process, so a killed run never leaves the folder locked. A
    // file system without locks (EINVAL, ENOLCK) runs unguarded.
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
      throw Error(cat("output folder '", dir_, "' is in use by another stepgraph run; wait for it to finish or ",
                      "choose another output folder"));
    check_run_folder(opt);  // again, under the lock: a run may have finished there meanwhile
    for (const char* f : kRunFiles) remove_stale_temporaries(file(f));
    if (continues(opt, dir_)) {
      drop_records_after(file("metrics.jsonl"), start_step);
    } else if (opt.overwrite) {
      for (const char* f : kRunFiles) {
        fs::remove(file(f), ec);
        SG_REQUIRE(!ec, "--overwrite: cannot remove '", file(f), "': ", ec.message());
      }
    }
    write_file_atomically(file("config.json"), config.dump(2) + "\n", "run config");
  } catch (...) {
    ::close(lock_fd_);
    throw;
  }
}

RunFolder::~RunFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string RunFolder::file(const std::string& name) const { return (fs::path(dir_) / name).string(); }

}  // namespace sg
