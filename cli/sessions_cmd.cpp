// `broker sessions`: the sessions in the log directory, oldest first.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "session/log_reader.hpp"

namespace broker::cli {

namespace {

int run_sessions(const std::string& log_dir) {
  const auto sessions = session::list_sessions(log_dir_or_default(log_dir));
  std::printf("%-24s %-24s %-24s %9s %7s %10s %5s %12s %10s %9s\n", "SESSION", "START", "END",
              "REQUESTS", "DENIED", "WOULD-DENY", "EXIT", "BYTES", "TOKENS", "COST");
  for (const auto& s : sessions) {
    const std::string exit = s.exit_code ? std::to_string(*s.exit_code) : "-";
    char cost[32] = "-";
    if (s.cost_usd) std::snprintf(cost, sizeof cost, "$%.2f", *s.cost_usd);
    std::printf(
        "%-24s %-24s %-24s %9llu %7llu %10llu %5s %12llu %10llu %9s\n", s.id.c_str(),
        s.start.empty() ? "-" : s.start.c_str(), s.end.empty() ? "(running)" : s.end.c_str(),
        static_cast<unsigned long long>(s.requests), static_cast<unsigned long long>(s.denied),
        static_cast<unsigned long long>(s.would_deny), exit.c_str(),
        static_cast<unsigned long long>(s.bytes), static_cast<unsigned long long>(s.llm_tokens),
        cost);
  }
  return exit_ok;
}

}  // namespace

void register_sessions(CLI::App& root, int& exit_status) {
  auto log_dir = std::make_shared<std::string>();
  auto* app = root.add_subcommand("sessions", "List the sessions in the audit log directory");
  add_log_dir_option(*app, *log_dir);
  app->callback([log_dir, &exit_status] { exit_status = run_sessions(*log_dir); });
}

}  // namespace broker::cli
