#include "wrap/child_session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "wrap/sandbox_init.hpp"

namespace broker::wrap {

namespace {

constexpr std::size_t clone_stack_bytes = 256 * 1024;

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

int namespace_flags(bool user_namespace) {
  // IPC: the host's System V IPC objects and POSIX message queues are out of reach too; UTS: a
  // hostname set inside stays inside.
  int flags = CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
  if (user_namespace) flags |= CLONE_NEWUSER;
  return flags;
}

// The child's uid and gid inside its user namespace are the user's own, so files keep their
// owners; it has no capability left once it execs the command.
void write_id_maps(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid) + "/";
  auto put = [&](const std::string& file, const std::string& text) {
    std::ofstream out(base + file);
    out << text;
    out.close();
    if (!out) throw launch_error("cannot write " + base + file + " for the user namespace");
  };
  put("setgroups", "deny");
  put("uid_map", std::to_string(::getuid()) + " " + std::to_string(::getuid()) + " 1\n");
  put("gid_map", std::to_string(::getgid()) + " " + std::to_string(::getgid()) + " 1\n");
}

// The listener, the sock_diag socket and the capture sockets (or the child's setup error),
// within a deadline: 'L', 'D' or '-' (a sock_diag socket attached or not), then why capture is
// unavailable (empty when it is not), with the descriptors attached.
std::vector<int> receive_sockets(int control, bool& sock_diag, std::string& capture_unavailable) {
  pollfd p{control, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) throw launch_error("the sandbox did not start within 10 s");
  char buffer[512];
  iovec data{buffer, sizeof buffer};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int) * max_sandbox_sockets)] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = space;
  message.msg_controllen = sizeof space;
  const ssize_t n = ::recvmsg(control, &message, MSG_CMSG_CLOEXEC);
  if (n <= 0) throw launch_error("the sandbox ended during setup");
  if (buffer[0] == 'E')
    throw launch_error("setting up the sandbox: " +
                       std::string(buffer + 1, static_cast<std::size_t>(n - 1)));
  const cmsghdr* header = CMSG_FIRSTHDR(&message);
  if (n < 2 || buffer[0] != 'L' || !header || header->cmsg_type != SCM_RIGHTS)
    throw launch_error("the sandbox sent no listener");
  const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
  std::vector<int> fds(count);
  std::memcpy(fds.data(), CMSG_DATA(header), count * sizeof(int));
  sock_diag = buffer[1] == 'D';
  capture_unavailable.assign(buffer + 2, static_cast<std::size_t>(n - 2));
  return fds;
}

}  // namespace

std::string netns_unavailable_reason() {
  auto stack = std::make_unique<char[]>(clone_stack_bytes);
  const bool user_namespace = ::geteuid() != 0;
  const pid_t pid = ::clone([](void*) -> int { return 0; }, stack.get() + clone_stack_bytes,
                            namespace_flags(user_namespace) | SIGCHLD, nullptr);
  if (pid < 0)
    return errno_text(user_namespace ? "cannot create user, network, PID and mount namespaces"
                                     : "cannot create network, PID and mount namespaces");
  ::waitpid(pid, nullptr, 0);
  return {};
}

child_session::child_session(const launch_options& options) : options_(options) {
  // The caller blocks the signals it forwards (and SIGCHLD) to take them itself; the command
  // starts with them unblocked.
  sigset_t current;
  ::sigprocmask(SIG_SETMASK, nullptr, &current);
  const sigset_t forwarded = forwarded_signals();
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&forwarded, s) || s == SIGCHLD) sigdelset(&current, s);
  if (options_.mode == isolation::env) {
    pid_ = ::fork();
    if (pid_ < 0) throw launch_error(errno_text("fork"));
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      exec_command(options_, current);
    }
    // The child makes its own group too; doing it here as well closes the race with a signal
    // forwarded before it ran.
    ::setpgid(pid_, pid_);
    return;
  }

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    throw launch_error(errno_text("socketpair"));
  const bool user_namespace = ::geteuid() != 0;
  sandbox_args args{&options_, pair[1], pair[0], user_namespace, forwarded_signals(), current};
  auto stack = std::make_unique<char[]>(clone_stack_bytes);
  pid_ = ::clone(sandbox_init, stack.get() + clone_stack_bytes,
                 namespace_flags(user_namespace) | SIGCHLD, &args);
  const int clone_errno = errno;
  ::close(pair[1]);
  if (pid_ < 0) {
    ::close(pair[0]);
    errno = clone_errno;
    throw launch_error(errno_text("cannot create the sandbox namespaces"));
  }
  try {
    if (user_namespace) {
      pollfd p{pair[0], POLLIN, 0};
      char ready = 0;
      if (::poll(&p, 1, 10000) != 1 || ::recv(pair[0], &ready, 1, 0) != 1 || ready != 'R')
        throw launch_error("the sandbox did not start");
      write_id_maps(pid_);
      const char go = 'G';
      if (::send(pair[0], &go, 1, MSG_NOSIGNAL) != 1) throw launch_error("the sandbox ended");
    }
    bool has_sock_diag = false;
    const auto fds = receive_sockets(pair[0], has_sock_diag, capture_.unavailable);
    listener_ = fds.at(0);
    std::size_t next = 1;
    if (has_sock_diag && fds.size() > next) sock_diag_ = fds[next++];
    if (fds.size() == next + 3) {
      capture_.listener = fds[next];
      capture_.dns_udp = fds[next + 1];
      capture_.dns_tcp = fds[next + 2];
    } else if (options_.capture && capture_.unavailable.empty()) {
      capture_.unavailable = "the sandbox made no capture sockets";
    }
  } catch (...) {
    ::close(pair[0]);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw;
  }
  ::close(pair[0]);
}

child_session::~child_session() {
  for (int fd : {listener_, sock_diag_, capture_.listener, capture_.dns_udp, capture_.dns_tcp})
    if (fd >= 0) ::close(fd);
}

int child_session::take_sock_diag() {
  return std::exchange(sock_diag_, -1);
}

child_session::capture_sockets child_session::take_capture() {
  capture_sockets out = capture_;
  capture_.listener = capture_.dns_udp = capture_.dns_tcp = -1;
  return out;
}

int child_session::take_listener() {
  const int fd = listener_;
  listener_ = -1;
  return fd;
}

void child_session::forward(int signo) const {
  if (pid_ <= 0 || status_ >= 0) return;
  if (options_.mode == isolation::env)
    ::kill(-pid_, signo);
  else
    ::kill(pid_, signo);
}

int child_session::poll() {
  if (status_ >= 0 || pid_ <= 0) return status_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = exit_code(status);
  return status_;
}

void child_session::kill_all() {
  if (pid_ <= 0 || status_ >= 0) return;
  if (options_.mode == isolation::env)
    ::kill(-pid_, SIGKILL);
  else
    ::kill(pid_, SIGKILL);
}

void child_session::end_leftovers() {
  if (options_.mode != isolation::env || pid_ <= 0) return;
  if (::kill(-pid_, SIGTERM) < 0) return;  // the group is empty already
  const auto until = std::chrono::steady_clock::now() + options_.grace;
  while (std::chrono::steady_clock::now() < until) {
    if (::kill(-pid_, 0) < 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid_, SIGKILL);
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 125;
}

}  // namespace broker::wrap
