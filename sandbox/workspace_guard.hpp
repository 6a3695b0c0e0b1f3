// Where the session's writes go through to the host (its workspaces, files.writable, the agents'
// data), the files that carry commands come back as data only (docs/security-model.md):
// - every git directory there, found as git finds them (a `.git` directory or gitfile, a
//   separate git directory, a bare repository, a submodule's or a worktree's under another):
//   one that existed keeps its config (but for data entries: remotes, branches, user),
//   config.worktree, commondir, hooks/ and info/ as they were, and its gitfile; in one the
//   session made, hooks other than git's samples are kept out, and its config keeps only its
//   data entries. Configs are read by git itself (git_config.hpp).
// - the files tools load by themselves with no review (.envrc, .mcp.json, .claude/, .gemini/,
//   .codex/, .vscode/tasks.json and settings.json, CLAUDE.md, CLAUDE.local.md, AGENTS.md,
//   GEMINI.md), wherever they are: kept out when the session made or changed them and git does
//   not track them (a tracked change is in the diff the user reviews).
// Kept out means: the session's version set aside under the kept root, and what was there
// before back exactly as it was (content, mode, owner). So what is there before is saved when
// the session starts (bounded: what is too large to save is read-only for the session instead),
// and looked at again when it ends. Both walks are bounded in entries and time; neither follows a
// link, and nothing is written through one.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "sandbox/kept.hpp"
#include "sandbox/saved_files.hpp"

namespace broker::sandbox {

struct workspace_limits {
  std::size_t entries = 200'000;         // each walk
  std::chrono::milliseconds time{2000};  // each walk
  std::size_t file_bytes = 4 << 20;      // one saved file (larger: read-only instead)
  std::size_t total_bytes = 64 << 20;    // all saved files
};

class workspace_guard {
 public:
  // Walks `roots` (absolute, normal; the places the session writes through) and saves what the
  // files above hold now. `workspaces` are the session's own (where a submodule's core.worktree
  // may lead). `skip`: directories not to walk (the broker's log directory).
  workspace_guard(std::vector<std::string> roots, std::vector<std::string> workspaces,
                  std::vector<std::string> skip, workspace_limits limits = {});

  // What could not be saved, to hold read-only for the session instead.
  const std::vector<std::string>& read_only() const { return read_only_; }
  // A walk cut short, for the user.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // After the session (no process of it left): what it changed above is set aside under
  // `kept_root` and what was there before put back; each is added to `kept`, and what could not
  // be looked at to `warnings`.
  void judge(const std::string& kept_root, std::vector<kept_out>& kept,
             std::vector<std::string>& warnings) const;

  struct git_dir {
    std::string path;
    dev_t dev = 0;
    ino_t ino = 0;
    saved_file config, config_worktree, commondir;
    saved_tree hooks, info;
  };
  struct loaded {  // a file or directory tools load
    std::string path;
    saved_tree tree;  // a file: exists, and `self` is it
    bool directory = false;
  };

 private:
  std::vector<std::string> roots_, workspaces_, skip_;
  workspace_limits limits_;
  std::vector<git_dir> git_dirs_;
  std::vector<std::pair<std::string, saved_file>> gitfiles_;
  std::vector<loaded> loaded_;
  std::vector<std::string> read_only_, warnings_;
};

}  // namespace broker::sandbox
