// The readers under test take a path, so each fuzz input is written to a file first: one file
// per process (its pid in the name, so parallel fuzzers do not share it), in /dev/shm when it
// exists (no disk writes at tens of thousands of inputs a second), else $TMPDIR or /tmp.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sg::fuzz {

class InputFile {
 public:
  // `name` ends the file name, e.g. "input.npz" (some readers mention it in their errors).
  explicit InputFile(const char* name) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && *tmp ? tmp : "/tmp";
    path_ = dir + "/stepgraph_fuzz_" + std::to_string(getpid()) + "_" + name;
  }
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's contents with the input; aborts if it cannot (that is no finding of the
  // code under test, and fuzzing on would only test "cannot open").
  const std::string& write(const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace sg::fuzz
