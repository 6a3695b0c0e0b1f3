// What `serve` and `wrap` both load before they run a session: the options, the layered policy,
// the brokered credentials (their `env:` sources then wiped from this process), and the audit log.
#pragma once

#include <optional>

#include <memory>
#include <string>
#include <vector>

#include "brokers/credential_set.hpp"
#include "cli/common.hpp"
#include "config/policy_set.hpp"
#include "proxy/proxy_context.hpp"

namespace broker::cli {

struct session_setup {
  proxy::proxy_options options;
  std::shared_ptr<const config::policy_set> policy;
  std::shared_ptr<const brokers::credential_set> credentials;
  std::shared_ptr<session::session_budget> budget;  // the tightest of every layer's budgets
};

// Options and policy. Throws std::exception whose what() is the user-facing message (a usage or
// policy error).
session_setup load_options_and_policy(const common_options& common,
                                      const std::vector<std::string>& timeouts,
                                      const std::string& session_name);

// Makes the process non-dumpable, reads the real values and wipes `env:` sources from this
// process's environment; warns (names only) about credentials not brokered. Throws on a failing
// source. `user_dummies` (wrap): dummies stable for this user and each real value, derived with
// the key at ~/.config/broker/dummy-key (made on first use; an unusable key throws); otherwise
// random ones.
void load_credentials(session_setup& setup, bool login_files = false, bool user_dummies = false);

// The audit log for the session, a gateway replica's own files with `replica` (failing closed, with
// an error line, when it cannot be opened).
std::unique_ptr<session::audit_log> open_audit(const common_options& common,
                                               const std::string& session_id,
                                               const std::string& replica = {});

using proxy::session_end_of;
using proxy::session_status;

}  // namespace broker::cli
