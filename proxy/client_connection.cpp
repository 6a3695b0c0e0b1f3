#include "proxy/client_connection.hpp"

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "base/race.hpp"
#include "capture/attribution.hpp"
#include "certs/tls_contexts.hpp"
#include "config/host_pattern.hpp"
#include "config/request_target.hpp"
#include "live/ask_desk.hpp"
#include "proxy/captured.hpp"
#include "proxy/idle_read.hpp"
#include "proxy/tunnel.hpp"
#include "proxy/upstream_dialer.hpp"
#include "session/log.hpp"
#include "ssh/tunnel_join.hpp"

namespace broker::proxy {

namespace {

// The first byte of a TLS record carrying a handshake message (RFC 8446 §5.1).
constexpr char tls_handshake_record = 0x16;

const char* name_of(live::waiting_for p) {
  switch (p) {
    case live::waiting_for::client_head:
      return "request head";
    case live::waiting_for::client_idle:
      return "next request";
    case live::waiting_for::request_body:
      return "request body";
    case live::waiting_for::upstream:
      return "upstream";
    case live::waiting_for::tunnel:
      return "tunnel traffic";
    case live::waiting_for::approval:
      return "a person's approval";
  }
  return "?";
}

bool sni_matches(SSL* ssl, const config::destination& dest) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (!name) return true;  // absent SNI (IP literal targets, some clients) is allowed
  if (dest.ip) return false;
  const auto normalized = config::normalize_host(name);
  return normalized && *normalized == dest.host;
}

}  // namespace

client_connection::client_connection(tcp::socket socket, std::shared_ptr<live::live_session> ctx,
                                     upstream_pool& pool, bool captured)
    : c_(std::move(socket), std::move(ctx), pool, captured) {
  if (captured) dialed_ = original_destination(c_.client.socket());
}

void client_connection::drain(bool now) {
  if (h2_) h2_->drain(now);
  c_.draining = true;
  c_.cut_short = c_.cut_short || now;
  const auto p = c_.deadline.waiting();
  if (now || p == live::waiting_for::client_idle || p == live::waiting_for::client_head)
    c_.deadline.arm(std::chrono::steady_clock::duration::zero(), p);
}

void client_connection::attribute() {
  // wrap knows its clients' process tree; serve's clients could be anyone, and searching every
  // process's descriptors per connection is not worth its cost there.
  const auto& ctx = *c_.ctx;
  const int root = ctx.clients().root_pid;
  if (root <= 0) return;
  error_code e1, e2;
  const auto peer = c_.client.socket().remote_endpoint(e1);
  // A captured client's socket is connected to the address it dialed, not to this listener.
  const auto local = dialed_ ? *dialed_ : c_.client.socket().local_endpoint(e2);
  if (e1 || e2) return;
  if (auto found = capture::find_socket_holders(
          peer.address().to_string(), peer.port(), local.address().to_string(), local.port(),
          ctx.clients().netns_pid, {root}, ctx.clients().sock_diag.get()))
    c_.holders = std::make_shared<const config::client_identity>(
        config::client_identity{std::move(found->holders), found->complete, ctx.clients().writes});
}

asio::awaitable<void> client_connection::run() {
  error_code ignored;
  c_.client.socket().set_option(tcp::no_delay(true), ignored);
  attribute();
  std::string failure;
  bool expired = false;
  c_.deadline.cancel_on_expiry(shared_from_this(), cancel_, expired);
  try {
    co_await serve();
  } catch (const std::exception& e) {
    if (!expired) failure = e.what();  // what the cancellation threw is the timeout, below
  }
  c_.deadline.stop();
  try {
    if (expired) {
      co_await asio::this_coro::reset_cancellation_state();
      co_await expire(c_.deadline.waiting());
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (auto* ex = h1_.in_flight(); ex && ex->active())
    ex->finish(ex->entry().status, true, "aborted");
  if (!failure.empty())
    session::log(spdlog::level::info, c_.tag, "connection ended: {}", c_.ctx->scrub(failure));
  h1_.end_exchange();
  if (c_.client.is_tls() && failure.empty()) {
    // close_notify, so a client reading until close sees a clean end (RFC 8446 §6.1); bounded,
    // as the client need not answer.
    c_.deadline.arm(std::chrono::seconds(1), live::waiting_for::client_idle);
    co_await base::race(c_.client.shutdown(), c_.deadline.watch());
  }
  c_.client.close();
}

asio::awaitable<void> client_connection::expire(live::waiting_for what) {
  if (what != live::waiting_for::client_idle)
    session::log(spdlog::level::debug, c_.tag, "deadline passed waiting for {}", name_of(what));
  auto* ex = h1_.in_flight();
  if (!ex || !ex->active()) co_return;
  const auto refused = ex->expire(what, c_.cut_short);
  if (!refused) co_return;
  const auto text =
      live::render_refusal(*refused, c_.ctx->scrub(ex->entry().host), c_.ctx->session_id(), false);
  // The client gets a bounded time to take the answer.
  c_.deadline.arm(c_.timeouts().body, live::waiting_for::request_body);
  co_await base::race(write_all(c_.client, text), c_.deadline.watch());
}

asio::awaitable<void> client_connection::serve() {
  if (c_.captured) {
    co_await handle_captured();
    if (!intercept_) co_return;
    if (intercept_->h2) co_return co_await serve_h2();
  }
  bool first = true;
  for (;;) {
    const auto got = co_await h1_.serve(first, intercept_ ? &*intercept_ : nullptr);
    if (got != h1_request_loop::outcome::connect) co_return;
    co_await handle_connect(h1_.connect_head());
    // An intercepted CONNECT goes on with the requests inside it.
    if (!intercept_) co_return;
    if (intercept_->h2) co_return co_await serve_h2();
    first = true;
  }
}

asio::awaitable<void> client_connection::handle_connect(const http::message_head& head) {
  auto& ex = h1_.begin_exchange("CONNECT");
  ex.entry().event = "tunnel";
  auto where = config::parse_authority(head.target);
  if (!where) {
    ex.entry().host = head.target;
    co_await ex.refuse(live::refusal::bad_request("CONNECT needs a host:port target"), false);
    co_return;
  }
  co_await open_target(ex, where->dest);
}

asio::awaitable<void> client_connection::open_target(http_exchange& ex,
                                                     const config::destination& dest) {
  auto& entry = ex.entry();
  ex.identify({}, dest, {});
  auto& ctx = *c_.ctx;
  auto policy = ctx.policy();
  auto verdict = policy->check_connect(dest, {c_.holders.get()});
  if (!ctx.audit_ok()) {
    // docs/cli.md: a refusal decided at CONNECT goes inside TLS, where the client shows it. Each
    // request there asks the log again (and meets the policy once it can be written), so a
    // connection outlives a full disk; only a tunnel's CONNECT is refused itself.
    if (verdict.allowed && verdict.tunnel) {
      co_await ex.refuse(live::refusal::audit_unavailable(), false);
      co_return;
    }
    ex.dismiss();
    if (!co_await start_interception(dest, std::nullopt, verdict.allowed && verdict.http2))
      c_.draining = true;
    co_return;
  }
  entry.rule = verdict.rule;
  entry.would_deny = verdict.would_deny;
  std::optional<live::refusal> why;
  if (!verdict.allowed && verdict.askable && (ctx.learns() || ctx.asks())) {
    if (!verdict.askable_tunnel) {
      // Learned or asked about (docs/policy.md) request by request, with its method and path, once
      // the client has sent it inside the intercepted connection (its timeouts run from there).
      ex.dismiss();
      if (!co_await start_interception(dest, std::nullopt)) c_.draining = true;
      co_return;
    }
    why = co_await settle_askable_tunnel(entry, dest, verdict);
    policy = ctx.policy();  // grown, when a person approved it for the session
  }
  if (!verdict.allowed) {
    // docs/cli.md: the refusal goes inside TLS, where the client shows it; the CONNECT itself is
    // audited as refused and nothing is dialed.
    if (!why) why = live::refusal::policy_denied(verdict.rule, entry.host);
    entry.event = "refused";
    if (!ex.finish(why->status, false, why->code)) co_return;
    // A client gone after the 200 (or whose TLS handshake failed) ends the connection now.
    if (!co_await start_interception(dest, std::move(why))) c_.draining = true;
    co_return;
  }
  if (!verdict.tunnel) {
    // Interception is the default (docs/architecture.md): the exchanges inside are audited one by
    // one.
    ex.dismiss();
    std::optional<live::refusal> none;
    if (!co_await start_interception(dest, std::move(none), verdict.http2)) c_.draining = true;
    co_return;
  }
  co_await open_tunnel(ex, dest, *policy, verdict.ssh);
}

asio::awaitable<void> client_connection::open_tunnel(http_exchange& ex,
                                                     const config::destination& dest,
                                                     const config::policy_set& policy,
                                                     bool ssh_rule) {
  if (auto refused = ex.admit_by_session(dest.host)) {
    co_await ex.refuse(*refused, false);
    co_return;
  }
  if (auto refused = co_await ex.admit_shared(dest.host)) {
    co_await ex.refuse(*refused, false);
    co_return;
  }
  ex.arm_for_dial();
  auto dialed = co_await dial_upstream(*c_.ctx, policy, dest);
  if (dialed.refused) {
    co_await ex.refuse(*dialed.refused, false);
    co_return;
  }
  if (spdlog::should_log(spdlog::level::debug))
    session::log(spdlog::level::debug, c_.tag, "tunnel to {} via {}", to_string(dest),
                 dialed.address);
  co_await relay_to(ex, *dialed.socket, ssh_rule);
}

asio::awaitable<std::optional<live::refusal>> client_connection::settle_askable_tunnel(
    session::audit_entry& entry, const config::destination& dest, config::verdict& verdict) {
  if (c_.ctx->learns()) {
    entry.learned = true;  // wrap --learn: through, and recorded as learned
    verdict.allowed = verdict.tunnel = true;
    co_return std::nullopt;
  }
  c_.deadline.arm(c_.timeouts().ask + std::chrono::seconds(5), live::waiting_for::approval);
  const auto outcome = co_await c_.ctx->asks()->hold(entry, dest, /*tunnel=*/true);
  if (outcome.what == live::ask_outcome::kind::full) co_return std::nullopt;  // refused as before
  if (outcome.what != live::ask_outcome::kind::approved)
    co_return live::refusal::approval_denied(verdict.rule, entry.host,
                                             outcome.what == live::ask_outcome::kind::timed_out);
  // Approved (for --once, this connection alone): a tunnel, as the other layers have it.
  entry.rule = outcome.rule;
  verdict.allowed = verdict.tunnel = true;
  co_return std::nullopt;
}

asio::awaitable<void> client_connection::handle_captured() {
  auto& ex = h1_.begin_exchange("");
  auto& entry = ex.entry();
  entry.event = "tunnel";
  std::string address;
  auto dest = dialed_ ? captured_target(*dialed_, c_.ctx->clients().synthetic_names.get(), address)
                      : std::nullopt;
  if (dest) {
    co_await open_target(ex, *dest);
    co_return;
  }
  // No name stands behind the address (or the kernel kept no record of it): nothing to dial.
  entry.host = address.empty() ? "unknown" : address;
  entry.port = dialed_ ? dialed_->port() : 0;
  entry.event = "refused";
  std::optional<live::refusal> why = live::refusal::policy_denied("default_deny", entry.host);
  entry.rule = why->rule;
  if (!ex.finish(why->status, false, why->code)) co_return;
  config::destination unknown{entry.host, config::ip_address::parse(entry.host), entry.port};
  if (!co_await start_interception(unknown, std::move(why))) c_.draining = true;
}

asio::awaitable<void> client_connection::relay_to(http_exchange& ex, tcp::socket& upstream,
                                                  bool ssh_rule) {
  auto& entry = ex.entry();
  // A captured client dialed the upstream itself: there is no CONNECT to answer.
  if (!c_.captured) co_await write_all(c_.client, "HTTP/1.1 200 Connection Established\r\n\r\n");
  ex.response_started(true);
  entry.status = 200;
  std::optional<ssh::tunnel_join> join;
  byte_watch watch;
  if (ssh_rule) {
    join.emplace(c_.ctx->ssh(), entry.host, entry.port);
    watch = [&join](std::string_view bytes) { return join->server_bytes(bytes); };
  }
  std::string error;
  const auto idle = c_.timeouts().tunnel;
  if (c_.ctx->budget()) {
    // A tunnel's bytes count as they move; a spent byte budget closes it (docs/policy.md).
    const auto ended =
        co_await base::race(relay_tunnel(c_.client.socket(), upstream, c_.in, c_.deadline, idle,
                                         entry.bytes_out, entry.bytes_in, std::move(watch)),
                            watch_tunnel_budget(entry));
    if (ended == 1) error = "budget_exhausted";
  } else {
    co_await relay_tunnel(c_.client.socket(), upstream, c_.in, c_.deadline, idle, entry.bytes_out,
                          entry.bytes_in, std::move(watch));
  }
  if (join) entry.ssh = join->finish();
  // A deadline (idle, or the drain after SIGTERM) cut it short: the connection records why.
  const auto cancelled = (co_await asio::this_coro::cancellation_state).cancelled();
  if (cancelled != asio::cancellation_type::none) co_return;
  ex.finish(200, true, error);
}

asio::awaitable<void> client_connection::watch_tunnel_budget(session::audit_entry& entry) {
  auto& budget = *c_.ctx->budget();
  asio::steady_timer tick(co_await asio::this_coro::executor);
  for (;;) {
    tick.expires_after(std::chrono::milliseconds(100));
    auto [ec] = co_await tick.async_wait(use_tuple);
    c_.ctx->charge(entry);  // what moved since the last look
    if (ec) co_return;      // the tunnel ended first
    if (budget.spent(entry.host, std::chrono::steady_clock::now())) co_return;
  }
}

asio::awaitable<bool> client_connection::start_interception(const config::destination& dest,
                                                            std::optional<live::refusal> refused,
                                                            bool http2) {
  if (!c_.captured) co_await write_all(c_.client, "HTTP/1.1 200 Connection Established\r\n\r\n");
  intercept_.emplace(interception{dest, "http", std::move(refused)});

  // What comes next decides between TLS and plain HTTP; it may already be buffered.
  c_.deadline.arm(c_.timeouts().head, live::waiting_for::client_head);
  if (c_.in.empty()) {
    auto [ec, n] = co_await read_idle(c_.client, c_.in);
    if (ec) co_return false;
  }
  if (c_.in.view().front() != tls_handshake_record) co_return true;

  auto& tls = c_.ctx->tls();
  c_.client.start_tls(tls.server());
  SSL* ssl = c_.client.native_tls();
  tls.use_leaf(ssl, dest.host);
  if (http2) tls.offer_h2(ssl);
  c_.deadline.arm(c_.timeouts().tls, live::waiting_for::client_head);
  // The bytes already read are the start of the ClientHello.
  const std::string early(c_.in.view());
  c_.in.consume(c_.in.size());
  const auto ec = co_await c_.client.tls().handshake_server(early);
  if (ec) {
    // Typically a client that does not trust the session CA; it says so on its side.
    session::log(spdlog::level::info, c_.tag, "TLS handshake for {} failed: {}",
                 c_.ctx->scrub(dest.host), ec.message());
    co_return false;
  }
  intercept_->scheme = "https";
  intercept_->h2 = tls.chose_h2(ssl);
  if (!intercept_->refused && !sni_matches(ssl, dest))
    intercept_->refused =
        live::refusal::host_mismatch("the TLS server name (SNI) is not the CONNECT host");
  co_return true;
}

asio::awaitable<void> client_connection::serve_h2() {
  h2_connection h2(
      {c_.client, c_.deadline, c_.ctx, c_.pool, c_.tag, *intercept_, c_.captured, c_.holders});
  h2_ = &h2;
  try {
    co_await h2.run();
  } catch (...) {
    h2_ = nullptr;
    throw;
  }
  h2_ = nullptr;
}

}  // namespace broker::proxy
