// The host's shared directories a netns-mode child gets private and empty (docs/security-model.md):
// /tmp, /var/tmp, /run, /var/run, /dev/shm and $XDG_RUNTIME_DIR hold the host's unix sockets
// (docker, systemd, D-Bus, ssh-agent, other sessions' control sockets), which no network namespace
// covers. What the command needs from under them (its working directory, $HOME, its executable,
// the session's trust bundle, files.pass) is bound through.
#pragma once

#include <string>
#include <vector>

namespace broker::sandbox {

// One step of the child's mount setup, done in order, each at `path` (made first when an
// earlier step hid it): an empty tmpfs (`empty`); the host's `path` bound back in, read-only
// like the rest of the host (`bind`); a copy-on-write layer over the host's directory, whose
// changes are the session's own (`layer`, docs/security-model.md); the host's directory bound in
// writable, where the session's writes go through (`through`: a workspace, an agent's data).
struct view_step {
  enum kind { empty, bind, layer, through } what;
  std::string path;
  unsigned mode = 0;  // empty: the tmpfs root's mode
};

// The steps for `dirs` (empty steps) made private, `kept` seen through them, and the
// `layers` and `through` places. Paths become canonical (links resolved; missing ones dropped,
// so /var/run is /run). A kept path needs a step only where an empty or a layer step holds it
// (not in a place bound in already); a layer in another layer, or a through place in another,
// needs none. Parents come before children, so $XDG_RUNTIME_DIR under a kept working directory
// is still made empty, and a workspace in the home is bound over the home's layer.
std::vector<view_step> private_view(const std::vector<view_step>& dirs,
                                    const std::vector<std::string>& kept,
                                    const std::vector<std::string>& layers = {},
                                    const std::vector<std::string>& through = {});

// The directories of docs/security-model.md with `xdg_runtime_dir` (empty: none), as empty steps:
// /run 0755, $XDG_RUNTIME_DIR 0700 (the user's), the others 1777.
std::vector<view_step> host_ipc_dirs(const std::string& xdg_runtime_dir);

// Where `command` is found as execvpe would find it with `path_variable` ($PATH), from `cwd`;
// empty when it is not found.
std::string find_command(const std::string& command, const std::string& path_variable,
                         const std::string& cwd);

}  // namespace broker::sandbox
