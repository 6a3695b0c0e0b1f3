// Reading a credential's real value from its source: env:NAME, file:PATH or cmd:COMMAND.
// Every buffer that held the value is wiped; every message names the source, never the value.
#include "brokers/secret_source.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include "base/text.hpp"

extern char** environ;

namespace broker::brokers {
namespace {

using clock = std::chrono::steady_clock;

// Trims in place, so the bytes never move to a second buffer.
void trim_in_place(std::string& s) {
  std::size_t end = s.size();
  while (end > 0 && base::is_space(s[end - 1])) --end;
  std::size_t begin = 0;
  while (begin < end && base::is_space(s[begin])) ++begin;
  s.resize(end);
  s.erase(0, begin);
}

// Takes the buffer's value (trimmed unless `untrimmed`; empty is absent unless `untrimmed`) and
// wipes the buffer either way.
std::optional<base::secret> take(std::string& buffer, bool untrimmed) {
  if (untrimmed) return base::secret(std::move(buffer));
  trim_in_place(buffer);
  if (buffer.empty()) {
    base::wipe(buffer);
    return std::nullopt;
  }
  return base::secret(std::move(buffer));  // copies, then wipes `buffer`
}

std::string errno_text(int err) {
  return std::strerror(err);
}

class fd_guard {
 public:
  explicit fd_guard(int fd = -1) : fd_(fd) {}
  ~fd_guard() { reset(); }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

std::optional<base::secret> from_env(const std::string& name, bool untrimmed) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  std::string copy(value);
  return take(copy, untrimmed);
}

std::optional<base::secret> from_file(const std::string& source, std::string_view path_text,
                                      const source_limits& limits, bool untrimmed) {
  std::string path(path_text);
  if (path_text.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    if (home == nullptr || *home == '\0')
      throw source_error(source + ": HOME is not set, so \"~/\" cannot be expanded");
    path = std::string(home) + std::string(path_text.substr(1));
  } else if (!path_text.starts_with("/")) {
    // docs/cli.md: nothing is read from the current directory implicitly.
    throw source_error(source + ": the path must be absolute or start with \"~/\"");
  }
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;
    throw source_error(source + ": cannot open: " + errno_text(err));
  }
  std::string buffer(limits.max_bytes + 1, '\0');
  std::size_t used = 0;
  while (used < buffer.size()) {
    ssize_t n = ::read(fd.get(), buffer.data() + used, buffer.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      base::wipe(buffer);
      throw source_error(source + ": cannot read: " + errno_text(err));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > limits.max_bytes) {
    base::wipe(buffer);
    throw source_error(source + ": larger than " + std::to_string(limits.max_bytes) + " bytes");
  }
  buffer.resize(used);
  return take(buffer, untrimmed);  // trimmed, an empty file is absent like an empty variable
}

// ---- cmd: ----

struct spawned {
  pid_t pid = -1;
  int out = -1;  // read end of the child's stdout
};

// /bin/sh -c COMMAND with stdin from /dev/null, stdout into a pipe, stderr inherited, in its own
// process group (so a timeout kills the command's children too) and default signal dispositions.
spawned spawn_shell(const std::string& source, const std::string& command) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw source_error(source + ": cannot create a pipe: " + errno_text(errno));
  fd_guard read_end(fds[0]), write_end(fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGCHLD);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::string arg0 = "sh", arg1 = "-c", arg2 = command;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw source_error(source + ": cannot run /bin/sh: " + errno_text(rc));

  return spawned{pid, read_end.release()};  // write_end closes here: the child has its copy
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

void kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);  // the whole group: the shell and whatever it started
  reap(pid);
}

// Waits for the shell to exit until `deadline`; nullopt when it did not (it is then killed).
std::optional<int> wait_until(pid_t pid, clock::time_point deadline) {
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 0;  // not our child any more (SIGCHLD ignored): assume ok
    if (clock::now() >= deadline) {
      kill_and_reap(pid);
      return std::nullopt;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
}

enum class read_outcome { eof, timed_out, too_big, failed };

read_outcome read_bounded(int fd, std::string& buffer, std::size_t& used,
                          clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) return read_outcome::timed_out;
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60'000)));
    if (ready < 0 && errno != EINTR) return read_outcome::failed;
    if (ready <= 0) continue;
    ssize_t n = ::read(fd, buffer.data() + used, buffer.size() - used);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return read_outcome::failed;
    if (n == 0) return read_outcome::eof;
    used += static_cast<std::size_t>(n);
    if (used == buffer.size()) return read_outcome::too_big;  // buffer is max_bytes + 1
  }
}

std::optional<base::secret> from_command(const std::string& source, const std::string& command,
                                         const source_limits& limits, bool untrimmed) {
  std::string buffer(limits.max_bytes + 1, '\0');  // allocated before there is a child to reap
  std::size_t used = 0;
  const auto deadline = clock::now() + limits.timeout;
  spawned child = spawn_shell(source, command);
  fd_guard out(child.out);
  read_outcome outcome = read_bounded(out.get(), buffer, used, deadline);
  out.reset();

  std::optional<int> status;
  if (outcome == read_outcome::eof)
    status = wait_until(child.pid, deadline);
  else
    kill_and_reap(child.pid);
  if (outcome == read_outcome::eof && !status) outcome = read_outcome::timed_out;

  if (outcome != read_outcome::eof) {
    base::wipe(buffer);
    if (outcome == read_outcome::timed_out)
      throw source_error(source + ": timed out after " + std::to_string(limits.timeout.count()) +
                         " ms");
    if (outcome == read_outcome::too_big)
      throw source_error(source + ": printed more than " + std::to_string(limits.max_bytes) +
                         " bytes");
    throw source_error(source + ": cannot read its output");
  }
  if (WIFSIGNALED(*status)) {
    base::wipe(buffer);
    throw source_error(source + ": killed by signal " + std::to_string(WTERMSIG(*status)));
  }
  if (WIFEXITED(*status) && WEXITSTATUS(*status) != 0) {
    base::wipe(buffer);
    throw source_error(source + ": exited with status " + std::to_string(WEXITSTATUS(*status)));
  }
  buffer.resize(used);
  auto value = take(buffer, untrimmed);
  if (!value || value->empty()) throw source_error(source + ": printed nothing");
  return value;
}

std::optional<base::secret> load(const std::string& source, const source_limits& limits,
                                 bool untrimmed) {
  std::string_view text = source;
  if (text.starts_with("env:")) return from_env(std::string(text.substr(4)), untrimmed);
  if (text.starts_with("file:")) return from_file(source, text.substr(5), limits, untrimmed);
  if (text.starts_with("cmd:"))
    return from_command(source, std::string(text.substr(4)), limits, untrimmed);
  throw source_error(source + ": unknown source (expected env:, file: or cmd:)");
}

}  // namespace

std::optional<base::secret> load_secret(const std::string& source, const source_limits& limits) {
  return load(source, limits, false);
}

std::optional<base::secret> load_secret_untrimmed(const std::string& source,
                                                  const source_limits& limits) {
  return load(source, limits, true);
}

void forget_environment_source(const std::string& source) {
  if (source.rfind("env:", 0) != 0) return;
  const std::string name = source.substr(4);
  if (char* value = std::getenv(name.c_str())) {
    // The bytes live in the process's environment block, readable through /proc/PID/environ
    // by the same user: overwrite them, then drop the variable.
    std::memset(value, 0, std::strlen(value));
    ::unsetenv(name.c_str());
  }
}

}  // namespace broker::brokers
