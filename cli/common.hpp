// Options every session-running subcommand shares (DESIGN §3 "common"), and what they load.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "config/policy.hpp"
#include "proxy/connect_to.hpp"
#include "session/audit_log.hpp"

namespace broker::cli {

// The team-wide layer, applied whenever it exists.
inline constexpr const char* team_policy_path = "/etc/broker/policy.json";

struct common_options {
  std::vector<std::string> policies;
  std::string log_dir;
  std::vector<std::string> connect_to;
  std::vector<std::string> upstream_cas;
  std::string log_level = "info";
  // --audit-rotate-size SIZE, --audit-rotate-age DURATION (0: never; both unset: one file).
  session::audit_rotation audit_rotation;
};

void add_common_options(CLI::App& app, common_options& options);
void add_log_dir_option(CLI::App& app, std::string& log_dir);

// Sets up the operational log on stderr at the given level.
void setup_logging(const std::string& level);

// The policy layers: the team file when present, then each --policy file; the embedded default
// when neither exists. Throws config::policy_error.
std::vector<config::policy> load_layers(const std::vector<std::string>& files);

std::filesystem::path log_dir_or_default(const std::string& log_dir);

// Throws std::invalid_argument naming the bad value.
std::vector<proxy::connect_to_rule> parse_connect_to_rules(const std::vector<std::string>& specs);
void check_upstream_cas(const std::vector<std::string>& files);

// A listening TCP socket on 127.0.0.1, any free port (written to `port`). Throws
// std::runtime_error.
int loopback_listener(std::uint16_t& port);

// Session names become file names: letters, digits, '.', '_', '-'; 1..64 chars; no leading dot.
bool valid_session_name(const std::string& name);

// Running sessions' control sockets (under wrap::runtime_base()), and one session's. The latter
// throws std::runtime_error for a name that is not a session name.
std::vector<std::filesystem::path> running_control_sockets();
std::filesystem::path control_socket_of(const std::string& session);

// Exit statuses shared by the subcommands.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

}  // namespace broker::cli
