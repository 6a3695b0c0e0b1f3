#include "sandbox/capture_net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
// After <net/if.h> and <netinet/in.h>, whose definitions these then leave out.
#include <linux/netfilter_ipv4.h>             // SO_ORIGINAL_DST
#include <linux/netfilter_ipv6/ip6_tables.h>  // IP6T_SO_ORIGINAL_DST

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

using broker::sandbox::set_up_capture;

// Each test forks a child that makes a fresh network namespace (inside a user namespace that
// maps its uid to root when the test is not root), brings lo up, calls set_up_capture and runs
// one check with real sockets there; the child reports through a pipe and its exit status.

namespace {

constexpr std::uint16_t redirect_port = 3129;
constexpr int passed = 0, failed = 1, unavailable = 77;
// Every socket wait in the child is bounded; the alarm ends a child that hangs anyway.
constexpr int socket_timeout_seconds = 3;
constexpr unsigned child_deadline_seconds = 20;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what);
}
[[noreturn]] void fail_errno(const std::string& what) {
  fail(what + ": " + std::strerror(errno));
}

class socket_fd {
 public:
  explicit socket_fd(int fd) : fd_(fd) {
    if (fd_ < 0) fail_errno("socket");
  }
  socket_fd(socket_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ~socket_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

void set_timeouts(const socket_fd& s) {
  const timeval t{socket_timeout_seconds, 0};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  ::setsockopt(s.get(), SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

sockaddr_storage address_of(const std::string& ip, std::uint16_t port, socklen_t& length) {
  sockaddr_storage a{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof *v4;
  } else if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof *v6;
  } else {
    fail("not an address: " + ip);
  }
  return a;
}

// "198.18.0.5:8443" or "[fd62:726b:7200::7]:22"; a v4-mapped IPv6 address shown as IPv4.
std::string shown(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(v4.sin_port));
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
  if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
    ::inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(v6.sin6_port));
  }
  ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
  return "[" + std::string(text) + "]:" + std::to_string(ntohs(v6.sin6_port));
}

std::string local_address(const socket_fd& s) {
  sockaddr_storage a{};
  socklen_t length = sizeof a;
  if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &length) < 0)
    fail_errno("getsockname");
  return shown(a);
}

void expect_equal(const std::string& what, const std::string& got, const std::string& wanted) {
  if (got != wanted) fail(what + " is " + got + ", not " + wanted);
}

// Bound to [::]:port with IPV6_V6ONLY off, so IPv4 arrives too (as v4-mapped addresses).
socket_fd dual_stack_socket(int type, std::uint16_t port) {
  socket_fd s(::socket(AF_INET6, type | SOCK_CLOEXEC, 0));
  set_timeouts(s);
  const int zero = 0, one = 1;
  ::setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_port = htons(port);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&any), sizeof any) < 0)
    fail_errno("binding [::]:" + std::to_string(port));
  if (type == SOCK_STREAM && ::listen(s.get(), 16) < 0) fail_errno("listen");
  return s;
}

socket_fd tcp_listener(std::uint16_t port) {
  return dual_stack_socket(SOCK_STREAM, port);
}

socket_fd connected(int type, const std::string& ip, std::uint16_t port) {
  socklen_t length = 0;
  const sockaddr_storage a = address_of(ip, port, length);
  socket_fd s(::socket(a.ss_family, type | SOCK_CLOEXEC, 0));
  set_timeouts(s);
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), length) < 0)
    fail_errno("connect to " + shown(a));
  return s;
}

socket_fd tcp_connect(const std::string& ip, std::uint16_t port) {
  return connected(SOCK_STREAM, ip, port);
}

socket_fd accept_one(const socket_fd& listener, const std::string& which) {
  const int s = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0) fail_errno("nothing arrived at " + which);
  return socket_fd(s);
}

// Loopback connections are queued by the time connect() returns.
void expect_nothing_at(const socket_fd& listener, const std::string& which) {
  pollfd p{listener.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) != 0) fail("a connection arrived at " + which);
}

// What the accepted socket's conntrack entry says the client aimed at: SO_ORIGINAL_DST for an
// IPv4 client (v4-mapped on the dual-stack listener), IP6T_SO_ORIGINAL_DST for IPv6.
std::string original_destination(const socket_fd& accepted) {
  sockaddr_storage peer{};
  socklen_t length = sizeof peer;
  if (::getpeername(accepted.get(), reinterpret_cast<sockaddr*>(&peer), &length) < 0)
    fail_errno("getpeername");
  const bool ipv4 = peer.ss_family == AF_INET ||
                    IN6_IS_ADDR_V4MAPPED(&reinterpret_cast<sockaddr_in6&>(peer).sin6_addr);
  sockaddr_storage original{};
  length = sizeof original;
  if (::getsockopt(accepted.get(), ipv4 ? SOL_IP : SOL_IPV6,
                   ipv4 ? SO_ORIGINAL_DST : IP6T_SO_ORIGINAL_DST, &original, &length) < 0)
    fail_errno("reading the original destination");
  return shown(original);
}

// A byte each way: the accepted socket really is the client's connection.
void expect_talking(const socket_fd& client, const socket_fd& server) {
  char c = 'q';
  if (::send(client.get(), &c, 1, MSG_NOSIGNAL) != 1) fail_errno("client send");
  if (::recv(server.get(), &c, 1, 0) != 1 || c != 'q') fail_errno("server recv");
  c = 'a';
  if (::send(server.get(), &c, 1, MSG_NOSIGNAL) != 1) fail_errno("server send");
  if (::recv(client.get(), &c, 1, 0) != 1 || c != 'a') fail_errno("client recv");
}

// A TCP connection to ip:port arrives at the redirect listener, aimed at ip:port.
void expect_redirected(const std::string& ip, std::uint16_t port, const std::string& original) {
  const socket_fd listener = tcp_listener(redirect_port);
  const socket_fd client = tcp_connect(ip, port);
  const socket_fd accepted = accept_one(listener, "the redirect listener");
  expect_equal("the original destination", original_destination(accepted), original);
  expect_talking(client, accepted);
}

void write_file(const char* path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) fail_errno(std::string("writing ") + path);
}

// A fresh network namespace; when not root, inside a user namespace mapping this uid and gid to
// root (which gives CAP_NET_ADMIN over the new network namespace). False when the kernel or the
// container refuses the namespaces.
bool enter_namespaces() {
  if (::geteuid() == 0) return ::unshare(CLONE_NEWNET) == 0;
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) return false;
  write_file("/proc/self/setgroups", "deny");  // before gid_map, or it cannot be written
  write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
  write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
  return true;
}

void bring_up_loopback() {
  const socket_fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &request) < 0) fail_errno("reading lo's flags");
  request.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s.get(), SIOCSIFFLAGS, &request) < 0) fail_errno("bringing lo up");
}

// The forked child: namespaces, loopback, capture, then `check`; never returns.
[[noreturn]] void run_child(int report, const std::function<void()>& check) {
  ::alarm(child_deadline_seconds);
  int status = passed;
  std::string message;
  try {
    if (!enter_namespaces()) {
      status = unavailable;
      message = std::string("unshare: ") + std::strerror(errno);
    } else {
      bring_up_loopback();
      message = set_up_capture(redirect_port);
      if (!message.empty()) {
        status = failed;
      } else {
        check();
      }
    }
  } catch (const std::exception& e) {
    status = failed;
    message = e.what();
  }
  (void)!::write(report, message.data(), message.size());
  ::_exit(status);
}

// Runs `check` in a namespace with capture set up and CHECKs that it threw nothing (showing what
// it threw, or how it ended). A machine where no namespace can be made fails the test: it cannot
// run there, and the suite runs as root where one always can.
void expect_passes(const std::function<void()>& check) {
  int report[2];
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(report[0]);
    run_child(report[1], check);
  }
  ::close(report[1]);
  std::string message;
  char buffer[512];
  for (ssize_t n; (n = ::read(report[0], buffer, sizeof buffer)) != 0;)
    if (n > 0) {
      message.append(buffer, n);
    } else if (errno != EINTR) {
      break;
    }
  ::close(report[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == unavailable) {
    FAIL("no network namespace can be made here (" << message << "), so this cannot be tested");
  }
  if (WIFSIGNALED(status))
    message += "(the child ended by signal " + std::to_string(WTERMSIG(status)) + ")";
  else if (WEXITSTATUS(status) != passed && message.empty())
    message = "the child exited with " + std::to_string(WEXITSTATUS(status));
  INFO("euid " << ::geteuid());
  CHECK(message == "");
}

}  // namespace

TEST_CASE("set_up_capture: lo has the namespace's own addresses, usable at once", "[capture]") {
  expect_passes([] {
    bool ipv4 = false, ipv6 = false;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) < 0) fail_errno("getifaddrs");
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || std::strcmp(i->ifa_name, "lo") != 0) continue;
      sockaddr_storage a{};
      std::memcpy(&a, i->ifa_addr,
                  i->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
      ipv4 |= shown(a) == "198.18.0.1:0";
      ipv6 |= shown(a) == "[fd62:726b:7200::1]:0";
    }
    ::freeifaddrs(list);
    if (!ipv4 || !ipv6) fail("lo lacks 198.18.0.1 or fd62:726b:7200::1");
    // A tentative address (one still in duplicate address detection) could not be bound.
    for (const char* own : {"198.18.0.1", "fd62:726b:7200::1"}) {
      socklen_t length = 0;
      const sockaddr_storage a = address_of(own, 0, length);
      const socket_fd s(::socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&a), length) < 0)
        fail_errno(std::string("binding ") + own);
    }
  });
}

TEST_CASE("set_up_capture: TCP to a synthetic IPv4 address reaches the redirect port",
          "[capture]") {
  expect_passes([] { expect_redirected("198.18.0.5", 8443, "198.18.0.5:8443"); });
}

TEST_CASE("set_up_capture: TCP to a synthetic IPv6 address reaches the redirect port",
          "[capture]") {
  expect_passes([] { expect_redirected("fd62:726b:7200::7", 22, "[fd62:726b:7200::7]:22"); });
}

TEST_CASE("set_up_capture: TCP to a literal public address is redirected too, never leaves",
          "[capture]") {
  expect_passes([] { expect_redirected("8.8.8.8", 80, "8.8.8.8:80"); });
}

TEST_CASE("set_up_capture: TCP to loopback reaches the listener there, not the redirect port",
          "[capture]") {
  expect_passes([] {
    const socket_fd redirect = tcp_listener(redirect_port);
    const socket_fd other = tcp_listener(8080);
    for (const char* loopback : {"127.0.0.1", "::1"}) {
      const socket_fd client = tcp_connect(loopback, 8080);
      const socket_fd accepted = accept_one(other, "the listener on port 8080");
      expect_talking(client, accepted);
      expect_nothing_at(redirect, "the redirect listener");
    }
  });
}

TEST_CASE("set_up_capture: TCP to any address on port 53 reaches the namespace's port 53",
          "[capture]") {
  expect_passes([] {
    const socket_fd redirect = tcp_listener(redirect_port);
    const socket_fd dns = tcp_listener(53);
    const socket_fd client = tcp_connect("10.1.2.3", 53);
    const socket_fd accepted = accept_one(dns, "the listener on port 53");
    expect_equal("the accepted connection's local address", local_address(accepted), "10.1.2.3:53");
    expect_talking(client, accepted);
    expect_nothing_at(redirect, "the redirect listener");
  });
}

TEST_CASE("set_up_capture: UDP to any address:53 reaches [::]:53 and the answer comes back",
          "[capture]") {
  expect_passes([] {
    const socket_fd dns = dual_stack_socket(SOCK_DGRAM, 53);
    const socket_fd client(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    set_timeouts(client);
    socklen_t length = 0;
    const sockaddr_storage server = address_of("9.9.9.9", 53, length);
    if (::sendto(client.get(), "q", 1, 0, reinterpret_cast<const sockaddr*>(&server), length) != 1)
      fail_errno("sendto 9.9.9.9:53");
    char c = 0;
    sockaddr_storage from{};
    socklen_t from_length = sizeof from;
    if (::recvfrom(dns.get(), &c, 1, 0, reinterpret_cast<sockaddr*>(&from), &from_length) != 1)
      fail_errno("the query did not reach [::]:53");
    if (::sendto(dns.get(), "a", 1, 0, reinterpret_cast<sockaddr*>(&from), from_length) != 1)
      fail_errno("sending the answer");
    from_length = sizeof from;
    if (::recvfrom(client.get(), &c, 1, 0, reinterpret_cast<sockaddr*>(&from), &from_length) != 1)
      fail_errno("the answer did not come back");
    // Resolvers drop answers from any other address than the one they asked.
    expect_equal("the answer's source", shown(from), "9.9.9.9:53");
  });
}

TEST_CASE("set_up_capture: UDP to any other port is refused", "[capture]") {
  expect_passes([] {
    const socket_fd client = connected(SOCK_DGRAM, "1.2.3.4", 443);
    if (::send(client.get(), "x", 1, 0) != 1) fail_errno("send to 1.2.3.4:443");
    char c = 0;
    if (::recv(client.get(), &c, 1, 0) >= 0) fail("recv after UDP to 1.2.3.4:443 got data");
    if (errno != ECONNREFUSED) fail_errno("recv after UDP to 1.2.3.4:443, not ECONNREFUSED");
  });
}

TEST_CASE("set_up_capture: a second call replaces the rules instead of adding to them",
          "[capture]") {
  expect_passes([] {
    const std::string error = set_up_capture(3130);
    if (!error.empty()) fail(error);
    // No listener on 3129: had the first rules stayed ahead, the connect would be refused.
    const socket_fd listener = tcp_listener(3130);
    const socket_fd client = tcp_connect("198.18.0.9", 443);
    const socket_fd accepted = accept_one(listener, "the listener on port 3130");
    expect_equal("the original destination", original_destination(accepted), "198.18.0.9:443");
  });
}
