#include "proxy/h1_request_loop.hpp"

#include "config/request_target.hpp"
#include "live/session_resolver.hpp"
#include "proxy/idle_read.hpp"

namespace broker::proxy {

asio::awaitable<h1_request_loop::outcome> h1_request_loop::serve(bool first,
                                                                 const interception* inside) {
  while (!c_.draining) {
    auto& parser = request_.emplace(http::parser::kind::request);
    if (co_await read_request_head(parser, first, inside) != head_result::ok)
      co_return outcome::closed;
    first = false;
    side_.start(parser);
    if (inside) {
      const auto next = co_await serve_inner(parser, *inside);
      side_.end();
      if (next != next_step::keep_alive) co_return outcome::closed;
      continue;
    }
    if (c_.listener_ctx->resolver()) {
      const auto bound = co_await bind_session(parser);
      if (bound == binding::refused_close) co_return outcome::closed;
      if (bound == binding::refused_keep) continue;
    }
    if (parser.head().method == "CONNECT") co_return outcome::connect;
    const auto next = co_await forward(parser);
    side_.end();
    if (next != next_step::keep_alive) co_return outcome::closed;
  }
  co_return outcome::closed;
}

asio::awaitable<h1_request_loop::head_result> h1_request_loop::read_request_head(
    http::parser& parser, bool first, const interception* inside) {
  if (first)
    c_.deadline.arm(c_.timeouts().head, live::waiting_for::client_head);
  else
    c_.deadline.arm(c_.timeouts().idle, live::waiting_for::client_idle);
  bool started = false;
  for (;;) {
    if (!c_.in.empty()) {
      if (!started && !first) c_.deadline.arm(c_.timeouts().head, live::waiting_for::client_head);
      started = true;
      const auto r = parser.feed(c_.in.view());
      c_.in.consume(r.consumed);
      if (r.status == http::parse_status::head_complete ||
          r.status == http::parse_status::message_complete)
        co_return head_result::ok;
      if (r.status == http::parse_status::error) {
        const auto why =
            parser.error() == http::parse_error::header_too_large
                ? live::refusal::header_too_large()
                : live::refusal::bad_request("malformed request: " + parser.error_reason());
        auto& ex = begin_exchange(parser.head().method);
        // Inside an intercepted CONNECT (or a captured connection): whose bytes they were.
        if (inside) ex.identify(inside->scheme, inside->dest, {});
        co_await ex.refuse(why, false);
        co_return head_result::refused;
      }
    }
    // Between requests the connection holds no buffer block (idle_read).
    auto [ec, n] = co_await read_idle(c_.client, c_.in);
    if (ec) co_return head_result::closed;  // EOF or reset before a whole head: nothing to answer
  }
}

asio::awaitable<h1_request_loop::binding> h1_request_loop::bind_session(
    const http::parser& request) {
  const auto& head = request.head();
  auto found = co_await c_.listener_ctx->resolver()->resolve(head);
  if (found.session) {
    if (found.session != c_.ctx) {
      exchange_.reset();  // it points at the context it ran in
      c_.ctx = std::move(found.session);
      c_.tag = session::log_tag(c_.ctx->session_id(), c_.id);
    }
    co_return binding::bound;
  }
  exchange_.reset();
  c_.ctx = c_.listener_ctx;
  c_.tag = session::log_tag(c_.ctx->session_id(), c_.id);
  const bool connect = head.method == "CONNECT";
  auto& ex = begin_exchange(head.method);
  if (connect) {
    ex.entry().event = "tunnel";
    if (auto where = config::parse_authority(head.target)) ex.identify({}, where->dest, {});
  } else if (auto uri = config::parse_absolute_uri(head.target)) {
    ex.identify(uri->scheme, uri->where.dest, uri->path_and_query);
  }
  // A request's unread body would be taken for the next head, so only a bodiless one keeps the
  // connection (the client may answer the 407 with credentials on it).
  const bool keep = !connect && request.keep_alive() && !head.has_body && !c_.draining;
  const live::refusal why = found.refused
                                ? *found.refused
                                : live::refusal::proxy_auth_required("no session for this request");
  co_await ex.refuse(why, keep);
  co_return keep ? binding::refused_keep : binding::refused_close;
}

namespace {

// What check_inner_request reads of an HTTP/1.1 request: its target carries scheme and authority.
inner_request inner_request_of(const http::message_head& head) {
  return {.method = head.method, .target = head.target, .host = head.find("host")};
}

}  // namespace

asio::awaitable<next_step> h1_request_loop::refuse_inner(const http::message_head& head,
                                                         const interception& inside,
                                                         bool keep_after_refusal) {
  const auto checked = check_inner_request(inside, inner_request_of(head));
  // What follows a CONNECT is the client's tunnel, never a request head: the connection ends.
  co_return co_await exchange_->refuse(std::get<live::refusal>(checked),
                                       keep_after_refusal && head.method != "CONNECT");
}

asio::awaitable<next_step> h1_request_loop::serve_inner(http::parser& request,
                                                        const interception& inside) {
  const http::message_head& head = request.head();
  auto& ex = begin_exchange(head.method);
  ex.identify(inside.scheme, inside.dest, head.target);
  const bool keep_after_refusal = request.keep_alive() && !head.has_body && !c_.draining;
  // The check's refusal is made and sent in a frame of its own: this one lives as long as the
  // response, a streamed answer's for minutes.
  auto path = inner_request_path(inside, inner_request_of(head));
  if (!path) co_return co_await refuse_inner(head, inside, keep_after_refusal);
  ex.entry().target = *path;
  // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
  const request_target to{inside.dest, inside.scheme, std::move(*path), keep_after_refusal};
  co_return co_await ex.forward(request.head(), to);
}

asio::awaitable<next_step> h1_request_loop::forward(http::parser& request) {
  const http::message_head& head = request.head();
  auto& ex = begin_exchange(head.method);
  ex.entry().target = head.target;
  // A refused request's body is not read, so the connection can only go on without one.
  const bool keep_after_refusal = request.keep_alive() && !head.has_body && !c_.draining;

  auto uri = config::parse_absolute_uri(head.target);
  if (!uri) {
    const bool origin_form = !head.target.empty() && head.target.front() == '/';
    ex.entry().target.clear();
    co_return co_await ex.refuse(
        live::refusal::bad_request(origin_form ? "this is a proxy: send an absolute-form URI "
                                                 "(http://host/path) or use CONNECT"
                                               : "malformed request target"),
        keep_after_refusal);
  }
  ex.identify(uri->scheme, uri->where.dest, uri->path_and_query);
  if (uri->scheme != "http")
    co_return co_await ex.refuse(
        live::refusal::bad_request(
            "only http:// URIs are forwarded; https:// goes through CONNECT"),
        keep_after_refusal);
  const std::string* host_header = head.find("host");
  if (host_header && !config::host_header_matches(*host_header, uri->where, 80))
    co_return co_await ex.refuse(
        live::refusal::host_mismatch("the Host header does not match the request URI's authority"),
        keep_after_refusal);
  // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
  const request_target to{uri->where.dest, "http", uri->path_and_query, keep_after_refusal};
  co_return co_await ex.forward(request.head(), to);
}

http_exchange& h1_request_loop::begin_exchange(std::string method) {
  exchange_.reset();
  auto& ex =
      exchange_.emplace(http_exchange::connection{side_, c_.deadline, *c_.ctx, c_.pool, c_.tag},
                        std::move(method), c_.holders);
  ex.entry().captured = c_.captured;
  return ex;
}

}  // namespace broker::proxy
