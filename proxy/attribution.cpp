#include "proxy/attribution.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <functional>
#include <unordered_set>

namespace broker::proxy {
namespace detail {
namespace {

// The whole of `text` as a number, or false.
template <typename T>
bool parse_number(std::string_view text, T& out, int base = 10) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return !text.empty() && ec == std::errc{} && end == text.data() + text.size();
}

// "0100007F:1F90" (v4) or 32 hex digits ":" port (v6). Each 8-digit word is a 32-bit value in
// host byte order, so copying it back in host order restores the network-order bytes.
bool parse_endpoint(std::string_view text, bool v6, ip_bytes& ip, std::uint16_t& port) {
  const std::size_t ip_digits = v6 ? 32 : 8;
  if (text.size() != ip_digits + 5 || text[ip_digits] != ':') return false;
  if (!parse_number(text.substr(ip_digits + 1), port, 16)) return false;
  ip = {};
  std::uint8_t* dest = ip.data();
  if (!v6) {
    ip[10] = ip[11] = 0xff;
    dest += 12;
  }
  for (std::size_t word = 0; word < ip_digits / 8; ++word) {
    std::uint32_t value = 0;
    if (!parse_number(text.substr(word * 8, 8), value, 16)) return false;
    std::memcpy(dest + word * 4, &value, 4);
  }
  return true;
}

}  // namespace

std::optional<tcp_row> parse_tcp_line(std::string_view line, bool v6) {
  // Columns: sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
  std::string_view fields[10];
  std::size_t count = 0;
  std::size_t pos = 0;
  while (count < 10) {
    pos = line.find_first_not_of(" \t", pos);
    if (pos == std::string_view::npos) return std::nullopt;
    const std::size_t end = std::min(line.find_first_of(" \t", pos), line.size());
    fields[count++] = line.substr(pos, end - pos);
    pos = end;
  }
  tcp_row row;
  if (fields[0].empty() || fields[0].back() != ':' ||
      !parse_endpoint(fields[1], v6, row.local_ip, row.local_port) ||
      !parse_endpoint(fields[2], v6, row.remote_ip, row.remote_port) ||
      !parse_number(fields[3], row.state, 16) || !parse_number(fields[9], row.inode)) {
    return std::nullopt;
  }
  return row;
}

std::vector<tcp_row> parse_tcp_table(std::string_view text, bool v6) {
  std::vector<tcp_row> rows;
  while (!text.empty()) {
    const std::size_t eol = std::min(text.find('\n'), text.size());
    if (auto row = parse_tcp_line(text.substr(0, eol), v6)) rows.push_back(*row);
    text.remove_prefix(std::min(eol + 1, text.size()));
  }
  return rows;
}

std::optional<ip_bytes> parse_ip(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  text = text.substr(0, text.find('%'));  // the scope id does not appear in /proc/net/tcp6
  const std::string s(text);
  ip_bytes ip{};
  if (inet_pton(AF_INET6, s.c_str(), ip.data()) == 1) return ip;
  ip[10] = ip[11] = 0xff;
  if (inet_pton(AF_INET, s.c_str(), ip.data() + 12) == 1) return ip;
  return std::nullopt;
}

}  // namespace detail

namespace {

using detail::ip_bytes;

// The inode of the socket whose local end is `client` and remote end `server`, streaming the
// table line by line so a large table costs no large buffer and a hit stops the read; 0 if none.
std::uint64_t find_inode_in(const std::string& path, bool v6, const ip_bytes& client,
                            std::uint16_t client_port, const ip_bytes& server,
                            std::uint16_t server_port) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::string pending;
  char chunk[16 * 1024];
  std::uint64_t inode = 0;
  for (ssize_t n; inode == 0 && (n = read(fd, chunk, sizeof chunk)) > 0;) {
    pending.append(chunk, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t eol; inode == 0 && (eol = pending.find('\n', start)) != std::string::npos;
         start = eol + 1) {
      auto row = detail::parse_tcp_line(std::string_view(pending).substr(start, eol - start), v6);
      if (row && row->inode != 0 && row->local_port == client_port && row->local_ip == client &&
          row->remote_port == server_port && row->remote_ip == server) {
        inode = row->inode;
      }
    }
    pending.erase(0, start);
    if (pending.size() > 4096) break;  // no row is this long: not a tcp table
  }
  close(fd);
  return inode;
}

std::optional<int> parse_pid(std::string_view text) {
  int pid = 0;
  return detail::parse_number(text, pid) && pid > 0 ? std::optional<int>(pid) : std::nullopt;
}

struct scan_budget {
  std::size_t processes = max_scanned_processes;
  std::size_t fds = max_scanned_fds;
};

// The names in directory `path` (a /proc directory), each passed to `take` until it returns
// false; false when the directory cannot be opened. Raw getdents64 with one large buffer: a
// /proc directory of a few entries costs open, one getdents64 and close.
template <typename F>
bool for_each_entry(const std::string& path, F take, int* keep_open = nullptr) {
  const int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(dirent64) char buffer[16 * 1024];
  for (bool more = true; more;) {
    const ssize_t n = getdents64(dir, buffer, sizeof buffer);
    if (n <= 0) break;
    // The kernel stops filling only when the next entry does not fit (a name is at most 255
    // bytes): with this much room left it has reached the end, and the call that would say so
    // is saved.
    more = static_cast<std::size_t>(n) + 512 > sizeof buffer;
    for (ssize_t at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);
      at += entry->d_reclen;
      if (entry->d_name[0] != '.' && !take(std::string_view(entry->d_name))) {
        more = false;
        break;
      }
    }
  }
  if (keep_open)
    *keep_open = dir;
  else
    close(dir);
  return true;
}

// Whether `pid` holds `link`, reading its descriptors newest-numbered first: a process that
// just connected usually holds the socket under its highest number (the lowest free one, above
// the descriptors it keeps). Only the `newest` highest ones when given.
bool holds_socket(int pid, std::string_view link, scan_budget& budget,
                  std::size_t newest = max_fds_per_scanned_process) {
  std::array<int, max_fds_per_scanned_process> fds;
  std::size_t count = 0;
  int dir = -1;
  const bool listed = for_each_entry(
      "/proc/" + std::to_string(pid) + "/fd",
      [&](std::string_view name) {
        if (count == fds.size()) return false;
        if (int fd = 0; detail::parse_number(name, fd)) fds[count++] = fd;
        return true;
      },
      &dir);
  if (!listed) return false;
  char name[16];
  char target[64];
  bool found = false;
  for (std::size_t checked = 0; !found && count > 0 && checked < newest && budget.fds > 0;
       ++checked) {
    --budget.fds;
    *std::to_chars(name, name + sizeof name - 1, fds[--count]).ptr = '\0';
    const ssize_t n = readlinkat(dir, name, target, sizeof target);
    found = n > 0 && std::string_view(target, static_cast<std::size_t>(n)) == link;
  }
  close(dir);
  return found;
}

std::string exe_of(int pid) {
  char path[4096];
  const ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), path, sizeof path);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

// Children of every thread of `pid` (a thread that forks is the child's parent).
void append_children(int pid, std::deque<int>& out) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task/";
  for_each_entry(task_dir, [&](std::string_view thread) {
    const int fd =
        open((task_dir + std::string(thread) + "/children").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    std::string text;
    char chunk[4096];
    for (ssize_t n; text.size() < 1024 * 1024 && (n = read(fd, chunk, sizeof chunk)) > 0;) {
      text.append(chunk, static_cast<std::size_t>(n));
      // A seq_file read returns short of a page only at the end (it stops early only when its
      // page overflows): far short of one, the read that would return 0 is saved.
      if (static_cast<std::size_t>(n) + 64 < sizeof chunk) break;
    }
    close(fd);
    for (std::size_t pos = 0; (pos = text.find_first_not_of(' ', pos)) != std::string::npos;) {
      const std::size_t end = std::min(text.find(' ', pos), text.size());
      if (auto child = parse_pid(std::string_view(text).substr(pos, end - pos))) {
        out.push_back(*child);
      }
      pos = end;
    }
    return true;
  });
}

// The recent owners' newest descriptors first; then every process of the trees under `roots`
// (breadth-first), newest (highest pid) first: a connection usually comes from the process
// started last, a leaf (curl under a shell under the agent), and the pid order needs no extra
// read. Pids wrap around, which costs time, not correctness.
std::optional<int> scan_tree(const std::vector<int>& roots, const std::vector<int>& recent,
                             std::string_view link) {
  scan_budget budget;
  for (int pid : recent)
    if (pid > 0 && holds_socket(pid, link, budget, recent_owner_probe_fds)) return pid;
  std::vector<int> tree;
  std::deque<int> queue(roots.begin(), roots.end());
  std::unordered_set<int> seen;
  while (!queue.empty() && tree.size() < budget.processes) {
    const int pid = queue.front();
    queue.pop_front();
    if (pid <= 0 || !seen.insert(pid).second) continue;
    tree.push_back(pid);
    append_children(pid, queue);
  }
  std::sort(tree.begin(), tree.end(), std::greater<>());
  for (int pid : tree) {
    if (budget.fds == 0) break;
    if (holds_socket(pid, link, budget)) return pid;
  }
  return std::nullopt;
}

std::optional<int> scan_all(std::string_view link) {
  scan_budget budget;
  std::optional<int> found;
  for_each_entry("/proc", [&](std::string_view name) {
    if (budget.processes == 0 || budget.fds == 0) return false;
    auto pid = parse_pid(name);
    if (!pid) return true;
    --budget.processes;
    if (holds_socket(*pid, link, budget)) found = pid;
    return !found;
  });
  return found;
}

}  // namespace

std::optional<socket_owner> find_socket_owner(const std::string& client_ip,
                                              std::uint16_t client_port,
                                              const std::string& server_ip,
                                              std::uint16_t server_port, int netns_pid,
                                              const std::vector<int>& candidates, sock_diag* diag,
                                              const std::vector<int>& recent) noexcept {
  try {
    const auto client = detail::parse_ip(client_ip);
    const auto server = detail::parse_ip(server_ip);
    if (!client || !server || netns_pid < 0) return std::nullopt;
    std::uint64_t inode = 0;
    if (diag) {
      if (auto entry = diag->find(*client, client_port, *server, server_port)) inode = entry->inode;
    }
    if (inode == 0 && (!diag || !diag->proven())) {
      const std::string net_dir =
          netns_pid == 0 ? "/proc/net/" : "/proc/" + std::to_string(netns_pid) + "/net/";
      // An IPv4 client end is in tcp; one on a dual-stack IPv6 socket is in tcp6 as v4-mapped.
      if (is_v4_mapped(*client) && is_v4_mapped(*server)) {
        inode = find_inode_in(net_dir + "tcp", false, *client, client_port, *server, server_port);
      }
      if (inode == 0) {
        inode = find_inode_in(net_dir + "tcp6", true, *client, client_port, *server, server_port);
      }
    }
    if (inode == 0) return std::nullopt;
    const std::string link = "socket:[" + std::to_string(inode) + "]";
    const auto pid = candidates.empty() ? scan_all(link) : scan_tree(candidates, recent, link);
    if (!pid) return std::nullopt;
    return socket_owner{*pid, exe_of(*pid)};
  } catch (...) {
    return std::nullopt;  // allocation failure: attribution is best effort
  }
}

void recent_owners::note(int pid) {
  std::lock_guard lock(mutex_);
  auto at = std::find(pids_.begin(), pids_.end(), pid);
  if (at == pids_.end()) at = pids_.end() - 1;
  std::rotate(pids_.begin(), at, at + 1);
  pids_.front() = pid;
}

std::vector<int> recent_owners::list() const {
  std::lock_guard lock(mutex_);
  std::vector<int> out;
  for (int pid : pids_)
    if (pid > 0) out.push_back(pid);
  return out;
}

}  // namespace broker::proxy
