// One TCP socket looked up by its exact 4-tuple through NETLINK_SOCK_DIAG (linux/inet_diag.h):
// the kernel hashes the tuple and answers about that one socket, where /proc/net/tcp walks its
// whole established-connection table. A netlink socket answers about the network namespace it
// was created in, so it must be made there (wrap's sandbox init makes one inside the child's
// namespace and hands it over with the listeners).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

namespace broker::capture {

using ip_bytes = std::array<std::uint8_t, 16>;  // network order; IPv4 as ::ffff:a.b.c.d

// Whether `ip` is an IPv4 address in its IPv6 form (::ffff:a.b.c.d).
inline bool is_v4_mapped(const ip_bytes& ip) {
  return std::all_of(ip.begin(), ip.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
         ip[10] == 0xff && ip[11] == 0xff;
}

// What the kernel says about one TCP socket.
struct tcp_socket_entry {
  std::uint64_t inode = 0;  // 0 for a socket no process holds (TIME_WAIT, orphans)
  std::uint32_t uid = 0;    // its creator's, in the netlink socket's user namespace
  int state = 0;            // TCP_ESTABLISHED = 1, ...
};

// The answer comes at once (the kernel replies within the sendmsg); this only bounds a stuck
// or foreign descriptor.
inline constexpr std::chrono::milliseconds sock_diag_wait{100};

// A NETLINK_SOCK_DIAG socket (SOCK_CLOEXEC | SOCK_NONBLOCK) of the calling thread's network
// namespace; -1 when the kernel refuses one.
int open_sock_diag_socket() noexcept;

// The TCP socket whose local end is local:local_port and remote end remote:remote_port, asked
// of `fd` (a NETLINK_SOCK_DIAG socket). Both ends v4-mapped (an IPv4 connection, on an IPv4 or a
// dual-stack socket) are asked as AF_INET with sequence number `seq`, then as AF_INET6 with
// `seq + 1` (distinct, so a late answer to the first is not taken for the second); anything else
// as AF_INET6 only. Waits at most `wait` in all. Not thread-safe on one `fd` (answers to
// concurrent requests would interleave). Never throws: no such socket, a listening one, a bad
// descriptor or no answer in time give nullopt.
std::optional<tcp_socket_entry> query_tcp_socket(
    int fd, std::uint32_t seq, const ip_bytes& local, std::uint16_t local_port,
    const ip_bytes& remote, std::uint16_t remote_port,
    std::chrono::milliseconds wait = sock_diag_wait) noexcept;

// A NETLINK_SOCK_DIAG socket shared by the proxy's threads: one request and its answer at a time
// under a mutex. The exchange takes a few microseconds, so a lock is cheaper than a socket per
// thread (which wrap could only make inside the child's namespace, before the threads exist).
class sock_diag {
 public:
  // Adopts `fd` (closed by the destructor); nullptr when it is not a NETLINK_SOCK_DIAG socket.
  static std::unique_ptr<sock_diag> adopt(int fd) noexcept;
  // One in the calling thread's network namespace; nullptr when the kernel refuses it.
  static std::unique_ptr<sock_diag> open() noexcept;
  ~sock_diag();
  sock_diag(const sock_diag&) = delete;
  sock_diag& operator=(const sock_diag&) = delete;

  std::optional<tcp_socket_entry> find(const ip_bytes& local, std::uint16_t local_port,
                                       const ip_bytes& remote, std::uint16_t remote_port) noexcept;
  // Whether any find() has found a socket. A kernel without TCP support in inet_diag answers
  // every question with ENOENT, just as for a socket that is gone: until one answer proves the
  // lookups work, a miss is no proof of absence.
  bool proven() const { return proven_.load(std::memory_order_relaxed); }

 private:
  explicit sock_diag(int fd) : fd_(fd) {}
  int fd_;
  std::mutex mutex_;
  std::uint32_t seq_ = 0;  // under mutex_
  std::atomic<bool> proven_{false};
};

}  // namespace broker::capture
