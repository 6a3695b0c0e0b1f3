#include "capture/sock_diag.hpp"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>

#include "capture/attribution.hpp"
#include "tests/unit/proxy/loopback_connection.hpp"

using namespace broker::capture;
using namespace broker::test;

namespace {

std::uint64_t inode_of(int fd) {
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  return st.st_ino;
}

ip_bytes ip(const std::string& text) {
  const auto bytes = detail::parse_ip(text);
  REQUIRE(bytes);
  return *bytes;
}

// The client's socket as the proxy would ask for it: its local end is the accepted socket's
// peer, its remote end the accepted socket's local name.
std::optional<tcp_socket_entry> client_socket(sock_diag& diag, const connection& c) {
  return diag.find(ip(c.client_end.ip), c.client_end.port, ip(c.server_end.ip), c.server_end.port);
}

// Sends `fd` (or no descriptor when -1) with `data` over a unix socket.
void send_with_fd(int unix_socket, const void* data, std::size_t size, int fd) {
  iovec part{const_cast<void*>(data), size};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  if (fd >= 0) {
    message.msg_control = space;
    message.msg_controllen = sizeof space;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
  }
  (void)!sendmsg(unix_socket, &message, MSG_NOSIGNAL);
}

// `data` and the descriptor sent with it (-1 if none); false when nothing came in time.
bool receive_with_fd(int unix_socket, void* data, std::size_t size, int& fd) {
  fd = -1;
  pollfd p{unix_socket, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) return false;
  iovec part{data, size};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = space;
  message.msg_controllen = sizeof space;
  if (recvmsg(unix_socket, &message, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(size)) return false;
  if (const cmsghdr* header = CMSG_FIRSTHDR(&message); header && header->cmsg_type == SCM_RIGHTS) {
    std::memcpy(&fd, CMSG_DATA(header), sizeof fd);
  }
  return true;
}

}  // namespace

TEST_CASE("sock_diag finds an IPv4 loopback client's socket", "[sock_diag]") {
  auto diag = sock_diag::open();
  REQUIRE(diag);
  CHECK_FALSE(diag->proven());
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  const auto entry = client_socket(*diag, *c);
  REQUIRE(entry);
  CHECK(entry->inode == inode_of(c->client.fd));
  CHECK(entry->uid == geteuid());
  CHECK(entry->state == 1);  // TCP_ESTABLISHED
  CHECK(diag->proven());
  // The same tuple asked from the proxy's side is the accepted socket, not the client's.
  const auto accepted = diag->find(ip(c->server_end.ip), c->server_end.port, ip(c->client_end.ip),
                                   c->client_end.port);
  REQUIRE(accepted);
  CHECK(accepted->inode == inode_of(c->accepted.fd));
}

TEST_CASE("sock_diag finds IPv6 and v4-mapped client sockets", "[sock_diag]") {
  auto diag = sock_diag::open();
  REQUIRE(diag);
  if (auto c = open_connection(AF_INET6, "::1", AF_INET6, "::1")) {
    REQUIRE(client_socket(*diag, *c));
    CHECK(client_socket(*diag, *c)->inode == inode_of(c->client.fd));
  } else {
    WARN("no IPv6 loopback here; skipped the ::1 case");
  }
  // An IPv4 client (an AF_INET socket) to a dual-stack listener: seen as ::ffff:127.0.0.1.
  auto mapped_server = open_connection(AF_INET6, "::ffff:127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(mapped_server);
  REQUIRE(mapped_server->client_end.ip == "::ffff:127.0.0.1");
  REQUIRE(client_socket(*diag, *mapped_server));
  CHECK(client_socket(*diag, *mapped_server)->inode == inode_of(mapped_server->client.fd));
  // A dual-stack AF_INET6 client socket dialing a v4-mapped address.
  auto mapped_client = open_connection(AF_INET, "127.0.0.1", AF_INET6, "::ffff:127.0.0.1");
  REQUIRE(mapped_client);
  REQUIRE(client_socket(*diag, *mapped_client));
  CHECK(client_socket(*diag, *mapped_client)->inode == inode_of(mapped_client->client.fd));
  // Both families of the same IPv4 connection, asked directly.
  const int fd = open_sock_diag_socket();
  REQUIRE(fd >= 0);
  fd_guard guard(fd);
  const auto& e = mapped_server->client_end;
  const auto& s = mapped_server->server_end;
  CHECK(query_tcp_socket(fd, 7, ip(e.ip), e.port, ip(s.ip), s.port)->inode ==
        inode_of(mapped_server->client.fd));
}

TEST_CASE("sock_diag: no such socket is nullopt", "[sock_diag]") {
  auto diag = sock_diag::open();
  REQUIRE(diag);
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  const auto client = ip(c->client_end.ip);
  const auto server = ip(c->server_end.ip);
  const std::uint16_t other = static_cast<std::uint16_t>(c->server_end.port + 1);
  CHECK(diag->find(client, c->client_end.port, server, other) == std::nullopt);
  CHECK(diag->find(ip("::1"), c->client_end.port, ip("::1"), c->server_end.port) == std::nullopt);
  // The kernel's lookup falls back to a listener on the local port; that is not an answer.
  CHECK(diag->find(server, c->server_end.port, client, other) == std::nullopt);
  // A closed connection's client end is no longer held (TIME_WAIT or gone).
  const std::uint16_t port = c->client_end.port;
  c->client.reset();
  c->accepted.reset();
  const auto gone = diag->find(client, port, server, c->server_end.port);
  CHECK((!gone || gone->inode == 0));
  // The next question still gets its own answer.
  auto d = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(d);
  REQUIRE(client_socket(*diag, *d));
  CHECK(client_socket(*diag, *d)->inode == inode_of(d->client.fd));
}

TEST_CASE("sock_diag: a bad descriptor is nullopt at once", "[sock_diag]") {
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  const auto client = ip(c->client_end.ip);
  const auto server = ip(c->server_end.ip);
  const auto started = std::chrono::steady_clock::now();
  CHECK(query_tcp_socket(-1, 1, client, c->client_end.port, server, c->server_end.port) ==
        std::nullopt);
  CHECK(query_tcp_socket(1 << 20, 1, client, c->client_end.port, server, c->server_end.port) ==
        std::nullopt);  // not open
  int p[2];
  REQUIRE(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
  fd_guard read_end(p[0]), write_end(p[1]);
  CHECK(query_tcp_socket(p[0], 1, client, c->client_end.port, server, c->server_end.port) ==
        std::nullopt);
  // A netlink socket of a protocol with no kernel side, and a UDP socket.
  fd_guard user(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_USERSOCK));
  REQUIRE(user.fd >= 0);
  CHECK(query_tcp_socket(user.fd, 1, client, c->client_end.port, server, c->server_end.port,
                         std::chrono::milliseconds(20)) == std::nullopt);
  fd_guard udp(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  CHECK(query_tcp_socket(udp.fd, 1, client, c->client_end.port, server, c->server_end.port,
                         std::chrono::milliseconds(20)) == std::nullopt);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
  // adopt() takes only a NETLINK_SOCK_DIAG socket, closing anything else.
  CHECK(sock_diag::adopt(-1) == nullptr);
  CHECK(sock_diag::adopt(user.fd) == nullptr);
  user.fd = -1;  // closed by adopt
  CHECK(sock_diag::adopt(dup(p[0])) == nullptr);
}

TEST_CASE("sock_diag: an answer left unread is not taken for the next question", "[sock_diag]") {
  auto a = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  auto b = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(a);
  REQUIRE(b);
  fd_guard diag(open_sock_diag_socket());
  REQUIRE(diag.fd >= 0);
  // A question about `a` whose answer nobody reads (as after a wait that ended too early).
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  struct {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } request{};
  request.header.nlmsg_len = sizeof request;
  request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.header.nlmsg_flags = NLM_F_REQUEST;
  request.header.nlmsg_seq = 300;
  request.body.sdiag_family = AF_INET;
  request.body.sdiag_protocol = IPPROTO_TCP;
  request.body.idiag_states = ~0u;
  request.body.id.idiag_sport = htons(a->client_end.port);
  request.body.id.idiag_dport = htons(a->server_end.port);
  request.body.id.idiag_src[0] = request.body.id.idiag_dst[0] = htonl(INADDR_LOOPBACK);
  request.body.id.idiag_cookie[0] = request.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  REQUIRE(sendto(diag.fd, &request, sizeof request, 0, reinterpret_cast<sockaddr*>(&kernel),
                 sizeof kernel) == sizeof request);
  const auto entry = query_tcp_socket(diag.fd, 400, ip(b->client_end.ip), b->client_end.port,
                                      ip(b->server_end.ip), b->server_end.port);
  REQUIRE(entry);
  CHECK(entry->inode == inode_of(b->client.fd));
}

TEST_CASE("a sock_diag socket answers about the namespace it was made in", "[sock_diag]") {
  int pair[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  fd_guard parent_end(pair[0]), child_end(pair[1]);
  struct report {
    std::uint16_t client_port = 0, server_port = 0;
    std::uint64_t inode = 0;
  };
  child_process child([&] {
    report r;
    ifreq lo{};
    std::strcpy(lo.ifr_name, "lo");
    const bool isolated = unshare(CLONE_NEWNET) == 0;  // sockets below are in the new netns
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    int diag = -1;
    if (isolated && ioctl(s, SIOCGIFFLAGS, &lo) == 0 &&
        (lo.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &lo) == 0)) {
      const int listener = make_socket(AF_INET, "127.0.0.1", 0, true);
      r.server_port = listener < 0 ? 0 : name_of(listener, false).port;
      const int client = make_socket(AF_INET, "127.0.0.1", r.server_port, false);
      if (client >= 0) {
        r.client_port = name_of(client, false).port;
        struct stat st {};
        fstat(client, &st);
        r.inode = st.st_ino;
      }
      diag = open_sock_diag_socket();
    }
    send_with_fd(pair[1], &r, sizeof r, diag);
  });
  child_end.reset();
  report r;
  int fd = -1;
  REQUIRE(receive_with_fd(parent_end.fd, &r, sizeof r, fd));
  if (r.client_port == 0 || fd < 0) {
    if (fd >= 0) close(fd);
    FAIL("cannot create a network namespace here, so this cannot be tested");
  }
  auto theirs = sock_diag::adopt(fd);
  REQUIRE(theirs);
  auto ours = sock_diag::open();
  REQUIRE(ours);
  const auto loopback = ip("127.0.0.1");
  const auto entry = theirs->find(loopback, r.client_port, loopback, r.server_port);
  REQUIRE(entry);
  CHECK(entry->inode == r.inode);
  CHECK(ours->find(loopback, r.client_port, loopback, r.server_port) == std::nullopt);
  // The whole attribution through it, with no table read.
  const auto found = find_socket_holders("127.0.0.1", r.client_port, "127.0.0.1", r.server_port,
                                         child.pid, {child.pid}, theirs.get());
  REQUIRE(found);
  REQUIRE(found->holders.size() == 1);
  CHECK(found->holders[0].pid == child.pid);
}
