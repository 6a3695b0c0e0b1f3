// The host's shared directories a netns-mode child gets private and empty (DESIGN §8.1): /tmp,
// /var/tmp, /run, /var/run, /dev/shm and $XDG_RUNTIME_DIR hold the host's unix sockets (docker,
// systemd, D-Bus, ssh-agent, other sessions' control sockets), which no network namespace
// covers. What the command needs from under them (its working directory, $HOME, its executable,
// the session's trust bundle, files.pass) is bound through.
#pragma once

#include <string>
#include <vector>

namespace broker::wrap {

// One step of the child's mount setup, done in order: an empty tmpfs over `path` (made first
// when an earlier step hid it), or the host's `path` bound back in.
struct view_step {
  enum kind { empty, bind } what;
  std::string path;
  unsigned mode = 0;  // empty: the tmpfs root's mode
};

// The steps for `dirs` (empty steps) made private and `kept` seen through them. Paths become
// canonical (links resolved; missing ones dropped, so /var/run is /run). A kept path under no
// private directory, or already visible through another kept path, needs no step. Parents come
// before children, so $XDG_RUNTIME_DIR under a kept working directory is still made empty.
std::vector<view_step> private_view(const std::vector<view_step>& dirs,
                                    const std::vector<std::string>& kept);

// The directories of DESIGN §8.1 with `xdg_runtime_dir` (empty: none), as empty steps: /run
// 0755, $XDG_RUNTIME_DIR 0700 (the user's), the others 1777.
std::vector<view_step> host_ipc_dirs(const std::string& xdg_runtime_dir);

// Where `command` is found as execvpe would find it with `path_variable` ($PATH), from `cwd`;
// empty when it is not found.
std::string find_command(const std::string& command, const std::string& path_variable,
                         const std::string& cwd);

}  // namespace broker::wrap
