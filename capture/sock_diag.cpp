#include "capture/sock_diag.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace broker::capture {

namespace {

struct diag_request {
  nlmsghdr header;
  inet_diag_req_v2 body;
};

bool send_request(int fd, std::uint32_t seq, int family, const ip_bytes& local,
                  std::uint16_t local_port, const ip_bytes& remote, std::uint16_t remote_port) {
  diag_request request{};
  request.header.nlmsg_len = sizeof request;
  request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.header.nlmsg_flags = NLM_F_REQUEST;  // no NLM_F_DUMP: the exact lookup
  request.header.nlmsg_seq = seq;
  request.body.sdiag_family = static_cast<std::uint8_t>(family);
  request.body.sdiag_protocol = IPPROTO_TCP;
  request.body.idiag_states = ~0u;
  inet_diag_sockid& id = request.body.id;
  id.idiag_sport = htons(local_port);
  id.idiag_dport = htons(remote_port);
  // AF_INET takes the address in the first word; AF_INET6 all four (a v4-mapped pair is looked
  // up in the IPv4 table by the kernel either way).
  const std::size_t offset = family == AF_INET ? 12 : 0;
  std::memcpy(id.idiag_src, local.data() + offset, local.size() - offset);
  std::memcpy(id.idiag_dst, remote.data() + offset, remote.size() - offset);
  id.idiag_cookie[0] = id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t sent;
  do {
    sent = ::sendto(fd, &request, sizeof request, MSG_DONTWAIT | MSG_NOSIGNAL,
                    reinterpret_cast<const sockaddr*>(&kernel), sizeof kernel);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(sizeof request);
}

enum class answer_state { pending, missing, found };

// One datagram of answers: ours (by sequence number) decides; others (an earlier request's, come
// after its wait ended) are skipped.
answer_state read_answer(const char* data, std::size_t size, std::uint32_t seq,
                         std::uint16_t local_port, std::uint16_t remote_port,
                         tcp_socket_entry& out) {
  auto length = static_cast<unsigned int>(size);
  for (auto* header = reinterpret_cast<const nlmsghdr*>(data); NLMSG_OK(header, length);
       header = NLMSG_NEXT(header, length)) {
    if (header->nlmsg_seq != seq) continue;
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
      return answer_state::missing;  // NLMSG_ERROR: ENOENT for no such socket
    const auto* message = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
    // The kernel's lookup falls back to a listener on the local port (it looks the tuple up as
    // an arriving packet would): that is not the client's socket.
    if (message->idiag_state == TCP_LISTEN || ntohs(message->id.idiag_sport) != local_port ||
        ntohs(message->id.idiag_dport) != remote_port)
      return answer_state::missing;
    out.inode = message->idiag_inode;
    out.uid = message->idiag_uid;
    out.state = message->idiag_state;
    return answer_state::found;
  }
  return answer_state::pending;
}

std::optional<tcp_socket_entry> ask(int fd, std::uint32_t seq, int family, const ip_bytes& local,
                                    std::uint16_t local_port, const ip_bytes& remote,
                                    std::uint16_t remote_port,
                                    std::chrono::steady_clock::time_point until) {
  if (!send_request(fd, seq, family, local, local_port, remote, remote_port)) return std::nullopt;
  alignas(nlmsghdr) char buffer[8192];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      tcp_socket_entry entry;
      switch (
          read_answer(buffer, static_cast<std::size_t>(n), seq, local_port, remote_port, entry)) {
        case answer_state::found:
          return entry;
        case answer_state::missing:
          return std::nullopt;
        case answer_state::pending:  // another question's answer: read on, within the deadline
          if (std::chrono::steady_clock::now() >= until) return std::nullopt;
          continue;
      }
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return std::nullopt;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return std::nullopt;
  }
}

}  // namespace

int open_sock_diag_socket() noexcept {
  return ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
}

std::optional<tcp_socket_entry> query_tcp_socket(int fd, std::uint32_t seq, const ip_bytes& local,
                                                 std::uint16_t local_port, const ip_bytes& remote,
                                                 std::uint16_t remote_port,
                                                 std::chrono::milliseconds wait) noexcept {
  if (fd < 0) return std::nullopt;
  const auto until = std::chrono::steady_clock::now() + wait;
  if (is_v4_mapped(local) && is_v4_mapped(remote)) {
    if (auto entry = ask(fd, seq, AF_INET, local, local_port, remote, remote_port, until))
      return entry;
  }
  return ask(fd, seq + 1, AF_INET6, local, local_port, remote, remote_port, until);
}

std::unique_ptr<sock_diag> sock_diag::adopt(int fd) noexcept {
  if (fd < 0) return nullptr;
  int domain = 0, protocol = 0;
  socklen_t size = sizeof domain;
  const bool diag = ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) == 0 &&
                    domain == AF_NETLINK && (size = sizeof protocol) &&
                    ::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &size) == 0 &&
                    protocol == NETLINK_SOCK_DIAG;
  if (!diag) {
    ::close(fd);
    return nullptr;
  }
  try {
    return std::unique_ptr<sock_diag>(new sock_diag(fd));
  } catch (...) {
    ::close(fd);
    return nullptr;
  }
}

std::unique_ptr<sock_diag> sock_diag::open() noexcept {
  return adopt(open_sock_diag_socket());
}

sock_diag::~sock_diag() {
  ::close(fd_);
}

std::optional<tcp_socket_entry> sock_diag::find(const ip_bytes& local, std::uint16_t local_port,
                                                const ip_bytes& remote,
                                                std::uint16_t remote_port) noexcept {
  std::lock_guard lock(mutex_);
  seq_ += 2;  // query_tcp_socket uses two
  auto entry = query_tcp_socket(fd_, seq_, local, local_port, remote, remote_port);
  if (entry) proven_.store(true, std::memory_order_relaxed);
  return entry;
}

}  // namespace broker::capture
