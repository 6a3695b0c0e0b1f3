// The mount namespace of a netns-mode child (DESIGN §8, §8.1), set up by its init before the
// command starts: a fresh /proc, host-global kernel state read-only, the host's IPC directories
// private, the session's files over /etc's, login files' dummy copies and directory views,
// credential and broker files masked, startup files read-only.
#pragma once

#include <string>

#include "wrap/launcher.hpp"

namespace broker::wrap {

// A setup step failed: 'E' + what + errno's text up the control socket, then exit 125 (the
// broker reports it).
[[noreturn]] void sandbox_fail(int control, const std::string& what);

// Every mount of the child's view, in order; fails through sandbox_fail.
void set_up_mounts(int control, const launch_options& options);

}  // namespace broker::wrap
