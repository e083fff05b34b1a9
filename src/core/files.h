// Files written so that a crash, a full disk or a kill -9 never leaves a half-written file in
// place of a good one: write a temporary beside the target, flush and fsync it, rename it over.
#pragma once

#include <cstdio>
#include <string>

namespace sg {

// The temporary is "<path>.tmp-<pid>"; a process killed before the rename leaves it behind, so
// opening one first removes such leftovers of processes that are no longer running.
class AtomicFile {
 public:
  AtomicFile(std::string path, std::string what);  // what: "checkpoint", "metrics file", ...
  ~AtomicFile();                                   // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(const std::string& s) { write(s.data(), s.size()); }
  // Flushes, fsyncs and renames the temporary over the target. Errors name the file and errno.
  void commit();

 private:
  [[noreturn]] void fail(const char* doing) const;
  std::string path_, what_, tmp_;
  FILE* f_ = nullptr;
  bool committed_ = false;
};

// Writes a whole file atomically.
void write_file_atomically(const std::string& path, const std::string& content, const std::string& what);

// Removes "<path>.tmp-<pid>" files whose process is gone (left by a kill during a write).
void remove_stale_temporaries(const std::string& path);

// Whether a process with this id exists (on this host).
bool process_alive(long pid);

// strerror(err) with the number, e.g. "No space left on device (errno 28)".
std::string errno_text(int err);

}  // namespace sg
