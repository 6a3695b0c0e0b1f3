// `broker serve`: one session on a listening address, until SIGINT/SIGTERM (DESIGN §3).
#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "brokers/credential_set.hpp"
#include "brokers/secret_source.hpp"
#include "certs/atomic_file.hpp"
#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "certs/trust_bundle.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "config/policy_set.hpp"
#include "proxy/server.hpp"
#include "proxy/target.hpp"
#include "proxy/tls.hpp"
#include "session/log_reader.hpp"
#include "wrap/child_env.hpp"

namespace broker::cli {

namespace {

struct serve_options {
  common_options common;
  std::string listen;
  std::string session;
  std::string env_file;
  std::string ca_dir;
  std::vector<std::string> timeouts;
};

// serve's CA persists in a directory (DESIGN §3), made on first use, so that clients trust it
// once: `broker ca path` names the file.
certs::certificate_authority load_or_create_ca(const std::filesystem::path& dir) {
  if (std::filesystem::exists(certs::certificate_authority::key_path(dir)))
    return certs::certificate_authority::load(dir);
  auto ca = certs::certificate_authority::generate("broker serve CA");
  ca.save(dir);
  spdlog::info("created a CA in {}; clients must trust {}", dir.string(),
               certs::certificate_authority::cert_path(dir).string());
  return ca;
}

// "127.0.0.1:8080" or "[::1]:8080"; the host must be an IP address.
bool split_listen(const std::string& text, std::string& host, std::uint16_t& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  try {
    const auto value = std::stoul(text.substr(colon + 1));
    if (value > 65535) return false;
    port = static_cast<std::uint16_t>(value);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// What the credentials of a policy say, to see whether a reload would change them.
std::string credential_specs(const config::policy_set& set) {
  std::string out;
  for (const auto& layer : set.layers()) out += config::to_json(layer)["credentials"].dump();
  return out;
}

nlohmann::ordered_json policy_sources(const config::policy_set& set) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& layer : set.layers())
    list.push_back({{"source", layer.source}, {"sha256", layer.sha256}});
  return list;
}

int run_serve(const serve_options& o) {
  setup_logging(o.common.log_level);
  std::string host;
  std::uint16_t port = 0;
  if (!split_listen(o.listen, host, port)) {
    std::cerr << "broker: --listen " << o.listen << ": expected HOST:PORT\n";
    return exit_usage;
  }
  if (!o.session.empty() && !valid_session_name(o.session)) {
    std::cerr << "broker: --session " << o.session
              << ": use 1-64 letters, digits, '.', '_' or '-'\n";
    return exit_usage;
  }
  proxy::proxy_options options;
  std::shared_ptr<const config::policy_set> policy;
  std::shared_ptr<const brokers::credential_set> credentials;
  std::vector<std::string> skipped;
  try {
    options.connect_to = parse_connect_to_rules(o.common.connect_to);
    check_upstream_cas(o.common.upstream_cas);
    for (const auto& spec : o.timeouts) proxy::set_timeout(options.timeouts, spec);
    for (const auto& f : o.common.upstream_cas) options.upstream_cas.emplace_back(f);
    policy = std::make_shared<config::policy_set>(load_layers(o.common.policies));
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_usage;
  }
  const std::filesystem::path ca_dir =
      o.ca_dir.empty() ? certs::default_ca_dir() : std::filesystem::path(o.ca_dir);
  std::shared_ptr<certs::certificate_authority> ca;
  std::shared_ptr<proxy::tls_contexts> tls;
  try {
    // Nothing of this process (its memory, its environment) is readable by a same-user debugger
    // or /proc reader once it holds real values.
    ::prctl(PR_SET_DUMPABLE, 0);
    credentials = std::make_shared<brokers::credential_set>(
        brokers::credential_set::load(policy->layers(), &skipped));
    for (const auto& layer : policy->layers())
      for (const auto& [name, spec] : layer.credentials)
        brokers::forget_environment_source(spec.source);
    ca = std::make_shared<certs::certificate_authority>(load_or_create_ca(ca_dir));
    tls = std::make_shared<proxy::tls_contexts>(std::make_shared<certs::leaf_cache>(*ca),
                                                options.upstream_cas);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
  options.session_id = o.session.empty() ? session::new_session_id() : o.session;
  auto audit = session::audit_log::open(log_dir_or_default(o.common.log_dir), options.session_id);
  if (audit->failed())
    spdlog::error("[{}] audit log unavailable ({}): every request will be refused",
                  options.session_id, audit->failure());
  for (const auto& why : skipped)
    spdlog::warn("[{}] credential {}: not brokered", options.session_id, why);
  auto ctx =
      std::make_shared<proxy::proxy_context>(options, policy, std::move(audit), credentials, tls);

  std::unique_ptr<proxy::server> server;
  try {
    server = std::make_unique<proxy::server>(ctx, host, port,
                                             std::max(2u, std::thread::hardware_concurrency()));
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
  const bool v6 = server->host().find(':') != std::string::npos;
  const std::string url = "http://" + (v6 ? "[" + server->host() + "]" : server->host()) + ":" +
                          std::to_string(server->port());
  auto brokered = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < credentials->size(); ++i)
    brokered.push_back((*credentials)[i].spec.name);
  ctx->audit_log().write({{"event", "session_start"},
                          {"version", BROKER_VERSION},
                          {"mode", "serve"},
                          {"listen", url},
                          {"policy", policy_sources(*policy)},
                          {"credentials", brokered}});
  if (!o.env_file.empty()) {
    try {
      // The bundle sits beside the CA: every serve session with this CA writes the same bytes.
      const auto bundle = ca_dir / "bundle.pem";
      certs::write_trust_bundle(bundle, *ca);
      // 0600: the file names the session's proxy and dummies, nothing for other users.
      certs::write_file_atomically(o.env_file,
                                   wrap::render_env_lines(wrap::child_environment(
                                       url, bundle.string(), credentials->dummy_environment())),
                                   0600);
    } catch (const std::exception& e) {
      std::cerr << "broker: --env-file: " << e.what() << "\n";
      return exit_failure;
    }
  }
  std::cout << "broker: listening on " << url << " session=" << options.session_id << std::endl;

  const auto files = o.common.policies;
  const std::string loaded_credentials = credential_specs(*policy);
  server->run([ctx, files, loaded_credentials] {
    // Validate first: a broken file never replaces a working policy.
    try {
      auto fresh = std::make_shared<config::policy_set>(load_layers(files));
      // The real values were read at start and their sources wiped; a binding that changed
      // could not be honoured half-way, so it takes a restart.
      if (credential_specs(*fresh) != loaded_credentials)
        throw std::runtime_error(
            "the credentials section changed; credentials are fixed for a session, restart "
            "serve to change them");
      std::string digests;
      for (const auto& layer : fresh->layers()) digests += " " + layer.source + "=" + layer.sha256;
      ctx->audit_log().write({{"event", "policy_reload"}, {"policy", policy_sources(*fresh)}});
      ctx->replace_policy(std::move(fresh));
      spdlog::info("[{}] policy reloaded:{}", ctx->session_id(), digests);
    } catch (const std::exception& e) {
      spdlog::error("[{}] policy reload refused, keeping the current policy: {}", ctx->session_id(),
                    e.what());
    }
  });
  ctx->audit_log().write({{"event", "session_end"},
                          {"requests", ctx->requests()},
                          {"denied", ctx->denied()},
                          {"exit", nullptr}});
  spdlog::info("[{}] stopped after {} request(s), {} denied", ctx->session_id(), ctx->requests(),
               ctx->denied());
  return exit_ok;
}

}  // namespace

void register_serve(CLI::App& root, int& exit_status) {
  auto options = std::make_shared<serve_options>();
  auto* app = root.add_subcommand("serve", "Run one proxy session on a listening address");
  add_common_options(*app, options->common);
  app->add_option("--listen", options->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->required();
  app->add_option("--session", options->session, "Session name (default: a random id)");
  app->add_option("--env-file", options->env_file,
                  "Write the child environment (KEY=VALUE lines) to this file");
  app->add_option("--ca-dir", options->ca_dir,
                  "The persistent CA for intercepted hosts (default: ~/.config/broker/ca; made "
                  "on first use)");
  app->add_option("--timeout", options->timeouts,
                  "NAME=DURATION: head, idle, dns, connect, tls, upstream, body, tunnel, drain");
  app->callback([options, &exit_status] { exit_status = run_serve(*options); });
}

}  // namespace broker::cli
