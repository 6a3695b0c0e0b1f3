// The plain-HTTP half of a client connection: an absolute-form http:// request is checked,
// forwarded in origin-form over a kept-alive upstream connection, its body and the response
// streamed as framed, and the exchange audited before the response's last bytes go out.
#include "proxy/client_connection.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>

#include "proxy/limits.hpp"
#include "proxy/race.hpp"
#include "proxy/target.hpp"
#include "proxy/upstream_dialer.hpp"

namespace broker::proxy {

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

asio::awaitable<void> hold_until_cancelled() {
  asio::steady_timer forever(co_await asio::this_coro::executor,
                             std::chrono::steady_clock::time_point::max());
  co_await forever.async_wait(use_tuple);
}

}  // namespace

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
    co_return co_await refuse(refusal::policy_denied(verdict.rule, entry.host), keep_after_refusal);

  const auto& dest = uri->where.dest;
  if (upstream_ && (upstream_->host != dest.host || upstream_->port != dest.port ||
                    !still_open(upstream_->socket)))
    upstream_.reset();
  if (!upstream_) {
    arm_for_dial();
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
    out.insert(line_end,
               "Host: " +
                   (default_port ? (dest.ip && !dest.ip->v4 ? "[" + dest.host + "]" : dest.host)
                                 : to_string(dest)) +
                   "\r\n");
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
          co_await refuse(refusal::upstream_unreachable(
                              entry.host, "malformed response: " + response->error_reason()),
                          false);
          co_return;
        }
      }
      auto [ec, n] = co_await up.socket.async_read_some(
          asio::buffer(up.in.tail(), up.in.tail_size()), use_tuple);
      if (ec == asio::error::operation_aborted) co_return;  // the request body failed first
      if (ec) {
        upstream_.reset();
        co_await refuse(
            refusal::upstream_unreachable(entry.host, "connection closed before a response"),
            false);
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
      auto [ec, n] = co_await up.socket.async_read_some(
          asio::buffer(up.in.tail(), up.in.tail_size()), use_tuple);
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

}  // namespace broker::proxy
