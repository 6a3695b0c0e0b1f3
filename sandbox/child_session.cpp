#include "sandbox/child_session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "sandbox/fd_message.hpp"
#include "sandbox/launch_plan.hpp"
#include "sandbox/sandbox_init.hpp"

namespace broker::sandbox {

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

// Init's error ('E' and what failed), or its next message; within `seconds`.
ssize_t receive(int control, msghdr& message, const char* waiting_for, int seconds = 10) {
  pollfd p{control, POLLIN, 0};
  if (::poll(&p, 1, seconds * 1000) != 1)
    throw launch_error(std::string("the sandbox did not ") + waiting_for + " within " +
                       std::to_string(seconds) + " s");
  const ssize_t n = ::recvmsg(control, &message, MSG_CMSG_CLOEXEC);
  if (n <= 0) throw launch_error("the sandbox ended during setup");
  const auto* text = static_cast<const char*>(message.msg_iov[0].iov_base);
  if (text[0] == 'E')
    throw launch_error("setting up the sandbox: " +
                       std::string(text + 1, static_cast<std::size_t>(n - 1)));
  return n;
}

// The listener, the sock_diag socket, the capture sockets and the nfnetlink socket (or the
// child's setup error): 'L', 'D' or '-' (a sock_diag socket attached or not), 'N' or '-' (the
// nfnetlink socket), then why capture is unavailable (empty when it is not), with the
// descriptors attached.
std::vector<int> receive_sockets(int control, bool& sock_diag, bool& netfilter,
                                 std::string& capture_unavailable) {
  char buffer[512];
  iovec data{buffer, sizeof buffer};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int) * max_sandbox_sockets)] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = space;
  message.msg_controllen = sizeof space;
  const ssize_t n = receive(control, message, "start");
  const cmsghdr* header = CMSG_FIRSTHDR(&message);
  if (n < 3 || buffer[0] != 'L' || !header || header->cmsg_type != SCM_RIGHTS)
    throw launch_error("the sandbox sent no listener");
  const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
  std::vector<int> fds(count);
  std::memcpy(fds.data(), CMSG_DATA(header), count * sizeof(int));
  sock_diag = buffer[1] == 'D';
  netfilter = buffer[2] == 'N';
  capture_unavailable.assign(buffer + 3, static_cast<std::size_t>(n - 3));
  return fds;
}

// What the copy of close_in_own_process keeps: the socket to close, the pipe's read end that
// says when, and the highest descriptor to close one at a time where close_range(2) is missing
// (before Linux 5.9, or a filter refusing it).
struct last_close {
  int socket, go;
  unsigned last;
};

// The copy's whole life. Only system calls: it is a copy of a process that may have had other
// threads.
int close_last(void* arg) {
  const auto [socket, go, last] = *static_cast<last_close*>(arg);
  const auto close_span = [last](unsigned first, unsigned end) {
    if (first > end || ::close_range(first, end, 0) == 0) return;
    for (unsigned each = first; each <= std::min(end, last); ++each)
      ::close(static_cast<int>(each));
  };
  // Not the broker's output, listeners or control socket: only these two.
  const unsigned low = static_cast<unsigned>(std::min(socket, go));
  const unsigned high = static_cast<unsigned>(std::max(socket, go));
  if (low > 0) close_span(0, low - 1);
  close_span(low + 1, high - 1);
  close_span(high + 1, ~0U);
  char end;
  while (::read(go, &end, 1) < 0 && errno == EINTR) {
  }
  ::close(socket);
  ::_exit(0);
}

// The last close of the nfnetlink socket capture's rules went over waits for the kernel to
// free their transaction (an RCU grace period, 5-30 ms here). A process's end waits for every
// thread of it, so a thread closing it held up a short command's end by that much: a copy of
// this process that holds nothing else closes it instead, once this one's copy is closed (an
// end of file on `go`), and ends by itself (no exit signal; the destructor, or whoever adopts it
// once the broker has ended, reaps it). -1 when none could be made: then it is closed here.
int close_in_own_process(int fd) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) < 0) {
    ::close(fd);
    return -1;
  }
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  last_close what{fd, go[0],
                  static_cast<unsigned>(std::clamp<rlim_t>(limit.rlim_cur, 1, 65536)) - 1};
  alignas(16) char stack[16 * 1024];  // the copy's own, copied with the rest of this process
  const pid_t pid = ::clone(close_last, stack + sizeof stack, 0, &what);
  ::close(fd);
  ::close(go[0]);
  ::close(go[1]);
  return pid;
}

// The plan (launch_plan.hpp) to init in a memory file, then its word that the command's file
// system is ready ('M', which layers it mounted, and the tmpfs holding them) or what failed.
void send_plan(int control, const launch_options& options, std::vector<bool>& layers, int& upper) {
  const std::string plan = encode_launch_plan(options);
  const int file = ::memfd_create("broker-launch-plan", MFD_CLOEXEC);
  if (file < 0) throw launch_error(errno_text("memfd_create"));
  for (std::size_t done = 0; done < plan.size();) {
    const ssize_t n = ::write(file, plan.data() + done, plan.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(file);
      throw launch_error(errno_text("writing the launch plan"));
    }
    done += static_cast<std::size_t>(n);
  }
  const ssize_t sent = send_with_fds(control, "P", {file});
  ::close(file);
  if (sent != 1) throw launch_error("the sandbox ended during setup");
  char reply[4096];
  iovec in{reply, sizeof reply};
  alignas(cmsghdr) char fds[CMSG_SPACE(sizeof(int))] = {};
  msghdr answer{};
  answer.msg_iov = &in;
  answer.msg_iovlen = 1;
  answer.msg_control = fds;
  answer.msg_controllen = sizeof fds;
  const ssize_t n = receive(control, answer, "set up its file system");
  if (const cmsghdr* h = CMSG_FIRSTHDR(&answer); h && h->cmsg_type == SCM_RIGHTS)
    std::memcpy(&upper, CMSG_DATA(h), sizeof upper);
  if (n < 1 || reply[0] != 'M') throw launch_error("the sandbox did not set up its file system");
  for (ssize_t i = 1; i < n; ++i) layers.push_back(reply[i] == '1');
}

}  // namespace

child_session::child_session(const launch_options& network) : options_(network) {
  // The caller blocks the signals it forwards (and SIGCHLD, SIGIO) to take them itself; the
  // command starts with them unblocked.
  ::sigprocmask(SIG_SETMASK, nullptr, &command_mask_);
  const sigset_t forwarded = forwarded_signals();
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&forwarded, s) || s == SIGCHLD || s == SIGIO) sigdelset(&command_mask_, s);
  if (options_.mode == isolation::env) return;  // nothing until launch()

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    throw launch_error(errno_text("socketpair"));
  const bool user_namespace = ::geteuid() != 0;
  sandbox_args args{&options_,           pair[1],      pair[0], user_namespace,
                    forwarded_signals(), command_mask_};
  auto stack = std::make_unique<char[]>(clone_stack_bytes);
  pid_ = ::clone(sandbox_init, stack.get() + clone_stack_bytes,
                 namespace_flags(user_namespace) | SIGCHLD, &args);
  const int clone_errno = errno;
  ::close(pair[1]);
  if (pid_ < 0) {
    ::close(pair[0]);
    errno = clone_errno;
    throw namespaces_unavailable(
        errno_text(user_namespace ? "cannot create user, network, PID and mount namespaces"
                                  : "cannot create network, PID and mount namespaces"));
  }
  control_ = pair[0];
  try {
    if (user_namespace) {
      pollfd p{control_, POLLIN, 0};
      char ready = 0;
      if (::poll(&p, 1, 10000) != 1 || ::recv(control_, &ready, 1, 0) != 1 || ready != 'R')
        throw launch_error("the sandbox did not start");
      write_id_maps(pid_);
      const char go = 'G';
      if (::send(control_, &go, 1, MSG_NOSIGNAL) != 1) throw launch_error("the sandbox ended");
    }
  } catch (...) {
    end_unlaunched();
    throw;
  }
}

void child_session::take_sockets() {
  bool has_sock_diag = false, has_netfilter = false;
  auto fds = receive_sockets(control_, has_sock_diag, has_netfilter, capture_.unavailable);
  if (has_netfilter && fds.size() > 1) {
    closer_ = close_in_own_process(fds.back());
    fds.pop_back();
  }
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
}

void child_session::launch(const launch_options& options) {
  options_ = options;
  if (options_.mode == isolation::env) {
    pid_ = ::fork();
    if (pid_ < 0) throw launch_error(errno_text("fork"));
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      exec_command(options_, command_mask_);
    }
    // The child makes its own group too; doing it here as well closes the race with a signal
    // forwarded before it ran.
    ::setpgid(pid_, pid_);
    return;
  }
  try {
    take_sockets();
    send_plan(control_, options_, layers_mounted_, layer_upper_);
  } catch (...) {
    end_unlaunched();
    throw;
  }
  // What init says from now on is its word that everything ended (take_end_report); SIGIO, to
  // this process, tells of it (or of init's end without one).
  end_report_ = std::exchange(control_, -1);
  if (::fcntl(end_report_, F_SETOWN, ::getpid()) < 0 ||
      ::fcntl(end_report_, F_SETFL, ::fcntl(end_report_, F_GETFL) | O_ASYNC | O_NONBLOCK) < 0)
    ::close(std::exchange(end_report_, -1));  // then init's end alone says it
}

int child_session::take_end_report() {
  if (status_ >= 0 || end_report_ < 0) return status_;
  char ended[1 + sizeof(int)];
  const ssize_t n = ::recv(end_report_, ended, sizeof ended, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return -1;
  ::close(std::exchange(end_report_, -1));  // one word, or init ended without it
  if (n != static_cast<ssize_t>(sizeof ended) || ended[0] != 'X') return -1;
  std::memcpy(&status_, ended + 1, sizeof(int));
  return status_;
}

void child_session::end_unlaunched() {
  if (control_ >= 0) ::close(std::exchange(control_, -1));
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

child_session::~child_session() {
  if (control_ >= 0) end_unlaunched();  // made, never launched: init waits for its plan
  if (end_report_ >= 0) ::close(end_report_);
  // Init said everything ended (its status came from take_end_report): its end follows at once.
  if (pid_ > 0 && status_ >= 0 && !reaped_) ::waitpid(pid_, nullptr, 0);
  if (closer_ > 0) ::waitpid(closer_, nullptr, WNOHANG | __WALL);
  for (int fd :
       {listener_, sock_diag_, layer_upper_, capture_.listener, capture_.dns_udp, capture_.dns_tcp})
    if (fd >= 0) ::close(fd);
}

int child_session::take_layer_upper() {
  return std::exchange(layer_upper_, -1);
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
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    status_ = exit_code(status);
    reaped_ = true;
  }
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

}  // namespace broker::sandbox
