#include "live/ask_desk.hpp"

#include <sstream>
#include <stdexcept>
#include <vector>

#include "config/approved_file.hpp"
#include "live/live_session.hpp"
#include "mcp/approvals.hpp"
#include "mcp/pins.hpp"
#include "session/redact.hpp"

namespace broker::live {

struct ask_desk::held_request {
  explicit held_request(const asio::any_io_executor& ex) : timer(ex) {}
  std::string id;
  session::audit_entry request;
  config::destination dest;
  std::chrono::steady_clock::time_point since;
  bool tunnel = false;                 // decided on host and port, approved as a tunnel
  std::optional<mcp_ask> call;         // an MCP call, decided as one (approve_call)
  asio::steady_timer timer;            // on the connection's thread; cancelled to release it
  std::optional<ask_outcome> outcome;  // under the desk's mutex
};

const char* scope_name(approval_scope s) {
  switch (s) {
    case approval_scope::once:
      return "once";
    case approval_scope::session:
      return "session";
    case approval_scope::always:
      return "always";
  }
  return "?";
}

std::optional<approval_scope> scope_named(std::string_view name) {
  for (const auto s : {approval_scope::once, approval_scope::session, approval_scope::always})
    if (name == scope_name(s)) return s;
  return std::nullopt;
}

namespace {

bool now_allowed(const config::policy_set& policy, const session::audit_entry& r,
                 const config::destination& dest, bool tunnel, std::string& rule) {
  const auto v = tunnel ? policy.check_connect(dest, {r.client.get()})
                        : policy.check_request(dest, r.method, r.target, {r.client.get()});
  if (v.allowed) rule = v.rule;
  return v.allowed;
}

long seconds(std::chrono::steady_clock::duration d) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

// The held request's number in an id "SESSION-N"; 0 (never held) when it is not one.
std::uint64_t held_number(const std::string& id, const std::string& session) {
  const std::string prefix = session + "-";
  if (!id.starts_with(prefix)) return 0;
  try {
    return std::stoull(id.substr(prefix.size()));
  } catch (const std::exception&) {
    return 0;
  }
}

// An MCP call as its records name it: "tools/call create_issue".
std::string call_named(const mcp_ask& call, const live_session& ctx) {
  return call.method + " " + ctx.scrub(call.target);
}

nlohmann::ordered_json decision_reply(const session::approval& record) {
  nlohmann::ordered_json out;
  out["ok"] = true;
  out["id"] = record.id;
  out["decision"] = record.decision;
  if (!record.scope.empty()) out["scope"] = record.scope;
  if (!record.rule.empty()) out["rule"] = record.rule;
  if (!record.call.empty()) out["call"] = record.call;
  out["released"] = record.released;
  return out;
}

}  // namespace

ask_desk::ask_desk(live_session& ctx, ask_options options)
    : ctx_(ctx), options_(std::move(options)) {}

ask_desk::~ask_desk() = default;

asio::awaitable<ask_outcome> ask_desk::hold(const session::audit_entry& entry,
                                            const config::destination& dest, bool tunnel) {
  auto h = std::make_shared<held_request>(co_await asio::this_coro::executor);
  h->request = entry;
  h->dest = dest;
  h->tunnel = tunnel;
  co_return co_await wait(std::move(h));
}

asio::awaitable<ask_outcome> ask_desk::hold_call(const session::audit_entry& entry,
                                                 const config::destination& dest, mcp_ask call) {
  auto h = std::make_shared<held_request>(co_await asio::this_coro::executor);
  h->request = entry;
  h->dest = dest;
  h->call = std::move(call);
  co_return co_await wait(std::move(h));
}

asio::awaitable<ask_outcome> ask_desk::wait(std::shared_ptr<held_request> h) {
  const auto timeout = ctx_.options().timeouts.ask;
  std::uint64_t number = 0;
  {
    std::lock_guard lock(mutex_);
    if (held_.size() >= options_.max_held) co_return ask_outcome{ask_outcome::kind::full, {}};
    number = ++next_id_;
    h->id = ctx_.session_id() + "-" + std::to_string(number);
    h->since = std::chrono::steady_clock::now();
    held_.emplace(number, h);
  }
  h->timer.expires_after(timeout);
  const auto scrub = [this](std::string_view text) { return ctx_.scrub(text); };
  ctx_.audit_log().write(session::ask_record(h->id, h->request, seconds(timeout), scrub));
  if (options_.on_ask) options_.on_ask(listed(*h, h->since));
  // A decision cancels the timer from this thread (release posts it here), so it cannot come
  // between the registration above and this wait.
  co_await h->timer.async_wait(use_tuple);
  std::optional<ask_outcome> outcome;
  {
    std::lock_guard lock(mutex_);
    held_.erase(number);
    outcome = h->outcome;
  }
  if (outcome) co_return *outcome;
  const auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none)
    co_return ask_outcome{ask_outcome::kind::cut_short, {}};
  session::approval record;
  record.id = h->id;
  record.decision = "timeout";
  record.who = "nobody: no decision within " + std::to_string(seconds(timeout)) + " s";
  record.host = ctx_.scrub(h->dest.host);
  record.port = h->dest.port;
  if (h->call) record.call = call_named(*h->call, ctx_);
  record.released = {h->id};
  ctx_.audit_log().write(session::approval_record(record));
  co_return ask_outcome{ask_outcome::kind::timed_out, {}};
}

nlohmann::ordered_json ask_desk::listed(const held_request& h,
                                        std::chrono::steady_clock::time_point now) const {
  const auto& r = h.request;
  nlohmann::ordered_json j;
  j["id"] = h.id;
  j["session"] = ctx_.session_id();
  j["pid"] = r.pid > 0 ? nlohmann::ordered_json(r.pid) : nlohmann::ordered_json();
  j["exe"] = r.pid > 0 && !r.exe.empty() ? nlohmann::ordered_json(r.exe) : nlohmann::ordered_json();
  j["method"] = h.tunnel ? "CONNECT" : r.method;
  const std::string host = ctx_.scrub(h.dest.host);
  const std::string authority =
      host +
      (h.dest.port == (r.scheme == "http" ? 80 : 443) ? "" : ":" + std::to_string(h.dest.port));
  j["url"] = h.tunnel ? authority
                      : (r.scheme.empty() ? "https" : r.scheme) + "://" + authority +
                            session::redact_target(ctx_.scrub(r.target));
  j["host"] = host;
  j["port"] = h.dest.port;
  j["rule"] = r.rule;
  if (h.call) {
    const auto& c = *h.call;
    nlohmann::ordered_json m;
    m["server"] = ctx_.scrub(c.server);
    m["method"] = c.method;
    m[std::string(mcp::kind_name(c.kind))] = ctx_.scrub(c.target);
    m["arguments"] = c.arguments.empty() ? nlohmann::ordered_json()
                                         : nlohmann::ordered_json(ctx_.scrub(c.arguments));
    m["why"] = ctx_.scrub(c.why);
    if (!c.changed.empty()) m["changed"] = c.changed;
    j["mcp"] = std::move(m);
  }
  j["waiting_s"] = seconds(now - h.since);
  j["timeout_s"] = seconds(ctx_.options().timeouts.ask);
  return j;
}

nlohmann::ordered_json ask_desk::pending() const {
  auto out = nlohmann::ordered_json::array();
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  for (const auto& [number, h] : held_) out.push_back(listed(*h, now));
  return out;
}

void ask_desk::release(std::shared_ptr<held_request> h, ask_outcome outcome) {
  h->outcome = std::move(outcome);
  const auto executor = h->timer.get_executor();
  asio::post(executor, [h = std::move(h)] { h->timer.cancel(); });
}

nlohmann::ordered_json ask_desk::decide(const std::string& id, const ask_answer& answer) {
  const std::uint64_t number = held_number(id, ctx_.session_id());
  session::approval record;
  record.id = id;
  record.who = answer.who;
  {
    std::lock_guard lock(mutex_);
    auto it = held_.find(number);
    if (it == held_.end() || it->second->outcome)
      throw std::invalid_argument("no request " + id +
                                  " is held (decided already, timed out, or never asked)");
    const auto asked = it->second;
    record.host = ctx_.scrub(asked->dest.host);
    record.port = asked->dest.port;
    std::vector<std::shared_ptr<held_request>> released;
    if (asked->call) {
      record.call = call_named(*asked->call, ctx_);
      released = approve_call(asked, answer, record);
    } else if (!answer.approve) {
      // The person answered for the host: every request held for it is refused.
      record.decision = "deny";
      for (auto& [n, h] : held_)
        if (!h->outcome && !h->call && h->dest.host == asked->dest.host &&
            h->dest.port == asked->dest.port)
          released.push_back(h);
      for (auto& h : released) release(h, {ask_outcome::kind::denied, {}});
    } else if (answer.scope == approval_scope::once) {
      record.decision = "approve";
      record.scope = "once";
      record.rule = "approved:once";
      released.push_back(asked);
      release(asked, {ask_outcome::kind::approved, record.rule});
    } else {
      released = approve_and_grow(*asked, answer, record);
    }
    for (const auto& h : released) record.released.push_back(h->id);
  }
  ctx_.audit_log().write(session::approval_record(record));
  return decision_reply(record);
}

std::vector<std::shared_ptr<ask_desk::held_request>> ask_desk::approve_and_grow(
    const held_request& asked, const ask_answer& answer, session::approval& record) {
  record.decision = "approve";
  record.scope = scope_name(answer.scope);
  record.path_prefix = answer.path_prefix;
  const config::approval_rule wanted{asked.dest.host, asked.dest.port, answer.path_prefix,
                                     asked.tunnel};
  record.rule = "approved[" + std::to_string(approved_.size()) + "]";
  auto rule = config::make_approval_rule(wanted, record.rule);
  if (answer.scope == approval_scope::always) {
    if (options_.approved_file.empty())
      throw std::invalid_argument(
          "--always needs the user's approved.json; this session has none (a gateway "
          "session): approve it for the session");
    config::append_approved(options_.approved_file, wanted);
  }
  approved_.push_back(rule);
  auto next = std::make_shared<const config::policy_set>(ctx_.policy()->with_approval(rule));
  ctx_.replace_policy(next);
  // Every request the grown policy allows goes, this one too unless the prefix leaves it out.
  std::vector<std::shared_ptr<held_request>> released;
  for (auto& [n, h] : held_) {
    std::string allowed_by;
    // A held MCP call is allowed on its host already: a rule for the host does not decide it.
    if (!h->outcome && !h->call && now_allowed(*next, h->request, h->dest, h->tunnel, allowed_by)) {
      released.push_back(h);
      release(h, {ask_outcome::kind::approved, allowed_by});
    }
  }
  return released;
}

std::vector<std::shared_ptr<ask_desk::held_request>> ask_desk::approve_call(
    const std::shared_ptr<held_request>& asked, const ask_answer& answer,
    session::approval& record) {
  const mcp_ask& call = *asked->call;
  const auto same_call = [&](const held_request& h) {
    return !h.outcome && h.call && h.call->server == call.server && h.call->kind == call.kind &&
           h.call->target == call.target;
  };
  std::vector<std::shared_ptr<held_request>> released;
  if (!answer.approve) {
    // The person answered for the call: every one held for the same tool on its server is refused.
    record.decision = "deny";
    for (auto& [n, h] : held_)
      if (same_call(*h)) released.push_back(h);
    for (auto& h : released) release(h, {ask_outcome::kind::denied, {}});
    return released;
  }
  if (!answer.path_prefix.empty())
    throw std::invalid_argument("an MCP call is approved by its " +
                                std::string(mcp::kind_name(call.kind)) + ", not by a path");
  if (answer.scope == approval_scope::always)
    throw std::invalid_argument(
        "an MCP call is approved once or for the session: to allow it always, name it in the "
        "policy's \"mcp\" rules");
  record.decision = "approve";
  record.scope = scope_name(answer.scope);
  record.rule = "approved:" + record.scope;
  if (answer.scope == approval_scope::once) {
    released.push_back(asked);
    release(released.back(), {ask_outcome::kind::approved, record.rule});
    return released;
  }
  ctx_.mcp_approvals().approve(call.server, call.kind, call.target);
  if (call.pin) ctx_.mcp_pins().accept(call.server, call.target, call.shown);
  for (auto& [n, h] : held_)
    if (same_call(*h)) {
      released.push_back(h);
      release(h, {ask_outcome::kind::approved, record.rule});
    }
  return released;
}

void ask_desk::replace_policy(std::shared_ptr<const config::policy_set> fresh) {
  std::lock_guard lock(mutex_);
  for (const auto& rule : approved_)
    fresh = std::make_shared<const config::policy_set>(fresh->with_approval(rule));
  ctx_.replace_policy(std::move(fresh));
}

void reload_policy(live_session& ctx, std::shared_ptr<const config::policy_set> fresh) {
  if (auto* desk = ctx.asks())
    desk->replace_policy(std::move(fresh));
  else
    ctx.replace_policy(std::move(fresh));
}

std::optional<nlohmann::ordered_json> answer_ask_command(ask_decider* desk, const std::string& line,
                                                         const std::string& who) {
  std::istringstream words(line);
  std::string verb, id, scope, prefix, extra;
  words >> verb;
  if (verb != "pending" && verb != "approve" && verb != "deny") return std::nullopt;
  if (!desk)
    return nlohmann::ordered_json{
        {"error", "this session does not ask: run it with wrap --ask, or \"on_deny\": \"ask\""}};
  if (verb == "pending") return desk->pending();
  words >> id >> scope >> prefix >> extra;
  ask_answer answer;
  answer.approve = verb == "approve";
  answer.who = who;
  if (answer.approve) {
    const auto named = scope_named(scope);
    if (!named) return nlohmann::ordered_json{{"error", "approve ID once|session|always [PATH]"}};
    answer.scope = *named;
    answer.path_prefix = prefix;
  }
  if (id.empty() || !extra.empty() || (!answer.approve && !scope.empty()))
    return nlohmann::ordered_json{
        {"error", "expected: approve ID once|session|always [PATH], or deny ID"}};
  try {
    return desk->decide(id, answer);
  } catch (const std::invalid_argument& e) {
    return nlohmann::ordered_json{{"error", e.what()}};
  }
}

}  // namespace broker::live
