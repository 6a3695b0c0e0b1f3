// `broker policy check FILE...`, `broker policy default` and `broker policy suggest`.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "config/approved_file.hpp"
#include "config/suggest.hpp"
#include "sandbox/home_rules.hpp"
#include "sandbox/program_check.hpp"
#include "session/audit_merge.hpp"
#include "session/log_reader.hpp"

namespace broker::cli {

namespace {

// `path` with the home as "~".
std::string tilde(const std::string& path, const std::string& home) {
  if (!home.empty() && home != "/" && path.starts_with(home + "/"))
    return "~" + path.substr(home.size());
  return path;
}

// What wrap would make of the layers for this user, in this environment.
sandbox::home_rule_inputs wrap_inputs(const std::vector<config::policy>& layers) {
  const char* home_variable = std::getenv("HOME");
  sandbox::home_rule_inputs in;
  in.home = home_variable ? home_variable : "";
  in.layers = layers;
  in.root = ::geteuid() == 0;
  for (const char* name :
       {"XDG_CACHE_HOME", "CODEX_HOME", "GOMODCACHE", "GOPATH", "npm_config_cache",
        "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"})
    if (const char* v = std::getenv(name)) in.env.emplace_back(name, v);
  return in;
}

nlohmann::ordered_json wrap_lists(const std::vector<config::policy>& layers) {
  const auto in = wrap_inputs(layers);
  const std::string& home = in.home;
  const sandbox::home_rules rules(in);
  nlohmann::ordered_json out;
  auto& writable = out["writable"] = nlohmann::ordered_json::array();
  writable.push_back({{"path", "the working directory and every --workspace"}, {"how", "live"}});
  const auto list = [&](sandbox::home_rule::kind kind, const char* how,
                        nlohmann::ordered_json& to) {
    for (const auto& r : rules.all())
      if (r.what == kind) {
        nlohmann::ordered_json item{{"path", tilde(r.path, home)}, {"how", how}};
        if (kind == sandbox::home_rule::settings) item["data"] = r.data;
        if (kind == sandbox::home_rule::dropped) item["what"] = r.why;
        to.push_back(std::move(item));
      }
  };
  list(sandbox::home_rule::through, "live where it exists, else when the session ends", writable);
  list(sandbox::home_rule::settings, "its data members, when the session ends", writable);
  list(sandbox::home_rule::key_store, "kept for broker's sessions, never in the home", writable);
  list(sandbox::home_rule::dropped, "the session's changes dropped", out["dropped"]);
  auto& readonly = out["readonly"] = nlohmann::ordered_json::array();
  for (const auto& p : sandbox::readonly_paths(layers, home)) readonly.push_back(tilde(p, home));
  return out;
}

int run_check(const std::vector<std::string>& files) {
  try {
    const auto layers = load_layers(files);
    // "programs" a session could defeat (docs/policy.md): each named; no workspace is known here.
    const auto problems =
        sandbox::program_problems(layers, sandbox::session_write_places(wrap_inputs(layers), {}));
    for (const auto& p : problems) std::cerr << "broker: " << p.text() << "\n";
    if (!problems.empty()) return exit_usage;
    nlohmann::ordered_json out;
    out["layers"] = nlohmann::ordered_json::array();
    for (const auto& layer : layers) out["layers"].push_back(config::to_json(layer));
    // Where wrap lets the command's writes through, and what it holds read-only
    // (docs/security-model.md), all layers applied; everything else it writes is kept out of the
    // host.
    out["wrap"] = wrap_lists(layers);
    // What `broker approve --always` approved: extends the layers that ask (docs/policy.md).
    const auto approved_path = config::default_approved_path();
    if (!approved_path.empty())
      if (auto approved = config::load_approved(approved_path))
        out["approved"] = {{"file", approved_path.string()},
                           {"extends", "every layer that asks (\"on_deny\": \"ask\", wrap --ask)"},
                           {"allow", config::to_json(*approved)["allow"]}};
    std::cout << out.dump(2) << "\n";
    return exit_ok;
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_usage;
  }
}

// What a session's records say it did: each request and tunnel that went (allowed, or let
// through by --learn).
void collect(const std::vector<session::replica_files>& files,
             std::vector<config::observed_request>& seen) {
  session::merged_log log(files);
  while (auto line = log.next()) {
    const auto r = nlohmann::json::parse(*line, nullptr, false);
    if (!r.is_object()) continue;
    const std::string event = r.value("event", "");
    const std::string decision = r.value("decision", "");
    if ((event != "request" && event != "tunnel") || decision == "deny") continue;
    if (!r.contains("host") || !r["host"].is_string() || !r.contains("port")) continue;
    config::observed_request o;
    o.host = r["host"].get<std::string>();
    o.port = r["port"].get<std::uint16_t>();
    o.tunnel = event == "tunnel";
    o.learned = decision == "learned";
    if (!o.tunnel) {
      o.method = r["method"].is_string() ? r["method"].get<std::string>() : "";
      o.path = r["path"].is_string() ? r["path"].get<std::string>() : "/";
    }
    if (const auto m = r.find("mcp"); m != r.end() && m->is_object()) {
      o.mcp = true;
      for (const char* kind : {"tool", "resource", "prompt"})
        if (const auto t = m->find(kind); t != m->end() && t->is_string()) {
          o.mcp_kind = kind;
          o.mcp_target = t->get<std::string>();
        }
    }
    seen.push_back(std::move(o));
  }
}

int run_suggest(const std::vector<std::string>& sessions, const std::string& log_dir) {
  const auto dir = log_dir_or_default(log_dir);
  std::vector<std::string> wanted = sessions;
  if (wanted.empty()) wanted.push_back("");  // the newest session
  std::vector<config::observed_request> seen;
  std::string names;
  for (const auto& which : wanted) {
    const auto selection = session::find_log(dir, which);
    if (!selection) {
      std::cerr << "broker: no audit log "
                << (which.empty() ? "in " + dir.string() : "for " + which) << "\n";
      return exit_failure;
    }
    collect(selection->files, seen);
    names +=
        (names.empty() ? "" : ", ") + (selection->session.empty() ? which : selection->session);
  }
  std::cout << config::suggest_layer(seen, "broker policy suggest: what " + names + " did");
  return exit_ok;
}

}  // namespace

void register_policy(CLI::App& root, int& exit_status) {
  auto* app = root.add_subcommand("policy", "Validate or show policies");
  app->require_subcommand(1);
  auto files = std::make_shared<std::vector<std::string>>();
  auto* check = app->add_subcommand(
      "check", "Validate policy files and print the effective (layered) policy; exit 2 on error");
  check->add_option("files", *files, "Policy files, one layer each")->required();
  check->callback([files, &exit_status] { exit_status = run_check(*files); });
  auto suggested = std::make_shared<std::vector<std::string>>();
  auto log_dir = std::make_shared<std::string>();
  auto* suggest = app->add_subcommand(
      "suggest", "Print a layer that allows what sessions did (after wrap --learn)");
  suggest->add_option("sessions", *suggested, "Session ids (default: the newest session)");
  add_log_dir_option(*suggest, *log_dir);
  suggest->callback(
      [suggested, log_dir, &exit_status] { exit_status = run_suggest(*suggested, *log_dir); });
  auto* def = app->add_subcommand("default", "Print the embedded default policy");
  def->callback([&exit_status] {
    std::cout << config::default_policy_text();
    exit_status = exit_ok;
  });
}

}  // namespace broker::cli
