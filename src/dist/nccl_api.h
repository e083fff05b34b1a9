// libnccl.so.2, loaded at run time (dlopen): the build needs only nccl.h, and a machine without
// NCCL fails with a message that says so when data-parallel training starts, not at startup.
// Only src/dist/ includes this (nccl.h pulls in the CUDA runtime).
#pragma once

#include <nccl.h>

#include <string>

namespace sg::dist {

struct NcclApi {
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t);  // may be null (older NCCL)
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  int version = 0;        // ncclGetVersion: 22803 for 2.28.3
  std::string library;    // the file that was loaded
};

// Loads the library once (by name through the loader's search path, LD_LIBRARY_PATH included,
// then where CMake saw it). Null with *why set when it cannot be loaded or lacks a function.
const NcclApi* nccl_api(std::string* why);
// The same, or an Error saying why NCCL is unusable.
const NcclApi& nccl();

// "ncclAllReduce failed: unhandled system error (ncclSystemError); <NCCL's last error>"
std::string nccl_error(const char* call, ncclResult_t r, ncclComm_t comm = nullptr);

}  // namespace sg::dist

#define NCCL_CHECK(call, ...)                                                              \
  do {                                                                                     \
    ncclResult_t sg_r_ = ::sg::dist::nccl().call(__VA_ARGS__);                             \
    if (sg_r_ != ncclSuccess) throw ::sg::Error(::sg::dist::nccl_error("nccl" #call, sg_r_)); \
  } while (0)
