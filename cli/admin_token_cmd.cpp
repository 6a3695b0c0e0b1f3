// `broker admin-token create|list|revoke`: the team gateway's operators' credentials
// (docs/gateway.md), through the gateway's control socket. `create` prints the token once, on
// stdout; the gateway keeps only its SHA-256.
#include <ctime>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "session/control_socket.hpp"

namespace broker::cli {

namespace {

struct admin_token_options {
  std::string gateway;
  std::string name;
  std::string id;
  bool json = false;
};

nlohmann::json ask(const admin_token_options& o, const std::string& line) {
  auto answer =
      nlohmann::json::parse(session::control_request(gateway_control_socket(o.gateway), line));
  if (answer.contains("error")) throw std::runtime_error(answer["error"].get<std::string>());
  return answer;
}

std::string when(std::int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

int run(const admin_token_options& o, const std::string& verb) {
  std::string line = "admin-token-" + verb;
  if (verb == "create") line += " " + o.name;
  if (verb == "revoke") line += " " + o.id;
  const auto answer = ask(o, line);
  if (o.json) {
    std::cout << answer.dump() << "\n";
    return exit_ok;
  }
  if (verb == "create") {
    // The token alone on stdout (`TOKEN=$(broker admin-token create --name ana)`).
    std::cout << answer["token"].get<std::string>() << "\n";
    std::cerr << "broker: admin token " << answer["id"].get<std::string>() << " for "
              << answer["name"].get<std::string>()
              << " created; it is shown this once (send it as Authorization: Bearer TOKEN)\n";
  } else if (verb == "list") {
    for (const auto& t : answer["tokens"])
      std::cout << t["id"].get<std::string>() << "  " << t["name"].get<std::string>()
                << "  created " << when(t["created_ms"].get<std::int64_t>()) << "\n";
  } else {
    for (const auto& t : answer["revoked"])
      std::cout << "broker: admin token " << t["id"].get<std::string>() << " ("
                << t["name"].get<std::string>() << ") revoked\n";
  }
  return exit_ok;
}

}  // namespace

void register_admin_token(CLI::App& root, int& exit_status) {
  auto o = std::make_shared<admin_token_options>();
  auto* app = root.add_subcommand("admin-token",
                                  "A team gateway's admin credentials (its admin API and console)");
  app->require_subcommand(1);
  app->add_option("--gateway", o->gateway, "The gateway's session name (default: the only one)");
  const auto guarded = [o, &exit_status](const std::string& verb) {
    return [o, verb, &exit_status] {
      try {
        exit_status = run(*o, verb);
      } catch (const std::exception& e) {
        std::cerr << "broker: " << e.what() << "\n";
        exit_status = exit_failure;
      }
    };
  };
  auto* create = app->add_subcommand("create", "Make a token for one operator (printed once)");
  create->add_option("--name", o->name, "Who holds it (in the records of what they decide)")
      ->required();
  create->add_flag("--json", o->json, "JSON");
  create->callback(guarded("create"));
  auto* list = app->add_subcommand("list", "The tokens: id, operator, created (never the token)");
  list->add_flag("--json", o->json, "JSON");
  list->callback(guarded("list"));
  auto* revoke = app->add_subcommand("revoke", "Revoke a token by id, or every token of a name");
  revoke->add_option("id", o->id, "Token id (a-...) or operator name")->required();
  revoke->add_flag("--json", o->json, "JSON");
  revoke->callback(guarded("revoke"));
}

}  // namespace broker::cli
