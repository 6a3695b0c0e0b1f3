#include "proxy/attribution.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <utility>

using namespace broker::proxy;

namespace {

struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f = -1) : fd(f) {}
  fd_guard(fd_guard&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  ~fd_guard() { reset(); }
  void reset() {
    if (fd >= 0) close(std::exchange(fd, -1));
  }
};

struct endpoint {
  std::string ip;
  std::uint16_t port = 0;
};

endpoint name_of(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len);
  const auto& sin = reinterpret_cast<const sockaddr_in&>(ss);
  const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(ss);
  const bool v4 = ss.ss_family == AF_INET;
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(ss.ss_family, v4 ? static_cast<const void*>(&sin.sin_addr) : &sin6.sin6_addr, text,
            sizeof text);
  return {text, ntohs(v4 ? sin.sin_port : sin6.sin6_port)};
}

// A socket of `family` listening on (or connected to) ip:port; -1 on failure. IPv6 sockets are
// dual-stack, so they can use v4-mapped addresses.
int make_socket(int family, const char* ip, std::uint16_t port, bool listen_on_it) {
  sockaddr_in sin{};
  sockaddr_in6 sin6{};
  sin.sin_family = AF_INET;
  sin6.sin6_family = AF_INET6;
  sin.sin_port = sin6.sin6_port = htons(port);
  const bool v4 = family == AF_INET;
  if (inet_pton(family, ip, v4 ? static_cast<void*>(&sin.sin_addr) : &sin6.sin6_addr) != 1) {
    return -1;
  }
  auto* sa = v4 ? reinterpret_cast<sockaddr*>(&sin) : reinterpret_cast<sockaddr*>(&sin6);
  const socklen_t len = v4 ? sizeof sin : sizeof sin6;
  fd_guard s(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int off = 0;
  if (!v4) setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  const bool ok =
      listen_on_it ? bind(s.fd, sa, len) == 0 && listen(s.fd, 8) == 0 : connect(s.fd, sa, len) == 0;
  return ok ? std::exchange(s.fd, -1) : -1;
}

int accept_within(int listener, int timeout_ms) {
  pollfd p{listener, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return -1;
  return accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

// A loopback connection; client/server are the ends as the proxy sees them (accepted socket's
// peer and local names).
struct connection {
  fd_guard listener, client, accepted;
  endpoint client_end, server_end;
};

std::optional<connection> open_connection(int listen_family, const char* listen_ip,
                                          int client_family, const char* connect_ip) {
  connection c;
  c.listener.fd = make_socket(listen_family, listen_ip, 0, true);
  if (c.listener.fd < 0) return std::nullopt;
  const std::uint16_t port = name_of(c.listener.fd, false).port;
  c.client.fd = make_socket(client_family, connect_ip, port, false);
  if (c.client.fd < 0) return std::nullopt;
  c.accepted.fd = accept_within(c.listener.fd, 5000);
  if (c.accepted.fd < 0) return std::nullopt;
  c.client_end = name_of(c.accepted.fd, true);
  c.server_end = name_of(c.accepted.fd, false);
  return c;
}

std::optional<socket_owner> owner_of(const connection& c, int netns_pid = 0,
                                     const std::vector<int>& candidates = {}) {
  return find_socket_owner(c.client_end.ip, c.client_end.port, c.server_end.ip, c.server_end.port,
                           netns_pid, candidates);
}

// A forked child that runs `body`, then waits until released. The test process has one thread,
// so the child may allocate.
struct child_process {
  pid_t pid = -1;
  fd_guard release;
  template <typename F>
  explicit child_process(F body) {
    int p[2];
    REQUIRE(pipe2(p, O_CLOEXEC) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(p[1]);
      body();
      char byte;
      (void)!read(p[0], &byte, 1);  // returns 0 once the parent closes its end
      _exit(0);
    }
    close(p[0]);
    release.fd = p[1];
  }
  ~child_process() {
    release.reset();
    waitpid(pid, nullptr, 0);
  }
};

}  // namespace

TEST_CASE("an IPv4 loopback client is attributed to this process", "[attribution]") {
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  const auto owner = owner_of(*c);
  REQUIRE(owner);
  CHECK(owner->pid == getpid());
  CHECK(owner->exe == std::filesystem::read_symlink("/proc/self/exe").string());
  CHECK(owner_of(*c, 0, {getpid()})->pid == getpid());
  CHECK(owner_of(*c, getpid(), {})->pid == getpid());  // our own netns, named by a pid
  CHECK(find_socket_owner(c->client_end.ip, c->client_end.port, c->server_end.ip,
                          static_cast<std::uint16_t>(c->server_end.port + 1), 0,
                          {}) == std::nullopt);
  CHECK(find_socket_owner("not an ip", 1, "127.0.0.1", 2, 0, {}) == std::nullopt);
  CHECK(owner_of(*c, 999999999, {}) == std::nullopt);  // no such netns_pid
}

TEST_CASE("candidates limit the search to their process trees", "[attribution]") {
  child_process idle([] {});  // forked before the sockets exist: it holds none of them
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  CHECK(owner_of(*c, 0, {idle.pid}) == std::nullopt);
  CHECK(owner_of(*c, 0, {idle.pid, getpid()})->pid == getpid());
}

TEST_CASE("a client connection opened by a forked child is the child's", "[attribution]") {
  fd_guard listener(make_socket(AF_INET, "127.0.0.1", 0, true));
  REQUIRE(listener.fd >= 0);
  const std::uint16_t port = name_of(listener.fd, false).port;
  child_process child([port] { make_socket(AF_INET, "127.0.0.1", port, false); });
  fd_guard accepted(accept_within(listener.fd, 5000));
  REQUIRE(accepted.fd >= 0);
  const endpoint client = name_of(accepted.fd, true);
  const endpoint server = name_of(accepted.fd, false);
  auto everywhere = find_socket_owner(client.ip, client.port, server.ip, server.port, 0, {});
  REQUIRE(everywhere);
  CHECK(everywhere->pid == child.pid);
  CHECK(everywhere->exe == std::filesystem::read_symlink("/proc/self/exe").string());
  // Found as a descendant of a candidate.
  auto in_tree = find_socket_owner(client.ip, client.port, server.ip, server.port, 0, {getpid()});
  REQUIRE(in_tree);
  CHECK(in_tree->pid == child.pid);
}

TEST_CASE("IPv6 and v4-mapped client ends", "[attribution]") {
  if (auto c = open_connection(AF_INET6, "::1", AF_INET6, "::1")) {
    CHECK(c->client_end.ip == "::1");
    CHECK(owner_of(*c)->pid == getpid());
    CHECK(find_socket_owner("[::1]", c->client_end.port, "::1", c->server_end.port, 0, {})->pid ==
          getpid());
  } else {
    WARN("no IPv6 loopback here; skipped the ::1 case");
  }
  // An IPv4 client to a dual-stack listener: the proxy sees ::ffff:127.0.0.1.
  auto mapped_server = open_connection(AF_INET6, "::ffff:127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(mapped_server);
  CHECK(mapped_server->client_end.ip == "::ffff:127.0.0.1");
  CHECK(owner_of(*mapped_server)->pid == getpid());
  // An IPv6 client socket connecting to a v4-mapped address: its end is in tcp6.
  auto mapped_client = open_connection(AF_INET, "127.0.0.1", AF_INET6, "::ffff:127.0.0.1");
  REQUIRE(mapped_client);
  CHECK(owner_of(*mapped_client)->pid == getpid());
}

TEST_CASE("a client in another network namespace, named by netns_pid", "[attribution]") {
  int ports[2];  // the child's client and server ports on its own 127.0.0.1, or 0s
  REQUIRE(pipe2(ports, O_CLOEXEC) == 0);
  fd_guard read_end(ports[0]), write_end(ports[1]);
  child_process child([&] {
    std::uint16_t found[2] = {0, 0};
    ifreq lo{};
    std::strcpy(lo.ifr_name, "lo");
    const bool isolated = unshare(CLONE_NEWNET) == 0;  // the socket below is in the new netns
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (isolated && ioctl(s, SIOCGIFFLAGS, &lo) == 0 &&
        (lo.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &lo) == 0)) {
      const int listener = make_socket(AF_INET, "127.0.0.1", 0, true);
      found[1] = listener < 0 ? 0 : name_of(listener, false).port;
      const int client = make_socket(AF_INET, "127.0.0.1", found[1], false);
      found[0] = client < 0 ? 0 : name_of(client, false).port;
    }
    (void)!write(ports[1], found, sizeof found);
  });
  write_end.reset();  // a child that dies early ends the read below
  std::uint16_t found[2] = {0, 0};
  REQUIRE(read(read_end.fd, found, sizeof found) == sizeof found);
  if (found[0] == 0 || found[1] == 0) {
    WARN("cannot create a network namespace here; skipped");
    return;
  }
  auto owner = find_socket_owner("127.0.0.1", found[0], "127.0.0.1", found[1], child.pid, {});
  REQUIRE(owner);
  CHECK(owner->pid == child.pid);
  CHECK(find_socket_owner("127.0.0.1", found[0], "127.0.0.1", found[1], child.pid, {child.pid})
            ->pid == child.pid);
  // Not in the broker's own namespace's table.
  CHECK(find_socket_owner("127.0.0.1", found[0], "127.0.0.1", found[1], 0, {}) == std::nullopt);
}

TEST_CASE("the /proc/net/tcp hex format", "[attribution]") {
  if constexpr (std::endian::native != std::endian::little) return;  // samples are from x86
  const std::string_view v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
      "0 1157601 1 00000000919b0b25 100 0 0 10 0\n"
      "   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        "
      "0 4242 1 0000000000000000 20 4 30 10 -1\n"
      "   2: 0100007F:C350 0100007F\n";
  const auto rows = detail::parse_tcp_table(v4, false);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].state == 0x0A);
  CHECK(rows[0].inode == 1157601);
  CHECK(rows[1].local_ip == detail::parse_ip("127.0.0.1"));
  CHECK(rows[1].local_port == 50000);
  CHECK(rows[1].remote_ip == detail::parse_ip("::ffff:127.0.0.1"));
  CHECK(rows[1].remote_port == 8080);
  CHECK(rows[1].state == 1);
  CHECK(rows[1].inode == 4242);
  CHECK_FALSE(detail::parse_tcp_line("   0: 0100007F:1F90", false));

  const std::string_view v6 =
      "   0: 00000000000000000000000001000000:A410 0000000000000000FFFF00000100007F:0050 01 "
      "00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 20 4 0 10 -1\n";
  const auto row = detail::parse_tcp_line(v6.substr(0, v6.size() - 1), true);
  REQUIRE(row);
  CHECK(row->local_ip == detail::parse_ip("::1"));
  CHECK(row->local_port == 0xA410);
  CHECK(row->remote_ip == detail::parse_ip("127.0.0.1"));
  CHECK(row->remote_port == 80);
  CHECK(row->inode == 77);
  CHECK_FALSE(detail::parse_tcp_line(v6, false));  // v6 addresses are not v4 rows
  CHECK(detail::parse_ip("fe80::1%eth0") == detail::parse_ip("fe80::1"));
}
