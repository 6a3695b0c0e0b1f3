// A running session's control socket (0600, in its private runtime directory): `broker status`
// reads the session's usage against every budget, `broker kill` ends it. One request per
// connection: a line "status" or "kill", answered with one JSON line. Beside the socket
// (control.pid) the broker records its pid; a client talks only to that process
// (docs/security-model.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace broker::session {

inline constexpr std::size_t control_line_max = 4 << 20;

class control_socket {
 public:
  using status_fn = std::function<nlohmann::ordered_json()>;
  using kill_fn = std::function<void()>;
  // Any other line (a gateway's `session ...` commands, `approve ...`): its answer, or nullopt
  // when unknown. `who` names the client from the socket's peer credentials ("uid 1000, pid 42
  // (/usr/bin/broker)"), for the records of what it decided.
  using command_fn = std::function<std::optional<nlohmann::ordered_json>(const std::string& line,
                                                                         const std::string& who)>;

  // Listens at `path` (replacing a stale socket) on its own thread. Throws std::runtime_error.
  control_socket(std::filesystem::path path, status_fn status, kill_fn kill, command_fn other = {});
  ~control_socket();
  control_socket(const control_socket&) = delete;
  control_socket& operator=(const control_socket&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  void serve();

  std::filesystem::path path_;
  status_fn status_;
  kill_fn kill_;
  command_fn other_;
  int fd_ = -1;
  int wake_ = -1;  // an eventfd: the destructor ends serve()'s wait at once
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Sends one command to a session's socket and returns the JSON answer's text. Throws
// std::runtime_error when the session does not answer, or when the socket's peer (SO_PEERCRED)
// is not the broker recorded beside it (then nothing is sent).
std::string control_request(const std::filesystem::path& socket, const std::string& command);

}  // namespace broker::session
