// An exchange with its upstream, the request's half: the head and body go up while the response
// comes down (response_relay), both streamed (a small body already here goes up first). With
// brokered credentials in the session, the request body is decoded on the way and searched for
// values that must not leave (before any of their bytes does), then framed again (same length, same
// coding). A body under a Content-Encoding is searched through its decoding while its coded bytes
// go up as they came (body_search.cpp).
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/asio.hpp"
#include "proxy/client_side.hpp"

namespace broker::brokers {
struct request_context;
}  // namespace broker::brokers

namespace broker::http {
struct message_head;
}  // namespace broker::http

namespace broker::proxy {

class body_search;
class http_exchange;
struct exchange_state;
struct request_target;

class request_relay {
 public:
  // The exchange's request half: its steps, and its state (http_exchange::state()).
  explicit request_relay(http_exchange& ex);

  // The head up, then the body (held whole; small and all here, sent before the response is read;
  // else pumped while the response comes down); what the client's connection does next. Once the
  // request is wholly up, its fields are wiped and let go of (the response may stream for minutes).
  asio::awaitable<next_step> run(http::message_head& request, const std::string& target,
                                 const request_target& to, const brokers::request_context& where);

 private:
  // A write up failed before any of the response: the upstream is let go of, the client gets 502.
  asio::awaitable<next_step> refuse_unsent(const error_code& ec);
  // The body read whole (exchange_state::body) up after the head, then let go of; false when a
  // write failed.
  asio::awaitable<bool> send_whole_body();
  // A small request body that is all here (client_side::body_here) up before the response is
  // read; nullopt when it went, else how the exchange ended (its refusal).
  asio::awaitable<std::optional<next_step>> send_body_here(const brokers::request_context& where);
  // Any other request body pumped up while the response comes down.
  asio::awaitable<next_step> relay_while_pumping(const brokers::request_context& where,
                                                 bool client_keep_alive);
  void release_upstream();
  // What the request body is searched with when the session brokers credentials: let go of once
  // the body is through, while the response may stream on for minutes.
  struct body_scan_state;
  // What the body is searched with (nullptr: the session brokers no credential).
  std::unique_ptr<body_scan_state> body_scan(const brokers::request_context& where) const;
  // In a handler of what the pump or the response threw: the upstream let go of, and the
  // exception returned when it refuses the request body; anything else (a client gone, a failed
  // upstream, a cancellation) rethrown as it came.
  std::exception_ptr body_refusal();
  // A refused request body (`refused`, from body_refusal) answered as its refusal, or, once the
  // response has begun, the connection ended. In a frame of its own, since the pump's caller may
  // live as long as the response.
  asio::awaitable<next_step> refuse_body(std::exception_ptr refused, const body_scan_state* scan,
                                         const brokers::request_context& where);
  // The request body up, searched when `scan` is set; `scan` is reset once the body is through.
  asio::awaitable<void> pump_request_body(std::unique_ptr<body_scan_state>& scan, bool& done);
  // What a scanned request body reuses from one piece to the next.
  struct scan_buffers;
  // A piece decoded, searched and rewritten before it goes up; throws before a value goes up.
  asio::awaitable<void> pump_scanned_piece(const client_side::body_piece& piece,
                                           body_search& search, scan_buffers& b);
  // Request body bytes to the upstream (framed by it, or `framed` already); a failed write ends
  // the exchange.
  asio::awaitable<void> write_request_body(std::string_view data, bool last, bool framed = false);

  http_exchange& ex_;
  exchange_state& s_;
};

}  // namespace broker::proxy
