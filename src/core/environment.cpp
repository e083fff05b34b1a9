#include "core/environment.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "stepgraph/core.h"

extern char** environ;

namespace sg::env {

const std::vector<std::string>& documented() {
  static const std::vector<std::string> names = {
      // The cuDNN plan cache's folder (plan_cache.h): SG_PLAN_CACHE, else under XDG_CACHE_HOME
      // or HOME.
      "SG_PLAN_CACHE", "XDG_CACHE_HOME", "HOME",
      // Distributed runs (distributed.h): the launchers' rank variables, the collectives'
      // deadline, forcing the NCCL path, the MPI bootstrap, NCCL's NVLink SHARP switch.
      "WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE",
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SG_DIST_TIMEOUT", "SG_DISTRIBUTED",
      "SG_MPI_BOOTSTRAP", "NCCL_NVLS_ENABLE",
      // Which CUDA runtime the cuDNN frontend loads (cudnn_conv.cpp).
      "CUDNN_FRONTEND_CUDART_LIB_NAME",
  };
  return names;
}

namespace {
void require_documented(const char* name) {
  const auto& d = documented();
  SG_REQUIRE(name && std::find(d.begin(), d.end(), name) != d.end(), "internal error: environment variable '",
             name ? name : "(null)", "' is not one the library documents (src/core/environment.cpp)");
}
}  // namespace

const char* get(const char* name) {
  require_documented(name);
  return std::getenv(name);
}

void set_default(const char* name, const char* value) {
  require_documented(name);
  setenv(name, value, 0);
}

std::vector<std::string> snapshot() {
  std::vector<std::string> all;
  for (char** e = environ; e && *e; ++e) all.emplace_back(*e);
  return all;
}

}  // namespace sg::env
