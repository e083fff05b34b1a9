// NumPy .npy and .npz files.
//
// .npy (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
//   "\x93NUMPY", major, minor, header length (u16 for 1.x, u32 for 2.x/3.x), then a Python dict
//   literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } and the raw data.
// .npz: a zip archive with one "<key>.npy" member per array, stored or deflated, possibly with
//   zip64 records (numpy asks for them so that arrays may exceed 4 GiB).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/host_memory.h"
#include "stepgraph/data.h"

namespace sg {
namespace {

// ---------------------------------------------------------------------------------------------
// Byte access. Values are assembled byte by byte so that the result does not depend on the
// host's byte order (compilers turn this into a plain load on little-endian machines).

uint64_t load_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
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

// ---------------------------------------------------------------------------------------------
// The .npy header: a small parser for the Python dict literal numpy writes.

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

class HeaderParser {
 public:
  // The padding spaces and final newline are dropped so that error messages stay readable.
  HeaderParser(const std::string& text, const std::string& src)
      : s_(text.substr(0, text.find_last_not_of(" \n\r\t") + 1)), src_(src) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!accept('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        skip_space();
        SG_REQUIRE(peek() == '\'' || peek() == '"', src_,
                   ": structured or sub-array dtypes are not supported (descr is not a simple "
                   "type string); save plain numeric arrays");
        h.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = int_tuple();
        have_shape = true;
      } else {
        skip_value();  // unknown keys are allowed by the format
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    SG_REQUIRE(have_descr && have_order && have_shape, src_,
               ": bad header: it must have the keys 'descr', 'fortran_order' and 'shape' (header: ",
               s_, ")");
    return h;
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  char peek() { return i_ < s_.size() ? s_[i_] : '\0'; }
  [[noreturn]] void fail(const std::string& what) {
    throw Error(cat(src_, ": bad header: ", what, " at character ", i_, " of '", s_, "'"));
  }
  bool accept(char c) {
    skip_space();
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(cat("expected '", c, "'"));
  }
  std::string string_literal() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  int64_t integer() {
    skip_space();
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("dimension too large");
      v = v * 10 + (s_[i_++] - '0');
    }
    if (i_ == start) fail("expected a non-negative integer dimension");
    if (peek() == 'L') ++i_;  // Python 2 long literals: (3L, 4L)
    return v;
  }
  Shape int_tuple() {
    Shape shape;
    expect('(');
    while (!accept(')')) {
      shape.push_back(integer());
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }
  // Skips a value of an unknown key: a string, or anything up to the next top-level ',' or '}'.
  void skip_value() {
    int depth = 0;
    skip_space();
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\'' || c == '"') {
        string_literal();
        continue;
      }
      if (depth == 0 && (c == ',' || c == '}')) return;
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      ++i_;
    }
    fail("unterminated value");
  }

  const std::string s_;
  const std::string& src_;
  size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------------
// .npy element types and their conversion to the library's dtypes.

enum class NpyType { F4, F8, I4, I8, U1, I1, B1, U8 };

struct NpyDescr {
  NpyType type;
  int itemsize;
  DType target;
};

NpyDescr parse_descr(const std::string& descr, const std::string& src) {
  SG_REQUIRE(descr.empty() || descr[0] != '>', src, ": big-endian arrays are not supported (dtype '",
             descr, "'); convert with a.astype(a.dtype.newbyteorder('<'))");
  const char order = descr.empty() ? '\0' : descr[0];
  const std::string kind = descr.size() > 1 ? descr.substr(1) : "";
  // Multi-byte types must say little-endian; numpy writes '|' (not applicable) for 1-byte types.
  if (order == '<') {
    if (kind == "f4") return {NpyType::F4, 4, DType::F32};
    if (kind == "f8") return {NpyType::F8, 8, DType::F32};
    if (kind == "i4") return {NpyType::I4, 4, DType::I32};
    if (kind == "i8") return {NpyType::I8, 8, DType::I32};
    if (kind == "u8") return {NpyType::U8, 8, DType::U64};
  }
  if (order == '|' || order == '<') {
    if (kind == "u1") return {NpyType::U1, 1, DType::I32};
    if (kind == "i1") return {NpyType::I1, 1, DType::I32};
    if (kind == "b1") return {NpyType::B1, 1, DType::I32};
  }
  throw Error(cat(src, ": unsupported dtype '", descr,
                  "'; supported: <f4, <f8 (read as f32), <i4, <i8, |u1, |i1, |b1 (read as i32), "
                  "<u8"));
}

double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Decodes `count` little-endian elements of `descr` into `out` (already of the target dtype).
void convert_elements(const unsigned char* in, int64_t count, const NpyDescr& descr,
                      HostArray& out, const std::string& src) {
  const int w = descr.itemsize;
  if (descr.target == DType::F32) {
    float* o = out.data<float>();
    for (int64_t i = 0; i < count; ++i) {
      const uint64_t bits = load_le(in + i * w, w);
      if (descr.type == NpyType::F4) {
        o[i] = as_float(static_cast<uint32_t>(bits));
        continue;
      }
      const double v = as_double(bits);
      SG_REQUIRE(!std::isfinite(v) || std::fabs(v) <= std::numeric_limits<float>::max(), src,
                 ": element ", i, " = ", v, " does not fit in a 32-bit float");
      o[i] = static_cast<float>(v);
    }
  } else if (descr.target == DType::I32) {
    int32_t* o = out.data<int32_t>();
    for (int64_t i = 0; i < count; ++i) {
      const uint64_t bits = load_le(in + i * w, w);
      switch (descr.type) {
        case NpyType::I4: o[i] = static_cast<int32_t>(static_cast<uint32_t>(bits)); break;
        case NpyType::I8: {
          const int64_t v = static_cast<int64_t>(bits);
          SG_REQUIRE(v >= std::numeric_limits<int32_t>::min() &&
                         v <= std::numeric_limits<int32_t>::max(),
                     src, ": element ", i, " = ", v,
                     " is outside the 32-bit integer range the library uses for int64 data");
          o[i] = static_cast<int32_t>(v);
          break;
        }
        case NpyType::U1: o[i] = static_cast<int32_t>(bits); break;
        case NpyType::I1: o[i] = static_cast<int8_t>(static_cast<uint8_t>(bits)); break;
        case NpyType::B1: o[i] = bits != 0 ? 1 : 0; break;
        default: SG_ASSERT(false);
      }
    }
  } else {
    uint64_t* o = out.data<uint64_t>();
    for (int64_t i = 0; i < count; ++i) o[i] = load_le(in + i * w, w);
  }
}

// Where a .npy image's array lies, from its header alone (an npz member's first bytes are
// enough to learn how large its array is before inflating it).
struct NpyLayout {
  NpyDescr descr;
  std::string descr_text;   // as the header wrote it, for messages
  Shape shape;
  uint64_t count = 0;       // elements
  size_t data_offset = 0;   // where the elements start
  uint64_t data_bytes = 0;  // count * itemsize
};

// numpy writes headers of a few hundred bytes for the dtypes read here; a larger length is
// corruption, and refusing it bounds what a header can make the parser read.
constexpr size_t kMaxNpyHeader = size_t{1} << 20;

NpyLayout parse_npy_layout(const unsigned char* data, size_t size, const std::string& src) {
  static const unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  SG_REQUIRE(size >= 10 && std::memcmp(data, kMagic, 6) == 0, src,
             ": not a .npy file (bad magic; expected the bytes \\x93NUMPY at the start)");
  const int major = data[6], minor = data[7];
  SG_REQUIRE((major == 1 || major == 2 || major == 3) && minor == 0, src,
             ": unsupported .npy format version ", major, ".", minor,
             " (supported: 1.0, 2.0, 3.0)");
  ByteView view(data, size, src);
  const size_t prefix = major == 1 ? 10 : 12;
  const size_t header_len = view.le(8, major == 1 ? 2 : 4, "header length");
  SG_REQUIRE(header_len <= kMaxNpyHeader, src, ": header length ", header_len, " is larger than any .npy header (at most ",
             kMaxNpyHeader, " bytes are read)");
  const unsigned char* h = view.at(prefix, header_len, "header");
  const std::string header(reinterpret_cast<const char*>(h), header_len);

  const NpyHeader hdr = HeaderParser(header, src).parse();
  NpyLayout out;
  out.descr = parse_descr(hdr.descr, src);
  out.descr_text = hdr.descr;
  SG_REQUIRE(!hdr.fortran_order, src,
             ": Fortran-order arrays are not supported; save with np.ascontiguousarray");

  // The element count, guarding against a corrupt shape overflowing the size computation.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / 16;
  uint64_t count = 1;
  for (int64_t d : hdr.shape) {
    SG_REQUIRE(d == 0 || count <= limit / static_cast<uint64_t>(d), src, ": shape ",
               shape_str(hdr.shape), " is too large");
    count *= static_cast<uint64_t>(d);
  }
  out.shape = hdr.shape;
  out.count = count;
  out.data_offset = prefix + header_len;
  out.data_bytes = count * static_cast<uint64_t>(out.descr.itemsize);
  return out;
}

// Parses a whole .npy image. `src` names it in errors ("npy file 'x.npy'").
HostArray parse_npy(const unsigned char* data, size_t size, const std::string& src) {
  const NpyLayout l = parse_npy_layout(data, size, src);
  const size_t have = size - l.data_offset;
  SG_REQUIRE(l.data_bytes <= have, src, ": truncated: shape ", shape_str(l.shape), " of '", l.descr_text,
             "' needs ", l.data_bytes, " bytes of data but only ", have, " follow the header");
  HostArray out(l.descr.target, l.shape);
  convert_elements(data + l.data_offset, static_cast<int64_t>(l.count), l.descr, out, src);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Zip archives (PKWARE APPNOTE.TXT): end of central directory, optional zip64 records, central
// directory entries, local headers.

constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kLocalSig = 0x04034b50;

struct ZipDirectory {
  uint64_t entries = 0, offset = 0, size = 0;
};

struct ZipEntry {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, local_offset = 0;
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

// The first `n` uncompressed bytes of a member (fewer if it is shorter).
std::vector<unsigned char> member_head(const ByteView& z, const ZipEntry& e, uint64_t n, const std::string& what) {
  const MemberData m = member_data(z, e, what);
  n = std::min(n, e.usize);
  if (e.method == 0) return std::vector<unsigned char>(m.data, m.data + n);
  return inflate_raw(m.data, e.csize, n, what, true);
}

// The uncompressed bytes of one member, CRC-checked.
std::vector<unsigned char> extract(const ByteView& z, const ZipEntry& e, const std::string& what) {
  const MemberData m = member_data(z, e, what);
  std::vector<unsigned char> out = e.method == 0 ? std::vector<unsigned char>(m.data, m.data + e.csize)
                                                 : inflate_raw(m.data, e.csize, e.usize, what);
  const uint32_t crc = static_cast<uint32_t>(crc32_z(0L, out.data(), out.size()));
  SG_REQUIRE(crc == e.crc, what, ": CRC-32 mismatch (computed ", crc, ", archive says ", e.crc,
             "); the file is corrupt");
  return out;
}

// numpy writes each member once; directory entries that share bytes would let a small file
// expand into many copies of one large member.
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

std::string npy_header(const HostArray& a) {
  const char* descr = a.dtype() == DType::F32 ? "<f4" : a.dtype() == DType::I32 ? "<i4" : "<u8";
  std::string shape = "(";
  for (size_t i = 0; i < a.shape().size(); ++i) shape += cat(i ? ", " : "", a.shape()[i]);
  if (a.shape().size() == 1) shape += ",";  // Python's one-element tuple
  shape += ")";
  std::string h = cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces so that the data starts at a multiple of 16 bytes, and end with '\n'.
  const size_t total = 10 + h.size() + 1;
  h.append((16 - total % 16) % 16, ' ');
  h += '\n';
  return h;
}

}  // namespace

HostArray read_npy(const std::string& path) {
  const std::string bytes = read_file(path, "npy file");
  return parse_npy(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), cat("npy file '", path, "'"));
}

std::map<std::string, HostArray> read_npz(const std::string& path) {
  const std::string bytes = read_file(path, "npz file");
  const std::string src = cat("npz file '", path, "'");
  const ByteView z(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), src);
  std::vector<ZipEntry> entries;
  for (ZipEntry& e : read_central_directory(z, find_central_directory(z, src), src))
    if (e.name.empty() || e.name.back() != '/') entries.push_back(std::move(e));  // not a directory entry
  refuse_shared_members(z, entries, src);

  // Before inflating anything: each member's size against the array its header declares, and
  // all of them against the memory there is (a few KB of deflate can claim gigabytes).
  uint64_t arrays = 0, largest_member = 0;  // the arrays stay; one member at a time is inflated
  for (const ZipEntry& e : entries) {
    const std::string what = cat(src, " member '", e.name, "'");
    const std::vector<unsigned char> head = member_head(z, e, kMaxNpyHeader + 12, what);
    const NpyLayout l = parse_npy_layout(head.data(), head.size(), what);
    const uint64_t image = l.data_offset + l.data_bytes;
    SG_REQUIRE(e.usize <= image + 65536, what, ": declares ", e.usize, " bytes uncompressed, but its array (shape ",
               shape_str(l.shape), " of '", l.descr_text, "') takes ", image, " bytes with its header");
    SG_REQUIRE(!__builtin_add_overflow(arrays, l.count * dtype_size(l.descr.target), &arrays), src,
               ": its arrays are too large");
    largest_member = std::max(largest_member, e.usize);
  }
  require_host_memory(arrays + largest_member, cat(src, " (", entries.size(), " arrays, inflated and converted)"));

  std::map<std::string, HostArray> out;
  for (const ZipEntry& e : entries) {
    const std::string what = cat(src, " member '", e.name, "'");
    std::string key = e.name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0)
      key.resize(key.size() - 4);
    SG_REQUIRE(!out.count(key), src, ": array '", key, "' appears twice");
    const std::vector<unsigned char> member = extract(z, e, what);
    out.emplace(key, parse_npy(member.data(), member.size(), what));
  }
  return out;
}

void write_npy(const std::string& path, const HostArray& a) {
  SG_REQUIRE(!a.empty(), "write_npy '", path, "': the array is empty (default-constructed)");
  const std::string header = npy_header(a);
  std::vector<unsigned char> bytes(10 + header.size() + a.nbytes());
  std::memcpy(bytes.data(), "\x93NUMPY\x01\x00", 8);
  store_le(bytes.data() + 8, header.size(), 2);
  std::memcpy(bytes.data() + 10, header.data(), header.size());
  // Element by element in little-endian order, whatever the host's order.
  const int w = static_cast<int>(dtype_size(a.dtype()));
  const unsigned char* src = static_cast<const unsigned char*>(a.raw());
  unsigned char* dst = bytes.data() + 10 + header.size();
  for (int64_t i = 0; i < a.numel(); ++i) {
    uint64_t v = 0;
    if (w == 4) {
      uint32_t u;
      std::memcpy(&u, src + i * 4, 4);
      v = u;
    } else {
      std::memcpy(&v, src + i * 8, 8);
    }
    store_le(dst + i * w, v, w);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  SG_REQUIRE(out, "cannot create npy file '", path, "': ", std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  SG_REQUIRE(out, "error while writing npy file '", path, "'");
}

}  // namespace sg
