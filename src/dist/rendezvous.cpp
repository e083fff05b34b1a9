// The TCP rendezvous that hands rank 0's NCCL unique id to every other rank (torchrun-style
// launches, and mpirun when Open MPI's library does not load; with it, mpi_bootstrap.cpp's
// MPI_Bcast). Plain POSIX sockets, IPv4, every wait bounded.
//   rank r > 0 -> rank 0:  "SGRV0001" | rank (u32, network order) | world size (u32)
//   rank 0 -> rank r:      payload length (u32) | payload
// Rank 0 answers only once every rank has connected, so returning is also a barrier.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "stepgraph/distributed.h"

namespace sg::dist {

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'S', 'G', 'R', 'V', '0', '0', '0', '1'};

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Sends or receives exactly n bytes before the deadline; an empty string on success, else why.
std::string send_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, deadline)) return "timed out sending";
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::strerror(errno);
    }
    p += k, n -= static_cast<size_t>(k);
  }
  return "";
}
std::string recv_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline)) return "timed out waiting for data";
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k == 0) return "the connection was closed";
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::strerror(errno);
    }
    p += k, n -= static_cast<size_t>(k);
  }
  return "";
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

std::string where(const World& w) { return cat(w.master_addr, ":", w.master_port); }

std::string serve(const World& w, const std::string& payload, double timeout_s, Clock::time_point deadline) {
  Fd ls(::socket(AF_INET, SOCK_STREAM, 0));
  SG_REQUIRE(ls.fd >= 0, "rendezvous: rank 0 cannot create a socket: ", std::strerror(errno));
  const int one = 1;
  ::setsockopt(ls.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(w.master_port));
  SG_REQUIRE(::bind(ls.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "rendezvous: rank 0 cannot listen on port ",
             w.master_port, " (MASTER_PORT): ", std::strerror(errno),
             errno == EADDRINUSE ? "; another job uses it: choose another MASTER_PORT" : "");
  SG_REQUIRE(::listen(ls.fd, 128) == 0, "rendezvous: rank 0: listen on port ", w.master_port, ": ", std::strerror(errno));
  set_nonblocking(ls.fd);

  std::vector<Fd> peers(static_cast<size_t>(w.size));
  int joined = 1;
  while (joined < w.size) {
    if (!wait_fd(ls.fd, POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < w.size; ++r)
        if (peers[r].fd < 0) missing += cat(missing.empty() ? "" : ", ", r);
      throw Error(cat("rendezvous: rank 0 waited ", timeout_s, " s on port ", w.master_port, " for ", w.size - 1,
                      " other ranks; rank", w.size - joined > 1 ? "s " : " ", missing,
                      " never connected (did they start, with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE=", w.size,
                      "?)"));
    }
    Fd c(::accept(ls.fd, nullptr, nullptr));
    if (c.fd < 0) continue;  // EAGAIN after a spurious wake-up, or the peer gave up
    set_nonblocking(c.fd);
    char hello[16];
    // A stray connection (a port scanner, another job) must not stall or break the job: short wait.
    const std::string why = recv_all(c.fd, hello, sizeof(hello), std::min(deadline, Clock::now() + std::chrono::seconds(10)));
    if (!why.empty() || std::memcmp(hello, kMagic, 8) != 0) continue;
    uint32_t r = 0, size = 0;
    std::memcpy(&r, hello + 8, 4);
    std::memcpy(&size, hello + 12, 4);
    r = ntohl(r), size = ntohl(size);
    SG_REQUIRE(static_cast<int>(size) == w.size, "rendezvous: rank ", r, " says the world has ", size,
               " ranks, rank 0 says ", w.size, " (WORLD_SIZE differs between ranks)");
    SG_REQUIRE(r >= 1 && static_cast<int>(r) < w.size, "rendezvous: a process connected as rank ", r,
               ", outside [1, ", w.size - 1, "]");
    SG_REQUIRE(peers[r].fd < 0, "rendezvous: two processes connected as rank ", r, " (RANK must differ per process)");
    peers[r] = std::move(c);
    ++joined;
  }
  const uint32_t len = htonl(static_cast<uint32_t>(payload.size()));
  for (int r = 1; r < w.size; ++r) {
    std::string why = send_all(peers[r].fd, &len, 4, deadline);
    if (why.empty()) why = send_all(peers[r].fd, payload.data(), payload.size(), deadline);
    SG_REQUIRE(why.empty(), "rendezvous: rank 0 could not send the NCCL id to rank ", r, ": ", why);
  }
  return payload;
}

std::string join(const World& w, double timeout_s, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(w.master_addr.c_str(), std::to_string(w.master_port).c_str(), &hints, &res);
  SG_REQUIRE(gai == 0 && res, "rendezvous: rank ", w.rank, " cannot resolve MASTER_ADDR '", w.master_addr, "': ",
             ::gai_strerror(gai));
  sockaddr_in addr{};
  std::memcpy(&addr, res->ai_addr, sizeof(addr));
  ::freeaddrinfo(res);

  std::string last = "no attempt";
  for (;;) {  // rank 0 may start later: retry until the deadline
    if (Clock::now() >= deadline)
      throw Error(cat("rendezvous: rank ", w.rank, " could not reach rank 0 at ", where(w), " within ", timeout_s,
                      " s (last error: ", last, "); is rank 0 running, with the same MASTER_ADDR/MASTER_PORT?"));
    Fd s(::socket(AF_INET, SOCK_STREAM, 0));
    SG_REQUIRE(s.fd >= 0, "rendezvous: rank ", w.rank, " cannot create a socket: ", std::strerror(errno));
    set_nonblocking(s.fd);
    int rc = ::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno == EINPROGRESS) {
      const auto attempt = std::min(deadline, Clock::now() + std::chrono::seconds(5));
      if (!wait_fd(s.fd, POLLOUT, attempt)) {
        last = "connect timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = std::strerror(errno);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
      continue;
    }
    char hello[16];
    std::memcpy(hello, kMagic, 8);
    const uint32_t r = htonl(static_cast<uint32_t>(w.rank)), n = htonl(static_cast<uint32_t>(w.size));
    std::memcpy(hello + 8, &r, 4);
    std::memcpy(hello + 12, &n, 4);
    std::string why = send_all(s.fd, hello, sizeof(hello), deadline);
    uint32_t len = 0;
    if (why.empty()) why = recv_all(s.fd, &len, 4, deadline);
    std::string payload;
    if (why.empty()) {
      len = ntohl(len);
      SG_REQUIRE(len <= (1u << 20), "rendezvous: rank ", w.rank, ": rank 0 at ", where(w), " sent a ", len,
                 "-byte id (not a stepgraph rendezvous?)");
      payload.resize(len);
      why = recv_all(s.fd, payload.data(), len, deadline);
    }
    if (why.empty()) return payload;
    if (why == "timed out waiting for data")
      throw Error(cat("rendezvous: rank ", w.rank, " reached rank 0 at ", where(w), " but got no NCCL id within ",
                      timeout_s, " s: some other rank never connected (rank 0 names it)"));
    throw Error(cat("rendezvous: rank ", w.rank, ": the connection to rank 0 at ", where(w), " failed: ", why));
  }
}

}  // namespace

std::string rendezvous(const World& w, const std::string& payload, double timeout_s) {
  SG_REQUIRE(timeout_s > 0, "rendezvous: the timeout must be positive, got ", timeout_s, " s");
  SG_REQUIRE(w.size >= 1 && w.rank >= 0 && w.rank < w.size, "rendezvous: rank ", w.rank, " of a world of ", w.size);
  if (w.size == 1) return payload;
  if (rendezvous_method(w) == "mpi") return mpi_broadcast(w, payload);
  SG_REQUIRE(!w.master_addr.empty() && w.master_port > 0 && w.master_port < 65536, "rendezvous: rank ", w.rank,
             " of ", w.size, " needs MASTER_ADDR and MASTER_PORT (got '", w.master_addr, "':", w.master_port, ")");
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  return w.rank == 0 ? serve(w, payload, timeout_s, deadline) : join(w, timeout_s, deadline);
}

std::string rendezvous_method(const World& w) {
  if (w.size == 1) return "none";
  return w.launcher == "mpirun" && mpi_bootstrap_available() ? "mpi" : "tcp";
}

}  // namespace sg::dist
