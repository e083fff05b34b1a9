// Internal: reading zip archives (PKWARE APPNOTE.TXT) for .npz files: the end of the central
// directory, zip64 records, directory entries and members, stored or deflated. A member's bytes
// are checked before they are used: CRC-32, sizes deflate can reach, no two entries sharing bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepgraph/core.h"

namespace sg {

// Byte access. Values are assembled byte by byte so that the result does not depend on the
// host's byte order (compilers turn this into a plain load on little-endian machines).

inline uint64_t load_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A bounds-checked view of a byte buffer; every read past the end is an Error naming `src`.
class ByteView {
 public:
  ByteView(const unsigned char* p, size_t n, std::string src) : p_(p), n_(n), src_(std::move(src)) {}

  size_t size() const { return n_; }
  const unsigned char* at(size_t off, size_t len, const char* what) const {
    SG_REQUIRE(off <= n_ && len <= n_ - off, src_, ": truncated or corrupt (", what,
               " at byte ", off, ", ", len, " bytes, runs past the end of the ", n_,
               " bytes)");
    return p_ + off;
  }
  uint64_t le(size_t off, int bytes, const char* what) const {
    return load_le(at(off, static_cast<size_t>(bytes), what), bytes);
  }

 private:
  const unsigned char* p_;
  size_t n_;
  std::string src_;
};

struct ZipEntry {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, local_offset = 0;
};

// The archive's file entries in directory order (directory entries skipped). Entries that
// share bytes are refused: numpy never writes them, and they let a small file expand into many
// copies of one large member.
std::vector<ZipEntry> zip_entries(const ByteView& z, const std::string& src);
// The first `n` uncompressed bytes of a member (fewer if it is shorter), without inflating the rest.
std::vector<unsigned char> zip_member_head(const ByteView& z, const ZipEntry& e, uint64_t n, const std::string& what);
// A member's uncompressed bytes, CRC-checked.
std::vector<unsigned char> zip_extract(const ByteView& z, const ZipEntry& e, const std::string& what);

}  // namespace sg
