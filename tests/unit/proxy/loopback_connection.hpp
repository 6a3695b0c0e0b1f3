// Real TCP connections on loopback and forked children holding them, for the attribution and
// sock_diag tests.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace broker::test {

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

inline endpoint name_of(int fd, bool peer) {
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
inline int make_socket(int family, const char* ip, std::uint16_t port, bool listen_on_it) {
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

inline int accept_within(int listener, int timeout_ms) {
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

inline std::optional<connection> open_connection(int listen_family, const char* listen_ip,
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

}  // namespace broker::test
