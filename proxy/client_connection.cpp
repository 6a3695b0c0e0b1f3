#include "proxy/client_connection.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>

#include "proxy/limits.hpp"
#include "proxy/race.hpp"
#include "proxy/target.hpp"
#include "proxy/tunnel.hpp"
#include "proxy/upstream_dialer.hpp"

namespace broker::proxy {

using namespace asio::experimental::awaitable_operators;

namespace {

// A client-side protocol error found while streaming a request body.
struct body_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// An upstream that breaks its response after the head went out: the client connection is cut.
struct upstream_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A kept-alive upstream connection may have been closed by the peer since its last response.
bool still_open(tcp::socket& socket) {
  char byte;
  const auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// Upstream-side failures are answered by the broker but were allowed by policy.
bool is_policy_refusal(const refusal& r) { return r.status != 502 && r.status != 504; }

const char* phase_name(deadline::phase p) {
  switch (p) {
    case deadline::phase::client_head: return "request head";
    case deadline::phase::client_idle: return "next request";
    case deadline::phase::request_body: return "request body";
    case deadline::phase::upstream: return "upstream";
    case deadline::phase::tunnel: return "tunnel traffic";
  }
  return "?";
}

asio::awaitable<void> hold_until_cancelled() {
  asio::steady_timer forever(co_await asio::this_coro::executor,
                             std::chrono::steady_clock::time_point::max());
  co_await forever.async_wait(use_tuple);
}

}  // namespace

client_connection::client_connection(tcp::socket socket, std::shared_ptr<proxy_context> ctx)
    : client_(std::move(socket)),
      ctx_(std::move(ctx)),
      in_(limits::relay_buffer_bytes),
      deadline_(client_.get_executor()) {
  tag_ = "[" + ctx_->session_id() + " c" + std::to_string(ctx_->next_connection_id()) + "]";
}

void client_connection::drain() {
  draining_ = true;
  const auto p = deadline_.current_phase();
  if (p == deadline::phase::client_idle || p == deadline::phase::client_head)
    deadline_.arm(std::chrono::steady_clock::duration::zero(), p);
}

asio::awaitable<void> client_connection::run() {
  error_code ignored;
  client_.set_option(tcp::no_delay(true), ignored);
  std::string failure;
  try {
    if (co_await race(serve(), deadline_.watch()) == 1) {
      const auto p = deadline_.current_phase();
      if (p != deadline::phase::client_idle)
        spdlog::debug("{} deadline passed waiting for {}", tag_, phase_name(p));
      if (exchange_.active && !exchange_.response_started && p == deadline::phase::upstream) {
        upstream_.reset();
        const auto r = refusal::upstream_timeout(exchange_.entry.host);
        finish_exchange(r.status, true, r.code);
        const auto text = render_refusal(r, exchange_.entry.host, ctx_->session_id(), false);
        // The client gets a bounded time to take the answer.
        co_await race(write_client(text), deadline_.watch());
      } else if (exchange_.active) {
        finish_exchange(exchange_.entry.status, true, "timeout");
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (exchange_.active) finish_exchange(exchange_.entry.status, true, "aborted");
  if (!failure.empty()) spdlog::info("{} connection ended: {}", tag_, failure);
  upstream_.reset();
  client_.close(ignored);
}

asio::awaitable<void> client_connection::serve() {
  bool first = true;
  while (!draining_) {
    http_parser parser(http_parser::kind::request);
    if (co_await read_request_head(parser, first) != head_result::ok) co_return;
    first = false;
    if (parser.head().method == "CONNECT") {
      co_await handle_connect(parser.head());
      co_return;
    }
    if (!co_await handle_forward(parser)) co_return;
  }
}

asio::awaitable<client_connection::head_result> client_connection::read_request_head(
    http_parser& parser, bool first) {
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
      if (r.status == parse_status::head_complete || r.status == parse_status::message_complete)
        co_return head_result::ok;
      if (r.status == parse_status::error) {
        begin_exchange(parser.head().method);
        const auto why = parser.error() == parse_error::header_too_large
                             ? refusal::header_too_large()
                             : refusal::bad_request("malformed request: " + parser.error_reason());
        co_await refuse(why, false);
        co_return head_result::refused;
      }
    }
    auto [ec, n] =
        co_await client_.async_read_some(asio::buffer(in_.tail(), in_.tail_size()), use_tuple);
    if (ec) co_return head_result::closed;  // EOF or reset before a whole head: nothing to answer
    in_.commit(n);
  }
}

asio::awaitable<void> client_connection::handle_connect(const message_head& head) {
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
    co_await refuse(refusal::policy_denied(verdict.rule, entry.host), false);
    co_return;
  }
  // Interception (DESIGN §1) slots in here: a CONNECT whose rule is not a tunnel rule will be
  // served by the MITM request loop. Until it exists, every allowed CONNECT is tunnelled.
  deadline_.arm(timeouts().dns + timeouts().connect + std::chrono::seconds(1),
                deadline::phase::upstream);
  auto dialed = co_await dial_upstream(*ctx_, *policy, where->dest);
  if (dialed.refused) {
    co_await refuse(*dialed.refused, false);
    co_return;
  }
  spdlog::debug("{} tunnel to {} via {}", tag_, to_string(where->dest), dialed.address);
  co_await write_client("HTTP/1.1 200 Connection Established\r\n\r\n");
  exchange_.response_started = true;
  entry.status = 200;
  co_await relay_tunnel(client_, *dialed.socket, in_, deadline_, timeouts().tunnel, entry.bytes_out,
                        entry.bytes_in);
  finish_exchange(200, true);
}

asio::awaitable<bool> client_connection::handle_forward(http_parser& request) {
  const message_head& head = request.head();
  begin_exchange(head.method);
  auto& entry = exchange_.entry;
  entry.target = head.target;
  // A refused request's body is not read, so the connection can only go on without one.
  const bool keep_after_refusal = request.keep_alive() && !head.has_body && !draining_;

  auto uri = parse_absolute_uri(head.target);
  if (!uri) {
    const bool origin_form = !head.target.empty() && head.target.front() == '/';
    entry.target.clear();
    co_return co_await refuse(
        refusal::bad_request(origin_form ? "this is a proxy: send an absolute-form URI "
                                           "(http://host/path) or use CONNECT"
                                         : "malformed request target"),
        keep_after_refusal);
  }
  entry.scheme = uri->scheme;
  entry.host = uri->where.dest.host;
  entry.port = uri->where.dest.port;
  entry.target = uri->path_and_query;
  if (uri->scheme != "http")
    co_return co_await refuse(
        refusal::bad_request("only http:// URIs are forwarded; https:// goes through CONNECT"),
        keep_after_refusal);
  const std::string* host_header = head.find("host");
  if (host_header && !host_header_matches(*host_header, uri->where, 80))
    co_return co_await refuse(
        refusal::host_mismatch("the Host header does not match the request URI's authority"),
        keep_after_refusal);
  if (!ctx_->audit_ok())
    co_return co_await refuse(refusal::audit_unavailable(), keep_after_refusal);

  const auto policy = ctx_->policy();
  const auto verdict = policy->check_request(uri->where.dest, head.method, uri->path_and_query);
  entry.rule = verdict.rule;
  if (!verdict.allowed)
    co_return co_await refuse(refusal::policy_denied(verdict.rule, entry.host),
                              keep_after_refusal);

  const auto& dest = uri->where.dest;
  if (upstream_ && (upstream_->host != dest.host || upstream_->port != dest.port ||
                    !still_open(upstream_->socket)))
    upstream_.reset();
  if (!upstream_) {
    deadline_.arm(timeouts().dns + timeouts().connect + std::chrono::seconds(1),
                  deadline::phase::upstream);
    auto dialed = co_await dial_upstream(*ctx_, *policy, dest);
    if (dialed.refused) co_return co_await refuse(*dialed.refused, keep_after_refusal);
    upstream_.emplace(upstream_connection{std::move(*dialed.socket), dest.host, dest.port,
                                          read_buffer(limits::relay_buffer_bytes)});
  }

  std::string out = serialize_request_head(head, uri->path_and_query);
  if (!host_header) {
    // HTTP/1.0 clients may omit Host; the upstream needs it (RFC 9112 §3.2).
    const auto line_end = out.find("\r\n") + 2;
    const bool default_port = dest.port == 80;
    out.insert(line_end, "Host: " + (default_port ? (dest.ip && !dest.ip->v4 ? "[" + dest.host + "]"
                                                                                : dest.host)
                                                   : to_string(dest)) + "\r\n");
  }
  co_return co_await exchange_with_upstream(request, out);
}

asio::awaitable<bool> client_connection::exchange_with_upstream(http_parser& request,
                                                                const std::string& head) {
  auto& entry = exchange_.entry;
  const bool client_keep_alive = request.keep_alive() && !draining_;
  deadline_.arm(timeouts().upstream, deadline::phase::upstream);
  auto [ec, n] = co_await asio::async_write(upstream_->socket, asio::buffer(head), use_tuple);
  if (ec) {
    upstream_.reset();
    co_return co_await refuse(refusal::upstream_unreachable(entry.host, ec.message()), false);
  }
  entry.bytes_out += n;
  bool keep_alive = false;
  if (!request.head().has_body) {
    co_await relay_response(entry.method, client_keep_alive, keep_alive);
    co_return keep_alive;
  }

  bool body_done = false;
  std::string body_problem;
  try {
    co_await race(pump_request_body(request, body_done),
                  relay_response(entry.method, client_keep_alive, keep_alive));
    if (body_done) co_return keep_alive;
    // The upstream answered before the body was through; the client's stream cannot be
    // resynchronized, so both connections end here.
    upstream_.reset();
    co_return false;
  } catch (const body_error& e) {
    upstream_.reset();
    if (exchange_.response_started) throw;
    body_problem = e.what();
  }
  co_return co_await refuse(refusal::bad_request("malformed request body: " + body_problem), false);
}

asio::awaitable<void> client_connection::pump_request_body(http_parser& request, bool& done) {
  auto& entry = exchange_.entry;
  // Yield once before any work: in Boost 1.81 a parallel group whose first operation completes
  // inline (a body error in bytes already buffered) never cancels the second one.
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  for (;;) {
    if (!in_.empty()) {
      const auto r = request.feed(in_.view());
      if (r.status == parse_status::error) throw body_error(request.error_reason());
      if (r.consumed > 0) {
        auto [ec, n] = co_await asio::async_write(
            upstream_->socket, asio::buffer(in_.view().data(), r.consumed), use_tuple);
        if (ec) throw upstream_error("upstream write failed: " + ec.message());
        entry.bytes_out += n;
        in_.consume(r.consumed);
      }
      if (r.status == parse_status::message_complete) break;
    }
    deadline_.arm(timeouts().body, deadline::phase::request_body);
    auto [ec, n] =
        co_await client_.async_read_some(asio::buffer(in_.tail(), in_.tail_size()), use_tuple);
    if (ec) throw body_error("client closed the connection mid-body");
    in_.commit(n);
  }
  done = true;
  deadline_.arm(timeouts().upstream, deadline::phase::upstream);
  co_await hold_until_cancelled();
}

asio::awaitable<void> client_connection::relay_response(const std::string& method,
                                                        bool client_keep_alive, bool& keep_alive) {
  keep_alive = false;
  auto& entry = exchange_.entry;
  auto& up = *upstream_;
  std::optional<http_parser> response;
  // Interim (1xx) responses are passed on; the loop ends at the final response's head.
  for (;;) {
    response.emplace(http_parser::kind::response, method);
    for (;;) {
      if (!up.in.empty()) {
        const auto r = response->feed(up.in.view());
        up.in.consume(r.consumed);
        entry.bytes_in += r.consumed;
        if (r.status == parse_status::head_complete || r.status == parse_status::message_complete)
          break;
        if (r.status == parse_status::error) {
          upstream_.reset();
          co_await refuse(
              refusal::upstream_unreachable(entry.host, "malformed response: " +
                                                            response->error_reason()),
              false);
          co_return;
        }
      }
      auto [ec, n] =
          co_await up.socket.async_read_some(asio::buffer(up.in.tail(), up.in.tail_size()), use_tuple);
      if (ec == asio::error::operation_aborted) co_return;  // the request body failed first
      if (ec) {
        upstream_.reset();
        co_await refuse(
            refusal::upstream_unreachable(entry.host, "connection closed before a response"), false);
        co_return;
      }
      up.in.commit(n);
      deadline_.arm(timeouts().upstream, deadline::phase::upstream);
    }
    const int status = response->head().status;
    if (status >= 200) break;
    if (status == 101) {
      upstream_.reset();
      co_await refuse(
          refusal::upstream_unreachable(entry.host, "protocol upgrade is not supported here"),
          false);
      co_return;
    }
    co_await write_client(serialize_response_head(response->head()));
  }

  const message_head& head = response->head();
  const bool until_close = head.has_body && !head.chunked && !head.content_length;
  const bool keep_client = client_keep_alive && !until_close && !draining_;
  std::string out = serialize_response_head(head);
  if (!keep_client) out.insert(out.size() - 2, "Connection: close\r\n");
  exchange_.response_started = true;
  entry.status = head.status;

  if (response->message_done()) {
    if (!finish_exchange(head.status, true)) throw upstream_error("audit log write failed");
    co_await write_client(out);
  } else {
    co_await write_client(out);
    for (;;) {
      if (!up.in.empty()) {
        const auto r = response->feed(up.in.view());
        if (r.status == parse_status::error)
          throw upstream_error("malformed response body: " + response->error_reason());
        entry.bytes_in += r.consumed;
        const bool last = r.status == parse_status::message_complete;
        // The record is written before the response completes (DESIGN §7).
        if (last && !finish_exchange(head.status, true))
          throw upstream_error("audit log write failed");
        co_await write_client(up.in.view().substr(0, r.consumed));
        up.in.consume(r.consumed);
        if (last) break;
      }
      auto [ec, n] =
          co_await up.socket.async_read_some(asio::buffer(up.in.tail(), up.in.tail_size()), use_tuple);
      if (ec == asio::error::eof) {
        if (response->finish().status != parse_status::message_complete)
          throw upstream_error("upstream closed mid-response");
        if (!finish_exchange(head.status, true)) throw upstream_error("audit log write failed");
        upstream_.reset();
        break;
      }
      if (ec) throw upstream_error("upstream read failed: " + ec.message());
      up.in.commit(n);
      deadline_.arm(timeouts().upstream, deadline::phase::upstream);
    }
  }
  if (upstream_ && (!response->keep_alive() || !upstream_->in.empty())) upstream_.reset();
  keep_alive = keep_client;
}

asio::awaitable<bool> client_connection::refuse(const refusal& r, bool keep_alive) {
  auto& entry = exchange_.entry;
  const bool policy_refusal = is_policy_refusal(r);
  if (policy_refusal) entry.event = "refused";
  if (!r.rule.empty()) entry.rule = r.rule;
  finish_exchange(r.status, !policy_refusal, r.code);
  spdlog::debug("{} {} {} {}: {}", tag_, entry.method, entry.host, r.code, r.message);
  co_await write_client(render_refusal(r, entry.host, ctx_->session_id(), keep_alive));
  co_return keep_alive;
}

asio::awaitable<void> client_connection::write_client(std::string_view data) {
  auto [ec, n] = co_await asio::async_write(client_, asio::buffer(data.data(), data.size()), use_tuple);
  if (ec) throw boost::system::system_error(ec);
}

void client_connection::begin_exchange(std::string method) {
  exchange_ = exchange{};
  exchange_.entry.event = "request";
  exchange_.entry.method = std::move(method);
  exchange_.start = std::chrono::steady_clock::now();
  exchange_.active = true;
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
  const bool ok = ctx_->record(entry);
  if (!ok) spdlog::error("{} audit log write failed: {}", tag_, ctx_->audit_log().failure());
  return ok;
}

}  // namespace broker::proxy
