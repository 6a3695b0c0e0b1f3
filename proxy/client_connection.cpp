#include "proxy/client_connection.hpp"

#include <spdlog/spdlog.h>

#include "proxy/attribution.hpp"
#include "proxy/limits.hpp"
#include "proxy/race.hpp"
#include "proxy/target.hpp"
#include "proxy/tunnel.hpp"
#include "proxy/upstream_dialer.hpp"
#include "session/log.hpp"

namespace broker::proxy {

namespace {

// Upstream-side failures are answered by the broker but were allowed by policy.
bool is_policy_refusal(const refusal& r) {
  return r.status != 502 && r.status != 504;
}

const char* phase_name(deadline::phase p) {
  switch (p) {
    case deadline::phase::client_head:
      return "request head";
    case deadline::phase::client_idle:
      return "next request";
    case deadline::phase::request_body:
      return "request body";
    case deadline::phase::upstream:
      return "upstream";
    case deadline::phase::tunnel:
      return "tunnel traffic";
  }
  return "?";
}

}  // namespace

client_connection::client_connection(tcp::socket socket, std::shared_ptr<proxy_context> ctx,
                                     upstream_pool& pool)
    : client_(std::move(socket)),
      ctx_(std::move(ctx)),
      pool_(pool),
      tag_(ctx_->session_id(), ctx_->next_connection_id()),
      in_(limits::relay_buffer_bytes),
      deadline_(client_.get_executor()) {}

void client_connection::drain(bool now) {
  draining_ = true;
  cut_short_ = cut_short_ || now;
  const auto p = deadline_.current_phase();
  if (now || p == deadline::phase::client_idle || p == deadline::phase::client_head)
    deadline_.arm(std::chrono::steady_clock::duration::zero(), p);
}

void client_connection::attribute() {
  // wrap knows its clients' process tree; serve's clients could be anyone, and searching every
  // process's descriptors per connection is not worth its cost there.
  const int root = ctx_->client_root_pid();
  if (root <= 0) return;
  error_code e1, e2;
  const auto peer = client_.socket().remote_endpoint(e1);
  const auto local = client_.socket().local_endpoint(e2);
  if (e1 || e2) return;
  if (auto found =
          find_socket_owner(peer.address().to_string(), peer.port(), local.address().to_string(),
                            local.port(), ctx_->client_netns_pid(), {root})) {
    owner_pid_ = found->pid;
    owner_exe_ = std::move(found->exe);
  }
}

asio::awaitable<void> client_connection::run() {
  error_code ignored;
  client_.socket().set_option(tcp::no_delay(true), ignored);
  attribute();
  std::string failure;
  try {
    if (co_await race(serve(), deadline_.watch()) == 1) {
      const auto p = deadline_.current_phase();
      if (p != deadline::phase::client_idle)
        session::log(spdlog::level::debug, tag_, "deadline passed waiting for {}", phase_name(p));
      if (cut_short_) {
        if (exchange_.active) finish_exchange(exchange_.entry.status, true, "shutdown");
      } else if (exchange_.active && !exchange_.response_started &&
                 p == deadline::phase::upstream) {
        upstream_.reset();
        const auto r = refusal::upstream_timeout(exchange_.entry.host);
        finish_exchange(r.status, true, r.code);
        const auto text =
            render_refusal(r, ctx_->scrub(exchange_.entry.host), ctx_->session_id(), false);
        // The client gets a bounded time to take the answer.
        deadline_.arm(timeouts().body, deadline::phase::request_body);
        co_await race(write_client(text), deadline_.watch());
      } else if (exchange_.active) {
        finish_exchange(exchange_.entry.status, true, "timeout");
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (exchange_.active) finish_exchange(exchange_.entry.status, true, "aborted");
  if (!failure.empty())
    session::log(spdlog::level::info, tag_, "connection ended: {}", ctx_->scrub(failure));
  upstream_.reset();
  if (client_.is_tls() && failure.empty()) {
    // close_notify, so a client reading until close sees a clean end (RFC 8446 §6.1); bounded,
    // as the client need not answer.
    deadline_.arm(std::chrono::seconds(1), deadline::phase::client_idle);
    co_await race(client_.shutdown(), deadline_.watch());
  }
  client_.close();
}

asio::awaitable<void> client_connection::serve() {
  bool first = true;
  while (!draining_) {
    http::parser parser(http::parser::kind::request);
    if (co_await read_request_head(parser, first) != head_result::ok) co_return;
    first = false;
    if (intercept_) {
      if (!co_await handle_intercepted(parser)) co_return;
      continue;
    }
    if (parser.head().method == "CONNECT") {
      co_await handle_connect(parser.head());
      // An intercepted CONNECT goes on with the requests inside it.
      if (!intercept_) co_return;
      first = true;
      continue;
    }
    if (!co_await handle_forward(parser)) co_return;
  }
}

asio::awaitable<client_connection::head_result> client_connection::read_request_head(
    http::parser& parser, bool first) {
  if (first)
    deadline_.arm(timeouts().head, deadline::phase::client_head);
  else
    deadline_.arm(timeouts().idle, deadline::phase::client_idle);
  bool started = false;
  for (;;) {
    if (!in_.empty()) {
      if (!started && !first) deadline_.arm(timeouts().head, deadline::phase::client_head);
      started = true;
      const auto r = parser.feed(in_.view());
      in_.consume(r.consumed);
      if (r.status == http::parse_status::head_complete ||
          r.status == http::parse_status::message_complete)
        co_return head_result::ok;
      if (r.status == http::parse_status::error) {
        begin_exchange(parser.head().method);
        const auto why = parser.error() == http::parse_error::header_too_large
                             ? refusal::header_too_large()
                             : refusal::bad_request("malformed request: " + parser.error_reason());
        co_await refuse(why, false);
        co_return head_result::refused;
      }
    }
    auto [ec, n] = co_await client_.read_some(in_.space());
    if (ec) co_return head_result::closed;  // EOF or reset before a whole head: nothing to answer
    in_.commit(n);
  }
}

asio::awaitable<void> client_connection::handle_connect(const http::message_head& head) {
  begin_exchange("CONNECT");
  auto& entry = exchange_.entry;
  entry.event = "tunnel";
  auto where = parse_authority(head.target);
  if (!where) {
    entry.host = head.target;
    co_await refuse(refusal::bad_request("CONNECT needs a host:port target"), false);
    co_return;
  }
  entry.host = where->dest.host;
  entry.port = where->dest.port;
  if (!ctx_->audit_ok()) {
    co_await refuse(refusal::audit_unavailable(), false);
    co_return;
  }
  const auto policy = ctx_->policy();
  const auto verdict = policy->check_connect(where->dest);
  entry.rule = verdict.rule;
  if (!verdict.allowed) {
    // DESIGN §6: the refusal goes inside TLS, where the client shows it; the CONNECT itself is
    // audited as refused and nothing is dialed.
    std::optional<refusal> why = refusal::policy_denied(verdict.rule, entry.host);
    entry.event = "refused";
    if (!finish_exchange(why->status, false, why->code)) co_return;
    co_await start_interception(where->dest, std::move(why));
    co_return;
  }
  if (!verdict.tunnel) {
    // Interception is the default (DESIGN §1): the exchanges inside are audited one by one.
    exchange_.active = false;
    std::optional<refusal> none;
    co_await start_interception(where->dest, std::move(none));
    co_return;
  }
  if (auto refused = admit_by_budget(where->dest.host)) {
    co_await refuse(*refused, false);
    co_return;
  }
  arm_for_dial();
  auto dialed = co_await dial_upstream(*ctx_, *policy, where->dest);
  if (dialed.refused) {
    co_await refuse(*dialed.refused, false);
    co_return;
  }
  if (spdlog::should_log(spdlog::level::debug))
    session::log(spdlog::level::debug, tag_, "tunnel to {} via {}", to_string(where->dest),
                 dialed.address);
  co_await write_client("HTTP/1.1 200 Connection Established\r\n\r\n");
  exchange_.response_started = true;
  entry.status = 200;
  if (ctx_->budget()) {
    // A tunnel's bytes count as they move; a spent byte budget closes it (DESIGN §4).
    const auto ended =
        co_await race(relay_tunnel(client_.socket(), *dialed.socket, in_, deadline_,
                                   timeouts().tunnel, entry.bytes_out, entry.bytes_in),
                      watch_tunnel_budget());
    finish_exchange(200, true, ended == 1 ? "budget_exhausted" : "");
  } else {
    co_await relay_tunnel(client_.socket(), *dialed.socket, in_, deadline_, timeouts().tunnel,
                          entry.bytes_out, entry.bytes_in);
    finish_exchange(200, true);
  }
}

asio::awaitable<void> client_connection::watch_tunnel_budget() {
  auto& entry = exchange_.entry;
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

asio::awaitable<bool> client_connection::refuse(const refusal& r, bool keep_alive) {
  auto& entry = exchange_.entry;
  const bool policy_refusal = is_policy_refusal(r);
  // A dummy caught on its way to the wrong host is the canary DESIGN §5 asks to record as such.
  if (policy_refusal)
    entry.event = r.code == "credential_not_bound" ? "exfiltration_blocked" : "refused";
  if (!r.rule.empty()) entry.rule = r.rule;
  // The target carried a real value, maybe encoded past what the audit's scrubbing recognizes.
  if (r.code == "real_secret_blocked") entry.target.clear();
  finish_exchange(r.status, !policy_refusal, r.code);
  // Hosts and messages hold client-chosen text; what the broker writes holds no real value.
  refusal shown = r;
  shown.message = ctx_->scrub(r.message);
  const std::string host = ctx_->scrub(entry.host);
  session::log(spdlog::level::debug, tag_, "{} {} {}: {}", entry.method, host, shown.code,
               shown.message);
  co_await write_client(render_refusal(shown, host, ctx_->session_id(), keep_alive));
  co_return keep_alive;
}

asio::awaitable<void> client_connection::write_client(std::string_view data) {
  auto [ec, n] = co_await client_.write(data);
  if (ec) throw boost::system::system_error(ec);
}

std::optional<refusal> client_connection::admit_by_budget(const std::string& host) {
  auto* budget = ctx_->budget();
  if (!budget) return std::nullopt;
  auto spent = budget->admit(host, std::chrono::steady_clock::now());
  if (!spent) return std::nullopt;
  if (spent->kill) ctx_->end_session(*spent);
  const auto retry_ms = spent->retry_after.count();
  return refusal::budget_exhausted(spent->budget, spent->limit, spent->used,
                                   retry_ms > 0 ? (retry_ms + 999) / 1000 : 0);
}

void client_connection::begin_exchange(std::string method) {
  exchange_ = exchange{};
  exchange_.entry.event = "request";
  exchange_.entry.method = std::move(method);
  exchange_.entry.pid = owner_pid_;
  exchange_.entry.exe = owner_exe_;
  exchange_.start = std::chrono::steady_clock::now();
  exchange_.active = true;
}

void client_connection::arm_for_dial() {
  // dial_upstream bounds each of its own steps; this only keeps an earlier phase's deadline
  // from cutting the dial short.
  deadline_.arm(timeouts().dns + timeouts().connect + std::chrono::seconds(1),
                deadline::phase::upstream);
}

double client_connection::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                   exchange_.start)
      .count();
}

bool client_connection::finish_exchange(int status, bool allowed, const std::string& error) {
  if (!exchange_.active) return true;
  exchange_.active = false;
  auto& entry = exchange_.entry;
  entry.status = status;
  entry.allowed = allowed;
  entry.error = error;
  entry.ms = elapsed_ms();
  ctx_->charge(entry);
  const bool ok = ctx_->record(entry);
  if (!ok)
    session::log(spdlog::level::err, tag_, "audit log write failed: {}",
                 ctx_->audit_log().failure());
  return ok;
}

}  // namespace broker::proxy
