// Each subcommand registers itself on the root app; its callback stores the exit status.
#pragma once

#include <CLI/CLI.hpp>

namespace broker::cli {

void register_serve(CLI::App& root, int& exit_status);
void register_policy(CLI::App& root, int& exit_status);
void register_log(CLI::App& root, int& exit_status);
void register_sessions(CLI::App& root, int& exit_status);
void register_session(CLI::App& root, int& exit_status);
void register_admin_token(CLI::App& root, int& exit_status);
void register_ca(CLI::App& root, int& exit_status);
// `command_line`: the words after the first "--" of broker's own, as given (CLI11 would read an
// argument "[a,b]" as a list of two); empty when there is no "--".
void register_wrap(CLI::App& root, int& exit_status, std::vector<std::string> command_line);
void register_control(CLI::App& root, int& exit_status);
void register_demo(CLI::App& root, int& exit_status);
void register_keep(CLI::App& root, int& exit_status);
void register_approvals(CLI::App& root, int& exit_status);
void register_mcp(CLI::App& root, int& exit_status);

}  // namespace broker::cli
