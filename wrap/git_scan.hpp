// Git directories in the workspace other than its own repository (DESIGN §8.1): a repository
// the command made or cloned there, or one that was there before, can hold a hook or a config
// command that would run at the user's next git command in it. At exit the working directory
// is walked (bounded in entries and time) for git directories, and what the session left in
// them that runs is kept out.
#pragma once

#include <chrono>
#include <ctime>
#include <string>
#include <vector>

namespace broker::wrap {

// What the session left in a git directory that would run later: a hook (any file in hooks/
// but git's *.sample ones) or a config file naming a command (core.fsmonitor, core.hooksPath,
// core.sshCommand, a filter, a textconv, a credential helper, a "!" alias...), made or changed
// at or after `since`.
struct git_leftover {
  std::string path;
  std::string reason;  // "a git hook", "git configuration"
};

struct git_scan_limits {
  std::size_t entries = 200'000;
  std::chrono::milliseconds time{2000};
};

// Walks `root` (not following links; not into the `skip` directories: the broker's own log
// directory, where kept-out repositories are set aside) for such leftovers. `complete` is false
// when a limit cut the walk.
std::vector<git_leftover> git_leftovers(const std::string& root, const timespec& since,
                                        const std::vector<std::string>& skip, bool& complete,
                                        const git_scan_limits& limits = {});

// Whether a git config text names a command to run (the keys above).
bool git_config_runs_commands(const std::string& text);

}  // namespace broker::wrap
