#include "stepgraph/distributed.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "core/environment.h"

namespace sg::dist {

namespace {

// An integer environment variable in [lo, hi]; `fallback` when unset.
int env_int(const std::function<const char*(const char*)>& get, const char* name, int fallback, int lo, int hi) {
  const char* v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  SG_REQUIRE(*v != '\0' && end && *end == '\0' && errno == 0, "environment: ", name, "='", v,
             "' is not an integer");
  SG_REQUIRE(x >= lo && x <= hi, "environment: ", name, "=", x, " is outside [", lo, ", ", hi, "]");
  return static_cast<int>(x);
}

}  // namespace

World world_from_env(const std::function<const char*(const char*)>& get_in) {
  const std::function<const char*(const char*)> get =
      get_in ? get_in : [](const char* n) -> const char* { return env::get(n); };
  constexpr int kMax = std::numeric_limits<int>::max();
  World w;
  if (get("WORLD_SIZE") || get("RANK")) {
    w.launcher = "torchrun";
    SG_REQUIRE(get("WORLD_SIZE") && get("RANK"), "environment: RANK and WORLD_SIZE go together (got only ",
               get("RANK") ? "RANK" : "WORLD_SIZE", ")");
    w.size = env_int(get, "WORLD_SIZE", 1, 1, kMax);
    w.rank = env_int(get, "RANK", 0, 0, w.size - 1);
    w.local_rank = env_int(get, "LOCAL_RANK", w.rank, 0, kMax);
    if (w.size > 1) {
      const char* addr = get("MASTER_ADDR");
      SG_REQUIRE(addr && *addr, "environment: WORLD_SIZE=", w.size, " needs MASTER_ADDR (the rank-0 host)");
      w.master_addr = addr;
      SG_REQUIRE(get("MASTER_PORT"), "environment: WORLD_SIZE=", w.size, " needs MASTER_PORT");
      w.master_port = env_int(get, "MASTER_PORT", 0, 1, 65535);
    }
    return w;
  }
  if (get("OMPI_COMM_WORLD_SIZE") || get("OMPI_COMM_WORLD_RANK")) {
    w.launcher = "mpirun";
    w.size = env_int(get, "OMPI_COMM_WORLD_SIZE", 1, 1, kMax);
    w.rank = env_int(get, "OMPI_COMM_WORLD_RANK", 0, 0, w.size - 1);
    w.local_rank = env_int(get, "OMPI_COMM_WORLD_LOCAL_RANK", w.rank, 0, kMax);
    if (w.size > 1) {  // MPI_Bcast hands out the id (mpi_bootstrap.cpp); without libmpi, TCP here:
      const char* addr = get("MASTER_ADDR");
      w.master_addr = addr && *addr ? addr : "127.0.0.1";
      w.master_port = env_int(get, "MASTER_PORT", 29500, 1, 65535);
    }
    return w;
  }
  return w;
}

Shard shard_of(int64_t per_rank_batch, const World& w) {
  SG_REQUIRE(per_rank_batch > 0, "sharding: the per-rank batch must be positive, got ", per_rank_batch);
  SG_REQUIRE(w.size >= 1 && w.rank >= 0 && w.rank < w.size, "sharding: rank ", w.rank, " of a world of ", w.size);
  Shard s;
  s.global_batch = per_rank_batch * w.size;
  s.begin = per_rank_batch * w.rank;
  s.end = s.begin + per_rank_batch;
  return s;
}

std::vector<Bucket> plan_buckets(const Program& p, int64_t bucket_bytes) {
  SG_REQUIRE(bucket_bytes > 0, "gradient buckets: the bucket size must be positive, got ", bucket_bytes, " bytes");
  // The last op that writes each gradient (an accumulated gradient is finished by its last write).
  std::vector<int> last(p.num_tensors(), -1);
  for (size_t i = 0; i < p.ops().size(); ++i)
    for (TensorId t : p.ops()[i].out)
      if (t != kNone) last[static_cast<size_t>(t)] = static_cast<int>(i);
  std::vector<TensorId> grads;
  for (size_t t = 0; t < p.num_tensors(); ++t)
    if (p.tensor(static_cast<TensorId>(t)).role == Role::Gradient) {
      SG_REQUIRE(last[t] >= 0, "gradient buckets: gradient '", p.tensor(static_cast<TensorId>(t)).name,
                 "' is written by no op");
      grads.push_back(static_cast<TensorId>(t));
    }
  std::stable_sort(grads.begin(), grads.end(), [&](TensorId a, TensorId b) {
    return last[static_cast<size_t>(a)] < last[static_cast<size_t>(b)];
  });
  std::vector<Bucket> out;
  Bucket cur;
  for (TensorId g : grads) {
    const TensorInfo& t = p.tensor(g);
    cur.grads.push_back(g);
    cur.bytes += numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
    cur.ready_after_op = std::max(cur.ready_after_op, last[static_cast<size_t>(g)]);
    if (cur.bytes >= bucket_bytes) {
      out.push_back(std::move(cur));
      cur = Bucket{};
    }
  }
  if (!cur.grads.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace sg::dist
