// A session's private directory (0700, removed when the session ends): the trust bundle the
// child's clients read, and later the session's control socket. Under $XDG_RUNTIME_DIR/broker
// when set, else /tmp/broker-<uid>.
#pragma once

#include <filesystem>
#include <string>

namespace broker::session {

// Where sessions' directories live: $XDG_RUNTIME_DIR/broker when set, else /tmp/broker-<uid>.
std::filesystem::path runtime_base();

class session_dir {
 public:
  // Throws std::runtime_error naming the directory when it cannot be made or is not private.
  explicit session_dir(const std::string& session_id);
  ~session_dir();
  session_dir(const session_dir&) = delete;
  session_dir& operator=(const session_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path bundle() const { return path_ / "ca-bundle.pem"; }
  std::filesystem::path control_socket() const { return path_ / "control.sock"; }
  // KEY=VALUE lines at `file` (mode 0600, atomically), removed with the directory's session.
  void write_env_file(const std::filesystem::path& file, const std::string& content);

 private:
  std::filesystem::path path_;
  std::filesystem::path env_file_;
};

}  // namespace broker::session
