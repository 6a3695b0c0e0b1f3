// The mount namespace of a netns-mode child (docs/security-model.md), set up by its init before the
// command starts: the host's file system read-only, a fresh /proc, host-global kernel state
// read-only, a minimal private /dev, the host's IPC directories private, the session's
// copy-on-write layers (the home; the system's directories for a root command) with the places
// its writes go through to bound in writable, the session's files over /etc's, the directories
// above every protected path pinned, login files' dummy copies, credential and broker files
// masked, what must not change read-only.
#pragma once

#include <string>
#include <vector>

#include "sandbox/child_session.hpp"

namespace broker::sandbox {

// A setup step failed: 'E' + what + errno's text up the control socket, then exit 125 (the
// broker reports it).
[[noreturn]] void sandbox_fail(int control, const std::string& what);

// The directories above every path the view protects (a dummy copy, a mask, a read-only path),
// outermost first, "/" left out. Each is bound onto itself in the child's
// namespace: a mount point cannot be renamed or removed there (EBUSY), so no rename of a parent
// carries a protection away (a mount over a file moves with its renamed directory) and no new
// directory takes a protected one's place (docs/security-model.md). Paths are absolute and normal.
std::vector<std::string> pinned_directories(const launch_options& options);

// What init tells the broker of the layers it made: for each layer step, whether it was
// mounted, and the tmpfs holding their upper directories (-1 when none was made).
struct mounted_layers {
  std::vector<bool> mounted;
  int upper = -1;
};

// Every mount of the child's view, in order; fails through sandbox_fail.
mounted_layers set_up_mounts(int control, const launch_options& options);

}  // namespace broker::sandbox
