#include "wrap/syscall_filter.hpp"

#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace broker::wrap {

namespace {

// Host-global kernel state, and ways around the sandbox.
constexpr const char* denied[] = {
    "init_module",   "finit_module",   "delete_module", "kexec_load",   "kexec_file_load",
    "bpf",           "perf_event_open", "userfaultfd",  "keyctl",       "add_key",
    "request_key",   "mount",          "umount2",       "pivot_root",   "move_mount",
    "open_tree",     "fsopen",         "fsmount",       "fsconfig",     "fspick",
    "mount_setattr", "swapon",         "swapoff",       "reboot",       "settimeofday",
    "clock_settime", "clock_adjtime",  "adjtimex",      "unshare",      "setns",
    "acct",          "iopl",           "ioperm",        "quotactl",     "lookup_dcookie",
    "syslog",        "vhangup",        "nfsservctl",
};

constexpr unsigned long namespace_flags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
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
  for (unsigned long flag : namespace_flags) {
    if (int rc = seccomp_rule_add(f.get(), deny, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc < 0)
      return failed("clone", rc);
  }
  if (int rc = seccomp_rule_add(f.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc < 0)
    return failed("clone3", rc);
  for (unsigned long request : terminal_requests) {
    // The request argument is an int to the kernel: compare the low 32 bits only.
    if (int rc = seccomp_rule_add(f.get(), deny, SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, request));
        rc < 0)
      return failed("ioctl", rc);
  }
  if (root) {
    // The mode is chmod's and fchmod's second argument, fchmodat's and fchmodat2's third.
    for (auto [name, mode_arg] : {std::pair{"chmod", 1u}, std::pair{"fchmod", 1u},
                                  std::pair{"fchmodat", 2u}, std::pair{"fchmodat2", 2u}}) {
      const int nr = seccomp_syscall_resolve_name(name);
      if (nr == __NR_SCMP_ERROR) continue;
      for (scmp_datum_t bit : {scmp_datum_t{S_ISUID}, scmp_datum_t{S_ISGID}}) {
        const scmp_arg_cmp mode{mode_arg, SCMP_CMP_MASKED_EQ, bit, bit};
        if (int rc = seccomp_rule_add_array(f.get(), deny, nr, 1, &mode); rc < 0)
          return failed(name, rc);
      }
    }
  }
  if (int rc = seccomp_load(f.get()); rc < 0) return failed("seccomp_load", rc);
  return {};
}

}  // namespace broker::wrap
