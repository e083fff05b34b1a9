#include "core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "stepgraph/core.h"

namespace sg {

namespace {

// Best effort: makes the rename durable. Failure here cannot un-write the file, so it is ignored.
void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  (void)::close(fd);
}

std::string parent_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

std::string errno_text(int err) { return cat(std::strerror(err), " (errno ", err, ")"); }

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

void remove_stale_temporaries(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string prefix = target.filename().string() + ".tmp-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent_of(path), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const long pid = std::stol(digits);
    if (pid == static_cast<long>(::getpid()) || process_alive(pid)) continue;
    std::error_code rm;
    std::filesystem::remove(entry.path(), rm);
  }
}

AtomicFile::AtomicFile(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)), tmp_(cat(path_, ".tmp-", ::getpid())) {
  SG_REQUIRE(!path_.empty(), what_, ": empty path");
  remove_stale_temporaries(path_);
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail("cannot create");
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_) std::remove(tmp_.c_str());
}

void AtomicFile::fail(const char* doing) const {
  const int err = errno;
  throw Error(cat(what_, " '", path_, "': ", doing, " (temporary file '", tmp_, "'): ", errno_text(err)));
}

void AtomicFile::write(const void* data, size_t bytes) {
  SG_ASSERT(f_ && !committed_);
  if (bytes && std::fwrite(data, 1, bytes, f_) != bytes) fail("cannot write");
}

void AtomicFile::commit() {
  SG_ASSERT(f_ && !committed_);
  if (std::fflush(f_) != 0) fail("cannot write");
  if (::fsync(::fileno(f_)) != 0) fail("cannot sync");
  FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) fail("cannot close");
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename the temporary file over it");
  committed_ = true;
  fsync_directory(parent_of(path_));
}

void write_file_atomically(const std::string& path, const std::string& content, const std::string& what) {
  AtomicFile f(path, what);
  f.write(content);
  f.commit();
}

}  // namespace sg
