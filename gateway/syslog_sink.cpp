#include "gateway/syslog_sink.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <stdexcept>

#include "config/request_target.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

constexpr int facility_local0 = 16;
constexpr int severity_warning = 4, severity_info = 6;

// The value of a top-level string member as the record writes it (`"key":"value"`), or "".
std::string_view member(std::string_view line, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\":\"";
  const auto at = line.find(needle);
  if (at == std::string_view::npos) return {};
  const auto start = at + needle.size();
  const auto end = line.find('"', start);
  return end == std::string_view::npos ? std::string_view() : line.substr(start, end - start);
}

// An RFC 5424 header field: 1..max printable US-ASCII characters, else the nil value "-".
std::string header_field(std::string_view value, std::size_t max) {
  if (value.empty() || value.size() > max) return "-";
  for (const char c : value)
    if (c < 33 || c > 126) return "-";
  return std::string(value);
}

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "-";
  return header_field(name, 255);
}

}  // namespace

syslog_sink::syslog_sink(const std::string& spec, std::string replica)
    : replica_(std::move(replica)), hostname_(this_hostname()) {
  config::destination dest{"127.0.0.1", std::nullopt, 514};
  if (spec != "syslog") {
    const auto where = spec.rfind("syslog:", 0) == 0
                           ? config::parse_authority(std::string_view(spec).substr(7))
                           : std::nullopt;
    if (!where)
      throw std::invalid_argument("--audit-sink " + spec +
                                  ": expected syslog or syslog:HOST:PORT (port 1-65535)");
    dest = where->dest;
  }
  host_ = dest.host;
  port_ = dest.port;
  endpoint_ = config::to_string(dest);
  thread_ = std::thread([this] { run(); });
}

syslog_sink::~syslog_sink() {
  stop();
  if (fd_ >= 0) ::close(fd_);
}

void syslog_sink::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string syslog_sink::frame(std::string_view line, const std::string& host,
                               const std::string& replica) {
  const bool refused = line.find("\"decision\":\"deny\"") != std::string_view::npos;
  std::string message =
      "<" + std::to_string(facility_local0 * 8 + (refused ? severity_warning : severity_info)) +
      ">1 " + header_field(member(line, "ts"), 64) + " " + host + " broker " +
      header_field(replica, 128) + " " + header_field(member(line, "event"), 32) + " - ";
  message.append(line);
  return std::to_string(message.size()) + " " + message;
}

void syslog_sink::ship(std::string_view, std::string_view line) {
  {
    std::lock_guard lock(mutex_);
    if (pending_.size() >= max_pending) {
      // The oldest line the thread has not taken goes (the ones it is sending stay).
      ++dropped_;
      if (in_flight_ >= pending_.size()) return;
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(in_flight_));
    }
    pending_.emplace_back(line);
  }
  wake_.notify_one();
}

// Connecting waits up to connect_timeout, and a send up to send_timeout (a server that stopped
// reading): then the connection counts as lost, and the thread never blocks for longer.
bool syslog_sink::connect_socket() {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found) != 0)
    return false;
  for (auto* a = found; a && fd_ < 0; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    bool connected = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!connected && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t size = sizeof error;
      connected = ::poll(&p, 1, static_cast<int>(connect_timeout.count())) == 1 &&
                  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
    }
    const timeval send_wait{static_cast<time_t>(send_timeout.count() / 1000), 0};
    if (connected && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 &&
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_wait, sizeof send_wait) == 0) {
      fd_ = fd;
    } else {
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  return fd_ >= 0;
}

// A syslog server never sends: the socket turning readable means it closed (or reset) it.
bool syslog_sink::connection_closed() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) != 0;
}

void syslog_sink::disconnect() {
  ::close(fd_);
  fd_ = -1;
  std::lock_guard lock(mutex_);
  pending_.insert(pending_.begin(), std::make_move_iterator(replay_.begin()),
                  std::make_move_iterator(replay_.end()));
  replay_.clear();
  replay_size_ = 0;
}

void syslog_sink::run() {
  bool failing = false;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (stopping_) return;
    }
    // Found closed before a batch: what was sent lately may not have been read; it goes again.
    if (fd_ >= 0 && connection_closed()) disconnect();
    bool sent = false;
    std::size_t lines = 0;
    if (fd_ >= 0 || connect_socket()) {
      std::string batch;
      {
        std::lock_guard lock(mutex_);
        for (; lines < pending_.size() && lines < batch_size; ++lines)
          batch += frame(pending_[lines], hostname_, replica_);
        in_flight_ = lines;
      }
      std::size_t off = 0;
      while (off < batch.size()) {
        const auto n = ::send(fd_, batch.data() + off, batch.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
      sent = off == batch.size();
      if (!sent) disconnect();  // the batch stays queued, behind the replay window
    }
    std::unique_lock lock(mutex_);
    in_flight_ = 0;
    if (sent) {
      // Only this thread takes from the front of pending_: the batch is its first `lines`.
      for (std::size_t i = 0; i < lines; ++i) {
        replay_size_ += pending_.front().size();
        replay_.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      while (replay_size_ > replay_bytes) {
        replay_size_ -= replay_.front().size();
        replay_.pop_front();
      }
      shipped_ += lines;
      if (failing)
        session::log(spdlog::level::info, session::log_tag("audit-sink"), "syslog {} reached again",
                     endpoint_);
      failing = false;
      continue;
    }
    if (!failing)
      session::log(spdlog::level::warn, session::log_tag("audit-sink"),
                   "records wait for syslog {} (cannot connect or send)", endpoint_);
    failing = true;
    wake_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stopping_; });
    if (stopping_) return;
  }
}

void syslog_sink::settle(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pending_.empty() && std::chrono::steady_clock::now() < until) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    lock.lock();
  }
}

void syslog_sink::flush() {
  settle(std::chrono::seconds(1));
  stop();
  std::lock_guard lock(mutex_);
  if (!pending_.empty())
    session::log(spdlog::level::err, session::log_tag("audit-sink"),
                 "{} record(s) not sent to syslog {} at shutdown (they are in the files)",
                 pending_.size(), endpoint_);
}

}  // namespace broker::gateway
