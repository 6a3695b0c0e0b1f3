// One wrap session's file system, assembled (docs/security-model.md): before the command starts,
// what it sees (its private directories, its copy-on-write layers with the places its writes go
// through to, the masks over credential files and the broker's own state, what is read-only)
// and what the places it writes through hold that carries commands (saved, to be judged); once
// the command and everything it left have ended, what it changed is taken in or kept out
// (layer_return.hpp, workspace_guard.hpp), and told.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/policy.hpp"
#include "sandbox/child_session.hpp"
#include "sandbox/home_rules.hpp"
#include "sandbox/kept.hpp"
#include "sandbox/layer_plan.hpp"
#include "sandbox/layer_return.hpp"
#include "sandbox/workspace_guard.hpp"

namespace broker::session {
class audit_log;
}

namespace broker::sandbox {

struct session_files_inputs {
  const std::vector<config::policy>* layers = nullptr;
  std::string home, cwd, log_dir;
  std::vector<std::string> workspaces;                   // --workspace
  std::vector<std::pair<std::string, std::string>> env;  // the caller's environment
  std::vector<std::string> kept;                         // the command, the session's files
  std::vector<std::pair<std::string, std::string>> login_copies;  // a copy, its target
  bool netns = true;
};

// A session's layers may hold this much in all (a tmpfs's size: memory, only as used).
inline constexpr std::uint64_t layer_bytes = 4ull << 30;

class session_files {
 public:
  // Plans the file system into `launch` (masks always; the rest in netns mode). Warnings for
  // the user go to `warnings`.
  session_files(const session_files_inputs& in, launch_options& launch,
                std::vector<std::string>& warnings);

  // Once the command started: the layers as init made them.
  void launched(child_session& child, std::vector<std::string>& warnings);

  // netns: the host's places the session's writes go through to (the workspaces, the home
  // rules' places), canonical.
  std::vector<std::string> written_through() const;

  // Once no process of the session is left: what it changed outside its workspace, taken in
  // or kept out (set aside under `kept_root`), and what it left in the places it wrote through.
  std::vector<kept_out> end(const std::string& kept_root, std::vector<std::string>& warnings);

 private:
  session_files_inputs in_;
  std::unique_ptr<home_rules> rules_;
  std::unique_ptr<start_files> started_;
  std::unique_ptr<workspace_guard> workspace_;
  layer_plan plan_;
  std::vector<bool> mounted_;
  int upper_ = -1;
};

// One stderr line per path kept out (docs/security-model.md), the first few, and one audit record
// each; nothing when nothing was. Dropped caches and what an agent makes again are in the log only.
void report_kept_out(const std::vector<kept_out>& kept, const std::string& session_id,
                     session::audit_log& audit);

}  // namespace broker::sandbox
