// One exchange from policy to record: admit (policy, budget), the credential plan, the body read
// whole when the plan asks (whole_body_reader), an upstream from the pool or a new one, then the
// relay (request_relay); refusals and the audit record for every outcome.
#include "proxy/http_exchange.hpp"

#include <algorithm>

#include "brokers/scrubber.hpp"
#include "config/request_target.hpp"
#include "live/ask_desk.hpp"
#include "live/shared_admission.hpp"
#include "mcp/messages.hpp"
#include "proxy/address_guard.hpp"
#include "proxy/body_search.hpp"
#include "proxy/h1_upstream_side.hpp"
#include "proxy/h2_upstream.hpp"
#include "proxy/limits.hpp"
#include "proxy/request_relay.hpp"
#include "proxy/upstream_dialer.hpp"
#include "proxy/whole_body_reader.hpp"
#include "session/llm_usage.hpp"

namespace broker::proxy {

namespace {

// Upstream-side failures are answered by the broker but were allowed by policy.
bool is_policy_refusal(const live::refusal& r) {
  return r.status != 502 && r.status != 504;
}

// Decided before anything is dialed, so a refused credential never costs a connection: an
// IP literal, "localhost", or a --connect-to mapping onto a loopback address.
bool loopback_destination(const live::live_session& ctx, const config::destination& dest) {
  auto is_loopback = [](std::string_view host) {
    if (host == "localhost") return true;
    auto ip = config::ip_address::parse(host);
    return ip && classify(*ip) == address_class::loopback;
  };
  if (auto mapped = live::apply_connect_to(ctx.options().connect_to, dest.host, dest.port))
    return is_loopback(mapped->host);
  return is_loopback(dest.host);
}

std::size_t count_headers(const http::message_head& head, std::string_view name) {
  return static_cast<std::size_t>(
      std::count_if(head.headers.begin(), head.headers.end(),
                    [name](const http::header_field& h) { return http::iequals(h.name, name); }));
}

// Why a request head cannot go through as it is, if it cannot.
std::optional<std::string> malformed_for_proxying(const http::message_head& head, bool websocket) {
  // Two Hosts let the upstream (or a front end before it) pick another virtual host than the
  // one checked here (RFC 9112 §3.2: a 400).
  if (count_headers(head, "host") > 1) return "more than one Host header";
  // An HTTP/1.0 hop cannot carry chunked coding; an upstream could read the body as a second,
  // unchecked request (RFC 9112 §6.1).
  if (head.chunked && head.version_major == 1 && head.version_minor == 0)
    return "Transfer-Encoding in an HTTP/1.0 request";
  // After a 101 the connection carries frames; a request body would be read by both.
  if (websocket && head.has_body) return "a WebSocket upgrade request with a body";
  return std::nullopt;
}

// A compressed response could carry a real value past the scrubber; ask for none (an absent
// Accept-Encoding would allow any coding, RFC 9110 §12.5.3).
void ask_for_identity(http::message_head& head) {
  std::erase_if(head.headers, [](const http::header_field& h) {
    return http::iequals(h.name, "accept-encoding");
  });
  head.headers.push_back({"Accept-Encoding", "identity"});
}

// permessage-deflate (RFC 7692) would compress the frames past the checks and the scrubber:
// the offer does not go upstream, so the connection is uncompressed (RFC 6455 §9.1).
bool is_grpc(const http::message_head& head) {
  const std::string* type = head.find("content-type");
  return type && type->starts_with("application/grpc");
}

void drop_extension_offers(http::message_head& head) {
  std::erase_if(head.headers, [](const http::header_field& h) {
    return http::iequals(h.name, "sec-websocket-extensions");
  });
}

// The brokers' refusal; a dummy refused only because its credential names other programs says
// so (docs/policy.md).
live::refusal credential_refusal(const brokers::credential_set& credentials,
                                 const brokers::request_decision& d,
                                 const brokers::request_context& where) {
  if (d.action == brokers::request_action::credential_not_bound && !where.plaintext)
    for (std::size_t i = 0; i < credentials.size(); ++i) {
      const auto& b = credentials[i];
      if (b.name() == d.credential && !b.spec().programs.empty() && b.bound(where.host))
        return live::refusal::credential_program(d.credential, where.host, d.where,
                                                 b.spec().programs, where.client);
    }
  return live::refusal::of(d, where.host, where.plaintext);
}

}  // namespace

http_exchange::http_exchange(connection io, std::string method,
                             std::shared_ptr<const config::client_identity> client)
    : s_{io}, start_(std::chrono::steady_clock::now()) {
  s_.entry.event = "request";
  s_.entry.method = std::move(method);
  if (client) {
    s_.entry.pid = client->holders.front().pid;
    s_.entry.exe = client->holders.front().exe;
  }
  s_.entry.client = std::move(client);
}

http_exchange::~http_exchange() = default;

asio::awaitable<std::optional<live::refusal>> http_exchange::admit(const config::policy_set& policy,
                                                                   const http::message_head& head,
                                                                   const request_target& to) {
  const auto verdict =
      policy.check_request(to.dest, head.method, to.path_and_query, {s_.entry.client.get()});
  s_.entry.rule = verdict.rule;
  s_.entry.would_deny = verdict.would_deny;
  http2_allowed_ = verdict.http2;
  s_.mcp = verdict.mcp;
  if (verdict.ambiguous_path) co_return live::refusal::bad_request(*verdict.ambiguous_path);
  if (!verdict.allowed) {
    if (verdict.askable && s_.io.ctx.learns()) {
      s_.entry.learned = true;  // wrap --learn: through, and recorded as learned
    } else if (!verdict.askable || !s_.io.ctx.asks()) {
      co_return live::refusal::policy_denied(verdict.rule, s_.entry.host);
    } else if (auto refused = co_await ask_person(to.dest)) {
      co_return refused;
    }
  }
  co_return admit_by_session(to.dest.host);
}

asio::awaitable<std::optional<live::refusal>> http_exchange::ask_person(
    const config::destination& dest) {
  // The connection's watchdog outlasts the ask's own timeout, which answers first.
  s_.io.timer.arm(timeouts().ask + std::chrono::seconds(5), live::waiting_for::approval);
  const auto outcome = co_await s_.io.ctx.asks()->hold(s_.entry, dest);
  using kind = live::ask_outcome::kind;
  switch (outcome.what) {
    case kind::approved:
      s_.entry.rule = outcome.rule;
      co_return std::nullopt;
    case kind::full:
      co_return live::refusal::policy_denied(s_.entry.rule, s_.entry.host);
    case kind::denied:
    case kind::timed_out:
    case kind::cut_short:
      break;
  }
  co_return live::refusal::approval_denied(s_.entry.rule, s_.entry.host,
                                           outcome.what == kind::timed_out);
}

asio::awaitable<next_step> http_exchange::forward(http::message_head& head,
                                                  const request_target& to) {
  // Once swapped, the head and target hold real values: they are wiped however this exchange
  // ends (a client reset, a cancelled coroutine), not only when it ends well.
  forward_plan plan{to.path_and_query};
  const base::wipe_on_exit wipe_swapped([&] {
    if (!plan.holds_real) return;
    for (auto& h : head.headers) base::wipe(h.value);
    base::wipe(plan.target);
  });
  // The checks and the refusals they may answer with run in a frame of their own, gone before the
  // response: this frame stays for as long as the response streams (minutes for a model's).
  if (auto ended = co_await decide(head, to, plan)) co_return *ended;
  // As the checks: the dial and its refusals in a frame that is gone before the response.
  if (auto ended = co_await find_upstream(head, to, *plan.policy)) co_return *ended;
  co_return co_await request_relay(*this).run(head, plan.target, to, plan.where);
}

asio::awaitable<std::optional<next_step>> http_exchange::decide(http::message_head& head,
                                                                const request_target& to,
                                                                forward_plan& out) {
  const auto& dest = to.dest;
  if (!s_.io.ctx.audit_ok())
    co_return co_await refuse(live::refusal::audit_unavailable(), to.keep_after_refusal);
  s_.websocket = head.has_token("connection", "upgrade") && head.has_token("upgrade", "websocket");
  if (auto why = malformed_for_proxying(head, s_.websocket))
    co_return co_await refuse(live::refusal::bad_request(*why), false);

  out.policy = s_.io.ctx.policy();
  if (auto refused = co_await admit(*out.policy, head, to))
    co_return co_await refuse(*refused, to.keep_after_refusal);
  if (auto refused = co_await admit_shared(dest.host))
    co_return co_await refuse(*refused, to.keep_after_refusal);
  s_.llm = session::classify_llm_request(dest.host, head.method, to.path_and_query);

  // The brokers: refuse what must not leave, swap what may (docs/policy.md).
  const auto& credentials = s_.io.ctx.credentials();
  std::string& target = out.target;
  s_.loopback = loopback_destination(s_.io.ctx, dest);
  brokers::request_context& where = out.where;
  where =
      brokers::request_context{dest.host, to.scheme == "http", s_.loopback, s_.entry.client.get()};
  // An MCP client's POST is read and judged before its credentials are planned: a credential
  // with "mcp_tools" is swapped only on a call of its tools.
  const bool mcp_post = carries_mcp_calls(head);
  if (mcp_post) {
    if (auto refused = co_await prepare_body(head, where))
      co_return co_await refuse(*refused, false);
    if (s_.body)
      if (auto ended = co_await judge_mcp(s_.io.client.keep_alive())) co_return *ended;
    if (const auto& call = s_.entry.mcp; call && call->kind == "tool" && call->messages == 1)
      where.mcp_tool = call->target;
  }
  auto& plan =
      s_.plan.emplace(credentials.plan(where, head.method, target, head.headers, head.has_body));
  out.holds_real = plan.holds_real();
  s_.entry.credential = plan.credential();
  if (plan.decision().refused())
    co_return co_await refuse(credential_refusal(credentials, plan.decision(), where),
                              to.keep_after_refusal);
  if (!mcp_post)
    if (auto refused = co_await prepare_body(head, where))
      co_return co_await refuse(*refused, false);
  std::string no_body;
  const auto completed = plan.complete(head.method, target, head.headers,
                                       s_.body && plan.whole_body() ? s_.body->bytes : no_body);
  s_.entry.credential = plan.credential();
  // A credential minted for the session: its record says until when (never what).
  if (!s_.entry.credential.empty())
    if (auto until = credentials.minted_until(s_.entry.credential))
      s_.entry.credential_expires =
          std::chrono::duration_cast<std::chrono::seconds>(until->time_since_epoch()).count();
  if (completed.refused())
    co_return co_await refuse(credential_refusal(credentials, completed, where),
                              to.keep_after_refusal && !s_.body);
  if (plan.rewriter() && !s_.body_codings.empty())
    co_return co_await refuse(live::refusal::unsupported_encoding(
                                  "a body the broker rewrites as it streams cannot be coded too"),
                              false);
  if (const auto& answer = plan.answer())
    co_return co_await answer_locally(answer->credential, answer->json, s_.io.client.keep_alive());
  // Real values, and what the brokers rewrote, back to the client's form.
  s_.scrub_patterns = plan.response_patterns();
  if (!credentials.empty()) ask_for_identity(head);
  if (s_.websocket) drop_extension_offers(head);
  co_return std::nullopt;
}

asio::awaitable<std::optional<live::refusal>> http_exchange::prepare_body(
    http::message_head& head, const brokers::request_context& where) {
  // (An MCP client's POST is read before there is a plan.)
  std::optional<brokers::whole_body_need> need =
      s_.plan ? s_.plan->whole_body() : std::optional<brokers::whole_body_need>();
  // An MCP client's POST carries its calls: read whole, as the broker judges them.
  const bool mcp = carries_mcp_calls(head);
  if (mcp) {
    const std::size_t limit = std::max(need ? need->limit : 0, mcp::max_message_bytes);
    need = brokers::whole_body_need{limit, "an MCP call is read whole to be judged", true};
  }
  // A coded body is searched through its decoding, or refused before any of it is read.
  if (head.has_body && (mcp || !s_.io.ctx.credentials().empty()))
    if (auto refused = read_body_codings(head, need, s_.body_codings)) co_return refused;
  if (need) co_return co_await whole_body_reader(*this).read(head, where, *need);
  co_return std::nullopt;
}

asio::awaitable<std::optional<next_step>> http_exchange::find_upstream(
    const http::message_head& head, const request_target& to, const config::policy_set& policy) {
  const bool https = to.scheme == "https";
  const std::string key = to.scheme + "://" + to_string(to.dest);
  // HTTP/2 up when the upstream offers it; not for a WebSocket (no extended CONNECT), nor where
  // a rule says "http2": false.
  const bool may_h2 = https && !s_.websocket && http2_allowed_;
  const bool grpc = is_grpc(head);
  s_.upstream = pooled_upstream(key, may_h2, grpc);
  if (!s_.upstream && may_h2 && s_.io.pool.dialing(key)) {
    // A dial that may bring an HTTP/2 connection is under way: its streams are shared.
    arm_for_dial();
    co_await s_.io.pool.wait_for_dial(key);
    s_.upstream = pooled_upstream(key, may_h2, grpc);
  }
  if (!s_.upstream) {
    arm_for_dial();
    std::optional<upstream_pool::dial_ticket> dialing;
    if (may_h2) dialing.emplace(s_.io.pool, key);
    auto opened = co_await open_upstream(s_.io.ctx, policy, to.dest, https, key, may_h2);
    if (opened.refused) co_return co_await refuse(*opened.refused, to.keep_after_refusal);
    if (opened.h2) {
      auto c = std::make_shared<h2_upstream>(std::move(opened.conn));
      c->start();
      s_.io.pool.keep_h2(c);
      s_.upstream = c->open_stream();
    } else {
      s_.upstream = std::make_unique<h1_upstream_side>(std::move(opened.conn));
    }
  }
  if (grpc && (!s_.upstream || s_.upstream->carries_wire())) {
    s_.upstream.reset();
    co_return co_await refuse(
        live::refusal::upstream_protocol_error(
            s_.entry.host, "gRPC needs HTTP/2 to the upstream, which answered in HTTP/1.1 only"),
        to.keep_after_refusal);
  }
  if (!s_.upstream)
    co_return co_await refuse(
        live::refusal::upstream_unreachable(s_.entry.host, "no HTTP/2 stream could start"),
        to.keep_after_refusal);
  co_return std::nullopt;
}

std::unique_ptr<upstream_side> http_exchange::pooled_upstream(const std::string& key, bool may_h2,
                                                              bool grpc) {
  if (may_h2)
    if (auto c = s_.io.pool.h2_for(key))
      if (auto stream = c->open_stream()) return stream;
  // gRPC never goes over HTTP/1.1: it dials, offering h2.
  if (grpc) return nullptr;
  if (auto conn = s_.io.pool.take(key)) return std::make_unique<h1_upstream_side>(std::move(conn));
  return nullptr;
}

asio::awaitable<next_step> http_exchange::answer_locally(const std::string& credential,
                                                         const std::string& json, bool keep_alive) {
  s_.entry.credential = credential;
  co_return co_await send_json(json, keep_alive, true, {});
}

asio::awaitable<next_step> http_exchange::send_json(const std::string& json, bool keep_alive,
                                                    bool allowed, const std::string& error) {
  http::message_head head;
  head.status = 200;
  head.reason = "OK";
  head.headers = {{"Content-Type", "application/json; charset=utf-8"},
                  {"Cache-Control", "no-store"},
                  {"Content-Length", std::to_string(json.size())}};
  head.has_body = true;
  head.content_length = json.size();
  s_.entry.bytes_in += json.size();
  finish(200, allowed, error);
  co_await s_.io.client.send_head(head, keep_alive, false);
  co_await s_.io.client.send_body(json, true);
  co_return keep_alive ? next_step::keep_alive : next_step::close;
}

asio::awaitable<next_step> http_exchange::refuse(const live::refusal& r, bool keep_alive) {
  const bool policy_refusal = is_policy_refusal(r);
  // A dummy caught on its way to the wrong host is the canary docs/policy.md asks to record as
  // such.
  if (policy_refusal)
    s_.entry.event = r.code == "credential_not_bound" ? "exfiltration_blocked" : "refused";
  if (!r.rule.empty()) s_.entry.rule = r.rule;
  // The target carried a real value, maybe encoded past what the audit's scrubbing recognizes.
  if (r.code == "real_secret_blocked") s_.entry.target.clear();
  finish(r.status, !policy_refusal, r.code);
  // Hosts and messages hold client-chosen text; what the broker writes holds no real value.
  live::refusal shown = r;
  shown.message = s_.io.ctx.scrub(r.message);
  const std::string host = s_.io.ctx.scrub(s_.entry.host);
  session::log(spdlog::level::debug, s_.io.tag, "{} {} {}: {}", s_.entry.method, host, shown.code,
               shown.message);
  co_await s_.io.client.send_refusal(shown, host, s_.io.ctx.session_id(), keep_alive);
  co_return keep_alive ? next_step::keep_alive : next_step::close;
}

asio::awaitable<std::optional<live::refusal>> http_exchange::admit_shared(const std::string& host) {
  auto* shared = s_.io.ctx.shared();
  if (!shared) co_return std::nullopt;
  co_return co_await shared->admit(host);
}

std::optional<live::refusal> http_exchange::admit_by_session(const std::string& host) {
  if (auto why = s_.io.ctx.ending().why(std::chrono::system_clock::now()))
    return live::refusal::proxy_auth_required(std::move(*why));
  auto* budget = s_.io.ctx.budget();
  if (!budget) return std::nullopt;
  auto spent = budget->admit(host, std::chrono::steady_clock::now());
  if (!spent) return std::nullopt;
  if (spent->kill) s_.io.ctx.ending().ask({live::session_end::cause::budget, *spent});
  const auto retry_ms = spent->retry_after.count();
  return live::refusal::budget_exhausted(spent->budget, spent->limit, spent->used,
                                         retry_ms > 0 ? (retry_ms + 999) / 1000 : 0);
}

void http_exchange::arm_for_dial() {
  // dial_upstream bounds each of its own steps; this only keeps an earlier phase's deadline
  // from cutting the dial short.
  s_.io.timer.arm(timeouts().dns + timeouts().connect + std::chrono::seconds(1),
                  live::waiting_for::upstream);
}

double http_exchange::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
      .count();
}

bool http_exchange::finish(int status, bool allowed, const std::string& error) {
  if (!active_) return true;
  active_ = false;
  s_.entry.status = status;
  s_.entry.allowed = allowed;
  s_.entry.error = error;
  s_.entry.ms = elapsed_ms();
  s_.io.ctx.charge(s_.entry);
  const bool staged = s_.io.client.flushes_records();
  const bool ok = s_.io.ctx.record(s_.entry, staged);
  if (ok && staged) s_.io.client.record_staged();
  if (!ok)
    session::log(spdlog::level::err, s_.io.tag, "audit log write failed: {}",
                 s_.io.ctx.audit_log().failure());
  return ok;
}

void http_exchange::identify(std::string_view scheme, const config::destination& dest,
                             std::string_view target) {
  s_.entry.scheme = scheme;
  s_.entry.host = dest.host;
  s_.entry.port = dest.port;
  s_.entry.target = target;
}

std::optional<live::refusal> http_exchange::expire(live::waiting_for what, bool shutdown) {
  if (!active_) return std::nullopt;
  if (shutdown) {
    finish(s_.entry.status, true, "shutdown");
    return std::nullopt;
  }
  if (s_.response_started || what != live::waiting_for::upstream) {
    finish(s_.entry.status, true, "timeout");
    return std::nullopt;
  }
  s_.upstream.reset();
  auto refused = live::refusal::upstream_timeout(s_.entry.host);
  finish(refused.status, true, refused.code);
  return refused;
}

}  // namespace broker::proxy
