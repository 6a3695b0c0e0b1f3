// `broker serve` assembled and run (serve.hpp): each step below is one part of the session, in
// the order they start.
#include "gateway/serve.hpp"

#include <spdlog/spdlog.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "base/atomic_file.hpp"
#include "base/text.hpp"
#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "certs/tls_contexts.hpp"
#include "certs/trust_bundle.hpp"
#include "gateway/admin/admin_api.hpp"
#include "gateway/admin/admin_auth.hpp"
#include "gateway/admin/admin_listener.hpp"
#include "gateway/admin/admin_tokens.hpp"
#include "gateway/console/console.hpp"
#include "gateway/gateway.hpp"
#include "gateway/metrics.hpp"
#include "gateway/serve_metrics.hpp"
#include "gateway/syslog_sink.hpp"
#include "live/ask_desk.hpp"
#include "live/session_setup.hpp"
#include "live/session_status.hpp"
#include "proxy/server.hpp"
#include "session/audit_files.hpp"
#include "session/child_env.hpp"
#include "session/control_socket.hpp"
#include "session/log.hpp"
#include "session/session_dir.hpp"

namespace broker::gateway {

namespace {

using live::start_error;

// serve's CA persists in a directory (docs/cli.md), made on first use, so that clients trust it
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

// What the credentials of a policy say, to see whether a reload would change them.
std::string credential_specs(const config::policy_set& set) {
  std::string out;
  for (const auto& layer : set.layers()) out += config::to_json(layer)["credentials"].dump();
  return out;
}

// What the stop may take once the drain is over (stop_backstop): the admin listener's slow
// handlers (an ask forwarded to another replica: 3 s), the audit sinks' settling (2 s) and last
// flushes (1 s each), the shared state's round trips (1 s each).
constexpr std::chrono::seconds stop_limit{15};

// The parts of a running serve, each made by one step below.
struct serving {
  live::session_setup setup;
  std::filesystem::path bundle;  // the trust bundle beside the CA
  std::shared_ptr<certs::certificate_authority> ca;
  std::shared_ptr<certs::tls_contexts> tls;
  std::shared_ptr<live::live_session> ctx;
  std::shared_ptr<broker::gateway::metrics> counters;
  live::record_observer observe;
  // Made before the server and ended after it: the server's context resolves sessions with it.
  std::shared_ptr<broker::gateway::gateway> team;
  std::shared_ptr<admin_tokens> tokens;       // a gateway's operators' credentials
  std::shared_ptr<redis_store> shared_state;  // replicas' shared state; null without --redis
  std::unique_ptr<proxy::server> server;
  std::unique_ptr<admin_listener> admin;
  std::string url;  // http://HOST:PORT of the listener
  std::unique_ptr<session::session_dir> dir;
  std::unique_ptr<session::control_socket> control;
};

// The options, policy and credentials, the CA and TLS contexts, the context and its metrics.
void load_session(const serve_config& c, serving& s) {
  try {
    // A gateway's operators approve per session: no user's approved.json extends its team.
    s.setup = live::load_options_and_policy(c.common, c.timeouts, c.session, false, !c.gateway);
  } catch (const std::exception& e) {
    throw start_error(e.what(), true);
  }
  const std::filesystem::path ca_dir =
      c.ca_dir.empty() ? certs::default_ca_dir() : std::filesystem::path(c.ca_dir);
  s.bundle = ca_dir / "bundle.pem";
  try {
    live::load_credentials(s.setup);
    s.ca = std::make_shared<certs::certificate_authority>(load_or_create_ca(ca_dir));
    s.tls = std::make_shared<certs::tls_contexts>(std::make_shared<certs::leaf_cache>(*s.ca),
                                                  s.setup.options.upstream_cas);
  } catch (const std::exception& e) {
    throw start_error(e.what(), false);
  }
  s.counters = std::make_shared<metrics>();
  s.observe = [m = s.counters](const std::string& session, const session::audit_entry& e) {
    m->exchange(session, e);
    if (e.llm_cost_usd > 0) m->llm_cost(session, e.credential, "", e.llm_cost_usd);
  };
  live::session_attachments attached;
  // A gateway's own context holds no budget: its sessions have theirs.
  if (!c.gateway) attached.budget = s.setup.budget;
  attached.observer = s.observe;
  if (s.setup.asks && !c.gateway) {
    // serve's asks are decided with broker approve/deny; each is one line of its log.
    auto asks = std::make_shared<live::ask_options>();
    asks->approved_file = s.setup.approved_file;
    asks->on_ask = [session = s.setup.options.session_id](const nlohmann::ordered_json& ask) {
      session::log(spdlog::level::warn, session::log_tag(session),
                   "ask {}: {} {} is not in the policy: broker approve {} | broker deny {}",
                   ask.value("id", ""), base::printable(ask.value("method", "")),
                   base::printable(ask.value("url", "")), ask.value("id", ""), ask.value("id", ""));
    };
    attached.asks = std::move(asks);
  }
  const auto& options = s.setup.options;
  s.ctx = std::make_shared<live::live_session>(options, s.setup.policy,
                                               live::open_audit(c.common, options.session_id),
                                               s.setup.credentials, s.tls, std::move(attached));
  attach_serve_metrics(*s.counters, *s.ctx, *s.tls);
}

// The proxy's listener and the admin listener.
void start_listeners(const serve_config& c, serving& s) {
  try {
    if (c.gateway && !c.env_file.empty())
      throw std::runtime_error(
          "--env-file: a gateway's clients each get their session's env file from `broker "
          "session create --env-file`");
    s.server = std::make_unique<proxy::server>(s.ctx, c.host, c.port,
                                               std::max(2u, std::thread::hardware_concurrency()));
  } catch (const std::exception& e) {
    // No session ran: its log, still empty, goes too (a failed start leaves nothing behind).
    std::error_code ec;
    const auto& log = s.ctx->audit_log().path();
    if (std::filesystem::is_regular_file(log, ec) && std::filesystem::file_size(log, ec) == 0)
      std::filesystem::remove(log, ec);
    throw start_error(e.what(), false);
  }
  if (!c.admin_host.empty()) {
    try {
      s.admin = std::make_unique<admin_listener>(c.admin_host, c.admin_port, s.counters);
    } catch (const std::exception& e) {
      throw start_error(std::string("--admin: ") + e.what(), false);
    }
    session::log(spdlog::level::info, session::log_tag(s.setup.options.session_id),
                 "admin listener on http://{}:{}/metrics", c.admin_host, s.admin->port());
  }
  const bool v6 = s.server->host().find(':') != std::string::npos;
  s.url = "http://" + (v6 ? "[" + s.server->host() + "]" : s.server->host()) + ":" +
          std::to_string(s.server->port());
}

// --audit-sink: every record of the gateway's own log, and of each session's (gateway.cpp), also
// goes to each sink, counted in /metrics.
void attach_audit_sinks(const serve_config& c, serving& s, gateway_setup& g) {
  for (const auto& spec : c.audit_sinks) {
    const std::string kind = spec.substr(0, spec.find(':'));
    std::shared_ptr<audit_sink> sink;
    std::string family;
    if (kind == "redis") {
      const std::string key =
          kind.size() == spec.size() ? "broker:audit" : spec.substr(kind.size() + 1);
      sink = std::make_shared<audit_stream>(g.redis, key, g.replica);
      family = "broker_audit_stream";
    } else if (kind == "syslog") {
      try {
        sink = std::make_shared<syslog_sink>(spec, g.replica);
      } catch (const std::invalid_argument& e) {
        throw start_error(e.what(), true);
      }
      family = "broker_audit_syslog";
    } else {
      throw start_error("--audit-sink " + spec + ": expected redis[:KEY] or syslog[:HOST:PORT]",
                        true);
    }
    g.audit_sinks.push_back(sink);
    const std::string where = kind == "redis" ? "the stream" : "syslog";
    s.counters->add_collector([sink, family, where](exposition& out) {
      using kind = exposition::kind;
      out.family(family + "_records_total", "Audit records shipped to " + where, kind::counter);
      out.sample(family + "_records_total", {}, sink->shipped());
      out.family(family + "_dropped_total",
                 "Audit records not shipped (the queue was full while " + where + " was away)",
                 kind::counter);
      out.sample(family + "_dropped_total", {}, sink->dropped());
    });
  }
  if (!g.audit_sinks.empty())
    s.ctx->audit_log().set_sink(ship_to(g.audit_sinks, s.setup.options.session_id));
}

// --redis: the store replicas share, its metrics, and the audit sink when asked for.
void attach_redis(const serve_config& c, serving& s, gateway_setup& g) {
  for (const auto& spec : c.audit_sinks)
    if (spec.substr(0, spec.find(':')) == "redis" && c.redis.empty())
      throw start_error("--audit-sink redis needs --redis URL", true);
  if (c.redis.empty()) return;
  try {
    auto stats = std::make_shared<redis_stats>();
    auto background = std::make_shared<redis_stats>();
    g.redis = std::make_shared<redis_store>(redis_endpoint::parse(c.redis), stats, background,
                                            std::chrono::milliseconds(1000));
    attach_redis_metrics(*s.counters, stats, background);
  } catch (const std::exception& e) {
    throw start_error(std::string("--redis: ") + e.what(), true);
  }
}

// The team gateway (docs/gateway.md): the sessions' resolver, on Redis when replicas share.
void start_gateway(const serve_config& c, serving& s) {
  const auto& options = s.setup.options;
  gateway_setup g;
  g.options = options;
  g.team_policy = s.setup.policy;
  g.credentials = s.setup.credentials;
  g.tls = s.tls;
  g.replica = c.replica.empty() ? options.session_id : c.replica;
  if (!session::valid_replica_name(g.replica))
    throw start_error("--replica " + g.replica + ": use 1-64 letters, digits, '.', '_' or '-'",
                      true);
  // Each replica writes its own files of a session: <log-dir>/<session>/<replica>.<n>.jsonl.
  g.open_audit = [common = c.common, replica = g.replica](const std::string& id) {
    return live::open_audit(common, id, replica);
  };
  g.proxy_authority = c.proxy_authority.empty() ? s.url.substr(std::string_view("http://").size())
                                                : c.proxy_authority;
  g.listen = s.url;
  g.trust_bundle = s.bundle.string();
  g.observer = s.observe;
  g.on_revoked = [m = s.counters](const std::string& id) { m->forget_session(id); };
  attach_redis(c, s, g);
  attach_audit_sinks(c, s, g);
  try {
    certs::write_trust_bundle(s.bundle, *s.ca);
  } catch (const std::exception& e) {
    throw start_error(s.bundle.string() + ": " + e.what(), false);
  }
  auto redis = g.redis;
  const auto replica = g.replica;
  s.shared_state = redis;
  s.tokens = std::make_shared<admin_tokens>(redis);
  s.team = std::make_shared<gateway>(std::move(g));
  s.counters->add_gauge("broker_gateway_sessions", "Gateway sessions served by this replica",
                        [gw = std::weak_ptr<gateway>(s.team)] {
                          auto g = gw.lock();
                          return g ? static_cast<double>(g->sessions_served()) : 0.0;
                        });
  s.ctx->set_resolver(s.team);
  if (redis) {
    redis->watch_revocations([weak = std::weak_ptr<gateway>(s.team)](const std::string& id) {
      if (auto gw = weak.lock()) gw->revoked_elsewhere(id);
    });
    // Every replica lists and decides every replica's asks.
    const std::weak_ptr<gateway> weak(s.team);
    auto relay = std::make_shared<ask_relay>(
        redis, replica,
        [weak] {
          auto gw = weak.lock();
          return gw ? gw->pending() : nlohmann::ordered_json::array();
        },
        [weak](const std::string& id, const live::ask_answer& answer) {
          auto gw = weak.lock();
          if (!gw) throw std::invalid_argument("no request " + id + ": the gateway is stopping");
          return gw->decide(id, answer);
        });
    s.team->relay_asks(relay);
    relay->start();
  }
}

// --env-file: what a client needs to use this session (the proxy, the trust bundle, dummies).
void write_env_file(const serve_config& c, serving& s) {
  try {
    // The bundle sits beside the CA: every serve session with this CA writes the same bytes.
    certs::write_trust_bundle(s.bundle, *s.ca);
    const auto& credentials = *s.setup.credentials;
    auto dummies = credentials.dummy_environment();
    for (const auto& f : credentials.dummy_files()) {
      // A gcp key file (a dummy OAuth client) beside the env file: FILE.gcp-NAME.json.
      const std::string file = c.env_file + "." + f.file_name;
      base::write_file_atomically(file, f.content, 0600);
      dummies.emplace_back(f.variable, file);
    }
    // 0600: the file names the session's proxy and dummies, nothing for other users.
    base::write_file_atomically(
        c.env_file,
        session::render_env_lines(session::child_environment(s.url, s.bundle.string(), dummies)),
        0600);
  } catch (const std::exception& e) {
    throw start_error(std::string("--env-file: ") + e.what(), false);
  }
}

// `broker status` / `broker kill` reach the session here; kill is a SIGTERM (drain, then end).
void open_control(const serve_config& c, serving& s) {
  try {
    s.dir = std::make_unique<session::session_dir>(s.setup.options.session_id);
    session::control_socket::command_fn sessions = [team = s.team, tokens = s.tokens, ctx = s.ctx](
                                                       const std::string& line,
                                                       const std::string& who) {
      if (tokens)
        if (auto answer = answer_admin_token_command(*tokens, line, who, ctx->audit_log()))
          return answer;
      // A gateway's asks are its sessions'; serve's are its own.
      live::ask_decider* desk = team ? static_cast<live::ask_decider*>(team.get())
                                     : static_cast<live::ask_decider*>(ctx->asks());
      if (auto asked = live::answer_ask_command(desk, line, who)) return asked;
      return team ? team->command(line) : std::nullopt;
    };
    s.control = std::make_unique<session::control_socket>(
        s.dir->control_socket(),
        [&s, gateway_mode = c.gateway] {
          auto status =
              live::session_status(*s.ctx, gateway_mode ? "gateway" : "serve", ::getpid());
          if (s.team) {
            status["sessions_served"] = s.team->sessions_served();
            status["session_requests"] = s.team->requests();
            status["session_denied"] = s.team->denied();
          }
          return status;
        },
        [] { ::kill(::getpid(), SIGTERM); }, std::move(sessions));
  } catch (const std::exception& e) {
    session::log(spdlog::level::warn, session::log_tag(s.setup.options.session_id),
                 "no control socket: {}", e.what());
  }
}

// SIGHUP: the policy files read again; a broken file never replaces a working policy.
void reload_policy(live::live_session& ctx, const std::vector<std::string>& files,
                   const std::string& loaded_credentials, gateway* team) {
  try {
    auto layers = live::load_layers(files);
    // approved.json as it is now (a gateway reads none); what the session approved is carried
    // onto the new policy by its desk.
    std::filesystem::path approved_file;
    live::prepare_asking(layers, false, team ? nullptr : &approved_file);
    auto fresh = std::make_shared<config::policy_set>(std::move(layers));
    // The real values were read at start and their sources wiped; a binding that changed could
    // not be honoured half-way, so it takes a restart.
    if (credential_specs(*fresh) != loaded_credentials)
      throw std::runtime_error(
          "the credentials section changed; credentials are fixed for a session, restart "
          "serve to change them");
    std::string digests;
    for (const auto& layer : fresh->layers()) digests += " " + layer.source + "=" + layer.sha256;
    ctx.audit_log().write(session::policy_reload_record(session::policy_sources(*fresh)));
    if (team) team->replace_team_policy(fresh);
    live::reload_policy(ctx, std::move(fresh));
    session::log(spdlog::level::info, session::log_tag(ctx.session_id()), "policy reloaded:{}",
                 digests);
  } catch (const std::exception& e) {
    session::log(spdlog::level::err, session::log_tag(ctx.session_id()),
                 "policy reload refused, keeping the current policy: {}", e.what());
  }
}

// The last resort of a stop: once the drain is over, what is left (the admin listener's
// handlers, the sessions' ends, the sinks, the shared store's thread) is given `limit`; past it
// the process exits (status 1, said in its log) rather than hang. Every step has its own
// deadline, so this is for a bug or a wait nobody foresaw.
class stop_backstop {
 public:
  stop_backstop(std::chrono::seconds limit, std::string id)
      : thread_([this, limit, id = std::move(id)] {
          std::unique_lock lock(mutex_);
          if (done_cv_.wait_for(lock, limit, [this] { return done_; })) return;
          session::log(spdlog::level::err, session::log_tag(id),
                       "the stop did not end within {} s of the drain: exiting now", limit.count());
          std::_Exit(1);
        }) {}
  ~stop_backstop() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  stop_backstop(const stop_backstop&) = delete;
  stop_backstop& operator=(const stop_backstop&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the members it reads are made
};

}  // namespace

void serve(const serve_config& c) {
  if (!c.gateway && (!c.audit_sinks.empty() || !c.redis.empty()))
    throw start_error(
        std::string(c.redis.empty() ? "--audit-sink" : "--redis") + " needs --gateway", true);
  // Declared before the session's parts: it watches their destructors too.
  std::optional<stop_backstop> backstop;
  serving s;
  load_session(c, s);
  start_listeners(c, s);
  if (c.gateway) start_gateway(c, s);
  auto& ctx = *s.ctx;
  session::session_start start;
  start.mode = "serve";
  start.listen = s.url;
  start.policy = session::policy_sources(*s.setup.policy);
  start.credentials = s.setup.credentials->names();
  ctx.audit_log().write(session::start_record(start));
  // The admin API writes to the gateway's log: from its start record on.
  if (s.admin && s.team) {
    auto gate = std::make_shared<admin_gate>(
        s.tokens, std::make_shared<admin_logins>(s.shared_state, s.tokens), ctx.audit_log());
    add_admin_api(*s.admin, s.team, gate);
    add_console(*s.admin, s.team, gate, live::log_dir_or_default(c.common.log_dir));
  }
  if (!c.env_file.empty()) write_env_file(c, s);
  open_control(c, s);
  std::cout << "broker: listening on " << s.url << " session=" << ctx.session_id() << std::endl;

  const std::string loaded_credentials = credential_specs(*s.setup.policy);
  s.server->run([ctx = s.ctx, files = c.common.policies, loaded_credentials, team = s.team] {
    reload_policy(*ctx, files, loaded_credentials, team.get());
  });
  backstop.emplace(stop_limit, ctx.session_id());
  s.admin.reset();  // nothing is written to the logs after their ends
  if (s.team) s.team->end_sessions();
  ctx.audit_log().end(session::end_record(live::session_end_of(ctx, std::nullopt)));
  session::log(spdlog::level::info, session::log_tag(ctx.session_id()),
               "stopped after {} request(s), {} denied", ctx.counters().requests(),
               ctx.counters().denied());
}

}  // namespace broker::gateway
