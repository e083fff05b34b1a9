// `stepgraph launch`: N processes of a command on this host, one per GPU, with torchrun's
// environment; their output gathered line by line; one failing rank stops the others.
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "stepgraph/distributed.h"

#include "core/environment.h"

namespace sg::dist {

std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& o, int rank, int port,
                                                                  const char* inherited_nvls) {
  SG_REQUIRE(o.nprocs >= 1, "launch: --gpus must be at least 1, got ", o.nprocs);
  SG_REQUIRE(rank >= 0 && rank < o.nprocs, "launch: rank ", rank, " of ", o.nprocs);
  SG_REQUIRE(port > 0 && port < 65536, "launch: port ", port, " is outside [1, 65535]");
  std::vector<std::pair<std::string, std::string>> env = {
      {"RANK", std::to_string(rank)},          {"WORLD_SIZE", std::to_string(o.nprocs)},
      {"LOCAL_RANK", std::to_string(rank)},    {"LOCAL_WORLD_SIZE", std::to_string(o.nprocs)},
      {"MASTER_ADDR", o.master_addr},          {"MASTER_PORT", std::to_string(port)}};
  // NVLink multicast stays off on the shared GPU machines unless the user chose otherwise.
  env.emplace_back("NCCL_NVLS_ENABLE", inherited_nvls ? inherited_nvls : "0");
  return env;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  SG_REQUIRE(fd >= 0, "launch: cannot create a socket to find a free port: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;  // the kernel picks one
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int err = errno;
  ::close(fd);
  SG_REQUIRE(ok, "launch: cannot find a free port: ", std::strerror(err));
  return ntohs(a.sin_port);
}

namespace {

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;        // read ends of the child's stdout and stderr
  std::string out_buf, err_buf;  // an unfinished line of each
  bool running = true;
  int status = 0;                // exit status, or 128 + signal
};

// Writes the complete lines of `buf` (all of it when `flush`), prefixed for ranks > 0.
void emit(std::string& buf, int rank, std::ostream& os, bool flush) {
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (rank > 0) os << "[rank " << rank << "] ";
    os.write(buf.data() + start, static_cast<std::streamsize>(nl + 1 - start));
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    if (rank > 0) os << "[rank " << rank << "] ";
    os << buf << "\n";
    buf.clear();
  }
  os.flush();
}

}  // namespace

int launch_local(const LaunchOptions& o, const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  SG_REQUIRE(o.nprocs >= 1, "launch: --gpus must be at least 1, got ", o.nprocs);
  SG_REQUIRE(!argv.empty() && !argv[0].empty(), "launch: no command to run");
  SG_REQUIRE(o.master_port >= 0 && o.master_port < 65536, "launch: --master-port ", o.master_port,
             " is outside [1, 65535]");
  const int port = o.master_port ? o.master_port : free_port();
  const char* nvls = env::get("NCCL_NVLS_ENABLE");

  const std::vector<std::string> inherited = env::snapshot();

  std::vector<Child> kids(static_cast<size_t>(o.nprocs));
  auto stop_all = [&](int sig) {
    for (Child& k : kids)
      if (k.running && k.pid > 0) ::kill(k.pid, sig);
  };
  for (int r = 0; r < o.nprocs; ++r) {
    // Everything the child needs is built before fork (only async-signal-safe calls after it).
    std::vector<std::string> env_strings;
    const auto mine = rank_environment(o, r, port, nvls);
    for (const std::string& kv : inherited) {
      const std::string key = kv.substr(0, kv.find('='));
      bool ours = false;
      for (const auto& [k, v] : mine) ours = ours || k == key;
      if (!ours) env_strings.push_back(kv);
    }
    for (const auto& [k, v] : mine) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (std::string& s : argv_copy) args.push_back(s.data());
    args.push_back(nullptr);

    int po[2], pe[2];
    if (::pipe(po) != 0 || ::pipe(pe) != 0) {
      stop_all(SIGKILL);
      throw Error(cat("launch: pipe: ", std::strerror(errno)));
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      stop_all(SIGKILL);
      throw Error(cat("launch: cannot start rank ", r, ": fork: ", std::strerror(errno)));
    }
    if (pid == 0) {
      ::dup2(po[1], 1);
      ::dup2(pe[1], 2);
      ::close(po[0]), ::close(po[1]), ::close(pe[0]), ::close(pe[1]);
      ::execve(args[0], args.data(), envp.data());
      const char* msg = "launch: cannot execute the command: ";
      (void)!::write(2, msg, std::strlen(msg));
      const char* why = std::strerror(errno);
      (void)!::write(2, why, std::strlen(why));
      (void)!::write(2, "\n", 1);
      ::_exit(127);
    }
    ::close(po[1]), ::close(pe[1]);
    kids[r].pid = pid, kids[r].out = po[0], kids[r].err = pe[0];
  }

  using Clock = std::chrono::steady_clock;
  int failed_rank = -1, failed_status = 0;
  Clock::time_point kill_at{};
  bool killed = false;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<int, bool>> who;  // rank, is stderr
    for (int r = 0; r < o.nprocs; ++r) {
      if (kids[r].out >= 0) fds.push_back({kids[r].out, POLLIN, 0}), who.emplace_back(r, false);
      if (kids[r].err >= 0) fds.push_back({kids[r].err, POLLIN, 0}), who.emplace_back(r, true);
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& k = kids[who[i].first];
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      std::string& b = who[i].second ? k.err_buf : k.out_buf;
      std::ostream& os = who[i].second ? err : out;
      if (n > 0) {
        b.append(buf, static_cast<size_t>(n));
        emit(b, who[i].first, os, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit(b, who[i].first, os, true);
        ::close(fds[i].fd);
        (who[i].second ? k.err : k.out) = -1;
      }
    }
    bool any_running = false;
    for (int r = 0; r < o.nprocs; ++r) {
      Child& k = kids[r];
      if (!k.running) continue;
      int st = 0;
      const pid_t w = ::waitpid(k.pid, &st, WNOHANG);
      if (w == k.pid) {
        k.running = false;
        k.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (k.status != 0 && failed_rank < 0) {
          failed_rank = r, failed_status = k.status;
          err << "launch: rank " << r << " "
              << (WIFSIGNALED(st) ? cat("was killed by signal ", WTERMSIG(st)) : cat("exited with status ", k.status))
              << (o.nprocs > 1 ? "; stopping the other ranks" : "") << "\n";
          err.flush();
          stop_all(SIGTERM);
          kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.kill_grace_s));
        }
      } else {
        any_running = true;
      }
    }
    if (failed_rank >= 0 && !killed && any_running && Clock::now() >= kill_at) {
      stop_all(SIGKILL);
      killed = true;
    }
    bool pipes_open = false;
    for (const Child& k : kids) pipes_open = pipes_open || k.out >= 0 || k.err >= 0;
    // Output still open after every process exited belongs to a grandchild: not waited for.
    if (!any_running && (!pipes_open || failed_rank >= 0)) break;
    if (!any_running) {
      bool readable = false;
      for (const pollfd& f : fds) readable = readable || f.revents;
      if (!readable) break;
    }
  }
  // What the processes wrote before they exited and was not read yet (their last error lines):
  // read without blocking (a grandchild may still hold a pipe open), then flush.
  for (int r = 0; r < o.nprocs; ++r) {
    Child& k = kids[r];
    for (int* fd : {&k.out, &k.err}) {
      if (*fd < 0) continue;
      std::string& b = fd == &k.out ? k.out_buf : k.err_buf;
      for (;;) {
        pollfd p{*fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP))) break;
        char buf[4096];
        const ssize_t n = ::read(*fd, buf, sizeof(buf));
        if (n <= 0) break;
        b.append(buf, static_cast<size_t>(n));
      }
      emit(b, r, fd == &k.out ? out : err, true);
      ::close(*fd);
      *fd = -1;
    }
  }
  if (failed_rank >= 0) {
    err << "launch: failed: rank " << failed_rank << " (status " << failed_status << ") of " << o.nprocs << "\n";
    return failed_status;
  }
  return 0;
}

}  // namespace sg::dist
