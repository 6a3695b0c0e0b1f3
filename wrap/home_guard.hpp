// Nothing a netns-mode child writes runs later outside the session (DESIGN §8.1). The paths
// of file_masks.hpp's persistence_paths that exist are read-only inside; one that does not
// exist yet could be made, so the directory that would hold it is shown as a view
// (directory_view.hpp), and what the child made there is judged when it ends: a protected path
// is kept out of the host, everything else goes back. The same for the user's own PATH
// directories under the home (~/.local/bin, ~/bin): a new executable there that shadows a
// command of the same name elsewhere on PATH is kept out (pip install --user and
// npm i -g --prefix ~/.local keep working). And the agents' own settings: their directories are
// views too, and what goes back keeps the host's hooks, MCP servers and other commands.
#pragma once

#include <string>
#include <vector>

#include "wrap/file_masks.hpp"
#include "wrap/view_merge.hpp"

namespace broker::wrap {

class home_guard {
 public:
  // `path_variable`: the user's PATH, for what a new executable would shadow.
  home_guard(std::vector<protected_path> protected_paths, std::string home,
             const std::string& path_variable);

  // Why `real` (an absolute path a view's entry would reach) may not go back; "" when it may.
  // `executable`: the entry is an executable file or a link.
  std::string kept_reason(const std::string& real, bool executable) const;

  // The directories to show as views: the deepest existing directory under the home above
  // each missing protected path, and the existing PATH directories under the home; parents
  // first. The working directory is never one (its files would be copies for the whole
  // session): left out with a warning in `warnings`.
  std::vector<std::string> view_directories(const std::string& cwd,
                                            std::vector<std::string>& warnings) const;

  // The agent settings file at `real` (Claude Code's, Codex's, Gemini CLI's), whose members that
  // name commands never go back; null for any other path.
  const settings_file* settings(const std::string& real) const;

  // Whether what the child made at `real` is removed rather than set aside (protected_path's
  // discard: an agent's own programs, installed again every session).
  bool discarded(const std::string& real) const;

  // Where the agent's key store at `real` is kept between sessions, or "" when `real` is none.
  // An agent that stores the key it was given (Codex's ~/.codex/auth.json from its sign-in
  // screen, Gemini CLI's ~/.gemini/gemini-credentials.json) stores a dummy: in the home, the
  // agent outside broker would send it instead of the user's key. So it never goes back; it is
  // kept in ~/.config/broker/agent-files (hidden from sessions) and shown again at the same
  // place in the next session where the home has nothing there (the dummy is stable).
  std::string agent_store(const std::string& real) const;
  // The real paths of the agent key stores.
  std::vector<std::string> agent_stores() const;

  // A view of `dir` lets links go back (a PATH directory: npm links its commands there).
  bool is_path_directory(const std::string& dir) const;

 private:
  std::vector<protected_path> protected_;
  std::vector<std::pair<std::string, settings_file>> settings_;  // absolute paths
  std::string home_;
  std::vector<std::string> own_path_dirs_;    // PATH directories under the home, watched
  std::vector<std::string> other_path_dirs_;  // the rest of PATH (and the system's), shadowed
};

}  // namespace broker::wrap
