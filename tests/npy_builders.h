// Hand-built .npy images and zip archives (.npz) for the reader tests.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sg::test {

using Bytes = std::string;  // raw file contents

inline void put_le(Bytes& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// A hand-built .npy image: `shape` is the Python tuple text, `data` the raw element bytes.
inline Bytes npy_bytes(const std::string& descr, const std::string& shape, const Bytes& data,
                int major = 1, const std::string& fortran = "False") {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape +
                  ", }";
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  Bytes b("\x93NUMPY", 6);
  b.push_back(static_cast<char>(major));
  b.push_back(0);
  put_le(b, h.size(), major == 1 ? 2 : 4);
  return b + h + data;
}

template <class T>
Bytes raw_le(const std::vector<T>& values) {
  Bytes b;
  for (T v : values) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    put_le(b, bits, sizeof(T));
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Zip archives built in the test (local headers, central directory, end record).

struct Member {
  std::string name;
  Bytes data;
  int method = 0;        // 0 stored, 8 deflate, anything else is written as-is
  bool bad_crc = false;  // store a wrong CRC in the directory
  int alias = -1;        // >= 0: a directory entry for that earlier member's bytes (no data of its own)
};

inline Bytes deflate_raw(const Bytes& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// zip64: sizes and offsets go to zip64 extra fields and the zip64 end records, as numpy does
// for large arrays.
inline Bytes build_zip(const std::vector<Member>& members, bool zip64 = false) {
  Bytes body, central;
  std::vector<uint64_t> offsets;
  for (const Member& given : members) {
    const Member& m = given.alias >= 0 ? members[given.alias] : given;
    const Bytes payload = m.method == 8 ? deflate_raw(m.data) : m.data;
    uint32_t crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size())));
    if (m.bad_crc) crc ^= 0x1234;
    const uint64_t offset = given.alias >= 0 ? offsets[given.alias] : body.size();
    offsets.push_back(offset);
    Bytes extra;
    if (zip64) {
      put_le(extra, 1, 2);
      put_le(extra, 24, 2);
      put_le(extra, m.data.size(), 8);
      put_le(extra, payload.size(), 8);
      put_le(extra, offset, 8);
    }
    const uint64_t size32 = zip64 ? 0xFFFFFFFF : 0;
    auto common = [&](Bytes& b, const std::string& name) {  // version needed .. extra length, shared by both headers
      put_le(b, 45, 2);
      put_le(b, 0, 2);
      put_le(b, m.method, 2);
      put_le(b, 0, 4);  // time, date
      put_le(b, crc, 4);
      put_le(b, zip64 ? size32 : payload.size(), 4);
      put_le(b, zip64 ? size32 : m.data.size(), 4);
      put_le(b, name.size(), 2);
      put_le(b, extra.size(), 2);
    };
    if (given.alias < 0) {
      put_le(body, 0x04034b50, 4);
      common(body, m.name);
      body += m.name + extra + payload;
    }

    put_le(central, 0x02014b50, 4);
    put_le(central, 45, 2);  // version made by
    common(central, given.name);
    put_le(central, 0, 2);  // comment length
    put_le(central, 0, 2);  // disk
    put_le(central, 0, 2);  // internal attributes
    put_le(central, 0, 4);  // external attributes
    put_le(central, zip64 ? size32 : offset, 4);
    central += given.name + extra;
  }
  Bytes zip = body + central;
  if (zip64) {
    const uint64_t record = zip.size();
    put_le(zip, 0x06064b50, 4);
    put_le(zip, 44, 8);
    put_le(zip, 45, 2);
    put_le(zip, 45, 2);
    put_le(zip, 0, 4);
    put_le(zip, 0, 4);
    put_le(zip, members.size(), 8);
    put_le(zip, members.size(), 8);
    put_le(zip, central.size(), 8);
    put_le(zip, body.size(), 8);
    put_le(zip, 0x07064b50, 4);
    put_le(zip, 0, 4);
    put_le(zip, record, 8);
    put_le(zip, 1, 4);
  }
  put_le(zip, 0x06054b50, 4);
  put_le(zip, 0, 2);
  put_le(zip, 0, 2);
  put_le(zip, zip64 ? 0xFFFF : members.size(), 2);
  put_le(zip, zip64 ? 0xFFFF : members.size(), 2);
  put_le(zip, zip64 ? 0xFFFFFFFF : central.size(), 4);
  put_le(zip, zip64 ? 0xFFFFFFFF : body.size(), 4);
  put_le(zip, 0, 2);
  return zip;
}

}  // namespace sg::test
