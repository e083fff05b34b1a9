#include "dist/nccl_api.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "stepgraph/core.h"

#ifndef STEPGRAPH_NCCL_LIB_DIR
#define STEPGRAPH_NCCL_LIB_DIR ""
#endif

namespace sg::dist {

namespace {

struct Loaded {
  NcclApi api{};
  bool ok = false;
  std::string error;
};

const char* result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult?";
  }
}

const Loaded& load() {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names = {"libnccl.so.2"};
    if (std::strlen(STEPGRAPH_NCCL_LIB_DIR) > 0) names.push_back(std::string(STEPGRAPH_NCCL_LIB_DIR) + "/libnccl.so.2");
    void* h = nullptr;
    std::string tried;
    for (const std::string& n : names) {
      dlerror();
      h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) {
        loaded.api.library = n;
        break;
      }
      const char* e = dlerror();
      tried += cat("; ", n, ": ", e ? e : "not loadable");
    }
    if (!h) {
      loaded.error = cat("NCCL not found (libnccl.so.2): install nvidia-nccl-cu13 (PyTorch's environment has it) and set "
                         "LD_LIBRARY_PATH=$(bash scripts/nccl_lib_dir.sh) (", tried.substr(2), ")");
      return;
    }
    std::string missing;
    auto sym = [&](auto& fn, const char* name, bool required = true) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && required) missing += cat(missing.empty() ? "" : ", ", name);
    };
    NcclApi& a = loaded.api;
    sym(a.GetVersion, "ncclGetVersion");
    sym(a.GetUniqueId, "ncclGetUniqueId");
    sym(a.CommInitRank, "ncclCommInitRank");
    sym(a.CommAbort, "ncclCommAbort");
    sym(a.CommDestroy, "ncclCommDestroy");
    sym(a.CommGetAsyncError, "ncclCommGetAsyncError");
    sym(a.GetErrorString, "ncclGetErrorString");
    sym(a.GetLastError, "ncclGetLastError", false);
    sym(a.AllReduce, "ncclAllReduce");
    sym(a.AllGather, "ncclAllGather");
    sym(a.GroupStart, "ncclGroupStart");
    sym(a.GroupEnd, "ncclGroupEnd");
    if (!missing.empty()) {
      loaded.error = cat(loaded.api.library, " lacks ", missing, ": NCCL 2.10 or newer is needed");
      return;
    }
    if (a.GetVersion(&a.version) != ncclSuccess) {
      loaded.error = cat(loaded.api.library, ": ncclGetVersion failed");
      return;
    }
    // ncclAvg (the average folded into the all-reduce) came with NCCL 2.10.
    if (a.version < 21000) {
      loaded.error = cat(loaded.api.library, " is NCCL ", a.version, "; 2.10 or newer is needed (ncclAvg)");
      return;
    }
    loaded.ok = true;
  });
  return loaded;
}

}  // namespace

const NcclApi* nccl_api(std::string* why) {
  const Loaded& l = load();
  if (!l.ok) {
    if (why) *why = l.error;
    return nullptr;
  }
  return &l.api;
}

const NcclApi& nccl() {
  std::string why;
  const NcclApi* a = nccl_api(&why);
  if (!a) throw Error(why);
  return *a;
}

std::string nccl_error(const char* call, ncclResult_t r, ncclComm_t comm) {
  const NcclApi* a = nccl_api(nullptr);
  std::string msg = cat(call, " failed: ", a ? a->GetErrorString(r) : "?", " (", result_name(r), ")");
  if (a && a->GetLastError) {
    const char* last = a->GetLastError(comm);
    if (last && *last) msg += cat("; NCCL says: ", last);
  }
  if (r == ncclSystemError || r == ncclRemoteError)
    msg += " (a peer rank may have failed; NCCL_DEBUG=WARN prints NCCL's own diagnosis)";
  return msg;
}

}  // namespace sg::dist
