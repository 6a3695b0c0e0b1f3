// `broker session create|list|show|revoke`: a team gateway's sessions (docs/gateway.md), through
// the gateway's control socket. `create` reads the session's policy files here, the gateway checks
// them against its team policy and answers with the session's proxy credential and dummies,
// which go into the env file a client sources (0600) and nowhere else.
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/atomic_file.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "config/units.hpp"
#include "session/child_env.hpp"
#include "session/control_socket.hpp"

namespace broker::cli {

namespace {

struct session_options {
  std::string gateway;  // the gateway's session name; default: the only gateway running
  std::vector<std::string> policies;
  std::string ttl = "8h";
  std::string user;
  std::vector<std::string> labels;
  std::string env_file;
  std::string id;
  bool json = false;
};

nlohmann::json ask(const session_options& o, const std::string& line) {
  auto answer =
      nlohmann::json::parse(session::control_request(gateway_control_socket(o.gateway), line));
  if (answer.contains("error")) throw std::runtime_error(answer["error"].get<std::string>());
  return answer;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int run_create(const session_options& o) {
  nlohmann::json request;
  request["policies"] = nlohmann::json::array();
  for (const auto& file : o.policies)
    request["policies"].push_back({{"source", file}, {"text", read_file(file)}});
  const auto ttl = config::parse_duration(o.ttl);
  if (!ttl && o.ttl != "0") {
    std::cerr << "broker: --ttl " << o.ttl << ": expected a duration such as 8h, 30m or 0 (none)\n";
    return exit_usage;
  }
  request["ttl_s"] = ttl ? std::chrono::duration_cast<std::chrono::seconds>(*ttl).count() : 0;
  request["user"] = o.user;
  request["labels"] = nlohmann::json::object();
  for (const auto& label : o.labels) {
    const auto eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "broker: --label " << label << ": expected KEY=VALUE\n";
      return exit_usage;
    }
    request["labels"][label.substr(0, eq)] = label.substr(eq + 1);
  }
  const auto answer = ask(o, "session-create " + request.dump());
  std::vector<session::variable> env;
  for (const auto& pair : answer["env"]) env.emplace_back(pair[0], pair[1]);
  const std::string id = answer["session"]["id"];
  if (o.env_file.empty()) {
    // The env lines on stdout (they hold the session's credential): `> FILE` or `eval`.
    std::cout << session::render_env_lines(env);
    std::cerr << "broker: session " << id << " created\n";
    return exit_ok;
  }
  for (const auto& f : answer["files"]) {
    // A gcp key file (a dummy OAuth client) beside the env file: FILE.NAME.
    const std::string file = o.env_file + "." + f["name"].get<std::string>();
    base::write_file_atomically(file, f["content"].get<std::string>(), 0600);
    env.emplace_back(f["variable"].get<std::string>(), file);
  }
  base::write_file_atomically(o.env_file, session::render_env_lines(env), 0600);
  std::cout << "broker: session " << id << " created; its clients use env $(cat " << o.env_file
            << ") CMD\n";
  return exit_ok;
}

std::string when(std::int64_t ms) {
  if (ms == 0) return "never";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

void print_session(const nlohmann::json& s) {
  std::cout << s.value("id", "?") << "  " << s.value("state", "?") << "  user "
            << (s.value("user", "").empty() ? "-" : s.value("user", "")) << "  expires "
            << when(s.value("expires_ms", std::int64_t{0}));
  if (s.contains("labels"))
    for (const auto& [k, v] : s["labels"].items())
      std::cout << "  " << k << "=" << v.get<std::string>();
  std::cout << "\n";
}

int run_admin(const session_options& o, const std::string& verb) {
  const auto answer = ask(o, "session-" + verb + (o.id.empty() ? "" : " " + o.id));
  if (o.json) {
    std::cout << answer.dump() << "\n";
    return exit_ok;
  }
  if (verb == "list") {
    for (const auto& s : answer["sessions"]) print_session(s);
  } else if (verb == "show") {
    print_session(answer);
    if (answer.contains("here"))
      std::cout << "  here: requests " << answer["here"].value("requests", 0) << ", denied "
                << answer["here"].value("denied", 0) << "\n";
  } else {
    std::cout << "broker: session " << o.id << " revoked\n";
  }
  return exit_ok;
}

int guarded(const std::function<int()>& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
}

}  // namespace

void register_session(CLI::App& root, int& exit_status) {
  auto o = std::make_shared<session_options>();
  auto* app = root.add_subcommand("session", "A team gateway's sessions (serve --gateway)");
  app->require_subcommand(1);
  app->add_option("--gateway", o->gateway, "The gateway's session name (default: the only one)");

  auto* create = app->add_subcommand("create", "Issue a session: its credential, dummies and env");
  create->add_option("--policy", o->policies, "A policy layer on the team's (repeatable)");
  create->add_option("--ttl", o->ttl, "How long it lasts (e.g. 8h; 0: until revoked)");
  create->add_option("--user", o->user, "Who it is for (in its records)");
  create->add_option("--label", o->labels, "KEY=VALUE, in its records (repeatable)");
  create->add_option("--env-file", o->env_file,
                     "Write the client environment here (0600) instead of stdout");
  create->callback([o, &exit_status] { exit_status = guarded([o] { return run_create(*o); }); });

  auto* list = app->add_subcommand("list", "Every session the gateway knows");
  list->add_flag("--json", o->json, "JSON");
  list->callback(
      [o, &exit_status] { exit_status = guarded([o] { return run_admin(*o, "list"); }); });
  for (const char* verb : {"show", "revoke"}) {
    auto* sub = app->add_subcommand(verb, std::string(verb) == "show"
                                              ? "One session, with its usage on this gateway"
                                              : "End a session on every replica");
    sub->add_option("id", o->id, "Session id")->required();
    sub->add_flag("--json", o->json, "JSON");
    const std::string v = verb;
    sub->callback(
        [o, v, &exit_status] { exit_status = guarded([o, v] { return run_admin(*o, v); }); });
  }
}

}  // namespace broker::cli
