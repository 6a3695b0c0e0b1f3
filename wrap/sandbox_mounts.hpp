// The mount namespace of a netns-mode child (DESIGN §8, §8.1), set up by its init before the
// command starts: a fresh /proc, host-global kernel state read-only, the host's IPC directories
// private, a minimal private /dev, the session's files over /etc's, the directories above
// every protected path pinned, login files' dummy copies and directory views, credential and
// broker files masked, startup files read-only.
#pragma once

#include <string>
#include <vector>

#include "wrap/child_session.hpp"

namespace broker::wrap {

// A setup step failed: 'E' + what + errno's text up the control socket, then exit 125 (the
// broker reports it).
[[noreturn]] void sandbox_fail(int control, const std::string& what);

// The directories above every path the view protects (a dummy copy, a directory view, a mask,
// a read-only path), outermost first, "/" left out. Each is bound onto itself in the child's
// namespace: a mount point cannot be renamed or removed there (EBUSY), so no rename of a parent
// carries a protection away (a mount over a file moves with its renamed directory) and no new
// directory takes a protected one's place (DESIGN §8.1). Paths are absolute and normal.
std::vector<std::string> pinned_directories(const launch_options& options);

// Every mount of the child's view, in order; fails through sandbox_fail.
void set_up_mounts(int control, const launch_options& options);

}  // namespace broker::wrap
