// The parts of the workspace's git repository that run code or decide what git shows, which a
// netns-mode child may read but not change (docs/security-model.md): a hook, a `core.fsmonitor`,
// `core.hooksPath` or filter command in its config, or an `info/exclude` hiding what the child
// left would act later, outside the session, with the user's rights. Commits, branches, fetches
// and pushes write elsewhere (objects, refs, index, logs) and keep working.
#pragma once

#include <string>
#include <vector>

namespace broker::sandbox {

// For the repository holding `cwd` (the nearest `.git` above it, a directory or a gitfile
// naming one): its gitfile itself, the `hooks`, `info` and `config` of its common git directory,
// a linked worktree's `config.worktree`, and the same for every submodule's git directory under
// `modules/`, at any depth. Missing `hooks` and `info` directories are made (empty, as
// `git init` makes them) so that they can be held; other missing paths are left out. Empty
// outside a repository.
std::vector<std::string> protected_git_paths(const std::string& cwd);

}  // namespace broker::sandbox
