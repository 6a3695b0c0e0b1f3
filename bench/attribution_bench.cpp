// Per-connection cost of attribution (docs/audit-log.md: the audit record's pid and exe;
// docs/policy.md: who the "programs" are judged against): the client socket's inode through
// NETLINK_SOCK_DIAG, the whole find_socket_holders with it (inode, then every descriptor of the
// candidate tree), and the same with the /proc/net/tcp read it replaces. The candidate root is a
// forked "init" holding descriptors 0-2, as wrap's is; the connection is held by init itself (depth
// 0), its child (depth 1, the command) or a grandchild (depth 2, a shell's command).
//
//   cmake -S . -B build-bench -G Ninja -DBROKER_BENCH=ON -DBROKER_TESTS=OFF
//   cmake --build build-bench -j2 --target attribution_bench
//   build-bench/bench/attribution_bench
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "capture/attribution.hpp"
#include "capture/sock_diag.hpp"

namespace {

using namespace broker;

std::uint16_t port_of(int fd, bool peer) {
  sockaddr_in address{};
  socklen_t size = sizeof address;
  auto* a = reinterpret_cast<sockaddr*>(&address);
  (peer ? getpeername(fd, a, &size) : getsockname(fd, a, &size));
  return ntohs(address.sin_port);
}

// A loopback connection whose client end lives `depth` generations below a forked "init" that
// keeps only descriptors 0-2 (as wrap's does); every process waits until the connection is
// destroyed. `root` is init's pid.
class held_connection {
 public:
  explicit held_connection(int depth) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        listen(listener_, 8) != 0)
      std::abort();
    address.sin_port = htons(port_of(listener_, false));
    int release[2];
    if (pipe2(release, O_CLOEXEC) != 0) std::abort();
    root = fork();
    if (root == 0) {
      for (int fd = 3; fd < 1024; ++fd)
        if (fd != release[0]) close(fd);
      for (int level = 0; level < depth; ++level) {
        const pid_t below = fork();
        if (below != 0) {  // wait for release, then for the one below
          char byte;
          (void)!read(release[0], &byte, 1);
          waitpid(below, nullptr, 0);
          _exit(0);
        }
      }
      const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) _exit(1);
      char byte;
      (void)!read(release[0], &byte, 1);
      _exit(0);
    }
    close(release[0]);
    release_ = release[1];
    pollfd p{listener_, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) std::abort();
    accepted_ = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    client_port = port_of(accepted_, true);
    server_port = port_of(accepted_, false);
  }
  ~held_connection() {
    close(release_);
    waitpid(root, nullptr, 0);
    close(accepted_);
    close(listener_);
  }
  pid_t root = -1;
  std::uint16_t client_port = 0, server_port = 0;

 private:
  int listener_ = -1, accepted_ = -1, release_ = -1;
};

const capture::ip_bytes loopback = *capture::detail::parse_ip("127.0.0.1");

void BM_sock_diag_inode(benchmark::State& state) {
  held_connection c(1);
  auto diag = capture::sock_diag::open();
  if (!diag) return state.SkipWithError("no NETLINK_SOCK_DIAG socket");
  for (auto _ : state) {
    auto entry = diag->find(loopback, c.client_port, loopback, c.server_port);
    if (!entry) return state.SkipWithError("not found");
    benchmark::DoNotOptimize(entry);
  }
}
BENCHMARK(BM_sock_diag_inode)->Unit(benchmark::kMicrosecond);

void attribute(benchmark::State& state, capture::sock_diag* diag) {
  held_connection c(static_cast<int>(state.range(0)));
  const std::vector<int> candidates{c.root};
  for (auto _ : state) {
    auto holders = capture::find_socket_holders("127.0.0.1", c.client_port, "127.0.0.1",
                                                c.server_port, 0, candidates, diag);
    if (!holders) return state.SkipWithError("not attributed");
    benchmark::DoNotOptimize(holders);
  }
}

void BM_find_socket_holders_sock_diag(benchmark::State& state) {
  auto diag = capture::sock_diag::open();
  if (!diag) return state.SkipWithError("no NETLINK_SOCK_DIAG socket");
  attribute(state, diag.get());
}
BENCHMARK(BM_find_socket_holders_sock_diag)
    ->ArgName("depth")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond);

void BM_find_socket_holders_proc_net_tcp(benchmark::State& state) {
  attribute(state, nullptr);
}
BENCHMARK(BM_find_socket_holders_proc_net_tcp)
    ->ArgName("depth")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
