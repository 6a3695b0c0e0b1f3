// The options every session-running command shares (docs/cli.md "common"): `wrap`, `serve` and
// `serve --gateway` read them from their command lines; session_setup.hpp loads a session from
// them.
#pragma once

#include <string>
#include <vector>

#include "session/audit_log.hpp"

namespace broker::live {

// The team-wide layer, applied whenever it exists.
inline constexpr const char* team_policy_path = "/etc/broker/policy.json";

// What the session-running commands share (their --policy, --log-dir, --connect-to, ...).
struct common_options {
  std::vector<std::string> policies;
  std::string log_dir;
  std::vector<std::string> connect_to;
  std::vector<std::string> upstream_cas;
  std::string log_level = "info";
  // --audit-rotate-size SIZE, --audit-rotate-age DURATION (0: never; both unset: one file).
  session::audit_rotation audit_rotation;
  // --audit-sync every|batch|none: when the records reach the disk (docs/audit-log.md).
  session::audit_sync_mode audit_sync = session::audit_sync_mode::batch;
};

}  // namespace broker::live
