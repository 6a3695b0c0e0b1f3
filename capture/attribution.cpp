#include "capture/attribution.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <unordered_set>

namespace broker::capture {
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

// What a search may still do, and whether it has had to leave something unsearched.
struct scan_budget {
  std::size_t processes = max_scanned_processes;
  std::size_t fds = max_scanned_fds;
  bool complete = true;
};

// The names in directory `path` (a /proc directory), each passed to `take` until it returns
// false; false when the directory cannot be opened (errno says why). Raw getdents64 with one
// large buffer: a /proc directory of a few entries costs open, one getdents64 and close.
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

// A /proc directory that could not be opened: its process or thread has gone (nothing of it
// is left to search), or it could not be searched.
void note_unopened(scan_budget& budget) {
  if (errno != ENOENT && errno != ESRCH) budget.complete = false;
}

// Whether the descriptor table /proc/<pid>/task/<tid>/fd holds `link`, reading its descriptors
// newest-numbered first: a process that just connected usually holds the socket under its
// highest number (the lowest free one, above the descriptors it keeps).
bool table_holds(int pid, int tid, std::string_view link, scan_budget& budget) {
  std::array<int, max_fds_per_scanned_process> fds;
  std::size_t count = 0;
  int dir = -1;
  const bool listed = for_each_entry(
      "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/fd",
      [&](std::string_view name) {
        if (count == fds.size()) return budget.complete = false;
        if (int fd = 0; detail::parse_number(name, fd)) fds[count++] = fd;
        return true;
      },
      &dir);
  if (!listed) {
    note_unopened(budget);
    return false;
  }
  char name[16];
  char target[64];
  bool found = false;
  while (!found && count > 0) {
    if (budget.fds == 0) {
      budget.complete = false;
      break;
    }
    --budget.fds;
    *std::to_chars(name, name + sizeof name - 1, fds[--count]).ptr = '\0';
    const ssize_t n = readlinkat(dir, name, target, sizeof target);
    found = n > 0 && std::string_view(target, static_cast<std::size_t>(n)) == link;
  }
  close(dir);
  return found;
}

// Whether two threads share one descriptor table; false when kcmp(2) cannot tell (then both
// are searched).
bool same_table(int a, int b) {
  return ::syscall(SYS_kcmp, a, b, KCMP_FILES, 0, 0) == 0;
}

// The threads of `pid`; empty when it has gone.
std::vector<int> threads_of(int pid, scan_budget& budget) {
  std::vector<int> tids;
  if (!for_each_entry("/proc/" + std::to_string(pid) + "/task", [&](std::string_view name) {
        if (auto tid = parse_pid(name)) tids.push_back(*tid);
        return true;
      }))
    note_unopened(budget);
  return tids;
}

// The thread of process `pid` (threads `tids`) whose table holds `link`; 0 for none. Threads
// share their process's table unless made without CLONE_FILES, and a thread-group leader that
// has exited leaves its threads' table out of /proc/<pid>/fd: each distinct table is read once.
int thread_holding(int pid, const std::vector<int>& tids, std::string_view link,
                   scan_budget& budget) {
  std::vector<int> read;
  for (int tid : tids) {
    if (std::any_of(read.begin(), read.end(), [&](int seen) { return same_table(seen, tid); }))
      continue;
    read.push_back(tid);
    if (table_holds(pid, tid, link, budget)) return tid;
  }
  return 0;
}

// A process as its thread `tid` shows it (the leader may have exited, and its /proc/<pid>/exe
// with it): the executable's path, and what stat of the link says, which follows it to the very
// file the process runs, in whatever mount namespace it was named.
config::program_holder holder_of(int pid, int tid) {
  const std::string link = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/exe";
  config::program_holder h{pid, {}, std::nullopt};
  char path[4096];
  if (const ssize_t n = readlink(link.c_str(), path, sizeof path); n > 0)
    h.exe.assign(path, static_cast<std::size_t>(n));
  if (struct stat st{}; ::stat(link.c_str(), &st) == 0)
    h.file = config::file_id{static_cast<std::uint64_t>(st.st_dev),
                             static_cast<std::uint64_t>(st.st_ino)};
  return h;
}

// Children of every thread of a process (a thread that forks is the child's parent).
void append_children(int pid, const std::vector<int>& tids, std::deque<int>& out) {
  for (int tid : tids) {
    const int fd = open(
        ("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/children").c_str(),
        O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
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
  }
}

struct listed_process {
  int pid = 0;
  std::vector<int> tids;
};

// Every process of the trees under `roots` (breadth-first), or every process there is when
// `roots` is empty; highest pid first: a connection usually comes from the process started
// last, a leaf (curl under a shell under the agent). Pids wrap around, which changes the order,
// never who is found.
std::vector<listed_process> list_processes(const std::vector<int>& roots, scan_budget& budget) {
  std::vector<listed_process> out;
  std::deque<int> queue(roots.begin(), roots.end());
  if (roots.empty())
    for_each_entry("/proc", [&](std::string_view name) {
      if (auto pid = parse_pid(name)) queue.push_back(*pid);
      return true;
    });
  std::unordered_set<int> seen;
  while (!queue.empty()) {
    const int pid = queue.front();
    queue.pop_front();
    if (pid <= 0 || !seen.insert(pid).second) continue;
    if (out.size() == budget.processes) {
      budget.complete = false;
      break;
    }
    listed_process p{pid, threads_of(pid, budget)};
    if (!roots.empty()) append_children(pid, p.tids, queue);
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid > b.pid; });
  return out;
}

}  // namespace

std::optional<socket_holders> find_socket_holders(const std::string& client_ip,
                                                  std::uint16_t client_port,
                                                  const std::string& server_ip,
                                                  std::uint16_t server_port, int netns_pid,
                                                  const std::vector<int>& candidates,
                                                  sock_diag* diag) noexcept {
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
    scan_budget budget;
    socket_holders found;
    for (const auto& p : list_processes(candidates, budget))
      if (const int tid = thread_holding(p.pid, p.tids, link, budget))
        found.holders.push_back(holder_of(p.pid, tid));
    if (found.holders.empty()) return std::nullopt;
    found.complete = budget.complete;
    return found;
  } catch (...) {
    return std::nullopt;  // allocation failure: attribution is best effort
  }
}

}  // namespace broker::capture
