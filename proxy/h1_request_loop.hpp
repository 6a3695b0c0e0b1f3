// The HTTP/1.1 request loop of one client connection (nghttpx's HttpsUpstream): reads each
// request head and serves it: an absolute-form http:// request is forwarded, a request inside an
// interception goes to the interception's target, and on a team gateway each request first binds
// the connection to the session its proxy credential names. A CONNECT goes back to the router
// (client_connection), which tunnels or intercepts it. Each request is one http_exchange, which
// carries it from policy to its audit record.
#pragma once

#include <optional>
#include <string>

#include "base/asio.hpp"
#include "http/parser.hpp"
#include "proxy/client_parts.hpp"
#include "proxy/h1_client_side.hpp"
#include "proxy/http_exchange.hpp"
#include "proxy/interception.hpp"

namespace broker::proxy {

class h1_request_loop {
 public:
  explicit h1_request_loop(client_parts& c) : c_(c) {}

  enum class outcome {
    closed,   // the connection ends: the client left, a refusal closed it, or it drains
    connect,  // a CONNECT: its head is connect_head(), its exchange in_flight()
  };
  // Serves requests until the connection ends or a CONNECT comes; `first`: no request has been
  // read since the connection (or the interception) began. `inside`: the interception the
  // requests are held to, if any.
  asio::awaitable<outcome> serve(bool first, const interception* inside);
  const http::message_head& connect_head() const { return request_->head(); }

  // The exchange for the request (or CONNECT) whose head was just read; the one before it ends.
  http_exchange& begin_exchange(std::string method);
  // The exchange in flight, so that a deadline that fires mid-exchange can still answer and
  // audit it; null when none is.
  http_exchange* in_flight() { return exchange_ ? &*exchange_ : nullptr; }
  void end_exchange() { exchange_.reset(); }

 private:
  enum class head_result { ok, closed, refused };
  enum class binding { bound, refused_keep, refused_close };

  asio::awaitable<head_result> read_request_head(http::parser& parser, bool first,
                                                 const interception* inside);
  // A team gateway's connection (docs/gateway.md): the session the request's proxy credential names
  // becomes the connection's; a missing or wrong one is refused (407) in the gateway's own log.
  asio::awaitable<binding> bind_session(const http::parser& request);
  // A request inside an interception, held to its target (check_inner_request).
  asio::awaitable<next_step> serve_inner(http::parser& request, const interception& inside);
  // Its refusal, made and answered in a frame of its own (inner_request_path).
  asio::awaitable<next_step> refuse_inner(const http::message_head& head,
                                          const interception& inside, bool keep_after_refusal);
  // An absolute-form http:// request (RFC 9112 §3.2.2): its URI read into the destination it
  // names, checked against its Host, and handed to its exchange.
  asio::awaitable<next_step> forward(http::parser& request);

  client_parts& c_;
  // What an exchange reads its request body from and answers through.
  h1_client_side side_{c_.client, c_.in, c_.deadline, c_.ctx, c_.draining};
  std::optional<http::parser> request_;
  std::optional<http_exchange> exchange_;
};

}  // namespace broker::proxy
