// Options every session-running subcommand shares (docs/cli.md "common"), and what they load.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "live/session_setup.hpp"
#include "live/session_status.hpp"
#include "session/audit_files.hpp"

namespace broker::cli {

using live::check_upstream_cas;
using live::load_credentials;
using live::load_layers;
using live::load_options_and_policy;
using live::log_dir_or_default;
using live::open_audit;
using live::parse_connect_to_rules;
using live::session_end_of;
using live::session_setup;
using live::session_status;
using session::valid_session_name;

using live::common_options;

void add_common_options(CLI::App& app, common_options& options);
void add_log_dir_option(CLI::App& app, std::string& log_dir);

// Sets up the operational log on stderr at the given level.
void setup_logging(const std::string& level);

// Running sessions' control sockets (under session::runtime_base()), and one session's. The latter
// throws std::runtime_error for a name that is not a session name.
std::vector<std::filesystem::path> running_control_sockets();
std::filesystem::path control_socket_of(const std::string& session);
// One session's socket, or every running one's when `session` is empty.
std::vector<std::filesystem::path> control_sockets(const std::string& session);

// The control socket of the gateway `name`, or of the only gateway running here when it is
// empty; throws std::runtime_error when there is none, or several and no name.
std::filesystem::path gateway_control_socket(const std::string& name);

// Exit statuses shared by the subcommands.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

}  // namespace broker::cli
