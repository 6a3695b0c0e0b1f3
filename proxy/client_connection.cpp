#include "proxy/client_connection.hpp"

#include <spdlog/spdlog.h>

#include "base/race.hpp"
#include "capture/attribution.hpp"
#include "config/request_target.hpp"
#include "live/ask_desk.hpp"
#include "live/session_resolver.hpp"
#include "proxy/captured.hpp"
#include "proxy/idle_read.hpp"
#include "proxy/limits.hpp"
#include "proxy/tunnel.hpp"
#include "proxy/upstream_dialer.hpp"
#include "session/log.hpp"

namespace broker::proxy {

namespace {

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

}  // namespace

client_connection::client_connection(tcp::socket socket, std::shared_ptr<live::live_session> ctx,
                                     upstream_pool& pool, bool captured)
    : client_(std::move(socket)),
      ctx_(ctx),
      listener_ctx_(std::move(ctx)),
      connection_id_(ctx_->next_connection_id()),
      pool_(pool),
      tag_(ctx_->session_id(), connection_id_),
      deadline_(client_.get_executor()),
      captured_(captured) {
  if (captured_) dialed_ = original_destination(client_.socket());
}

void client_connection::drain(bool now) {
  if (h2_) h2_->drain(now);
  draining_ = true;
  cut_short_ = cut_short_ || now;
  const auto p = deadline_.waiting();
  if (now || p == live::waiting_for::client_idle || p == live::waiting_for::client_head)
    deadline_.arm(std::chrono::steady_clock::duration::zero(), p);
}

void client_connection::attribute() {
  // wrap knows its clients' process tree; serve's clients could be anyone, and searching every
  // process's descriptors per connection is not worth its cost there.
  const int root = ctx_->client_root_pid();
  if (root <= 0) return;
  error_code e1, e2;
  const auto peer = client_.socket().remote_endpoint(e1);
  // A captured client's socket is connected to the address it dialed, not to this listener.
  const auto local = dialed_ ? *dialed_ : client_.socket().local_endpoint(e2);
  if (e1 || e2) return;
  if (auto found = capture::find_socket_holders(
          peer.address().to_string(), peer.port(), local.address().to_string(), local.port(),
          ctx_->client_netns_pid(), {root}, ctx_->client_sock_diag()))
    holders_ = std::make_shared<const config::client_identity>(
        config::client_identity{std::move(found->holders), found->complete, ctx_->client_writes()});
}

asio::awaitable<void> client_connection::run() {
  error_code ignored;
  client_.socket().set_option(tcp::no_delay(true), ignored);
  attribute();
  std::string failure;
  try {
    if (co_await base::race(serve(), deadline_.watch()) == 1) {
      const auto p = deadline_.waiting();
      if (p != live::waiting_for::client_idle)
        session::log(spdlog::level::debug, tag_, "deadline passed waiting for {}", name_of(p));
      if (cut_short_) {
        if (exchange_ && exchange_->active())
          exchange_->finish(exchange_->entry().status, true, "shutdown");
      } else if (exchange_ && exchange_->active() && !exchange_->response_started() &&
                 p == live::waiting_for::upstream) {
        exchange_->drop_upstream();
        const auto r = live::refusal::upstream_timeout(exchange_->entry().host);
        exchange_->finish(r.status, true, r.code);
        const auto text = live::render_refusal(r, ctx_->scrub(exchange_->entry().host),
                                               ctx_->session_id(), false);
        // The client gets a bounded time to take the answer.
        deadline_.arm(timeouts().body, live::waiting_for::request_body);
        co_await base::race(write_all(client_, text), deadline_.watch());
      } else if (exchange_ && exchange_->active()) {
        exchange_->finish(exchange_->entry().status, true, "timeout");
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (exchange_ && exchange_->active())
    exchange_->finish(exchange_->entry().status, true, "aborted");
  if (!failure.empty())
    session::log(spdlog::level::info, tag_, "connection ended: {}", ctx_->scrub(failure));
  exchange_.reset();
  if (client_.is_tls() && failure.empty()) {
    // close_notify, so a client reading until close sees a clean end (RFC 8446 §6.1); bounded,
    // as the client need not answer.
    deadline_.arm(std::chrono::seconds(1), live::waiting_for::client_idle);
    co_await base::race(client_.shutdown(), deadline_.watch());
  }
  client_.close();
}

asio::awaitable<void> client_connection::serve() {
  bool first = true;
  if (captured_) {
    co_await handle_captured();
    if (!intercept_) co_return;
    if (intercept_->h2) co_return co_await serve_h2();
  }
  while (!draining_) {
    http::parser parser(http::parser::kind::request);
    if (co_await read_request_head(parser, first) != head_result::ok) co_return;
    first = false;
    h1_.start(parser);
    if (intercept_) {
      const auto next = co_await handle_intercepted(parser);
      h1_.end();
      if (next != next_step::keep_alive) co_return;
      continue;
    }
    if (listener_ctx_->resolver()) {
      const auto bound = co_await bind_session(parser);
      if (bound == binding::refused_close) co_return;
      if (bound == binding::refused_keep) continue;
    }
    if (parser.head().method == "CONNECT") {
      co_await handle_connect(parser.head());
      // An intercepted CONNECT goes on with the requests inside it.
      if (!intercept_) co_return;
      if (intercept_->h2) co_return co_await serve_h2();
      first = true;
      continue;
    }
    const auto next = co_await handle_forward(parser);
    h1_.end();
    if (next != next_step::keep_alive) co_return;
  }
}

asio::awaitable<client_connection::head_result> client_connection::read_request_head(
    http::parser& parser, bool first) {
  if (first)
    deadline_.arm(timeouts().head, live::waiting_for::client_head);
  else
    deadline_.arm(timeouts().idle, live::waiting_for::client_idle);
  bool started = false;
  for (;;) {
    if (!in_.empty()) {
      if (!started && !first) deadline_.arm(timeouts().head, live::waiting_for::client_head);
      started = true;
      const auto r = parser.feed(in_.view());
      in_.consume(r.consumed);
      if (r.status == http::parse_status::head_complete ||
          r.status == http::parse_status::message_complete)
        co_return head_result::ok;
      if (r.status == http::parse_status::error) {
        const auto why =
            parser.error() == http::parse_error::header_too_large
                ? live::refusal::header_too_large()
                : live::refusal::bad_request("malformed request: " + parser.error_reason());
        auto& ex = begin_exchange(parser.head().method);
        if (intercept_) {
          // Inside an intercepted CONNECT (or a captured connection): whose bytes they were.
          ex.entry().host = intercept_->dest.host;
          ex.entry().port = intercept_->dest.port;
          ex.entry().scheme = intercept_->scheme;
        }
        co_await ex.refuse(why, false);
        co_return head_result::refused;
      }
    }
    // Between requests the connection holds no buffer block (idle_read).
    auto [ec, n] = co_await read_idle(client_, in_);
    if (ec) co_return head_result::closed;  // EOF or reset before a whole head: nothing to answer
  }
}

asio::awaitable<void> client_connection::handle_connect(const http::message_head& head) {
  auto& ex = begin_exchange("CONNECT");
  auto& entry = ex.entry();
  entry.event = "tunnel";
  auto where = config::parse_authority(head.target);
  if (!where) {
    entry.host = head.target;
    co_await ex.refuse(live::refusal::bad_request("CONNECT needs a host:port target"), false);
    co_return;
  }
  co_await open_target(ex, where->dest);
}

asio::awaitable<client_connection::binding> client_connection::bind_session(
    const http::parser& request) {
  const auto& head = request.head();
  auto found = co_await listener_ctx_->resolver()->resolve(head);
  if (found.session) {
    if (found.session != ctx_) {
      exchange_.reset();  // it points at the context it ran in
      ctx_ = std::move(found.session);
      tag_ = session::log_tag(ctx_->session_id(), connection_id_);
    }
    co_return binding::bound;
  }
  exchange_.reset();
  ctx_ = listener_ctx_;
  tag_ = session::log_tag(ctx_->session_id(), connection_id_);
  const bool connect = head.method == "CONNECT";
  auto& ex = begin_exchange(head.method);
  auto& entry = ex.entry();
  if (connect) {
    entry.event = "tunnel";
    if (auto where = config::parse_authority(head.target)) {
      entry.host = where->dest.host;
      entry.port = where->dest.port;
    }
  } else if (auto uri = config::parse_absolute_uri(head.target)) {
    entry.scheme = uri->scheme;
    entry.host = uri->where.dest.host;
    entry.port = uri->where.dest.port;
    entry.target = uri->path_and_query;
  }
  // A request's unread body would be taken for the next head, so only a bodiless one keeps the
  // connection (the client may answer the 407 with credentials on it).
  const bool keep = !connect && request.keep_alive() && !head.has_body && !draining_;
  const live::refusal why = found.refused
                                ? *found.refused
                                : live::refusal::proxy_auth_required("no session for this request");
  co_await ex.refuse(why, keep);
  co_return keep ? binding::refused_keep : binding::refused_close;
}

asio::awaitable<void> client_connection::open_target(http_exchange& ex,
                                                     const config::destination& dest) {
  auto& entry = ex.entry();
  entry.host = dest.host;
  entry.port = dest.port;
  auto policy = ctx_->policy();
  auto verdict = policy->check_connect(dest, {holders_.get()});
  if (!ctx_->audit_ok()) {
    // DESIGN §6: a refusal decided at CONNECT goes inside TLS, where the client shows it. Each
    // request there asks the log again (and meets the policy once it can be written), so a
    // connection outlives a full disk; only a tunnel's CONNECT is refused itself.
    if (verdict.allowed && verdict.tunnel) {
      co_await ex.refuse(live::refusal::audit_unavailable(), false);
      co_return;
    }
    ex.dismiss();
    if (!co_await start_interception(dest, std::nullopt, verdict.allowed && verdict.http2))
      draining_ = true;
    co_return;
  }
  entry.rule = verdict.rule;
  entry.would_deny = verdict.would_deny;
  std::optional<live::refusal> why;
  if (!verdict.allowed && verdict.askable && (ctx_->learns() || ctx_->asks())) {
    if (!verdict.askable_tunnel) {
      // Learned or asked about (DESIGN §13) request by request, with its method and path, once
      // the client has sent it inside the intercepted connection (its timeouts run from there).
      ex.dismiss();
      if (!co_await start_interception(dest, std::nullopt)) draining_ = true;
      co_return;
    }
    why = co_await settle_askable_tunnel(entry, dest, verdict);
    policy = ctx_->policy();  // grown, when a person approved it for the session
  }
  if (!verdict.allowed) {
    // DESIGN §6: the refusal goes inside TLS, where the client shows it; the CONNECT itself is
    // audited as refused and nothing is dialed.
    if (!why) why = live::refusal::policy_denied(verdict.rule, entry.host);
    entry.event = "refused";
    if (!ex.finish(why->status, false, why->code)) co_return;
    // A client gone after the 200 (or whose TLS handshake failed) ends the connection now.
    if (!co_await start_interception(dest, std::move(why))) draining_ = true;
    co_return;
  }
  if (!verdict.tunnel) {
    // Interception is the default (DESIGN §1): the exchanges inside are audited one by one.
    ex.dismiss();
    std::optional<live::refusal> none;
    if (!co_await start_interception(dest, std::move(none), verdict.http2)) draining_ = true;
    co_return;
  }
  if (auto refused = ex.admit_by_session(dest.host)) {
    co_await ex.refuse(*refused, false);
    co_return;
  }
  if (auto refused = co_await ex.admit_shared(dest.host)) {
    co_await ex.refuse(*refused, false);
    co_return;
  }
  ex.arm_for_dial();
  auto dialed = co_await dial_upstream(*ctx_, *policy, dest);
  if (dialed.refused) {
    co_await ex.refuse(*dialed.refused, false);
    co_return;
  }
  if (spdlog::should_log(spdlog::level::debug))
    session::log(spdlog::level::debug, tag_, "tunnel to {} via {}", to_string(dest),
                 dialed.address);
  co_await relay_to(ex, *dialed.socket);
}

asio::awaitable<std::optional<live::refusal>> client_connection::settle_askable_tunnel(
    session::audit_entry& entry, const config::destination& dest, config::verdict& verdict) {
  if (ctx_->learns()) {
    entry.learned = true;  // wrap --learn: through, and recorded as learned
    verdict.allowed = verdict.tunnel = true;
    co_return std::nullopt;
  }
  deadline_.arm(timeouts().ask + std::chrono::seconds(5), live::waiting_for::approval);
  const auto outcome = co_await ctx_->asks()->hold(entry, dest, /*tunnel=*/true);
  if (outcome.what == live::ask_outcome::kind::full) co_return std::nullopt;  // refused as before
  if (outcome.what != live::ask_outcome::kind::approved)
    co_return live::refusal::approval_denied(verdict.rule, entry.host,
                                             outcome.what == live::ask_outcome::kind::timed_out);
  // Approved (for --once, this connection alone): a tunnel, as the other layers have it.
  entry.rule = outcome.rule;
  verdict.allowed = verdict.tunnel = true;
  co_return std::nullopt;
}

asio::awaitable<void> client_connection::relay_to(http_exchange& ex, tcp::socket& upstream) {
  auto& entry = ex.entry();
  // A captured client dialed the upstream itself: there is no CONNECT to answer.
  if (!captured_) co_await write_all(client_, "HTTP/1.1 200 Connection Established\r\n\r\n");
  ex.response_started(true);
  entry.status = 200;
  std::string error;
  if (ctx_->budget()) {
    // A tunnel's bytes count as they move; a spent byte budget closes it (DESIGN §4).
    const auto ended =
        co_await base::race(relay_tunnel(client_.socket(), upstream, in_, deadline_,
                                         timeouts().tunnel, entry.bytes_out, entry.bytes_in),
                            watch_tunnel_budget());
    if (ended == 1) error = "budget_exhausted";
  } else {
    co_await relay_tunnel(client_.socket(), upstream, in_, deadline_, timeouts().tunnel,
                          entry.bytes_out, entry.bytes_in);
  }
  // A deadline (idle, or the drain after SIGTERM) cut it short: the connection records why.
  const auto cancelled = (co_await asio::this_coro::cancellation_state).cancelled();
  if (cancelled != asio::cancellation_type::none) co_return;
  ex.finish(200, true, error);
}

asio::awaitable<void> client_connection::watch_tunnel_budget() {
  auto& entry = exchange_->entry();
  auto& budget = *ctx_->budget();
  asio::steady_timer tick(co_await asio::this_coro::executor);
  for (;;) {
    tick.expires_after(std::chrono::milliseconds(100));
    auto [ec] = co_await tick.async_wait(use_tuple);
    ctx_->charge(entry);  // what moved since the last look
    if (ec) co_return;    // the tunnel ended first
    if (budget.spent(entry.host, std::chrono::steady_clock::now())) co_return;
  }
}

http_exchange& client_connection::begin_exchange(std::string method) {
  exchange_.reset();
  auto& ex = exchange_.emplace(http_exchange::connection{h1_, deadline_, *ctx_, pool_, tag_},
                               std::move(method), holders_);
  ex.entry().captured = captured_;
  return ex;
}

}  // namespace broker::proxy
