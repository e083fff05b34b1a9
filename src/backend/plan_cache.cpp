#include "backend/plan_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/environment.h"
#include "stepgraph/core.h"

namespace sg::plan_cache {

namespace fs = std::filesystem;

namespace {

// Sanity bounds: a length field beyond these is corruption, not a big plan.
constexpr uint64_t kMaxText = uint64_t{1} << 20;
constexpr uint64_t kMaxPayload = uint64_t{1} << 30;

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Reads fields front to back; every read checks that the bytes are there.
struct Reader {
  const std::vector<uint8_t>& b;
  size_t at = 0;
  bool has(uint64_t n) const { return n <= b.size() - at; }
  uint64_t get(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
    at += bytes;
    return v;
  }
};

}  // namespace

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string key_hash(const std::string& key) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a64(key.data(), key.size())));
  return buf;
}

std::vector<uint8_t> encode(const Entry& e) {
  std::vector<uint8_t> b(kMagic, kMagic + sizeof kMagic);
  put_u32(b, kFormatVersion);
  put_u32(b, static_cast<uint32_t>(e.key.size()));
  b.insert(b.end(), e.key.begin(), e.key.end());
  put_u32(b, static_cast<uint32_t>(e.note.size()));
  b.insert(b.end(), e.note.begin(), e.note.end());
  put_u64(b, e.payload.size());
  // The checksum covers everything after the magic up to here, then the payload.
  uint64_t h = fnv1a64(b.data() + sizeof kMagic, b.size() - sizeof kMagic);
  h = fnv1a64(e.payload.data(), e.payload.size(), h);
  put_u64(b, h);
  b.insert(b.end(), e.payload.begin(), e.payload.end());
  return b;
}

namespace {
std::string decode_impl(const std::vector<uint8_t>& bytes, const std::string* expected_key, Entry* out) {
  Reader r{bytes};
  if (!r.has(sizeof kMagic)) return cat("truncated: ", bytes.size(), " bytes, shorter than the header");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return "not a stepgraph plan cache file (bad magic)";
  r.at = sizeof kMagic;
  if (!r.has(8)) return "truncated in the header";
  const uint64_t version = r.get(4);
  if (version != kFormatVersion)
    return cat("format version ", version, ", this build reads version ", kFormatVersion);
  const uint64_t key_len = r.get(4);
  if (key_len > kMaxText || !r.has(key_len)) return cat("truncated or corrupt: key length ", key_len);
  std::string key(bytes.begin() + r.at, bytes.begin() + r.at + key_len);
  r.at += key_len;
  if (!r.has(4)) return "truncated in the header";
  const uint64_t note_len = r.get(4);
  if (note_len > kMaxText || !r.has(note_len)) return cat("truncated or corrupt: note length ", note_len);
  std::string note(bytes.begin() + r.at, bytes.begin() + r.at + note_len);
  r.at += note_len;
  if (!r.has(16)) return "truncated in the header";
  const uint64_t payload_len = r.get(8);
  const size_t checked_end = r.at;
  const uint64_t stored = r.get(8);
  if (payload_len > kMaxPayload) return cat("corrupt: payload length ", payload_len);
  if (bytes.size() - r.at != payload_len)
    return cat(bytes.size() - r.at < payload_len ? "truncated" : "trailing bytes", ": the header says ", payload_len,
               " payload bytes, the file has ", bytes.size() - r.at);
  uint64_t h = fnv1a64(bytes.data() + sizeof kMagic, checked_end - sizeof kMagic);
  h = fnv1a64(bytes.data() + r.at, payload_len, h);
  if (h != stored) return "checksum mismatch (the file is corrupt)";
  if (expected_key && key != *expected_key)
    return cat("written for another key (hash collision or a copied file): stored key\n", key);
  if (out) {
    out->key = std::move(key);
    out->note = std::move(note);
    out->payload.assign(bytes.begin() + r.at, bytes.end());
  }
  return "";
}
}  // namespace

std::string decode(const std::vector<uint8_t>& bytes, const std::string& expected_key, Entry* out) {
  return decode_impl(bytes, &expected_key, out);
}

std::string decode_any(const std::vector<uint8_t>& bytes, Entry* out) { return decode_impl(bytes, nullptr, out); }

std::string resolve_dir(const std::string& configured) {
  std::string d = configured;
  if (d.empty())
    if (const char* v = env::get("SG_PLAN_CACHE")) d = v;
  if (d == "off") return "";
  if (!d.empty()) return d;
  if (const char* xdg = env::get("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "stepgraph" / "cudnn").string();
  if (const char* home = env::get("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "stepgraph" / "cudnn").string();
  return "";
}

std::string PlanCache::path_for(const std::string& key) const {
  return (fs::path(dir_) / (key_hash(key) + ".sgplan")).string();
}

void PlanCache::warn_rejected(const std::string& path, const std::string& problem) {
  std::fprintf(stderr, "stepgraph: warning: plan cache entry %s rejected: %s; rebuilding it\n", path.c_str(),
               problem.c_str());
}

PlanCache::Lookup PlanCache::load(const std::string& key) const {
  Lookup l;
  if (!enabled()) return l;
  l.path = path_for(key);
  std::error_code ec;
  if (!fs::exists(l.path, ec)) return l;
  std::ifstream in(l.path, std::ios::binary);
  std::vector<uint8_t> bytes;
  if (in) bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) {
    l.problem = "cannot be read";
  } else {
    l.problem = decode(bytes, key, &l.entry);
  }
  if (!l.problem.empty()) {
    l.status = Status::Rejected;
    warn_rejected(l.path, l.problem);
    return l;
  }
  l.status = Status::Hit;
  return l;
}

std::string PlanCache::store(const Entry& e) const {
  if (!enabled()) return "the plan cache is off";
  const std::string path = path_for(e.key);
  static std::atomic<unsigned> counter{0};
  const std::string tmp = cat(path, ".tmp.", getpid(), ".", counter++);
  std::string why;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    why = cat("cannot create the folder ", dir_, ": ", ec.message());
  } else {
    const std::vector<uint8_t> bytes = encode(e);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      out.flush();
      if (!out) why = cat("cannot write ", tmp);
    }
    if (why.empty()) {
      fs::rename(tmp, path, ec);
      if (ec) why = cat("cannot rename ", tmp, " to ", path, ": ", ec.message());
    }
    if (!why.empty()) fs::remove(tmp, ec);
  }
  if (!why.empty() && !warned_) {
    warned_ = true;
    std::fprintf(stderr, "stepgraph: warning: plan cache: %s (plans are used, not cached)\n", why.c_str());
  }
  return why;
}

}  // namespace sg::plan_cache
