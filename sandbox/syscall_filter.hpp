// The seccomp filter a netns-mode command runs under (docs/security-model.md), built with
// libseccomp: a root child cannot load modules, kexec, use bpf, perf_event_open, userfaultfd or the
// kernel keyring, mount, swap, reboot, set the clock, or make new namespaces; no child can push
// input into the user's terminal (TIOCSTI, TIOCLINUX). Each is refused with EPERM (clone3, whose
// flags a filter cannot read, with ENOSYS: libc then falls back to clone, whose flags it can).
// openat2 (its mode is in a struct the filter cannot read) and io_uring (whose operations bypass
// the filter) get ENOSYS: programs fall back to openat and to plain system calls.
#pragma once

#include <string>

namespace broker::sandbox {

// Sets no_new_privs and loads the filter into the calling thread (inherited by what it execs).
// `root`: the command runs as real root, and may not make a file set-user-ID or set-group-ID
// either (chmod, fchmod, fchmodat, fchmodat2, and open, openat, creat, mknod, mknodat with those
// mode bits): one left in the user's files would give root to whoever runs it later, outside.
// Returns "" or what failed; async-signal-safe enough for a freshly forked child (it allocates).
std::string install_syscall_filter(bool root);

}  // namespace broker::sandbox
