#include "sandbox/sandbox_init.hpp"

#include <arpa/inet.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/capture_net.hpp"
#include "sandbox/fd_message.hpp"
#include "sandbox/launch_plan.hpp"
#include "sandbox/sandbox_mounts.hpp"
#include "sandbox/syscall_filter.hpp"

extern char** environ;

namespace broker::sandbox {

void sandbox_fail(int control, const std::string& what) {
  const std::string message = "E" + what + ": " + std::strerror(errno);
  (void)::send(control, message.data(), message.size(), MSG_NOSIGNAL);
  ::_exit(125);
}

namespace {

void bring_up_loopback(int control) {
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) sandbox_fail(control, "socket");
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s, SIOCGIFFLAGS, &request) < 0) sandbox_fail(control, "reading the loopback's flags");
  request.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s, SIOCSIFFLAGS, &request) < 0) sandbox_fail(control, "bringing up loopback");
  ::close(s);
}

int make_listener(int control, std::uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) sandbox_fail(control, "socket");
  const int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address) < 0)
    sandbox_fail(control, "binding the proxy listener");
  if (::listen(s, SOMAXCONN) < 0) sandbox_fail(control, "listen");
  return s;
}

// A dual-stack socket on [::]:port (IPv4 clients arrive as v4-mapped): the capture listener,
// and the DNS server's UDP and TCP sockets.
int make_any_address_socket(int control, int type, std::uint16_t port, const char* what) {
  const int s = ::socket(AF_INET6, type | SOCK_CLOEXEC, 0);
  if (s < 0) sandbox_fail(control, std::string("socket for ") + what);
  const int zero = 0, one = 1;
  ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (type == SOCK_STREAM) ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_port = htons(port);
  address.sin6_addr = in6addr_any;
  if (::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address) < 0)
    sandbox_fail(control, std::string("binding ") + what);
  if (type == SOCK_STREAM && ::listen(s, SOMAXCONN) < 0)
    sandbox_fail(control, std::string("listen for ") + what);
  return s;
}

// 'L', 'D' when a sock_diag socket is attached ('-' when not), 'N' when the nfnetlink socket is
// ('-' when not), and why capture is unavailable (nothing when it is available or not asked
// for), with the sockets attached: the proxy listener, the sock_diag socket, the capture listener
// and the DNS sockets, then the nfnetlink socket.
static_assert(max_sandbox_sockets <= max_message_fds);

void send_sockets(int control, const std::vector<int>& fds, bool sock_diag, bool netfilter,
                  const std::string& capture_unavailable) {
  std::string text =
      std::string("L") + (sock_diag ? 'D' : '-') + (netfilter ? 'N' : '-') + capture_unavailable;
  if (send_with_fds(control, text, fds) != static_cast<ssize_t>(text.size()))
    sandbox_fail(control, "handing over the listener");
  for (int fd : fds) ::close(fd);
}

// The sockets the broker serves inside this namespace. With capture, the namespace is set up so
// that directly dialed TCP lands on the capture listener and every address's port 53 on the DNS
// sockets (capture_net.hpp); a kernel that refuses that leaves the proxy listener alone, and
// the broker says why. The nfnetlink socket capture's rules went over goes to the broker too:
// its last close waits for the kernel to free their transaction (an RCU grace period), which
// would hold up the command's start (its exec closing an inherited copy) or init's exit.
void hand_over_sockets(int control, const launch_options& options) {
  std::vector<int> fds{make_listener(control, options.proxy_port)};
  // A netlink socket answers about the namespace it was made in: the broker asks this one which
  // socket of the child's a connection comes from. Without it (a kernel without sock_diag) the
  // broker reads this namespace's /proc/<pid>/net/tcp instead.
  const int sock_diag =
      ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
  if (sock_diag >= 0) fds.push_back(sock_diag);
  std::string unavailable;
  int netfilter_socket = -1;
  if (options.capture) unavailable = set_up_capture(options.capture_port, &netfilter_socket);
  if (options.capture && unavailable.empty()) {
    fds.push_back(make_any_address_socket(control, SOCK_STREAM, options.capture_port,
                                          "the capture listener"));
    fds.push_back(make_any_address_socket(control, SOCK_DGRAM, 53, "the DNS socket"));
    fds.push_back(make_any_address_socket(control, SOCK_STREAM, 53, "the DNS listener"));
  }
  if (netfilter_socket >= 0) fds.push_back(netfilter_socket);
  send_sockets(control, fds, sock_diag >= 0, netfilter_socket >= 0, unavailable);
}

// The rest of the launch options, from the broker once it has prepared them (launch_plan.hpp).
// The broker gone before it sent them: the session never started, nothing to report.
launch_options receive_plan(int control) {
  char word = 0;
  iovec data{&word, 1};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = space;
  message.msg_controllen = sizeof space;
  ssize_t n;
  do n = ::recvmsg(control, &message, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0) ::_exit(125);
  const cmsghdr* header = CMSG_FIRSTHDR(&message);
  if (word != 'P' || !header || header->cmsg_type != SCM_RIGHTS)
    sandbox_fail(control, "reading the launch plan");
  int file = -1;
  std::memcpy(&file, CMSG_DATA(header), sizeof file);
  std::string plan;
  char chunk[64 * 1024];
  for (off_t at = 0;;) {
    const ssize_t got = ::pread(file, chunk, sizeof chunk, at);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) sandbox_fail(control, "reading the launch plan");
    if (got == 0) break;
    plan.append(chunk, static_cast<std::size_t>(got));
    at += got;
  }
  ::close(file);
  try {
    return decode_launch_plan(plan);
  } catch (const launch_error& e) {
    errno = EINVAL;
    sandbox_fail(control, e.what());
  }
}

// 'M', the file system is ready: then for each layer '1' (mounted) or '0' (left read-only),
// with the tmpfs of their upper directories attached when there is one (the broker reads what
// the session changed there when it ends, after this namespace is gone).
void report_mounts(int control, const mounted_layers& layers) {
  std::string text = "M";
  for (bool m : layers.mounted) text += m ? '1' : '0';
  std::vector<int> fds;
  if (layers.upper >= 0) fds.push_back(layers.upper);
  if (send_with_fds(control, text, fds) != static_cast<ssize_t>(text.size())) ::_exit(125);
  if (layers.upper >= 0) ::close(layers.upper);
}

void ignore_handler(int) {}

// A command started as real root keeps root's everyday powers over files and users (owning
// files, installing packages, dropping to another user) but loses those that would undo the
// sandbox or outlive it: unmounting the masks or reading the memory of init (a copy of the
// broker's), reaching outside the namespaces, raw devices and kernel memory, the clock, the
// audit and accounting subsystems, immutable flags and file capabilities on the user's files.
// Dropped from the bounding set, they cannot come back through exec.
void drop_escape_capabilities() {
  for (int cap : {CAP_SYS_ADMIN,       CAP_SYS_PTRACE,
                  CAP_SYS_MODULE,      CAP_SYS_RAWIO,
                  CAP_MKNOD,           CAP_DAC_READ_SEARCH,
                  CAP_NET_ADMIN,       CAP_SYS_BOOT,
                  CAP_SYSLOG,          CAP_BPF,
                  CAP_PERFMON,         CAP_SETPCAP,
                  CAP_SYS_RESOURCE,    CAP_MAC_ADMIN,
                  CAP_MAC_OVERRIDE,    CAP_SYS_TIME,
                  CAP_SYS_PACCT,       CAP_SYS_TTY_CONFIG,
                  CAP_LINUX_IMMUTABLE, CAP_AUDIT_CONTROL,
                  CAP_AUDIT_READ,      CAP_AUDIT_WRITE,
                  CAP_WAKE_ALARM,      CAP_BLOCK_SUSPEND,
                  CAP_SETFCAP,         CAP_CHECKPOINT_RESTORE,
                  CAP_IPC_OWNER,       CAP_LEASE})
    ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

// After the command: TERM to everything else in the namespace, reap for up to the grace period;
// what is left dies with init (the kernel kills a PID namespace's members when its init exits).
// True once every other process of the namespace has been reaped (there are none left).
bool end_the_rest(const launch_options& options, const sigset_t& waited) {
  ::kill(-1, SIGTERM);
  timespec until{};
  ::clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += options.grace.count() / 1000;
  until.tv_nsec += (options.grace.count() % 1000) * 1000000;
  for (;;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) return true;
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    long left_ms = (until.tv_sec - now.tv_sec) * 1000 + (until.tv_nsec - now.tv_nsec) / 1000000;
    if (left_ms <= 0) return false;
    const timespec wait{0, std::min(left_ms, 50L) * 1000000};
    siginfo_t info;
    (void)::sigtimedwait(&waited, &info, &wait);
  }
}

}  // namespace

sigset_t forwarded_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  return set;
}

void exec_command(const launch_options& options, const sigset_t& mask) {
  for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
  ::setpgid(0, 0);
  if (::isatty(STDIN_FILENO)) {
    // Take the terminal, as a shell does for a foreground job; SIGTTOU would stop us otherwise.
    ::signal(SIGTTOU, SIG_IGN);
    ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    ::signal(SIGTTOU, SIG_DFL);
  }
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : options.envp) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // execvpe looks the command up in this process's PATH, not envp's: the command's own, since
  // init's environment is wiped (unset, it would be /bin:/usr/bin only).
  ::unsetenv("PATH");
  for (const auto& e : options.envp)
    if (e.starts_with("PATH=")) ::setenv("PATH", e.c_str() + 5, 1);
  ::execvpe(argv[0], argv.data(), envp.data());
  const int error = errno;
  std::fprintf(stderr, "broker: %s: %s\n", argv[0], std::strerror(error));
  ::_exit(error == ENOENT ? 127 : 126);
}

int sandbox_init(void* arg) {
  const auto& a = *static_cast<sandbox_args*>(arg);
  const launch_options& network = *a.options;
  ::close(a.broker_end);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Init is cloned before the broker reads the credentials, so the environment it inherited still
  // holds the values of `env:` sources. It needs none of it (the command's comes with the plan):
  // overwritten where /proc/PID/environ reads it, as the broker overwrites its own, and nothing
  // of init is readable through /proc by the same user.
  for (char** e = environ; e && *e; ++e) std::memset(*e, 0, std::strlen(*e));
  ::clearenv();
  ::prctl(PR_SET_DUMPABLE, 0);
  if (a.user_namespace) {
    // The broker, non-dumpable, can only write our id maps while our /proc files are ours: that
    // takes us being dumpable, for the moment it writes them (no other process of the session
    // exists yet).
    ::prctl(PR_SET_DUMPABLE, 1);
    const char ready = 'R';
    if (::send(a.control, &ready, 1, MSG_NOSIGNAL) != 1) ::_exit(125);
    char go = 0;
    if (::recv(a.control, &go, 1, 0) != 1) ::_exit(125);  // the broker went away
    ::prctl(PR_SET_DUMPABLE, 0);
  }
  ::setpgid(0, 0);
  bring_up_loopback(a.control);
  hand_over_sockets(a.control, network);
  // The file system once the broker has prepared it; a failure in it still reaches the broker
  // (it reads the control socket until the word that it is ready).
  const launch_options options = receive_plan(a.control);
  report_mounts(a.control, set_up_mounts(a.control, options));

  // PID 1 receives only signals it has a handler for; they stay blocked and are taken with
  // sigwaitinfo below.
  sigset_t waited = a.forwarded;
  sigaddset(&waited, SIGCHLD);
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&waited, s)) ::signal(s, ignore_handler);
  ::sigprocmask(SIG_BLOCK, &waited, nullptr);

  const pid_t command = ::fork();
  if (command < 0) sandbox_fail(a.control, "fork");
  if (command == 0) {
    ::close(a.control);
    const bool root = ::geteuid() == 0;
    if (root) drop_escape_capabilities();
    if (const std::string why = install_syscall_filter(root); !why.empty()) {
      std::fprintf(stderr, "broker: the command's syscall filter: %s\n", why.c_str());
      ::_exit(125);
    }
    exec_command(options, a.original_mask);
  }
  int code = 125;
  for (;;) {
    siginfo_t info{};
    if (::sigwaitinfo(&waited, &info) < 0) continue;
    if (info.si_signo != SIGCHLD) {
      ::kill(-command, info.si_signo);
      continue;
    }
    int status = 0;
    pid_t done;
    bool command_done = false;
    while ((done = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (done == command) {
        code = exit_code(status);
        command_done = true;
      }
    }
    if (command_done) break;
  }
  if (end_the_rest(options, waited)) {
    // No process of the session is left, and none can start (we fork no more): the broker may
    // take the views back now, while the kernel takes down this namespace's mounts as we exit
    // (~70 of them, 2-3 ms). With some still there past the grace, it waits for our exit, which
    // ends them first.
    char ended[1 + sizeof code] = {'X'};
    std::memcpy(ended + 1, &code, sizeof code);
    (void)::send(a.control, ended, sizeof ended, MSG_NOSIGNAL);
  }
  ::_exit(code);
}

}  // namespace broker::sandbox
