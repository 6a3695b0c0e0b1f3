// SSH in a wrap session (docs/policy.md, "SSH"): the ssh rule a default policy gets for an SSH
// origin, the session's agent and the socket the command reaches it by, and what the command's
// ssh reads of host keys. Steps of wrap/run.cpp.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "config/policy_set.hpp"
#include "sandbox/child_session.hpp"
#include "ssh/agent_process.hpp"

namespace broker::wrap {

struct ssh_setup {
  std::unique_ptr<ssh::agent_process> agent;  // null: no ssh rules, or the agent failed
  std::string socket;                         // the session's SSH_AUTH_SOCK
  int listener = -1;                          // listening at `socket`, for the agent filter
  std::string known_hosts;                    // the policy's host keys, for the command's ssh
};

// With no policy written (the default's agent profiles), an SSH origin on GitHub, GitLab or
// Bitbucket and keys in ~/.ssh: `policy` with an ssh rule for that host; else `policy` itself.
std::shared_ptr<const config::policy_set> with_ssh_origin(
    std::shared_ptr<const config::policy_set> policy, const std::string& home,
    const std::string& cwd);

// With ssh rules, the session's agent (in `session_dir`: its socket and, in netns mode, the
// policy's host keys), said on stderr; an empty setup without them, or when it fails (warned).
ssh_setup start_ssh(const config::policy_set& policy, const std::string& home,
                    const std::filesystem::path& session_dir, bool netns);

// netns, with the agent: the user's known_hosts read-only, and the policy's host keys named by a
// copy of the system's ssh_config shown over it.
void add_ssh_files(const ssh_setup& ssh, const std::string& home,
                   const std::filesystem::path& session_dir, sandbox::launch_options& launch);

}  // namespace broker::wrap
