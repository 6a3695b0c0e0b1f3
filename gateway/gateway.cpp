#include "gateway/gateway.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "base/text.hpp"
#include "config/policy.hpp"
#include "live/session_status.hpp"
#include "session/budget.hpp"
#include "session/child_env.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

live::resolution refused(std::string why) {
  return {nullptr, live::refusal::proxy_auth_required(std::move(why))};
}

// A session's own layers, parsed as every replica parses them. A session cannot add
// credentials: they are the team's, loaded once by the gateway.
std::vector<config::policy> parse_layers(const session_record& r) {
  std::vector<config::policy> layers;
  for (const auto& p : r.policies) layers.push_back(config::parse_policy(p.text, p.source));
  return layers;
}

// A session layer's credentials may only narrow the team's of the same name and type (their
// hosts and scope, docs/gateway.md); the real values are the gateway's.
void check_session_credentials(const std::vector<config::policy>& session_layers,
                               const config::policy_set& team) {
  for (const config::policy& layer : session_layers)
    for (const auto& [name, spec] : layer.credentials) {
      const config::credential_spec* own = nullptr;
      for (const config::policy& t : team.layers())
        if (auto it = t.credentials.find(name); it != t.credentials.end() && !own)
          own = &it->second;
      if (!own)
        throw std::invalid_argument(
            layer.source + ":" + std::to_string(spec.line) + ": credentials." + name +
            ": a session policy cannot add credentials, only narrow the gateway's (its team "
            "policy has no \"" +
            name + "\")");
      if (own->type != spec.type)
        throw std::invalid_argument(layer.source + ":" + std::to_string(spec.line) +
                                    ": credentials." + name + ": type \"" + spec.type +
                                    "\", but the gateway's is \"" + own->type + "\"");
    }
}

nlohmann::ordered_json error(const std::string& why) {
  return {{"error", why}};
}

}  // namespace

gateway::gateway(gateway_setup setup) : setup_(std::move(setup)) {
  if (setup_.redis)
    store_ = setup_.redis;
  else
    store_ = make_memory_store();
}

gateway::~gateway() = default;

std::shared_ptr<const config::policy_set> gateway::policy_of(const session_record& r,
                                                             const config::policy_set& team) const {
  std::vector<config::policy> layers = team.layers();
  auto own = parse_layers(r);
  check_session_credentials(own, team);
  for (auto& layer : own) layers.push_back(std::move(layer));
  return std::make_shared<const config::policy_set>(std::move(layers));
}

std::shared_ptr<const brokers::credential_set> gateway::credentials_of(
    const session_record& r) const {
  // The team's real values, with this session's own dummies: the same on every replica.
  return std::make_shared<const brokers::credential_set>(
      setup_.credentials->for_session(r.dummy_seed, parse_layers(r)));
}

std::shared_ptr<live::live_session> gateway::open_session(const session_record& r) {
  if (auto it = live_.find(r.id); it != live_.end()) return it->second.ctx;
  auto policy = policy_of(r, *setup_.team_policy);
  auto options = setup_.options;
  options.session_id = r.id;
  auto audit = setup_.open_audit(r.id);
  if (!setup_.audit_sinks.empty()) audit->set_sink(ship_to(setup_.audit_sinks, r.id));
  auto budget = std::make_shared<session::session_budget>(session::tightest(policy->layers()),
                                                          std::chrono::steady_clock::now());
  live::session_attachments attached;
  attached.budget = budget;
  std::shared_ptr<shared_budget> shared;
  if (setup_.redis && shares_budgets(budget->limits())) {
    shared = std::make_shared<shared_budget>(setup_.redis, r.id, setup_.replica, budget);
    attached.shared = shared;
  }
  if (r.expires_ms > 0)
    attached.expires =
        std::chrono::system_clock::time_point(std::chrono::milliseconds(r.expires_ms));
  attached.observer = setup_.observer;
  const auto& layers = policy->layers();
  if (config::session_asks(layers)) {
    // Decided by an operator through the admin API; no approved.json, so never "always".
    auto asks = std::make_shared<live::ask_options>();
    asks->on_ask = [gateway = setup_.options.session_id](const nlohmann::ordered_json& ask) {
      session::log(spdlog::level::warn, session::log_tag(gateway),
                   "ask {}: {} {} is not in the session's policy: POST /api/asks/{}/approve or "
                   "/deny on the admin listener, or broker approve|deny {} here",
                   ask.value("id", ""), base::printable(ask.value("method", "")),
                   base::printable(ask.value("url", "")), ask.value("id", ""), ask.value("id", ""));
    };
    attached.asks = std::move(asks);
  }
  auto ctx = std::make_shared<live::live_session>(
      options, policy, std::move(audit), credentials_of(r), setup_.tls, std::move(attached));
  if (r.revoked) ctx->ending().revoke();
  session::session_start start;
  start.mode = "serve";
  start.listen = setup_.listen;
  start.policy = session::policy_sources(*policy);
  start.credentials = ctx->credentials().names();
  auto first = session::start_record(start);
  first["gateway"] = setup_.options.session_id;
  if (!r.user.empty()) first["user"] = r.user;
  if (!r.labels.empty()) {
    auto labels = nlohmann::ordered_json::object();
    for (const auto& [k, v] : r.labels) labels[k] = v;
    first["labels"] = labels;
  }
  ctx->audit_log().write(first);
  session::log(spdlog::level::info, session::log_tag(r.id), "session served here from now on");
  live_.emplace(r.id, served{r, ctx, shared});
  return ctx;
}

asio::awaitable<live::resolution> gateway::resolve(const http::message_head& head) {
  const std::string* value = head.find("proxy-authorization");
  if (!value)
    co_return refused(
        "this gateway serves sessions: send their proxy credential "
        "(HTTPS_PROXY=http://ID:TOKEN@host:port from `broker session create`)");
  auto credential = parse_proxy_authorization(*value);
  if (!credential) co_return refused("Proxy-Authorization is not a Basic session credential");
  {
    std::lock_guard lock(mutex_);
    if (auto it = live_.find(credential->id); it != live_.end()) {
      if (!token_matches(it->second.record, credential->token))
        co_return refused("wrong credential for session " + credential->id);
      co_return live::resolution{it->second.ctx, std::nullopt};
    }
  }
  std::optional<session_record> record;
  try {
    record = co_await store_->fetch(credential->id);
  } catch (const std::exception& e) {
    session::log(spdlog::level::err, session::log_tag(setup_.options.session_id),
                 "session store unavailable: {}", e.what());
    co_return live::resolution{
        nullptr, live::refusal::state_unavailable("the gateway's session store cannot be reached")};
  }
  if (!record || !token_matches(*record, credential->token))
    co_return refused("no session " + credential->id + " with this credential");
  std::lock_guard lock(mutex_);
  try {
    co_return live::resolution{open_session(*record), std::nullopt};
  } catch (const std::exception& e) {
    session::log(spdlog::level::err, session::log_tag(record->id), "cannot serve the session: {}",
                 e.what());
    co_return refused("the session " + record->id + " cannot be served: " + e.what());
  }
}

nlohmann::ordered_json gateway::create(const nlohmann::json& request) {
  if (!request.is_object()) throw std::invalid_argument("session create: not a JSON object");
  session_record r;
  r.id = new_gateway_session_id();
  const auto token = new_proxy_token();
  r.token_sha256 = token_sha256(token);
  r.dummy_seed = new_dummy_seed();
  r.created_ms = now_ms();
  const auto ttl = request.value("ttl_s", std::int64_t{0});
  if (ttl < 0) throw std::invalid_argument("--ttl must not be negative");
  r.expires_ms = ttl > 0 ? r.created_ms + ttl * 1000 : 0;
  r.user = request.value("user", std::string());
  if (request.contains("labels"))
    for (const auto& [k, v] : request["labels"].items())
      r.labels.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  if (request.contains("policies"))
    for (const auto& p : request["policies"])
      r.policies.push_back(
          {p.value("source", std::string("<session>")), p.value("text", std::string())});
  // Every layer must parse and narrow the team's as it will on each replica.
  const auto team = [this] {
    std::lock_guard lock(mutex_);
    return setup_.team_policy;
  }();
  const auto policy = policy_of(r, *team);
  (void)session::tightest(policy->layers());
  const auto credentials = credentials_of(r);
  store_->put(r);

  nlohmann::ordered_json answer;
  answer["session"] = public_view(r, r.created_ms);
  const std::string url =
      "http://" + r.id + ":" + std::string(token.expose()) + "@" + setup_.proxy_authority;
  auto dummies = credentials->dummy_environment();
  auto files = nlohmann::ordered_json::array();
  for (const auto& f : credentials->dummy_files())
    files.push_back({{"name", f.file_name}, {"variable", f.variable}, {"content", f.content}});
  auto env = nlohmann::ordered_json::array();
  for (const auto& [k, v] : session::child_environment(url, setup_.trust_bundle, dummies))
    env.push_back({k, v});
  answer["proxy_url"] = url;
  answer["env"] = env;
  answer["files"] = files;
  session::log(spdlog::level::info, session::log_tag(setup_.options.session_id),
               "session {} created{}", r.id, r.user.empty() ? "" : " for " + r.user);
  return answer;
}

nlohmann::ordered_json gateway::list() {
  auto out = nlohmann::ordered_json::array();
  const auto now = now_ms();
  for (const auto& r : store_->all()) out.push_back(public_view(r, now));
  return {{"sessions", out}};
}

std::vector<session_record> gateway::records() {
  return store_->all();
}

config::budget_spec gateway::budgets_of(const session_record& r) const {
  const auto team = [this] {
    std::lock_guard lock(mutex_);
    return setup_.team_policy;
  }();
  return session::tightest(policy_of(r, *team)->layers());
}

nlohmann::ordered_json gateway::show(const std::string& id) {
  auto r = store_->get(id);
  if (!r) throw std::invalid_argument("no session " + id);
  auto out = public_view(*r, now_ms());
  std::lock_guard lock(mutex_);
  if (auto it = live_.find(id); it != live_.end()) {
    auto here = live::session_status(*it->second.ctx, "serve", 0);
    here.erase("pid");
    out["here"] = here;
  }
  return out;
}

nlohmann::ordered_json gateway::revoke(const std::string& id) {
  if (!store_->revoke(id)) throw std::invalid_argument("no session " + id);
  revoked_elsewhere(id);
  session::log(spdlog::level::info, session::log_tag(setup_.options.session_id),
               "session {} revoked", id);
  return {{"ok", true}, {"session", id}};
}

void gateway::revoked_elsewhere(const std::string& id) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = live_.find(id); it != live_.end()) {
      it->second.record.revoked = true;
      it->second.ctx->ending().revoke();
    }
  }
  if (setup_.on_revoked) setup_.on_revoked(id);
}

std::optional<nlohmann::ordered_json> gateway::command(const std::string& line) {
  const auto space = line.find(' ');
  const std::string verb = line.substr(0, space);
  const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
  if (!verb.starts_with("session-")) return std::nullopt;
  try {
    if (verb == "session-create") return create(nlohmann::json::parse(rest));
    if (verb == "session-list") return list();
    if (verb == "session-show") return show(rest);
    if (verb == "session-revoke") return revoke(rest);
    return error("unknown session command " + verb);
  } catch (const nlohmann::json::exception& e) {
    return error(std::string("malformed request: ") + e.what());
  } catch (const std::exception& e) {
    return error(e.what());
  }
}

nlohmann::ordered_json gateway::pending() const {
  std::vector<std::shared_ptr<live::live_session>> sessions;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, l] : live_)
      if (l.ctx->asks()) sessions.push_back(l.ctx);
  }
  auto out = nlohmann::ordered_json::array();
  for (const auto& ctx : sessions)
    for (auto& ask : ctx->asks()->pending()) out.push_back(std::move(ask));
  // Oldest first across sessions, as each session lists its own.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.value("waiting_s", 0L) > b.value("waiting_s", 0L);
  });
  return out;
}

void gateway::relay_asks(std::shared_ptr<ask_relay> relay) {
  relay_ = std::move(relay);
}

nlohmann::ordered_json gateway::pending_everywhere() const {
  auto local = pending();
  if (relay_) return relay_->everywhere(std::move(local));
  for (auto& ask : local) ask["replica"] = setup_.replica;
  return local;
}

nlohmann::ordered_json gateway::decide_anywhere(const std::string& id,
                                                const live::ask_answer& answer) {
  try {
    return decide(id, answer);
  } catch (const std::invalid_argument& e) {
    if (!relay_ || !std::string_view(e.what()).starts_with("no request")) throw;
  }
  return relay_->forward(id, answer);  // held by another replica, if any
}

nlohmann::ordered_json gateway::decide(const std::string& id, const live::ask_answer& answer) {
  // An ask's id is its session's id, '-' and a number.
  const auto dash = id.rfind('-');
  std::shared_ptr<live::live_session> ctx;
  if (dash != std::string::npos) {
    std::lock_guard lock(mutex_);
    if (auto it = live_.find(id.substr(0, dash)); it != live_.end()) ctx = it->second.ctx;
  }
  if (!ctx || !ctx->asks())
    throw std::invalid_argument("no request " + id +
                                " is held here (decided already, timed out, never asked, or held "
                                "by another replica)");
  return ctx->asks()->decide(id, answer);
}

void gateway::replace_team_policy(std::shared_ptr<const config::policy_set> team) {
  std::lock_guard lock(mutex_);
  setup_.team_policy = std::move(team);
  // Each session's own layers parsed when it was made; they parse the same now.
  // What an operator approved for a session is carried onto its new policy by its desk.
  for (auto& [id, l] : live_) live::reload_policy(*l.ctx, policy_of(l.record, *setup_.team_policy));
}

void gateway::end_sessions() {
  if (relay_) relay_->stop();  // no more calls from the store's thread
  // The sessions are ended outside mutex_: the store's thread takes it (a revocation polled
  // from another replica, revoked_elsewhere), and below this thread waits on that one (settle,
  // close). Held here, a revoke polled in that moment stopped the store's thread on the lock
  // and the stop waited for it forever. The workers have stopped: no session opens now.
  std::vector<served> ending;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, l] : live_) ending.push_back(l);
  }
  // Once Redis has not answered, the other sessions' usage is not tried: each try would wait
  // the store's timeout, and a stop must not take one timeout per session.
  bool shared = true;
  for (const auto& l : ending) {
    if (l.shared && shared) shared = l.shared->flush();
    l.ctx->audit_log().end(session::end_record(live::session_end_of(*l.ctx, std::nullopt)));
  }
  for (const auto& sink : setup_.audit_sinks) sink->settle(std::chrono::seconds(2));
  if (setup_.redis) setup_.redis->close();  // before the workers' io_contexts go
  for (const auto& sink : setup_.audit_sinks) sink->flush();
}

std::size_t gateway::sessions_served() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

std::uint64_t gateway::requests() const {
  std::lock_guard lock(mutex_);
  std::uint64_t n = 0;
  for (const auto& [id, l] : live_) n += l.ctx->counters().requests();
  return n;
}

std::uint64_t gateway::denied() const {
  std::lock_guard lock(mutex_);
  std::uint64_t n = 0;
  for (const auto& [id, l] : live_) n += l.ctx->counters().denied();
  return n;
}

}  // namespace broker::gateway
