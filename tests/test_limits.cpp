// Sizes from untrusted input: checked arithmetic, memory asked for before it is taken, npz
// archives that would expand without bound, files that are not files.
#include <sys/resource.h>

#include <limits>

#include "core/host_memory.h"
#include "npy_builders.h"
#include "stepgraph/data.h"
#include "stepgraph/ir.h"
#include "test_errors.h"

namespace sg::test {
namespace {

// Lowers the address-space limit (ulimit -v) to what is in use now plus `headroom` for the
// guard's lifetime: the machine then has that much left, whatever it has in truth.
class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(uint64_t headroom) {
    getrlimit(RLIMIT_AS, &saved_);
    std::ifstream status("/proc/self/status");
    std::string line;
    uint64_t vm_kib = 0;
    while (std::getline(status, line))
      if (line.rfind("VmSize:", 0) == 0) vm_kib = std::stoull(line.substr(7));
    rlimit lim = saved_;
    lim.rlim_cur = (vm_kib << 10) + headroom;
    ok_ = vm_kib > 0 && setrlimit(RLIMIT_AS, &lim) == 0;
  }
  ~AddressSpaceLimit() { setrlimit(RLIMIT_AS, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST(Limits, ElementAndByteCountsThatOverflowAreErrors) {
  EXPECT_EQ(numel({1 << 20, 1 << 20}), int64_t{1} << 40);
  EXPECT_ERROR(numel({int64_t{1} << 40, int64_t{1} << 40}), "shape [1099511627776, 1099511627776]",
               "more elements than a 64-bit count can hold");
  EXPECT_ERROR(nbytes({int64_t{1} << 31, int64_t{1} << 31}, DType::U64), "of u64 has more bytes than a 64-bit size");
  EXPECT_EQ(nbytes({3, 5}, DType::F32), 60u);
}

TEST(Limits, ATensorBeyondAnyMemoryNamesItselfAndItsShape) {
  Program p;
  EXPECT_ERROR(p.add_tensor({"0.conv.weight", {16777216, 4096, 4096, 16384}, DType::F32, Role::Parameter}),
               "tensor '0.conv.weight' of shape [16777216, 4096, 4096, 16384] (f32) has more bytes than a 64-bit size "
               "can count; a tensor may hold at most 1 PiB");
  EXPECT_ERROR(p.add_tensor({"1.w", {int64_t{1} << 30, int64_t{1} << 20}, DType::F32, Role::Parameter}),
               "tensor '1.w' of shape [1073741824, 1048576] (f32) needs 4.0 PiB; a tensor may hold at most 1 PiB");
  EXPECT_EQ(p.num_tensors(), 0u);
}

TEST(Limits, LargeHostArraysAreRefusedWhenTheMemoryIsNotThere) {
  AddressSpaceLimit limit(uint64_t{512} << 20);
  ASSERT_TRUE(limit.ok());
  EXPECT_LE(host_memory_available(), uint64_t{512} << 20);
  EXPECT_ERROR(HostArray(DType::F32, {int64_t{1} << 28}), "an array of shape [268435456] needs 1.0 GiB of host memory",
               "available");
  EXPECT_ERROR(require_host_memory(uint64_t{2} << 30, "the test"), "the test needs 2.0 GiB of host memory");
  EXPECT_NO_THROW(HostArray(DType::F32, {1 << 20}));  // below the threshold: not even asked
}

TEST(Limits, HumanBytes) {
  EXPECT_EQ(human_bytes(17), "17 bytes");
  EXPECT_EQ(human_bytes(uint64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(human_bytes(uint64_t{1} << 50), "1.0 PiB");
}

TEST(Limits, NpzMembersSharingTheirBytesAreRefused) {
  const std::string dir = fresh_dir("limits", "npz_shared");
  const Bytes x = npy_bytes("<f4", "(2, 2)", raw_le<float>({1, 2, 3, 4}));
  Member alias{"copy.npy", "", 8};
  alias.alias = 0;
  const std::string path = write_file(dir, "shared.npz", build_zip({{"X.npy", x, 8}, alias}));
  EXPECT_ERROR(read_npz(path), "npz file '" + path + "': members 'X.npy' and 'copy.npy' share their bytes (from offset 0)",
               "numpy never writes such an archive");
  // The same arrays, each with its own bytes, load.
  EXPECT_EQ(read_npz(write_file(dir, "ok.npz", build_zip({{"X.npy", x, 8}, {"copy.npy", x, 8}}))).size(), 2u);
}

TEST(Limits, NpzMemberLargerThanItsDeclaredArrayIsRefusedBeforeInflating) {
  const std::string dir = fresh_dir("limits", "npz_liar");
  // A [2] array followed by 1 MiB of zeros: deflate takes ~1 KB for what claims 1 MiB.
  const Bytes liar = npy_bytes("<f4", "(2,)", raw_le<float>({1, 2})) + Bytes(size_t{1} << 20, '\0');
  const std::string path = write_file(dir, "liar.npz", build_zip({{"X.npy", liar, 8}}));
  EXPECT_ERROR(read_npz(path), "member 'X.npy': declares ", "bytes uncompressed, but its array (shape [2] of '<f4') takes ",
               "bytes with its header");
}

TEST(Limits, NpzArraysBeyondFreeMemoryAreRefusedBeforeInflating) {
  const std::string dir = fresh_dir("limits", "npz_big");
  // 64 MiB of float zeros in ~64 KB; with 32 MiB left the archive must be refused unopened.
  const Bytes big = npy_bytes("<f4", "(4096, 4096)", Bytes(size_t{64} << 20, '\0'));
  const std::string path = write_file(dir, "big.npz", build_zip({{"X.npy", big, 8}}));
  {
    AddressSpaceLimit limit(uint64_t{32} << 20);
    ASSERT_TRUE(limit.ok());
    EXPECT_ERROR(read_npz(path), "npz file '" + path + "' (1 arrays, inflated and converted) needs 128.0 MiB of host memory");
  }
  EXPECT_EQ(read_npz(path).at("X").numel(), 4096 * 4096);
}

TEST(Limits, DevicesAndFoldersAreNotReadAsFiles) {
  CsvOptions opt;
  EXPECT_ERROR(load_csv("/dev/zero", opt), "cannot read CSV file '/dev/zero': it is a device, not a file");
  EXPECT_ERROR(read_npy("/dev/zero"), "cannot read npy file '/dev/zero': it is a device");
  const std::string dir = fresh_dir("limits", "folder");
  EXPECT_ERROR(read_npz(dir), "cannot read npz file '" + dir + "': it is a directory, not a file");
}

TEST(Limits, ACsvFirstRowOfNanOrInfIsDataNotAHeader) {
  const std::string dir = fresh_dir("limits", "csv");
  CsvOptions opt;
  for (const char* first : {"nan,1,0", "inf,1,0", "1,-Infinity,0", "NaN,NaN,0"}) {
    const std::string path = write_file(dir, "nan.csv", std::string(first) + "\n1,2,1\n2,3,0\n");
    EXPECT_ERROR(load_csv(path, opt), "line 1, column ", "is not a finite number");
  }
  // A header among numbers is still a header.
  const std::string path = write_file(dir, "header.csv", "x,nan_count,label\n1,2,1\n2,3,0\n");
  EXPECT_EQ(load_csv(path, opt).size(), 2);
}

}  // namespace
}  // namespace sg::test
