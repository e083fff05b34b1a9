// NumPy .npy and .npz files (the zip container itself: zip_reader.cpp).
//
// .npy (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
//   "\x93NUMPY", major, minor, header length (u16 for 1.x, u32 for 2.x/3.x), then a Python dict
//   literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } and the raw data.
// .npz: a zip archive with one "<key>.npy" member per array, stored or deflated, possibly with
//   zip64 records (numpy asks for them so that arrays may exceed 4 GiB).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include <zlib.h>

#include "core/host_memory.h"
#include "data/zip_reader.h"
#include "stepgraph/data.h"

namespace sg {
namespace {

// store_le: the bytes of v in little-endian order, whatever the host's order.
void store_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

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
  const std::vector<ZipEntry> entries = zip_entries(z, src);

  // Before inflating anything: each member's size against the array its header declares, and
  // all of them against the memory there is (a few KB of deflate can claim gigabytes).
  uint64_t arrays = 0, largest_member = 0;  // the arrays stay; one member at a time is inflated
  for (const ZipEntry& e : entries) {
    const std::string what = cat(src, " member '", e.name, "'");
    const std::vector<unsigned char> head = zip_member_head(z, e, kMaxNpyHeader + 12, what);
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
    const std::vector<unsigned char> member = zip_extract(z, e, what);
    out.emplace(key, parse_npy(member.data(), member.size(), what));
  }
  return out;
}

namespace {

// A whole .npy image of `a`, element by element in little-endian order, whatever the host's.
std::vector<unsigned char> npy_image(const HostArray& a, const std::string& what) {
  SG_REQUIRE(!a.empty(), what, ": the array is empty (default-constructed)");
  const std::string header = npy_header(a);
  std::vector<unsigned char> bytes(10 + header.size() + a.nbytes());
  std::memcpy(bytes.data(), "\x93NUMPY\x01\x00", 8);
  store_le(bytes.data() + 8, header.size(), 2);
  std::memcpy(bytes.data() + 10, header.data(), header.size());
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
  return bytes;
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes, const char* kind) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  SG_REQUIRE(out, "cannot create ", kind, " file '", path, "': ", std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  SG_REQUIRE(out, "error while writing ", kind, " file '", path, "'");
}

}  // namespace

void write_npy(const std::string& path, const HostArray& a) {
  write_bytes(path, npy_image(a, cat("write_npy '", path, "'")), "npy");
}

// A zip archive of stored (uncompressed) members, as numpy.savez writes; no zip64, so at most
// 4 GiB in all.
void write_npz(const std::string& path, const NamedArrays& arrays) {
  SG_REQUIRE(!arrays.empty(), "write_npz '", path, "': no arrays");
  std::vector<unsigned char> zip, dir;
  auto put = [](std::vector<unsigned char>& b, uint64_t v, int n) {
    const size_t at = b.size();
    b.resize(at + n);
    store_le(b.data() + at, v, n);
  };
  for (const auto& [name, a] : arrays) {
    const std::vector<unsigned char> npy = npy_image(a, cat("write_npz '", path, "' array '", name, "'"));
    const std::string file = name + ".npy";
    const uint64_t offset = zip.size();
    SG_REQUIRE(offset + npy.size() + file.size() + 30 < (uint64_t{1} << 32), "write_npz '", path,
               "': more than 4 GiB (zip64 is not written)");
    const uint32_t crc = static_cast<uint32_t>(crc32_z(0L, npy.data(), npy.size()));
    // Local file header: signature, version, flags, method 0 (stored), time, date, CRC, sizes, name.
    for (auto* b : {&zip, &dir}) {
      const bool central = b == &dir;
      put(*b, central ? 0x02014b50 : 0x04034b50, 4);
      if (central) put(*b, 20, 2);  // made by
      put(*b, 20, 2), put(*b, 0, 2), put(*b, 0, 2), put(*b, 0, 2), put(*b, 0x21, 2);  // 1980-01-01
      put(*b, crc, 4), put(*b, npy.size(), 4), put(*b, npy.size(), 4), put(*b, file.size(), 2), put(*b, 0, 2);
      if (central) put(*b, 0, 2), put(*b, 0, 2), put(*b, 0, 2), put(*b, 0, 4), put(*b, offset, 4);
      b->insert(b->end(), file.begin(), file.end());
    }
    zip.insert(zip.end(), npy.begin(), npy.end());
  }
  const uint64_t dir_offset = zip.size();
  zip.insert(zip.end(), dir.begin(), dir.end());
  put(zip, 0x06054b50, 4), put(zip, 0, 2), put(zip, 0, 2), put(zip, arrays.size(), 2), put(zip, arrays.size(), 2);
  put(zip, dir.size(), 4), put(zip, dir_offset, 4), put(zip, 0, 2);
  write_bytes(path, zip, "npz");
}

}  // namespace sg
