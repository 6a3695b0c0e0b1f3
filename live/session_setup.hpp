// What a session (serve's, a gateway's, wrap's) loads before it runs: the options every
// session-running command shares (docs/cli.md "common"), the layered policy, the brokered
// credentials (their `env:` sources then wiped from this process), and the audit log.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "brokers/credential_set.hpp"
#include "config/policy_set.hpp"
#include "live/common_options.hpp"
#include "live/connect_to.hpp"
#include "live/live_session.hpp"
#include "session/audit_log.hpp"

namespace broker::live {

// A session that cannot start: the message for the user, and whether the command line was at
// fault (a usage error) rather than the machine.
struct start_error : std::runtime_error {
  start_error(const std::string& message, bool usage)
      : std::runtime_error(message), usage_error(usage) {}
  bool usage_error;
};

// The policy layers: the team file when present, then each --policy file; the embedded default
// when neither exists. Throws config::policy_error.
std::vector<config::policy> load_layers(const std::vector<std::string>& files);

std::filesystem::path log_dir_or_default(const std::string& log_dir);

// Throws std::invalid_argument naming the bad value.
std::vector<connect_to_rule> parse_connect_to_rules(const std::vector<std::string>& specs);
void check_upstream_cas(const std::vector<std::string>& files);

struct session_setup {
  session_options options;
  std::shared_ptr<const config::policy_set> policy;
  std::shared_ptr<const brokers::credential_set> credentials;
  std::shared_ptr<session::session_budget> budget;  // the tightest of every layer's budgets
  // Some layer asks (docs/policy.md); approved.json's rules then extend the asking layers.
  bool asks = false;
  std::filesystem::path approved_file;
};

// `ask_on_deny` (wrap --ask): every layer that does not say "on_deny" asks. When some layer
// asks, approved.json's rules (`approved_file`, set to where it is) extend the asking layers;
// a null `approved_file` (a team gateway: its operators approve per session) reads none.
// Returns whether the session asks (config::session_asks). Throws config::policy_error for a
// malformed approved.json.
bool prepare_asking(std::vector<config::policy>& layers, bool ask_on_deny,
                    std::filesystem::path* approved_file);

// Options and policy. `ask_on_deny` (wrap --ask): every layer that does not say "on_deny" asks.
// When some layer asks, approved.json's rules extend the asking layers, unless
// `use_approved_file` is false (a team gateway). Throws std::exception whose what() is the
// user-facing message (a usage or policy error).
session_setup load_options_and_policy(const common_options& common,
                                      const std::vector<std::string>& timeouts,
                                      const std::string& session_name, bool ask_on_deny = false,
                                      bool use_approved_file = true);

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

}  // namespace broker::live
