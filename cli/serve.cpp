// `broker serve`: one session on a listening address, or with --gateway a team gateway's many
// sessions (DESIGN §12), until SIGINT/SIGTERM (DESIGN §3).
#include <spdlog/spdlog.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <thread>

#include "base/atomic_file.hpp"
#include "brokers/credential_set.hpp"
#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "certs/trust_bundle.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "config/policy_set.hpp"
#include "gateway/admin_listener.hpp"
#include "gateway/gateway.hpp"
#include "gateway/metrics.hpp"
#include "gateway/serve_metrics.hpp"
#include "proxy/server.hpp"
#include "proxy/session_setup.hpp"
#include "proxy/target.hpp"
#include "proxy/tls.hpp"
#include "session/audit_files.hpp"
#include "session/child_env.hpp"
#include "session/control_socket.hpp"
#include "session/log.hpp"
#include "session/session_dir.hpp"

namespace broker::cli {

namespace {

struct serve_options {
  common_options common;
  std::string listen;
  std::string session;
  std::string env_file;
  std::string ca_dir;
  std::vector<std::string> timeouts;
  // Team gateway (DESIGN §12): many sessions, each client authenticating as one.
  bool gateway = false;
  std::string proxy_authority;  // what session env files name (a front such as haproxy)
  std::string redis;            // replicas share sessions, budgets and revocations here
  std::string replica;          // this replica's name (default: the gateway's session name)
  std::string admin;            // HOST:PORT of the admin listener (/metrics)
  std::string audit_sink;       // "redis" or "redis:STREAM-KEY": records also go to a stream
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

int run_serve(const serve_options& o) {
  setup_logging(o.common.log_level);
  std::string host;
  std::uint16_t port = 0;
  if (!split_listen(o.listen, host, port)) {
    std::cerr << "broker: --listen " << o.listen << ": expected HOST:PORT\n";
    return exit_usage;
  }
  session_setup setup;
  try {
    setup = load_options_and_policy(o.common, o.timeouts, o.session);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_usage;
  }
  const std::filesystem::path ca_dir =
      o.ca_dir.empty() ? certs::default_ca_dir() : std::filesystem::path(o.ca_dir);
  std::shared_ptr<certs::certificate_authority> ca;
  std::shared_ptr<proxy::tls_contexts> tls;
  try {
    load_credentials(setup);
    ca = std::make_shared<certs::certificate_authority>(load_or_create_ca(ca_dir));
    tls = std::make_shared<proxy::tls_contexts>(std::make_shared<certs::leaf_cache>(*ca),
                                                setup.options.upstream_cas);
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_failure;
  }
  const auto& options = setup.options;
  const auto& policy = setup.policy;
  const auto& credentials = setup.credentials;
  auto ctx = std::make_shared<proxy::proxy_context>(
      options, policy, open_audit(o.common, options.session_id), credentials, tls);
  // A gateway's own context holds no budget: its sessions have theirs.
  if (!o.gateway) ctx->set_budget(setup.budget);
  std::shared_ptr<gateway::gateway> team_gateway;
  auto metrics = std::make_shared<gateway::metrics>();
  const auto observe = [metrics](const std::string& session, const proxy::audit_entry& e) {
    metrics->exchange(session, e);
    if (e.llm_cost_usd > 0) metrics->llm_cost(session, e.credential, "", e.llm_cost_usd);
  };
  ctx->set_record_observer(observe);
  gateway::attach_serve_metrics(*metrics, *ctx, *tls);

  std::unique_ptr<proxy::server> server;
  try {
    if (o.gateway && !o.env_file.empty())
      throw std::runtime_error(
          "--env-file: a gateway's clients each get their session's env file from `broker "
          "session create --env-file`");
    server = std::make_unique<proxy::server>(ctx, host, port,
                                             std::max(2u, std::thread::hardware_concurrency()));
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    // No session ran: its log, still empty, goes too (a failed start leaves nothing behind).
    std::error_code ec;
    const auto& log = ctx->audit_log().path();
    if (std::filesystem::is_regular_file(log, ec) && std::filesystem::file_size(log, ec) == 0)
      std::filesystem::remove(log, ec);
    return exit_failure;
  }
  std::unique_ptr<gateway::admin_listener> admin;
  if (!o.admin.empty()) {
    std::string admin_host;
    std::uint16_t admin_port = 0;
    if (!split_listen(o.admin, admin_host, admin_port)) {
      std::cerr << "broker: --admin " << o.admin << ": expected HOST:PORT\n";
      return exit_usage;
    }
    try {
      admin = std::make_unique<gateway::admin_listener>(admin_host, admin_port, metrics);
    } catch (const std::exception& e) {
      std::cerr << "broker: --admin: " << e.what() << "\n";
      return exit_failure;
    }
    session::log(spdlog::level::info, session::log_tag(options.session_id),
                 "admin listener on http://{}:{}/metrics", admin_host, admin->port());
  }
  const bool v6 = server->host().find(':') != std::string::npos;
  const std::string url = "http://" + (v6 ? "[" + server->host() + "]" : server->host()) + ":" +
                          std::to_string(server->port());
  const auto bundle = ca_dir / "bundle.pem";
  if (o.gateway) {
    gateway::gateway_setup g;
    g.options = options;
    g.team_policy = policy;
    g.credentials = credentials;
    g.tls = tls;
    const auto common = o.common;
    const std::string replica = o.replica.empty() ? options.session_id : o.replica;
    if (!session::valid_replica_name(replica)) {
      std::cerr << "broker: --replica " << replica
                << ": use 1-64 letters, digits, '.', '_' or '-'\n";
      return exit_usage;
    }
    // Each replica writes its own files of a session: <log-dir>/<session>/<replica>.<n>.jsonl.
    g.open_audit = [common, replica](const std::string& id) {
      return open_audit(common, id, replica);
    };
    g.proxy_authority = o.proxy_authority.empty() ? url.substr(std::string_view("http://").size())
                                                  : o.proxy_authority;
    g.listen = url;
    g.trust_bundle = bundle.string();
    g.replica = replica;
    g.observer = observe;
    g.on_revoked = [metrics](const std::string& id) { metrics->forget_session(id); };
    if (!o.audit_sink.empty() && o.redis.empty()) {
      std::cerr << "broker: --audit-sink redis needs --redis URL\n";
      return exit_usage;
    }
    if (!o.redis.empty()) {
      try {
        auto stats = std::make_shared<gateway::redis_stats>();
        auto background = std::make_shared<gateway::redis_stats>();
        g.redis =
            std::make_shared<gateway::redis_store>(gateway::redis_endpoint::parse(o.redis), stats,
                                                   background, std::chrono::milliseconds(1000));
        gateway::attach_redis_metrics(*metrics, stats, background);
        if (!o.audit_sink.empty()) {
          const auto colon = o.audit_sink.find(':');
          if (o.audit_sink.substr(0, colon) != "redis")
            throw std::invalid_argument("--audit-sink: expected redis or redis:STREAM-KEY");
          const std::string key =
              colon == std::string::npos ? "broker:audit" : o.audit_sink.substr(colon + 1);
          g.audit_sink = std::make_shared<gateway::audit_stream>(g.redis, key, replica);
          ctx->audit_log().set_sink([sink = g.audit_sink, id = options.session_id](
                                        std::string_view line) { sink->ship(id, line); });
          metrics->add_collector([sink = g.audit_sink](gateway::exposition& out) {
            using kind = gateway::exposition::kind;
            out.family("broker_audit_stream_records_total", "Audit records shipped to the stream",
                       kind::counter);
            out.sample("broker_audit_stream_records_total", {}, sink->shipped());
            out.family("broker_audit_stream_dropped_total",
                       "Audit records not shipped (the queue was full while Redis was away)",
                       kind::counter);
            out.sample("broker_audit_stream_dropped_total", {}, sink->dropped());
          });
        }
      } catch (const std::exception& e) {
        std::cerr << "broker: --redis: " << e.what() << "\n";
        return exit_usage;
      }
    }
    try {
      certs::write_trust_bundle(bundle, *ca);
    } catch (const std::exception& e) {
      std::cerr << "broker: " << bundle.string() << ": " << e.what() << "\n";
      return exit_failure;
    }
    auto redis = g.redis;
    team_gateway = std::make_shared<gateway::gateway>(std::move(g));
    metrics->add_gauge("broker_gateway_sessions", "Gateway sessions served by this replica",
                       [gw = std::weak_ptr<gateway::gateway>(team_gateway)] {
                         auto g = gw.lock();
                         return g ? static_cast<double>(g->sessions_served()) : 0.0;
                       });
    ctx->set_resolver(team_gateway);
    if (redis) {
      std::weak_ptr<gateway::gateway> weak = team_gateway;
      redis->watch_revocations([weak](const std::string& id) {
        if (auto gw = weak.lock()) gw->revoked_elsewhere(id);
      });
    }
  }
  session::session_start start;
  start.mode = "serve";
  start.listen = url;
  start.policy = session::policy_sources(*policy);
  start.credentials = credentials->names();
  ctx->audit_log().write(session::start_record(start));
  if (!o.env_file.empty()) {
    try {
      // The bundle sits beside the CA: every serve session with this CA writes the same bytes.
      certs::write_trust_bundle(bundle, *ca);
      auto dummies = credentials->dummy_environment();
      for (const auto& f : credentials->dummy_files()) {
        // A gcp key file (a dummy OAuth client) beside the env file: FILE.gcp-NAME.json.
        const std::string file = o.env_file + "." + f.file_name;
        base::write_file_atomically(file, f.content, 0600);
        dummies.emplace_back(f.variable, file);
      }
      // 0600: the file names the session's proxy and dummies, nothing for other users.
      base::write_file_atomically(
          o.env_file,
          session::render_env_lines(session::child_environment(url, bundle.string(), dummies)),
          0600);
    } catch (const std::exception& e) {
      std::cerr << "broker: --env-file: " << e.what() << "\n";
      return exit_failure;
    }
  }
  // `broker status` / `broker kill` reach the session here; kill is a SIGTERM (drain, then end).
  std::unique_ptr<session::session_dir> dir;
  std::unique_ptr<session::control_socket> control;
  try {
    dir = std::make_unique<session::session_dir>(options.session_id);
    session::control_socket::command_fn sessions;
    if (team_gateway)
      sessions = [team_gateway](const std::string& line) { return team_gateway->command(line); };
    control = std::make_unique<session::control_socket>(
        dir->control_socket(),
        [&] {
          auto status = session_status(*ctx, o.gateway ? "gateway" : "serve", ::getpid());
          if (team_gateway) {
            status["sessions_served"] = team_gateway->sessions_served();
            status["session_requests"] = team_gateway->requests();
            status["session_denied"] = team_gateway->denied();
          }
          return status;
        },
        [] { ::kill(::getpid(), SIGTERM); }, std::move(sessions));
  } catch (const std::exception& e) {
    session::log(spdlog::level::warn, session::log_tag(options.session_id), "no control socket: {}",
                 e.what());
  }
  std::cout << "broker: listening on " << url << " session=" << options.session_id << std::endl;

  const auto files = o.common.policies;
  const std::string loaded_credentials = credential_specs(*policy);
  server->run([ctx, files, loaded_credentials, team_gateway] {
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
      ctx->audit_log().write(session::policy_reload_record(session::policy_sources(*fresh)));
      if (team_gateway) team_gateway->replace_team_policy(fresh);
      ctx->replace_policy(std::move(fresh));
      session::log(spdlog::level::info, session::log_tag(ctx->session_id()), "policy reloaded:{}",
                   digests);
    } catch (const std::exception& e) {
      session::log(spdlog::level::err, session::log_tag(ctx->session_id()),
                   "policy reload refused, keeping the current policy: {}", e.what());
    }
  });
  if (team_gateway) team_gateway->end_sessions();
  ctx->audit_log().end(session::end_record(session_end_of(*ctx, std::nullopt)));
  session::log(spdlog::level::info, session::log_tag(ctx->session_id()),
               "stopped after {} request(s), {} denied", ctx->requests(), ctx->denied());
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
  app->add_flag("--gateway", options->gateway,
                "Serve many sessions (`broker session create`), each client authenticating with "
                "its session's proxy credential");
  app->add_option("--proxy-authority", options->proxy_authority,
                  "HOST:PORT that session env files tell clients to dial (default: --listen's)");
  app->add_option("--redis", options->redis,
                  "With --gateway: share sessions, budgets and revocations with other replicas "
                  "(redis://[:PASSWORD@]HOST[:PORT][/DB] or unix:///PATH)");
  app->add_option("--replica", options->replica,
                  "This replica's name in audit files and shared state (default: --session)");
  app->add_option("--audit-sink", options->audit_sink,
                  "With --redis: also ship every audit record to a Redis Stream (redis, or "
                  "redis:KEY; default key broker:audit)");
  app->add_option("--admin", options->admin,
                  "HOST:PORT for the admin listener: GET /metrics (Prometheus), /healthz; no "
                  "authentication, so bind it to loopback or an admin network");
  app->add_option("--timeout", options->timeouts,
                  "NAME=DURATION: head, idle, dns, connect, tls, upstream, body, tunnel, drain")
      ->allow_extra_args(false);
  app->callback([options, &exit_status] { exit_status = run_serve(*options); });
}

}  // namespace broker::cli
