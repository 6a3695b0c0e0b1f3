// Which local processes hold a client connection to the proxy: the audit log's `pid` and `exe`
// (docs/audit-log.md), and who a rule's or a credential's "programs" are judged against
// (docs/policy.md). Linux only. Two steps: the connection's client end to its socket inode, then
// that inode among the descriptor links of the client's process tree. The inode comes from
// NETLINK_SOCK_DIAG (sock_diag.hpp: one exact lookup, a few microseconds) when the caller has such
// a socket in the client's network namespace, otherwise from /proc/<pid>/net/tcp{,6} (~1 ms: the
// kernel prints its whole established-connection table). Best effort by nature: the client may
// exit, or /proc may deny access, before the scan finds it; the record says null then, and an
// incomplete search matches no "programs".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capture/sock_diag.hpp"
#include "config/program_identity.hpp"

namespace broker::capture {

// Every process holding the client end of a connection, for the audit record's pid and exe and
// for "programs" (docs/policy.md, docs/audit-log.md).
struct socket_holders {
  std::vector<config::program_holder> holders;  // highest pid first; never empty
  // Every process (and every thread with a descriptor table of its own) that could hold the
  // socket was searched, within the bounds below: no other holder exists.
  bool complete = false;
};

// One lookup runs per accepted connection on the proxy's thread, so its work is bounded: past
// any of these it stops and says the search is incomplete rather than stall every other
// connection. A process with more than max_fds_per_scanned_process descriptors is not searched
// whole (incomplete too).
// The /proc/net/tcp read alone costs ~1 ms however few sockets exist: the kernel walks its whole
// established-connection hash (262144 buckets on a typical host); sock_diag hashes the tuple.
inline constexpr std::size_t max_scanned_processes = 4096;
inline constexpr std::size_t max_fds_per_scanned_process = 1024;
inline constexpr std::size_t max_scanned_fds = 16 * 1024;  // ~20 ms at ~1.2 us per readlink

// The processes holding the client end of a TCP connection accepted by the proxy. `client` is
// the peer address (the client's ip:port as the proxy sees it), `server` the proxy's local
// ip:port; IPs are textual, IPv4, IPv6 or v4-mapped IPv6 ("::ffff:127.0.0.1"), optionally
// bracketed or with a %scope. `diag`: a NETLINK_SOCK_DIAG socket of the client's network
// namespace, asked for the inode; null, or one that has never found a socket
// (sock_diag::proven), falls back to the tables: `netns_pid` 0 when the client lives in the
// broker's own network namespace, otherwise a pid inside the client's namespace, whose
// /proc/<pid>/net/tcp{,6} is read.
// `candidates`: when non-empty, only these pids and their descendants
// (/proc/<pid>/task/*/children) are searched; when empty, every process is. Every one of them is
// searched, not only until a holder is found: a socket made by one process is held by every
// child that inherited it, and any of them may be the one writing to it. A process's threads
// that do not share its descriptor table (kcmp(2) tells) are searched too.
// Never throws: every failure, including an unparsable IP, is nullopt, as is finding no holder.
std::optional<socket_holders> find_socket_holders(const std::string& client_ip,
                                                  std::uint16_t client_port,
                                                  const std::string& server_ip,
                                                  std::uint16_t server_port, int netns_pid,
                                                  const std::vector<int>& candidates,
                                                  sock_diag* diag = nullptr) noexcept;

namespace detail {

using capture::ip_bytes;

// One row of /proc/net/tcp or tcp6 (the kernel's tcp4_seq_show / tcp6_seq_show format).
struct tcp_row {
  ip_bytes local_ip{};
  std::uint16_t local_port = 0;
  ip_bytes remote_ip{};
  std::uint16_t remote_port = 0;
  int state = 0;            // TCP_ESTABLISHED = 1, TCP_LISTEN = 10, ...
  std::uint64_t inode = 0;  // 0 for sockets no process holds (TIME_WAIT, orphans)
};

// Addresses are printed as 32-bit words in host byte order ("0100007F:1F90" is 127.0.0.1:8080
// on little-endian hosts), so the parse is only meaningful on the host that produced the text.
// A line that is not a well-formed row (the header, a truncated line) gives nullopt.
std::optional<tcp_row> parse_tcp_line(std::string_view line, bool v6);
// Every well-formed row of a whole table; other lines are skipped.
std::vector<tcp_row> parse_tcp_table(std::string_view text, bool v6);

// "127.0.0.1", "::1", "[::1]", "fe80::1%eth0" as bytes; nullopt when not an IP.
std::optional<ip_bytes> parse_ip(std::string_view text);

}  // namespace detail
}  // namespace broker::capture
