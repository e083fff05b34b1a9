// The .npy and .npz readers: every dtype they take, their conversions with range checks, and
// corrupt or unsupported files refused with errors that name the file.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "stepgraph/data.h"
#include "data_test_util.h"
#include "npy_builders.h"

namespace {

using sg::DType;
using sg::HostArray;
using sg::test::Bytes;
using sg::test::build_zip;
using sg::test::Member;
using sg::test::npy_bytes;
using sg::test::raw_le;
using sg::test::expect_error;
using sg::test::floats;
using sg::test::ints;
using sg::test::read_file;
using sg::test::tmp_path;
using sg::test::write_file;

// ---------------------------------------------------------------------------------------------
// .npy

TEST(Npy, RoundTripF32) {
  const std::string path = tmp_path("rt_f32.npy");
  std::vector<float> v;
  for (int i = 0; i < 12; ++i) v.push_back(0.5f * i - 1.25f);
  sg::write_npy(path, HostArray::f32({3, 4}, v));

  const Bytes b = read_file(path);
  ASSERT_GT(b.size(), 10u);
  const size_t header_len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  EXPECT_EQ((10 + header_len) % 16, 0u);
  EXPECT_EQ(b[10 + header_len - 1], '\n');
  EXPECT_EQ(b.substr(0, 8), Bytes("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(b.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(b.find("'shape': (3, 4)"), std::string::npos);
  EXPECT_EQ(b.size(), 10 + header_len + 48);

  const HostArray a = sg::read_npy(path);
  EXPECT_EQ(a.dtype(), DType::F32);
  EXPECT_EQ(a.shape(), (sg::Shape{3, 4}));
  EXPECT_EQ(floats(a), v);
}

TEST(Npy, RoundTripI32AndU64) {
  const std::string path = tmp_path("rt_i32.npy");
  const std::vector<int32_t> v = {7, -3, 2147483647, -2147483647 - 1, 0};
  sg::write_npy(path, HostArray::i32({5}, v));
  EXPECT_NE(read_file(path).find("'shape': (5,)"), std::string::npos);
  const HostArray a = sg::read_npy(path);
  EXPECT_EQ(a.dtype(), DType::I32);
  EXPECT_EQ(a.shape(), (sg::Shape{5}));
  EXPECT_EQ(ints(a), v);

  HostArray u(DType::U64, {2});
  u.data<uint64_t>()[0] = 0xFEDCBA9876543210ull;
  u.data<uint64_t>()[1] = 42;
  const std::string upath = tmp_path("rt_u64.npy");
  sg::write_npy(upath, u);
  EXPECT_NE(read_file(upath).find("'<u8'"), std::string::npos);
  const HostArray b = sg::read_npy(upath);
  ASSERT_EQ(b.dtype(), DType::U64);
  EXPECT_EQ(b.data<uint64_t>()[0], 0xFEDCBA9876543210ull);
  EXPECT_EQ(b.data<uint64_t>()[1], 42u);
}

TEST(Npy, ReadsF8AsF32) {
  const std::string path = tmp_path("f8.npy");
  write_file(path, npy_bytes("<f8", "(2, 2)", raw_le<double>({1.5, -2.25, 1e30, 0.1})));
  const HostArray a = sg::read_npy(path);
  EXPECT_EQ(a.dtype(), DType::F32);
  EXPECT_EQ(a.shape(), (sg::Shape{2, 2}));
  EXPECT_EQ(floats(a), (std::vector<float>{1.5f, -2.25f, 1e30f, 0.1f}));
}

TEST(Npy, ReadsI8AsI32WithRangeCheck) {
  const std::string path = tmp_path("i8.npy");
  write_file(path, npy_bytes("<i8", "(3,)", raw_le<int64_t>({-5, 2147483647, 7})));
  const HostArray a = sg::read_npy(path);
  EXPECT_EQ(a.dtype(), DType::I32);
  EXPECT_EQ(ints(a), (std::vector<int32_t>{-5, 2147483647, 7}));

  const std::string big = tmp_path("i8_big.npy");
  write_file(big, npy_bytes("<i8", "(2,)", raw_le<int64_t>({1, int64_t(1) << 40})));
  expect_error([&] { sg::read_npy(big); }, {big, "element 1", "1099511627776"});
}

TEST(Npy, ReadsF8OverflowAsError) {
  const std::string path = tmp_path("f8_big.npy");
  write_file(path, npy_bytes("<f8", "(1,)", raw_le<double>({1e300})));
  expect_error([&] { sg::read_npy(path); }, {path, "32-bit float"});
}

TEST(Npy, ReadsU1I1B1AsI32) {
  const std::string u1 = tmp_path("u1.npy");
  write_file(u1, npy_bytes("|u1", "(4,)", Bytes("\x00\x05\xc8\xff", 4)));
  EXPECT_EQ(ints(sg::read_npy(u1)), (std::vector<int32_t>{0, 5, 200, 255}));

  const std::string i1 = tmp_path("i1.npy");
  write_file(i1, npy_bytes("|i1", "(3,)", Bytes("\x80\x05\xff", 3)));
  EXPECT_EQ(ints(sg::read_npy(i1)), (std::vector<int32_t>{-128, 5, -1}));

  const std::string b1 = tmp_path("b1.npy");
  write_file(b1, npy_bytes("|b1", "(2, 2)", Bytes("\x01\x00\x00\x01", 4)));
  const HostArray b = sg::read_npy(b1);
  EXPECT_EQ(b.shape(), (sg::Shape{2, 2}));
  EXPECT_EQ(ints(b), (std::vector<int32_t>{1, 0, 0, 1}));
}

TEST(Npy, Version2HeaderRankZeroAndEmptyArrays) {
  const std::string v2 = tmp_path("v2.npy");
  write_file(v2, npy_bytes("<i4", "(2,)", raw_le<int32_t>({11, -12}), 2));
  EXPECT_EQ(ints(sg::read_npy(v2)), (std::vector<int32_t>{11, -12}));

  const std::string scalar = tmp_path("scalar.npy");
  write_file(scalar, npy_bytes("<f4", "()", raw_le<float>({3.5f})));
  const HostArray s = sg::read_npy(scalar);
  EXPECT_TRUE(s.shape().empty());
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.data<float>()[0], 3.5f);

  const std::string empty = tmp_path("empty.npy");
  write_file(empty, npy_bytes("<f4", "(0, 3)", ""));
  EXPECT_EQ(sg::read_npy(empty).shape(), (sg::Shape{0, 3}));
}

TEST(Npy, BadInputsNameThePath) {
  const std::string missing = tmp_path("does_not_exist.npy");
  expect_error([&] { sg::read_npy(missing); }, {missing, "cannot open"});

  const std::string magic = tmp_path("bad_magic.npy");
  Bytes b = npy_bytes("<f4", "(1,)", raw_le<float>({1.0f}));
  b[1] = 'X';
  write_file(magic, b);
  expect_error([&] { sg::read_npy(magic); }, {magic, "magic"});

  const std::string truncated = tmp_path("truncated.npy");
  b = npy_bytes("<f4", "(3, 4)", raw_le<float>({1, 2, 3, 4, 5}));
  write_file(truncated, b);
  expect_error([&] { sg::read_npy(truncated); }, {truncated, "truncated", "48", "20"});

  const std::string short_header = tmp_path("short_header.npy");
  write_file(short_header, npy_bytes("<f4", "(1,)", "").substr(0, 30));
  expect_error([&] { sg::read_npy(short_header); }, {short_header, "header"});

  const std::string fortran = tmp_path("fortran.npy");
  write_file(fortran, npy_bytes("<f4", "(2, 2)", raw_le<float>({1, 2, 3, 4}), 1, "True"));
  expect_error([&] { sg::read_npy(fortran); },
               {fortran, "Fortran-order arrays are not supported", "np.ascontiguousarray"});

  const std::string big_endian = tmp_path("big_endian.npy");
  write_file(big_endian, npy_bytes(">f4", "(1,)", Bytes("\x3f\x80\x00\x00", 4)));
  expect_error([&] { sg::read_npy(big_endian); }, {big_endian, "big-endian"});

  const std::string f2 = tmp_path("f2.npy");
  write_file(f2, npy_bytes("<f2", "(2,)", Bytes("\x00\x3c\x00\x3c", 4)));
  expect_error([&] { sg::read_npy(f2); }, {f2, "unsupported dtype '<f2'"});

  const std::string bad_dict = tmp_path("bad_dict.npy");
  write_file(bad_dict, npy_bytes("<f4", "(1, x)", raw_le<float>({1.0f})));
  expect_error([&] { sg::read_npy(bad_dict); }, {bad_dict, "bad header"});
}

// ---------------------------------------------------------------------------------------------
// .npz

std::vector<Member> npz_members(int method) {
  return {{"X.npy", npy_bytes("<f4", "(2, 3)", raw_le<float>({1, 2, 3, 4, 5, 6.5f})), method},
          {"y.npy", npy_bytes("<i8", "(2,)", raw_le<int64_t>({1, 0})), method}};
}

void expect_npz_contents(const std::map<std::string, HostArray>& m) {
  ASSERT_EQ(m.size(), 2u);
  ASSERT_TRUE(m.count("X"));
  ASSERT_TRUE(m.count("y"));
  EXPECT_EQ(m.at("X").shape(), (sg::Shape{2, 3}));
  EXPECT_EQ(floats(m.at("X")), (std::vector<float>{1, 2, 3, 4, 5, 6.5f}));
  EXPECT_EQ(ints(m.at("y")), (std::vector<int32_t>{1, 0}));
}

TEST(Npz, StoredMembers) {
  const std::string path = tmp_path("stored.npz");
  write_file(path, build_zip(npz_members(0)));
  expect_npz_contents(sg::read_npz(path));
}

TEST(Npz, DeflatedMembers) {
  const std::string path = tmp_path("deflated.npz");
  // A compressible member large enough that deflate really compresses it.
  std::vector<float> big(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 7);
  std::vector<Member> members = npz_members(8);
  members.push_back({"big.npy", npy_bytes("<f4", "(1000,)", raw_le<float>(big)), 8});
  const Bytes zip = build_zip(members);
  EXPECT_LT(zip.size(), 2000u);  // really compressed
  write_file(path, zip);
  auto m = sg::read_npz(path);
  ASSERT_TRUE(m.count("big"));
  EXPECT_EQ(floats(m.at("big")), big);
  m.erase("big");
  expect_npz_contents(m);
}

TEST(Npz, Zip64Records) {
  const std::string path = tmp_path("zip64.npz");
  std::vector<Member> members = npz_members(8);
  members[1].method = 0;
  write_file(path, build_zip(members, /*zip64=*/true));
  expect_npz_contents(sg::read_npz(path));
}

TEST(Npz, CrcMismatchIsDetected) {
  for (int method : {0, 8}) {
    const std::string path = tmp_path("bad_crc.npz");
    std::vector<Member> members = npz_members(method);
    members[1].bad_crc = true;
    write_file(path, build_zip(members));
    expect_error([&] { sg::read_npz(path); }, {path, "y.npy", "CRC"});
  }
}

TEST(Npz, CorruptAndUnsupportedArchives) {
  const std::string corrupt = tmp_path("corrupt_deflate.npz");
  Bytes zip = build_zip(npz_members(8));
  zip[30 + 5 + 3] ^= 0x5A;  // inside X.npy's compressed data
  write_file(corrupt, zip);
  expect_error([&] { sg::read_npz(corrupt); }, {corrupt, "X.npy"});

  const std::string bzip = tmp_path("bzip2.npz");
  write_file(bzip, build_zip({{"X.npy", "abc", 12}}));
  expect_error([&] { sg::read_npz(bzip); }, {bzip, "compression method 12"});

  const std::string not_zip = tmp_path("not_a_zip.npz");
  write_file(not_zip, Bytes(100, 'z'));
  expect_error([&] { sg::read_npz(not_zip); }, {not_zip, "not a zip"});

  const std::string cut = tmp_path("cut.npz");
  const Bytes whole = build_zip(npz_members(0));
  write_file(cut, whole.substr(0, 40) + whole.substr(whole.size() - 22));
  expect_error([&] { sg::read_npz(cut); }, {cut});

  const std::string bad_member = tmp_path("bad_member.npz");
  write_file(bad_member, build_zip({{"X.npy", npy_bytes(">f4", "(1,)", Bytes(4, '\0')), 0}}));
  expect_error([&] { sg::read_npz(bad_member); }, {bad_member, "X.npy", "big-endian"});

  const std::string missing = tmp_path("missing.npz");
  expect_error([&] { sg::read_npz(missing); }, {missing, "cannot open"});
}

// Every single-byte corruption of an archive must end in a result or an sg::Error: never a
// crash, a read out of bounds (run under a sanitizer to see those) or another exception type.
TEST(Npz, ByteCorruptionGivesErrorsOnly) {
  const std::string path = tmp_path("flipped.npz");
  for (int method : {0, 8}) {
    const Bytes zip = build_zip(npz_members(method), /*zip64=*/method == 8);
    int errors = 0;
    for (size_t i = 0; i < zip.size(); ++i) {
      Bytes bad = zip;
      bad[i] = static_cast<char>(bad[i] ^ 0xA5);
      write_file(path, bad);
      try {
        sg::read_npz(path);
      } catch (const sg::Error& e) {
        ++errors;
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << i << ": unexpected exception " << e.what();
      }
    }
    EXPECT_GT(errors, static_cast<int>(zip.size() / 2)) << "method " << method;
  }
}

}  // namespace
