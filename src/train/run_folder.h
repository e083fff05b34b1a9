// A training run's output folder (--out): config.json, metrics.jsonl, checkpoint.safetensors and
// a physics-informed run's arrays. A folder holds one run; a run never damages another's:
//   - a folder that holds another run is refused unless the run continues it (--resume with its
//     checkpoint) or replaces it (--overwrite);
//   - everything is checked before the folder is touched, and the folder is locked while a run
//     writes it (a second run into it is refused);
//   - temporaries left by killed runs are removed; a resumed run drops the metrics records past
//     its checkpoint's step (they are redone), so the file never holds a step twice.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace sg {

struct RunOptions;

// Refuses, without touching anything, an --out folder this run must not write: one that is a
// file, cannot be written, or holds another run. Cheap: call it first, before loading data.
void check_run_folder(const RunOptions& opt);

class RunFolder {
 public:
  // Takes the folder, once every input has been checked: creates and locks it, removes stale
  // temporaries, checks again under the lock, then applies --overwrite (the earlier run's files
  // go) or --resume at `start_step` (metrics past it go) and writes config.json.
  RunFolder(const RunOptions& opt, const nlohmann::json& config, int64_t start_step);
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  std::string file(const std::string& name) const;  // a path inside the folder

 private:
  std::string dir_;
  int lock_fd_ = -1;
};

}  // namespace sg
