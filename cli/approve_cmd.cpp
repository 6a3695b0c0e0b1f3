// `broker pending`, `broker approve ID` and `broker deny ID` (docs/policy.md): the requests running
// sessions hold while they ask, and the person's decisions, through each session's control
// socket (a gateway's sessions through the gateway's).
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/text.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "live/ask_text.hpp"
#include "session/control_socket.hpp"

namespace broker::cli {

namespace {

// An ask's id is its session's followed by "-N".
std::string session_of(const std::string& id) {
  const auto dash = id.rfind('-');
  return dash == std::string::npos || dash == 0 ? std::string() : id.substr(0, dash);
}

// The sockets that hold `session`'s asks (every running session's when empty): its own, or the
// gateway's (--gateway, or the only one here) that serves it.
std::vector<std::filesystem::path> sockets_for(const std::string& session,
                                               const std::string& gateway) {
  if (!gateway.empty()) return {gateway_control_socket(gateway)};
  auto sockets = control_sockets(session);
  if (!session.empty() && !std::filesystem::exists(sockets.front()))
    return {gateway_control_socket("")};
  return sockets;
}

int run_pending(const std::string& session, const std::string& gateway, bool json) {
  std::vector<std::filesystem::path> sockets;
  try {
    sockets = sockets_for(session, gateway);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
  auto all = nlohmann::json::array();
  int status = exit_ok;
  for (const auto& socket : sockets) {
    try {
      auto answer = nlohmann::json::parse(session::control_request(socket, "pending"));
      if (answer.is_array()) {
        for (auto& ask : answer)
          if (session.empty() || ask.value("session", "") == session) all.push_back(std::move(ask));
      } else if (!session.empty()) {
        throw std::runtime_error(answer.value("error", "no answer"));
      }
    } catch (const std::exception& e) {
      if (!session.empty()) {
        std::cerr << "broker: " << e.what() << "\n";
        status = exit_failure;
      }
    }
  }
  if (json) {
    std::cout << all.dump() << "\n";
    return status;
  }
  if (all.empty()) {
    std::cout << "no requests waiting for approval\n";
    return status;
  }
  for (const auto& ask : all) {
    std::string who = ask["pid"].is_number() ? "pid " + std::to_string(ask["pid"].get<int>()) : "";
    if (ask["exe"].is_string()) who += " " + ask["exe"].get<std::string>();
    // What the wrapped command chose (its URL, its program's name, an MCP call's arguments) is
    // printed escaped.
    std::cout << base::printable(ask.value("id", "") + "  " + live::asked_what(ask) + "  (" +
                                 (who.empty() ? "process unknown" : who) + "; refused by " +
                                 ask.value("rule", "") + "; waiting " +
                                 std::to_string(ask.value("waiting_s", 0)) + " of " +
                                 std::to_string(ask.value("timeout_s", 0)) + " s)")
              << "\n"
              << live::argument_lines(ask, "    ");
  }
  return status;
}

int run_decision(const std::string& id, const std::string& gateway, const std::string& command) {
  const std::string session = session_of(id);
  try {
    if (session.empty() || !valid_session_name(session))
      throw std::runtime_error(id + ": not an ask id (broker pending lists them)");
    // A gateway's session has no socket of its own: its gateway decides for it.
    const auto socket = sockets_for(session, gateway).front();
    const auto answer = nlohmann::json::parse(session::control_request(socket, command));
    if (answer.contains("error")) throw std::runtime_error(answer["error"].get<std::string>());
    std::cout << "broker: " << id << " "
              << (answer.value("decision", "") == "deny" ? "denied" : "approved");
    if (answer.contains("scope")) std::cout << " (" << answer.value("scope", "") << ")";
    if (answer.contains("rule")) std::cout << ", rule " << answer.value("rule", "");
    std::cout << "; released " << answer["released"].size() << " held request"
              << (answer["released"].size() == 1 ? "" : "s") << "\n";
    return exit_ok;
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
}

void add_gateway_option(CLI::App* app, std::string& gateway) {
  app->add_option("--gateway", gateway,
                  "The gateway serving the session (default: the session's own socket, else the "
                  "only gateway here)");
}

void add_pending(CLI::App& root, int& exit_status) {
  struct options {
    std::string session, gateway;
    bool json = false;
  };
  auto o = std::make_shared<options>();
  auto* pending = root.add_subcommand("pending", "Requests held while a session asks about them");
  pending->add_option("session", o->session, "Session id (default: every running session)");
  pending->add_flag("--json", o->json, "One JSON array of every held request");
  add_gateway_option(pending, o->gateway);
  pending->callback(
      [o, &exit_status] { exit_status = run_pending(o->session, o->gateway, o->json); });
}

void add_approve(CLI::App& root, int& exit_status) {
  struct approval {
    std::string id, gateway;
    bool once = false, for_session = false, always = false;
    std::string path;
  };
  auto a = std::make_shared<approval>();
  auto* approve = root.add_subcommand(
      "approve", "Let a held request go, and (--session, the default) its host for the session");
  approve->add_option("id", a->id, "The ask's id (broker pending)")->required();
  add_gateway_option(approve, a->gateway);
  auto* once = approve->add_flag("--once", a->once, "Only this request");
  auto* whole = approve->add_flag("--session", a->for_session,
                                  "Its host and port for the rest of the session (the default)");
  auto* always =
      approve->add_flag("--always", a->always,
                        "As --session, and in ~/.config/broker/approved.json for later sessions");
  once->excludes(whole)->excludes(always);
  whole->excludes(always);
  approve
      ->add_option("--path", a->path,
                   "Only this path and what is under it (\"/docs\": /docs and /docs/...)")
      ->check([](const std::string& p) {
        if (p.empty() || p.front() != '/') return std::string("a path starts with /");
        if (p.find_first_of(" \t\r\n*") != std::string::npos)
          return std::string("a path prefix has no spaces and no *");
        return std::string();
      });
  approve->callback([a, &exit_status] {
    const char* scope = a->once ? "once" : a->always ? "always" : "session";
    if (a->once && !a->path.empty()) {
      std::cerr << "broker: --path applies to --session and --always; --once is this request\n";
      exit_status = exit_usage;
      return;
    }
    std::string command = "approve " + a->id + " " + scope;
    if (!a->path.empty()) command += " " + a->path;
    exit_status = run_decision(a->id, a->gateway, command);
  });
}

void add_deny(CLI::App& root, int& exit_status) {
  struct options {
    std::string id, gateway;
  };
  auto o = std::make_shared<options>();
  auto* deny = root.add_subcommand(
      "deny", "Refuse a held request (403 approval_denied) and every one held for its host");
  deny->add_option("id", o->id, "The ask's id (broker pending)")->required();
  add_gateway_option(deny, o->gateway);
  deny->callback(
      [o, &exit_status] { exit_status = run_decision(o->id, o->gateway, "deny " + o->id); });
}

}  // namespace

void register_approvals(CLI::App& root, int& exit_status) {
  add_pending(root, exit_status);
  add_approve(root, exit_status);
  add_deny(root, exit_status);
}

}  // namespace broker::cli
