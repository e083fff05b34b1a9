// The on-disk cache of built library plans (serialized cuDNN graphs), CPU-only: the key, the
// file format and its validation live here so they are tested without a GPU; the cuDNN side
// (cuda/cudnn_conv.cpp) only hands in key text and opaque payload bytes.
//
// One file per key, named by a hash of the key text: DIR/<16 hex digits>.sgplan, holding
//   magic "SGPLAN\r\n" (8 bytes) | u32 format version | u32 key length | key text |
//   u32 note length | note text | u64 payload length | u64 checksum | payload
// all little-endian. The checksum (FNV-1a 64) covers the version, both texts, the lengths and
// the payload, so a corrupt, truncated or extended file is detected; the full key text is
// stored and compared, so an entry written for another key (a hash collision, a copied file)
// is never used. A rejected entry is reported on stderr, rebuilt and rewritten; writes go to a
// temporary file in the same folder and are renamed over the target.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sg::plan_cache {

constexpr uint32_t kFormatVersion = 1;
constexpr char kMagic[8] = {'S', 'G', 'P', 'L', 'A', 'N', '\r', '\n'};

uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);
// 16 lowercase hex digits of fnv1a64(key): the entry's file name (without ".sgplan").
std::string key_hash(const std::string& key);

struct Entry {
  std::string key;               // everything that must match for the payload to be usable
  std::string note;              // what was chosen and how (shown in explain when loaded)
  std::vector<uint8_t> payload;  // opaque: the serialized plan
};

std::vector<uint8_t> encode(const Entry& e);
// "" when `bytes` is a well-formed entry for `expected_key` (then *out holds it), otherwise
// what is wrong ("truncated ...", "checksum mismatch", "written for another key", ...).
std::string decode(const std::vector<uint8_t>& bytes, const std::string& expected_key, Entry* out);
// The same checks without the key comparison (to inspect a file: which key wrote it).
std::string decode_any(const std::vector<uint8_t>& bytes, Entry* out);

// The folder to use: `configured` (train.plan_cache) when not empty, else $SG_PLAN_CACHE, else
// $XDG_CACHE_HOME/stepgraph/cudnn, else $HOME/.cache/stepgraph/cudnn. "off" (from either
// source), or no home to default to, gives "": the cache is disabled.
std::string resolve_dir(const std::string& configured);

class PlanCache {
 public:
  explicit PlanCache(std::string dir) : dir_(std::move(dir)) {}
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  std::string path_for(const std::string& key) const;

  enum class Status { Hit, Miss, Rejected };
  struct Lookup {
    Status status = Status::Miss;
    Entry entry;           // Hit: the stored entry
    std::string path;      // the entry's file
    std::string problem;   // Rejected: what was wrong (already warned about)
  };
  // Hit, Miss (no file), or Rejected (unreadable, corrupt, foreign: a warning on stderr naming
  // the file and the problem; the caller rebuilds and store() replaces the file).
  Lookup load(const std::string& key) const;
  // Writes the entry atomically. Returns "" or why it could not (warned on stderr, once per
  // PlanCache object): a cache that cannot be written never fails the program.
  std::string store(const Entry& e) const;
  // For a payload that passed the file checks but that the library then refused: warns the same
  // way (the caller rebuilds and stores over it).
  static void warn_rejected(const std::string& path, const std::string& problem);

 private:
  std::string dir_;
  mutable bool warned_ = false;
};

}  // namespace sg::plan_cache
