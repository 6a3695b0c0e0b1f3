#include "session/control_socket.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/atomic_file.hpp"

namespace broker::session {

namespace {

sockaddr_un address_of(const std::filesystem::path& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string p = path.string();
  if (p.size() >= sizeof a.sun_path)
    throw std::runtime_error(p + ": path too long for a unix socket");
  std::memcpy(a.sun_path, p.c_str(), p.size() + 1);
  return a;
}

// One line, bounded, within a deadline.
std::string read_line(int fd, int timeout_ms) {
  std::string line;
  char buffer[4096];
  // A gateway's `session create` carries policy files; its answer names the dummies.
  while (line.size() < control_line_max && line.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) break;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    line.append(buffer, static_cast<std::size_t>(n));
  }
  if (auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
  return line;
}

// Where the session's broker records its pid, beside its control socket.
std::filesystem::path pid_file_of(const std::filesystem::path& socket) {
  return std::filesystem::path(socket).replace_extension(".pid");
}

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// The client as its peer credentials name it.
std::string peer_of(int fd) {
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return "unknown";
  std::string who = "uid " + std::to_string(peer.uid) + ", pid " + std::to_string(peer.pid);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(peer.pid) + "/exe", ec);
  if (!ec) who += " (" + exe.string() + ")";
  return who;
}

}  // namespace

control_socket::control_socket(std::filesystem::path path, status_fn status, kill_fn kill,
                               command_fn other)
    : path_(std::move(path)),
      status_(std::move(status)),
      kill_(std::move(kill)),
      other_(std::move(other)) {
  const sockaddr_un a = address_of(path_);
  // Who listens here, for clients to check the socket's peer against (it is the pid
  // SO_PEERCRED reports: the process that called listen).
  base::write_file_atomically(pid_file_of(path_), std::to_string(::getpid()) + "\n", 0600,
                              base::durability::session);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("control socket: " + std::string(std::strerror(errno)));
  ::unlink(path_.c_str());
  // Only this user may ask for the usage or end the session.
  const mode_t old = ::umask(077);
  const int bound = ::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  ::umask(old);
  if (bound < 0 || ::listen(fd_, 8) < 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error(path_.string() + ": " + why);
  }
  wake_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_ < 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("control socket: " + why);
  }
  thread_ = std::thread([this] { serve(); });
}

control_socket::~control_socket() {
  stop_ = true;
  const std::uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(wake_);
  ::close(fd_);
  ::unlink(path_.c_str());
  ::unlink(pid_file_of(path_).c_str());
}

void control_socket::serve() {
  while (!stop_) {
    // Waits for a client or the destructor's wake-up, nothing else: a session's end never
    // waits on a timer here.
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (::poll(p, 2, -1) < 1 || (p[1].revents & POLLIN) || !(p[0].revents & POLLIN)) continue;
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    // A client that stops reading holds the answer at most this long (the session's end joins
    // this thread).
    const timeval send_wait{2, 0};
    ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &send_wait, sizeof send_wait);
    const std::string command = read_line(client, 2000);
    nlohmann::ordered_json answer;
    try {
      if (command == "status") {
        answer = status_();
      } else if (command == "kill") {
        kill_();
        answer = {{"ok", true}};
      } else if (auto handled = other_ ? other_(command, peer_of(client)) : std::nullopt) {
        answer = std::move(*handled);
      } else {
        answer = {{"error", "unknown command; use status or kill"}};
      }
    } catch (const std::exception& e) {
      answer = {{"error", e.what()}};
    }
    write_all(client, answer.dump() + "\n");
    ::close(client);
  }
}

std::string control_request(const std::filesystem::path& socket, const std::string& command) {
  const sockaddr_un a = address_of(socket);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) < 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(socket.string() + ": the session does not answer");
  }
  // Whoever answers must be the session's broker: a process that replaced the socket (the
  // wrapped command, when it can reach the runtime directory) must not take `kill` for it.
  ucred peer{};
  socklen_t size = sizeof peer;
  const bool known = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0;
  std::ifstream recorded(pid_file_of(socket));
  pid_t broker = 0;
  recorded >> broker;
  if (!known || broker <= 0 || peer.pid != broker) {
    ::close(fd);
    throw std::runtime_error(socket.string() + ": answered by pid " +
                             (known ? std::to_string(peer.pid) : "?") +
                             ", not the session's broker (" +
                             (broker > 0 ? "pid " + std::to_string(broker) : "no pid recorded") +
                             "); the socket was replaced, nothing was sent");
  }
  write_all(fd, command + "\n");
  std::string answer = read_line(fd, 5000);
  ::close(fd);
  if (answer.empty()) throw std::runtime_error(socket.string() + ": no answer");
  return answer;
}

}  // namespace broker::session
