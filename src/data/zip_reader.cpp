#include "data/zip_reader.h"

#include <zlib.h>

#include <algorithm>

namespace sg {
namespace {

constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kLocalSig = 0x04034b50;

struct ZipDirectory {
  uint64_t entries = 0, offset = 0, size = 0;
};

ZipDirectory find_central_directory(const ByteView& z, const std::string& src) {
  SG_REQUIRE(z.size() >= 22, src, ": not a zip archive (only ", z.size(), " bytes)");
  // The end record is 22 bytes plus a comment of at most 65535 bytes, so search backwards.
  const size_t lowest = z.size() >= 22 + 65535 ? z.size() - 22 - 65535 : 0;
  size_t eocd = z.size() - 22;
  while (true) {
    if (z.le(eocd, 4, "end record") == kEocdSig) break;
    SG_REQUIRE(eocd > lowest, src,
               ": not a zip archive (no end-of-central-directory record found)");
    --eocd;
  }
  SG_REQUIRE(z.le(eocd + 4, 2, "disk number") == 0 && z.le(eocd + 6, 2, "disk number") == 0, src,
             ": multi-part zip archives are not supported");
  ZipDirectory dir;
  dir.entries = z.le(eocd + 10, 2, "entry count");
  dir.size = z.le(eocd + 12, 4, "directory size");
  dir.offset = z.le(eocd + 16, 4, "directory offset");
  if (dir.entries != 0xFFFF && dir.size != 0xFFFFFFFF && dir.offset != 0xFFFFFFFF) return dir;

  // Zip64: a locator just before the end record points at the zip64 end record.
  SG_REQUIRE(eocd >= 20 && z.le(eocd - 20, 4, "zip64 locator") == kZip64LocatorSig, src,
             ": corrupt zip archive (zip64 sizes announced but no zip64 locator found)");
  const uint64_t rec = z.le(eocd - 20 + 8, 8, "zip64 locator");
  SG_REQUIRE(rec < z.size() && z.le(rec, 4, "zip64 end record") == kZip64EocdSig, src,
             ": corrupt zip archive (bad zip64 end-of-central-directory record)");
  dir.entries = z.le(rec + 32, 8, "zip64 entry count");
  dir.size = z.le(rec + 40, 8, "zip64 directory size");
  dir.offset = z.le(rec + 48, 8, "zip64 directory offset");
  return dir;
}

// The zip64 extended-information extra field (id 1) holds, in this order, each of the sizes and
// the offset whose 32-bit field is 0xFFFFFFFF.
void apply_zip64_extra(const ByteView& z, size_t extra, size_t extra_len, ZipEntry& e,
                       const std::string& src) {
  size_t p = extra;
  const size_t end = extra + extra_len;
  while (p + 4 <= end) {
    const uint64_t id = z.le(p, 2, "extra field"), len = z.le(p + 2, 2, "extra field");
    SG_REQUIRE(p + 4 + len <= end, src, ": corrupt zip extra field in member '", e.name, "'");
    if (id == 0x0001) {
      size_t q = p + 4;
      auto take = [&](uint64_t& field) {
        if (field != 0xFFFFFFFF) return;
        SG_REQUIRE(q + 8 <= p + 4 + len, src, ": corrupt zip64 extra field in member '", e.name,
                   "'");
        field = z.le(q, 8, "zip64 extra field");
        q += 8;
      };
      take(e.usize);
      take(e.csize);
      take(e.local_offset);
      return;
    }
    p += 4 + len;
  }
}

std::vector<ZipEntry> read_central_directory(const ByteView& z, const ZipDirectory& dir,
                                             const std::string& src) {
  std::vector<ZipEntry> out;
  size_t p = dir.offset;
  SG_REQUIRE(dir.offset <= z.size() && dir.size <= z.size() - dir.offset, src,
             ": corrupt zip archive (central directory lies outside the file)");
  for (uint64_t i = 0; i < dir.entries; ++i) {
    SG_REQUIRE(z.le(p, 4, "central directory entry") == kCentralSig, src,
               ": corrupt zip archive (central directory entry ", i, " has a bad signature)");
    ZipEntry e;
    e.flags = static_cast<uint16_t>(z.le(p + 8, 2, "central directory entry"));
    e.method = static_cast<uint16_t>(z.le(p + 10, 2, "central directory entry"));
    e.crc = static_cast<uint32_t>(z.le(p + 16, 4, "central directory entry"));
    e.csize = z.le(p + 20, 4, "central directory entry");
    e.usize = z.le(p + 24, 4, "central directory entry");
    const size_t name_len = z.le(p + 28, 2, "central directory entry");
    const size_t extra_len = z.le(p + 30, 2, "central directory entry");
    const size_t comment_len = z.le(p + 32, 2, "central directory entry");
    e.local_offset = z.le(p + 42, 4, "central directory entry");
    e.name.assign(reinterpret_cast<const char*>(z.at(p + 46, name_len, "member name")), name_len);
    z.at(p + 46 + name_len, extra_len, "extra field");
    apply_zip64_extra(z, p + 46 + name_len, extra_len, e, src);
    out.push_back(std::move(e));
    p += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// Raw deflate (no zlib/gzip wrapper) into exactly `usize` bytes, or with `head` into at most
// `usize` bytes: the start of the data. zlib counts in 32-bit units, so large members are fed in
// chunks.
std::vector<unsigned char> inflate_raw(const unsigned char* in, uint64_t csize, uint64_t usize,
                                       const std::string& what, bool head = false) {
  std::vector<unsigned char> out(static_cast<size_t>(usize));
  unsigned char dummy = 0;  // zlib refuses a null output pointer, even for 0 bytes
  z_stream zs{};
  SG_REQUIRE(inflateInit2(&zs, -MAX_WBITS) == Z_OK, what, ": cannot initialise zlib");
  struct End {
    z_stream* s;
    ~End() { inflateEnd(s); }
  } end{&zs};
  constexpr uint64_t kChunk = 1u << 30;
  uint64_t in_pos = 0, out_pos = 0;
  while (true) {
    zs.next_in = const_cast<Bytef*>(in + in_pos);
    zs.avail_in = static_cast<uInt>(std::min(csize - in_pos, kChunk));
    zs.next_out = usize ? out.data() + out_pos : &dummy;
    zs.avail_out = static_cast<uInt>(std::min(usize - out_pos, kChunk));
    const uInt in_before = zs.avail_in, out_before = zs.avail_out;
    const int ret = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_before - zs.avail_in;
    out_pos += out_before - zs.avail_out;
    if (ret == Z_STREAM_END || (head && out_pos == usize)) break;
    if (ret == Z_OK) continue;
    SG_REQUIRE(ret != Z_BUF_ERROR || out_pos < usize, what,
               ": deflate data expands beyond the declared size of ", usize, " bytes");
    SG_REQUIRE(ret != Z_BUF_ERROR, what, ": deflate data is truncated");
    throw Error(cat(what, ": corrupt deflate data (", zs.msg ? zs.msg : "zlib error", ")"));
  }
  if (head) {
    out.resize(static_cast<size_t>(out_pos));
    return out;
  }
  SG_REQUIRE(out_pos == usize, what, ": deflate data expands to ", out_pos,
             " bytes, but the zip directory declares ", usize);
  return out;
}

// A member's compressed bytes, after its local header.
struct MemberData {
  const unsigned char* data;
  uint64_t begin, end;  // the member's bytes in the archive, local header included
};

MemberData member_data(const ByteView& z, const ZipEntry& e, const std::string& what) {
  SG_REQUIRE((e.flags & 1) == 0, what, ": encrypted zip members are not supported");
  SG_REQUIRE(z.le(e.local_offset, 4, "local header") == kLocalSig, what,
             ": corrupt zip archive (bad local header signature)");
  const size_t name_len = z.le(e.local_offset + 26, 2, "local header");
  const size_t extra_len = z.le(e.local_offset + 28, 2, "local header");
  const uint64_t start = e.local_offset + 30 + name_len + extra_len;
  const unsigned char* data = z.at(start, static_cast<size_t>(e.csize), "member data");
  SG_REQUIRE(e.method == 0 || e.method == 8, what, ": zip compression method ", e.method,
             " is not supported (only 0 = stored and 8 = deflate)");
  SG_REQUIRE(e.method != 0 || e.csize == e.usize, what, ": corrupt zip archive (stored member has compressed size ",
             e.csize, " but uncompressed size ", e.usize, ")");
  // Deflate cannot expand data more than ~1032:1; a larger claim is corruption, and refusing it
  // avoids a huge allocation.
  SG_REQUIRE(e.method != 8 || e.usize <= e.csize * 1032 + 1024, what, ": corrupt zip archive (declared size ",
             e.usize, " is impossible for ", e.csize, " compressed bytes)");
  return {data, e.local_offset, start + e.csize};
}

void refuse_shared_members(const ByteView& z, const std::vector<ZipEntry>& entries, const std::string& src) {
  std::vector<std::pair<MemberData, const ZipEntry*>> spans;
  for (const ZipEntry& e : entries) spans.push_back({member_data(z, e, cat(src, " member '", e.name, "'")), &e});
  std::stable_sort(spans.begin(), spans.end(),
                   [](const auto& a, const auto& b) { return a.first.begin < b.first.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    SG_REQUIRE(spans[i].first.begin >= spans[i - 1].first.end, src, ": members '", spans[i - 1].second->name,
               "' and '", spans[i].second->name, "' share their bytes (from offset ", spans[i].first.begin,
               "); numpy never writes such an archive");
}

}  // namespace

std::vector<ZipEntry> zip_entries(const ByteView& z, const std::string& src) {
  std::vector<ZipEntry> entries;
  for (ZipEntry& e : read_central_directory(z, find_central_directory(z, src), src))
    if (e.name.empty() || e.name.back() != '/') entries.push_back(std::move(e));
  refuse_shared_members(z, entries, src);
  return entries;
}

std::vector<unsigned char> zip_member_head(const ByteView& z, const ZipEntry& e, uint64_t n, const std::string& what) {
  const MemberData m = member_data(z, e, what);
  n = std::min(n, e.usize);
  if (e.method == 0) return std::vector<unsigned char>(m.data, m.data + n);
  return inflate_raw(m.data, e.csize, n, what, true);
}

std::vector<unsigned char> zip_extract(const ByteView& z, const ZipEntry& e, const std::string& what) {
  const MemberData m = member_data(z, e, what);
  std::vector<unsigned char> out = e.method == 0 ? std::vector<unsigned char>(m.data, m.data + e.csize)
                                                 : inflate_raw(m.data, e.csize, e.usize, what);
  const uint32_t crc = static_cast<uint32_t>(crc32_z(0L, out.data(), out.size()));
  SG_REQUIRE(crc == e.crc, what, ": CRC-32 mismatch (computed ", crc, ", archive says ", e.crc,
             "); the file is corrupt");
  return out;
}

}  // namespace sg
