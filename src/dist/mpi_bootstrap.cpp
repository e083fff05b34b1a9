// NCCL's unique id through MPI under Open MPI's mpirun: rank 0's bytes reach every rank by
// MPI_Bcast over MPI_COMM_WORLD, as NCCL's own examples bootstrap. libmpi.so.40 is loaded at run
// time (stepgraph links no MPI, so one binary serves torchrun-style launches and machines without
// MPI), through the Open MPI ABI: MPI_COMM_WORLD and MPI_BYTE are the addresses of the library's
// predefined objects ompi_mpi_comm_world and ompi_mpi_byte. MPI lives only for the broadcast:
// initialized (unless the program already did), used, finalized.
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

#include "stepgraph/distributed.h"

#include "core/environment.h"

namespace sg::dist {

namespace {

using MpiHandle = void*;  // Open MPI: MPI_Comm and MPI_Datatype are pointers
struct MpiApi {
  int (*Initialized)(int*) = nullptr;
  int (*Finalized)(int*) = nullptr;
  int (*Init)(int*, char***) = nullptr;
  int (*Finalize)() = nullptr;
  int (*Comm_rank)(MpiHandle, int*) = nullptr;
  int (*Comm_size)(MpiHandle, int*) = nullptr;
  int (*Bcast)(void*, int, MpiHandle, int, MpiHandle) = nullptr;
  MpiHandle comm_world = nullptr, byte = nullptr;
  std::string error;  // why it is unusable ("" when loaded)
};

const MpiApi& mpi() {
  static MpiApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    // RTLD_GLOBAL: Open MPI's components (dlopen'ed plugins) resolve libmpi's symbols globally.
    void* h = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      api.error = cat("Open MPI's libmpi.so.40 does not load (", e ? e : "?", "); install openmpi-bin");
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p && api.error.empty()) api.error = cat("libmpi.so.40 has no ", name, " (not Open MPI 4 or 5?)");
      return p;
    };
    api.Initialized = reinterpret_cast<int (*)(int*)>(sym("MPI_Initialized"));
    api.Finalized = reinterpret_cast<int (*)(int*)>(sym("MPI_Finalized"));
    api.Init = reinterpret_cast<int (*)(int*, char***)>(sym("MPI_Init"));
    api.Finalize = reinterpret_cast<int (*)()>(sym("MPI_Finalize"));
    api.Comm_rank = reinterpret_cast<int (*)(MpiHandle, int*)>(sym("MPI_Comm_rank"));
    api.Comm_size = reinterpret_cast<int (*)(MpiHandle, int*)>(sym("MPI_Comm_size"));
    api.Bcast = reinterpret_cast<int (*)(void*, int, MpiHandle, int, MpiHandle)>(sym("MPI_Bcast"));
    api.comm_world = sym("ompi_mpi_comm_world");
    api.byte = sym("ompi_mpi_byte");
  });
  return api;
}

void mpi_check(int rc, const char* call, const World& w) {
  SG_REQUIRE(rc == 0, "MPI bootstrap: rank ", w.rank, ": ", call, " failed with MPI error ", rc);
}

}  // namespace

bool mpi_bootstrap_available(std::string* why) {
  const char* off = env::get("SG_MPI_BOOTSTRAP");
  if (off && std::string(off) == "0") {
    if (why) *why = "SG_MPI_BOOTSTRAP=0";
    return false;
  }
  const MpiApi& api = mpi();
  if (!api.error.empty() && why) *why = api.error;
  return api.error.empty();
}

std::string mpi_broadcast(const World& w, const std::string& payload) {
  const MpiApi& api = mpi();
  SG_REQUIRE(api.error.empty(), "MPI bootstrap: ", api.error);
  int initialized = 0, finalized = 0;
  mpi_check(api.Initialized(&initialized), "MPI_Initialized", w);
  mpi_check(api.Finalized(&finalized), "MPI_Finalized", w);
  SG_REQUIRE(!finalized, "MPI bootstrap: rank ", w.rank, ": MPI was already finalized in this process");
  if (!initialized) mpi_check(api.Init(nullptr, nullptr), "MPI_Init", w);
  int rank = -1, size = 0;
  mpi_check(api.Comm_rank(api.comm_world, &rank), "MPI_Comm_rank", w);
  mpi_check(api.Comm_size(api.comm_world, &size), "MPI_Comm_size", w);
  SG_REQUIRE(rank == w.rank && size == w.size, "MPI bootstrap: MPI says rank ", rank, " of ", size,
             ", the environment (OMPI_COMM_WORLD_RANK/SIZE) rank ", w.rank, " of ", w.size);
  // The length first (only rank 0 knows it), then the bytes.
  uint64_t n = w.rank == 0 ? payload.size() : 0;
  mpi_check(api.Bcast(&n, static_cast<int>(sizeof n), api.byte, 0, api.comm_world), "MPI_Bcast (length)", w);
  SG_REQUIRE(n <= (1u << 20), "MPI bootstrap: rank ", w.rank, ": a ", n, "-byte payload (at most 1 MiB)");
  std::string got = w.rank == 0 ? payload : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) mpi_check(api.Bcast(got.data(), static_cast<int>(n), api.byte, 0, api.comm_world), "MPI_Bcast", w);
  if (!initialized) mpi_check(api.Finalize(), "MPI_Finalize", w);
  return got;
}

}  // namespace sg::dist
