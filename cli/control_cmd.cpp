// `broker status [SESSION]` and `broker kill SESSION`: a running session's usage against its
// budgets, and ending it (docs/cli.md), through the session's control socket.
#include <cstdint>
#include <ctime>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "session/control_socket.hpp"

namespace broker::cli {

namespace {

void print_status(const nlohmann::json& s) {
  std::cout << "session " << s.value("session", "?") << "  (" << s.value("mode", "?") << ", pid "
            << s.value("pid", 0) << ")  requests " << s.value("requests", 0) << ", denied "
            << s.value("denied", 0) << "\n";
  if (s.contains("minted"))
    for (const auto& m : s["minted"]) {
      const std::time_t expires = m.value("expires", std::int64_t{0});
      char when[32] = "?";
      std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&expires));
      std::cout << "  minted " << m.value("credential", "?") << ": " << m.value("what", "?")
                << ", expires " << when << "\n";
    }
  if (!s.contains("budgets")) return;
  const auto& report = s["budgets"];
  if (report.contains("budgets"))
    for (const auto& [name, b] : report["budgets"].items())
      std::cout << "  " << name << ": " << b.value("used", nlohmann::json()).dump() << " of "
                << b.value("limit", nlohmann::json()).dump()
                << (b.value("exhausted", false) ? "  (spent)" : "") << "\n";
  if (report.contains("usage")) std::cout << "  usage: " << report["usage"].dump() << "\n";
}

int run_status(const std::string& session, bool json) {
  const auto sockets = control_sockets(session);
  if (sockets.empty()) {
    std::cout << "no running sessions\n";
    return exit_ok;
  }
  int status = exit_ok;
  for (const auto& socket : sockets) {
    try {
      const std::string answer = session::control_request(socket, "status");
      if (json)
        std::cout << answer << "\n";
      else
        print_status(nlohmann::json::parse(answer));
    } catch (const std::exception& e) {
      std::cerr << "broker: " << e.what() << "\n";
      status = exit_failure;
    }
  }
  return status;
}

int run_kill(const std::string& session) {
  try {
    session::control_request(control_socket_of(session), "kill");
    std::cout << "broker: session " << session << " is ending\n";
    return exit_ok;
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
}

}  // namespace

void register_control(CLI::App& root, int& exit_status) {
  auto session = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* status = root.add_subcommand("status", "A running session's usage against its budgets");
  status->add_option("session", *session, "Session id (default: every running session)");
  status->add_flag("--json", *json, "One JSON object per session");
  status->callback([session, json, &exit_status] { exit_status = run_status(*session, *json); });
  auto target = std::make_shared<std::string>();
  auto* kill = root.add_subcommand("kill", "End a running session and its process tree");
  kill->add_option("session", *target, "Session id")->required();
  kill->callback([target, &exit_status] { exit_status = run_kill(*target); });
}

}  // namespace broker::cli
