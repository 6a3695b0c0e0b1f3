// A git configuration as git itself reads it (docs/security-model.md): the broker never judges one
// with a line parser of its own, which a continuation line, a byte order mark or a quoted section
// would fool. `git config --file F --list` reads it, in an environment of its own (no global or
// system configuration, no includes followed); what git reads there is what runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace broker::sandbox {

// One entry as `git config --list` prints it: section and name lowercased, a subsection as
// written ("remote.origin.url", "branch.Main.merge"); a value-less boolean has none.
struct git_entry {
  std::string key;
  std::optional<std::string> value;
  bool operator==(const git_entry&) const = default;
};

// The entries of the configuration file `file` (read through git, bounded in time), or nullopt
// when git cannot read it: not a configuration git accepts, or no git to ask (then nothing of
// it can be judged).
std::optional<std::vector<git_entry>> read_git_config(const std::string& file);

// Whether `entry` is data: how the repository is laid out and where it fetches from and pushes
// to (core's format keys, extensions, remote.*.url and fetch, branch.*.remote and merge,
// user.name and email, submodule.*.url...). Everything else (hooks paths, fsmonitor, pagers,
// editors, ssh commands, filters, diff and merge drivers, credential helpers, aliases, includes,
// URL rewrites, proxies) is not. `core.worktree` is data only where it leads into one of
// `workspaces` (a submodule's own), resolved from `git_dir`.
bool git_data_entry(const git_entry& entry, const std::string& git_dir,
                    const std::vector<std::string>& workspaces);

// A new configuration file at `file` holding `entries`, written by git (`git config --file
// --add`); false when git could not.
bool write_git_config(const std::string& file, const std::vector<git_entry>& entries);

// Which of `paths` (relative to `worktree`) git tracks in the repository there: `git ls-files`,
// with no fsmonitor or other configured command able to run. Empty when none, or git fails.
std::vector<std::string> git_tracked(const std::string& worktree,
                                     const std::vector<std::string>& paths);

}  // namespace broker::sandbox
