// `broker serve`: its options read, then the session assembled and run by gateway::serve.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "gateway/serve.hpp"

namespace broker::cli {

namespace {

struct serve_options {
  gateway::serve_config config;
  std::string listen;
  std::string admin;
};

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

int run_serve(serve_options& o) {
  setup_logging(o.config.common.log_level);
  auto& c = o.config;
  if (!split_listen(o.listen, c.host, c.port)) {
    std::cerr << "broker: --listen " << o.listen << ": expected HOST:PORT\n";
    return exit_usage;
  }
  if (!o.admin.empty() && !split_listen(o.admin, c.admin_host, c.admin_port)) {
    std::cerr << "broker: --admin " << o.admin << ": expected HOST:PORT\n";
    return exit_usage;
  }
  try {
    gateway::serve(c);
  } catch (const live::start_error& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return e.usage_error ? exit_usage : exit_failure;
  }
  return exit_ok;
}

}  // namespace

void register_serve(CLI::App& root, int& exit_status) {
  auto options = std::make_shared<serve_options>();
  auto* app = root.add_subcommand("serve", "Run one proxy session on a listening address");
  add_common_options(*app, options->config.common);
  app->add_option("--listen", options->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->required();
  app->add_option("--session", options->config.session, "Session name (default: a random id)");
  app->add_option("--env-file", options->config.env_file,
                  "Write the child environment (KEY=VALUE lines) to this file");
  app->add_option("--ca-dir", options->config.ca_dir,
                  "The persistent CA for intercepted hosts (default: ~/.config/broker/ca; made "
                  "on first use)");
  app->add_flag("--gateway", options->config.gateway,
                "Serve many sessions (`broker session create`), each client authenticating with "
                "its session's proxy credential");
  app->add_option("--proxy-authority", options->config.proxy_authority,
                  "HOST:PORT that session env files tell clients to dial (default: --listen's)");
  app->add_option("--redis", options->config.redis,
                  "With --gateway: share sessions, budgets and revocations with other replicas "
                  "(redis://[:PASSWORD@]HOST[:PORT][/DB] or unix:///PATH)");
  app->add_option("--replica", options->config.replica,
                  "This replica's name in audit files and shared state (default: --session)");
  app->add_option("--audit-sink", options->config.audit_sinks,
                  "With --gateway, repeatable: also ship every audit record to a Redis Stream "
                  "(redis, or redis:KEY; default key broker:audit; needs --redis) or to a syslog "
                  "server, RFC 5424 over TCP (syslog, or syslog:HOST:PORT; default "
                  "127.0.0.1:514)");
  app->add_option("--admin", options->admin,
                  "HOST:PORT for the admin listener: GET /metrics (Prometheus), /healthz; no "
                  "authentication, so bind it to loopback or an admin network");
  app->add_option("--timeout", options->config.timeouts,
                  "NAME=DURATION: head, idle, dns, connect, tls, upstream, body, tunnel, drain")
      ->allow_extra_args(false);
  app->callback([options, &exit_status] { exit_status = run_serve(*options); });
}

}  // namespace broker::cli
