#include "sandbox/syscall_filter.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace broker::sandbox {

namespace {

// Host-global kernel state, and ways around the sandbox.
constexpr const char* denied[] = {
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "swapon",
    "swapoff",
    "reboot",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "unshare",
    "setns",
    "acct",
    "iopl",
    "ioperm",
    "quotactl",
    "lookup_dcookie",
    "syslog",
    "vhangup",
    "nfsservctl",
};

// Calls whose arguments a filter cannot read (clone3's flags, openat2's mode: both in a struct)
// or whose work escapes it (io_uring opens files and more without a system call of its own).
// ENOSYS, so that libc and programs fall back to the calls the filter can judge.
constexpr const char* unfilterable[] = {"clone3", "openat2", "io_uring_setup", "io_uring_enter",
                                        "io_uring_register"};

constexpr unsigned long unshare_flags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                           CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                           CLONE_NEWCGROUP};

// The terminal requests that inject input (TIOCSTI) or act on the console (TIOCLINUX).
constexpr unsigned long terminal_requests[] = {TIOCSTI, TIOCLINUX};

class filter {
 public:
  filter() : ctx_(seccomp_init(SCMP_ACT_ALLOW)) {}
  ~filter() {
    if (ctx_) seccomp_release(ctx_);
  }
  filter(const filter&) = delete;
  filter& operator=(const filter&) = delete;

  scmp_filter_ctx get() const { return ctx_; }

 private:
  scmp_filter_ctx ctx_;
};

std::string failed(const char* what, int rc) {
  return std::string(what) + ": " + std::strerror(-rc);
}

// The calls that take a new file's mode, and which argument holds it (and, for open and
// openat, which holds the flags: the mode counts only with O_CREAT or O_TMPFILE).
struct mode_call {
  const char* name;
  unsigned mode_arg;
  int flags_arg = -1;
};
constexpr mode_call mode_calls[] = {
    {"chmod", 1}, {"fchmod", 1},  {"fchmodat", 2}, {"fchmodat2", 2}, {"creat", 1},
    {"mknod", 1}, {"mknodat", 2}, {"open", 2, 1},  {"openat", 3, 2},
};

// No call makes a file set-user-ID or set-group-ID.
std::string deny_set_id_modes(scmp_filter_ctx ctx) {
  const auto deny = SCMP_ACT_ERRNO(EPERM);
  for (const mode_call& call : mode_calls) {
    const int nr = seccomp_syscall_resolve_name(call.name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture (open, creat on arm64)
    for (scmp_datum_t bit : {scmp_datum_t{S_ISUID}, scmp_datum_t{S_ISGID}}) {
      const scmp_arg_cmp mode{call.mode_arg, SCMP_CMP_MASKED_EQ, bit, bit};
      if (call.flags_arg < 0) {
        if (int rc = seccomp_rule_add_array(ctx, deny, nr, 1, &mode); rc < 0)
          return failed(call.name, rc);
        continue;
      }
      const auto flags_arg = static_cast<unsigned>(call.flags_arg);
      for (scmp_datum_t creating : {scmp_datum_t{O_CREAT}, scmp_datum_t{__O_TMPFILE}}) {
        const scmp_arg_cmp both[] = {{flags_arg, SCMP_CMP_MASKED_EQ, creating, creating}, mode};
        if (int rc = seccomp_rule_add_array(ctx, deny, nr, 2, both); rc < 0)
          return failed(call.name, rc);
      }
    }
  }
  return {};
}

}  // namespace

std::string install_syscall_filter(bool root) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return std::string("no_new_privs: ") + std::strerror(errno);
  filter f;
  if (!f.get()) return "seccomp_init failed";
  const auto deny = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : denied) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (int rc = seccomp_rule_add(f.get(), deny, nr, 0); rc < 0) return failed(name, rc);
  }
  for (unsigned long flag : unshare_flags) {
    if (int rc = seccomp_rule_add(f.get(), deny, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc < 0)
      return failed("clone", rc);
  }
  for (const char* name : unfilterable) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;
    if (int rc = seccomp_rule_add(f.get(), SCMP_ACT_ERRNO(ENOSYS), nr, 0); rc < 0)
      return failed(name, rc);
  }
  for (unsigned long request : terminal_requests) {
    // The request argument is an int to the kernel: compare the low 32 bits only.
    if (int rc = seccomp_rule_add(f.get(), deny, SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, request));
        rc < 0)
      return failed("ioctl", rc);
  }
  if (root)
    if (std::string why = deny_set_id_modes(f.get()); !why.empty()) return why;
  if (int rc = seccomp_load(f.get()); rc < 0) return failed("seccomp_load", rc);
  return {};
}

}  // namespace broker::sandbox
