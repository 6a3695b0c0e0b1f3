// `broker wrap -- CMD` assembled and run (docs/cli.md, docs/security-model.md): one session around
// one command. The command gets dummy credentials and the session's proxy and trust variables; with
// netns isolation its only way out is the proxy, served here from a listener made inside its
// network namespace.
#pragma once

#include <string>
#include <vector>

#include "live/common_options.hpp"

namespace broker::wrap {

struct wrap_config {
  live::common_options common;
  std::string session;
  std::string isolate = "auto";  // auto, netns or env
  std::string env_file;
  std::vector<std::string> timeouts;
  bool ask = false;        // --ask: what the layers refuse is asked about (docs/policy.md)
  std::string ask_notify;  // --ask-notify CMD: run per ask
  bool learn = false;      // --learn: what the layers refuse goes through, recorded as learned
  // --workspace DIR: more places the command's writes go through to (docs/security-model.md),
  // besides the working directory.
  std::vector<std::string> workspaces;
  // --scope-to-workspace: every github credential scoped to the working directory's origin
  // repository, GraphQL to queries (docs/policy.md, "Least privilege").
  bool scope_to_workspace = false;
  std::vector<std::string> command;
};

// `wrap` exits with the command's status; this is its own (docs/cli.md).
inline constexpr int exit_broker_failed = 125;

// Runs the command in its session to its end; returns its exit status, or exit_broker_failed
// (with the reason on stderr) when the session could not start.
int run(const wrap_config& config);

}  // namespace broker::wrap
