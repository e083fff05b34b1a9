// The safetensors format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the
// data buffer. The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the start of the data buffer) plus an optional "__metadata__" object of
// string -> string. The writer produces exactly what the reference implementation produces for
// the same tensor order (compact JSON, "__metadata__" first, header padded with spaces to a
// multiple of 8 bytes); the reader accepts any conforming file and rejects anything else with an
// Error naming the file and, where there is one, the tensor.
#include "stepgraph/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/json_text.h"
#include <set>
#include <system_error>

namespace sg {
namespace {

using Json = nlohmann::ordered_json;  // keeps the header's key order (ties between empty tensors)

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
const char* const kMetadataKey = "__metadata__";

std::string sys_error(int err) { return std::generic_category().message(err); }

std::string where(const std::string& path) { return cat("safetensors file '", path, "': "); }

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::I32: return "I32";
    case DType::U64: return "U64";
  }
  return "?";
}

// The element types a file may hold, and the host type each becomes: wider and narrower floats
// are converted to f32 and I64 to i32 (range checked), so weights saved by other tools load.
struct StoredType {
  const char* name;
  size_t size;
  DType host;
};
constexpr StoredType kStoredTypes[] = {{"F32", 4, DType::F32}, {"I32", 4, DType::I32}, {"U64", 8, DType::U64},
                                       {"F64", 8, DType::F32}, {"F16", 2, DType::F32}, {"BF16", 2, DType::F32},
                                       {"I64", 8, DType::I32}};

const StoredType* st_dtype_parse(const std::string& s) {
  for (const StoredType& t : kStoredTypes)
    if (s == t.name) return &t;
  return nullptr;
}

// IEEE binary16 to binary32, exactly (subnormals, infinities and NaN included).
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    bits = sign | static_cast<uint32_t>(112 - e) << 23 | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool host_is_little_endian() {
  const uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

// The file holds little-endian elements; on a big-endian host every element is reversed.
void swap_elements(void* data, size_t nbytes, size_t elem) {
  if (host_is_little_endian() || elem <= 1) return;
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i + elem <= nbytes; i += elem) std::reverse(p + i, p + i + elem);
}

void put_u64_le(unsigned char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_u64_le(const unsigned char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

// Closes a FILE* on every path out of a scope.
struct FileCloser {
  FILE* f = nullptr;
  ~FileCloser() {
    if (f) std::fclose(f);
  }
};

// ---------------------------------------------------------------------------------------------
// Reading

struct Entry {
  std::string name;
  const StoredType* stored = nullptr;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

std::string offsets_str(uint64_t b, uint64_t e) { return cat("[", b, ", ", e, "]"); }

// Parses the header strictly: a duplicate key would hide a tensor or a metadata entry.
Json parse_header(const std::string& path, const std::string& text) {
  const Json header = parse_json_text<Json>(text, cat("safetensors file '", path, "': header"));
  SG_REQUIRE(header.is_object(), where(path), "header is JSON ", header.type_name(),
             ", expected an object");
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const Json& j) {
  SG_REQUIRE(j.is_object(), where(path), "'", kMetadataKey, "' is ", j.type_name(),
             ", expected an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : j.items()) {
    SG_REQUIRE(value.is_string(), where(path), "'", kMetadataKey, "' entry '", key, "' is ",
               value.type_name(), ", expected a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

// Checks one tensor entry on its own: keys, types, dtype, shape, and that its byte range has the
// size its shape needs and lies within the data buffer of `buffer_size` bytes.
Entry parse_entry(const std::string& path, const std::string& name, const Json& j,
                  uint64_t buffer_size) {
  const std::string at = cat(where(path), "tensor '", name, "': ");
  SG_REQUIRE(j.is_object(), at, "entry is JSON ", j.type_name(), ", expected an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    SG_REQUIRE(j.contains(key), at, "entry has no '", key, "'");

  Entry e;
  e.name = name;
  const Json& dt = j.at("dtype");
  SG_REQUIRE(dt.is_string(), at, "'dtype' is ", dt.type_name(), ", expected a string");
  e.stored = st_dtype_parse(dt.get<std::string>());
  SG_REQUIRE(e.stored, at, "dtype '", dt.get<std::string>(),
             "' is not supported (supported: F32, F64, F16, BF16 as f32; I32, I64 as i32; U64)");

  const Json& sh = j.at("shape");
  SG_REQUIRE(sh.is_array(), at, "'shape' is ", sh.type_name(), ", expected an array");
  for (const Json& d : sh) {
    SG_REQUIRE(d.is_number_integer(), at, "'shape' ", sh.dump(),
               " has a non-integer dimension");
    SG_REQUIRE(d.is_number_unsigned() || d.get<int64_t>() >= 0, at, "'shape' ", sh.dump(),
               " has a negative dimension");
    const uint64_t v = d.get<uint64_t>();
    SG_REQUIRE(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), at, "'shape' ",
               sh.dump(), " has a dimension that is too large");
    e.shape.push_back(static_cast<int64_t>(v));
  }

  const Json& off = j.at("data_offsets");
  SG_REQUIRE(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                 off[1].is_number_unsigned(),
             at, "'data_offsets' is ", off.dump(), ", expected [begin, end] (unsigned integers)");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  SG_REQUIRE(e.begin <= e.end, at, "data_offsets ", offsets_str(e.begin, e.end),
             " end before they begin");

  // Byte count the shape needs. The product of the non-zero dimensions must fit in int64 (so
  // that no partial product overflows, whatever the order of dimensions); any zero makes it 0.
  const auto max_elems = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t elems = 1;
  bool zero = false, overflow = false;
  for (int64_t d : e.shape) {
    const auto ud = static_cast<uint64_t>(d);
    if (ud == 0) {
      zero = true;
    } else if (elems > max_elems / ud) {
      overflow = true;
    } else {
      elems *= ud;
    }
  }
  SG_REQUIRE(!overflow, at, "shape ", shape_str(e.shape), " has too many elements");
  const uint64_t elem = e.stored->size;
  overflow = !zero && elems > std::numeric_limits<uint64_t>::max() / elem;
  const uint64_t need = zero || overflow ? 0 : elems * elem;
  std::string stored = e.stored->name;  // lower case, as dtype_name says f32
  std::transform(stored.begin(), stored.end(), stored.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const std::string what = cat("shape ", shape_str(e.shape), " ", stored);
  SG_REQUIRE(!overflow, at, "data_offsets ", offsets_str(e.begin, e.end), " do not match ", what,
             " (more than 2^64 bytes)");
  SG_REQUIRE(e.end - e.begin == need, at, "data_offsets ", offsets_str(e.begin, e.end),
             " do not match ", what, " (", need, " bytes)");
  SG_REQUIRE(e.end <= buffer_size, at, "data_offsets ", offsets_str(e.begin, e.end),
             " run past the end of the data buffer (", buffer_size,
             " bytes; is the file truncated?)");
  return e;
}

// Converts a tensor stored as F64/F16/BF16 (to f32) or I64 (to i32) into `out`; a value the
// host type cannot hold is an Error naming the tensor and the element, never clamped.
void convert_elements(const std::string& path, const Entry& e, const unsigned char* src, HostArray& out) {
  const std::string kind = e.stored->name;
  const int64_t n = out.numel();
  auto at = [&](int64_t i) { return cat(where(path), "tensor '", e.name, "' (", kind, ") element ", i, ": "); };
  if (kind == "I64") {
    int32_t* dst = out.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      SG_REQUIRE(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(), at(i), v,
                 " does not fit in i32");
      dst[i] = static_cast<int32_t>(v);
    }
  } else if (kind == "F64") {
    float* dst = out.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      SG_REQUIRE(!std::isfinite(v) || std::fabs(v) <= std::numeric_limits<float>::max(), at(i), v,
                 " is outside the range of f32");
      dst[i] = static_cast<float>(v);
    }
  } else {  // F16, or BF16: the top half of an f32
    const bool half = kind == "F16";
    float* dst = out.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      if (half) {
        dst[i] = half_to_float(h);
      } else {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&dst[i], &bits, 4);
      }
    }
  }
}

// Sorts the entries by data offset and checks that they tile [0, buffer_size) exactly.
void check_coverage(const std::string& path, std::vector<Entry>& entries, uint64_t buffer_size) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    const std::string at = cat(where(path), "tensor '", e.name, "': data_offsets ",
                               offsets_str(e.begin, e.end));
    SG_REQUIRE(e.begin >= covered, at, " overlap tensor '", prev ? prev->name : "", "' ",
               prev ? offsets_str(prev->begin, prev->end) : "");
    SG_REQUIRE(e.begin == covered, at, " leave a gap of ", e.begin - covered,
               " bytes after the previous tensor data (which ends at ", covered, ")");
    covered = e.end;
    if (e.end > e.begin) prev = &e;
  }
  SG_REQUIRE(covered == buffer_size, where(path), buffer_size - covered,
             " trailing bytes after the last tensor data (data buffer is ", buffer_size,
             " bytes, tensors cover ", covered, ")");
}

// ---------------------------------------------------------------------------------------------
// Writing

// Builds the header bytes (JSON padded with spaces to a multiple of 8), validating the input.
std::string build_header(const std::string& path,
                         const std::vector<std::pair<std::string, HostArray>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[kMetadataKey] = std::move(meta);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, arr] : tensors) {
    SG_REQUIRE(name != kMetadataKey, where(path), "a tensor cannot be named '", kMetadataKey,
               "'");
    SG_REQUIRE(seen.insert(name).second, where(path), "tensor name '", name,
               "' appears more than once");
    SG_REQUIRE(!arr.empty(), where(path), "tensor '", name,
               "' is an empty (default-constructed) array");
    const uint64_t n = arr.nbytes();
    Json entry = Json::object();
    entry["dtype"] = st_dtype_name(arr.dtype());
    entry["shape"] = arr.shape();
    entry["data_offsets"] = {offset, offset + n};
    // Names are unique (checked above): append, as a lookup is linear in an ordered_json object.
    header.get_ref<Json::object_t&>().emplace_back(name, std::move(entry));
    offset += n;
  }
  std::string text;
  try {
    text = header.dump();  // compact, like the reference; throws on invalid UTF-8
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat(where(path), "cannot encode the header (tensor names and metadata must be "
                                 "valid UTF-8): ",
                    e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

const HostArray* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, arr] : tensors)
    if (n == name) return &arr;
  return nullptr;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, HostArray>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  SG_REQUIRE(!path.empty(), "safetensors file: empty path");
  const std::string header = build_header(path, tensors, metadata);

  AtomicFile f(path, "safetensors file");
  unsigned char len[8];
  put_u64_le(len, header.size());
  f.write(len, 8);
  f.write(header);

  std::vector<unsigned char> swapped;  // only used on big-endian hosts
  for (const auto& [name, arr] : tensors) {
    const size_t n = arr.nbytes();
    if (n == 0) continue;
    const void* src = arr.raw();
    if (!host_is_little_endian()) {
      swapped.assign(static_cast<const unsigned char*>(src),
                     static_cast<const unsigned char*>(src) + n);
      swap_elements(swapped.data(), n, dtype_size(arr.dtype()));
      src = swapped.data();
    }
    f.write(src, n);
  }
  f.commit();
}

SafetensorsFile read_safetensors(const std::string& path) {
  FileCloser file;
  file.f = std::fopen(path.c_str(), "rb");
  if (!file.f) {
    const int err = errno;
    throw Error(cat(where(path), "cannot open: ", sys_error(err)));
  }
  FILE* f = file.f;
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0) {
    const int err = errno;
    throw Error(cat(where(path), "cannot stat: ", sys_error(err)));
  }
  SG_REQUIRE(S_ISREG(st.st_mode), where(path), "not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);

  // Reads exactly n bytes or throws (a short read means the file changed under us).
  auto read_exact = [&](void* dst, uint64_t n, const char* what) {
    if (n == 0) return;
    const size_t got = std::fread(dst, 1, static_cast<size_t>(n), f);
    if (got != n) {
      const int err = std::ferror(f) ? errno : 0;
      throw Error(cat(where(path), "cannot read ", what, ": ",
                      err ? sys_error(err) : std::string("unexpected end of file")));
    }
  };

  SG_REQUIRE(file_size >= 8, where(path), "file is ", file_size,
             " bytes, too short for the 8-byte header length");
  unsigned char len[8];
  read_exact(len, 8, "the header length");
  const uint64_t header_size = get_u64_le(len);
  SG_REQUIRE(header_size <= kMaxHeaderBytes, where(path), "header length ", header_size,
             " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  SG_REQUIRE(header_size <= file_size - 8, where(path), "header length ", header_size,
             " runs past the end of the file (", file_size, " bytes; is the file truncated?)");
  std::string text(static_cast<size_t>(header_size), '\0');
  read_exact(text.data(), header_size, "the header");
  const uint64_t buffer_size = file_size - 8 - header_size;

  const Json header = parse_header(path, text);
  text.clear();
  text.shrink_to_fit();

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      out.metadata = parse_metadata(path, value);
      continue;
    }
    entries.push_back(parse_entry(path, name, value, buffer_size));
  }
  check_coverage(path, entries, buffer_size);

  // The entries now tile the data buffer in order: read them sequentially.
  out.tensors.reserve(entries.size());
  std::vector<unsigned char> raw;
  for (const Entry& e : entries) {
    HostArray arr(e.stored->host, e.shape);
    const std::string what = cat("tensor '", e.name, "'");
    if (e.stored->size == dtype_size(e.stored->host)) {
      SG_ASSERT(arr.nbytes() == e.end - e.begin);
      read_exact(arr.raw(), arr.nbytes(), what.c_str());
      swap_elements(arr.raw(), arr.nbytes(), e.stored->size);
    } else {
      raw.resize(static_cast<size_t>(e.end - e.begin));
      read_exact(raw.data(), raw.size(), what.c_str());
      swap_elements(raw.data(), raw.size(), e.stored->size);
      convert_elements(path, e, raw.data(), arr);
      out.converted_from[e.name] = e.stored->name;
    }
    out.tensors.emplace_back(e.name, std::move(arr));
  }
  SG_REQUIRE(std::fgetc(f) == EOF, where(path), "file grew while it was being read");
  return out;
}

}  // namespace sg
