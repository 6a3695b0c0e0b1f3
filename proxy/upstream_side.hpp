// Where an exchange's request goes and where its response comes from: the seam between one
// http_exchange and the upstream that answers it, the counterpart of client_side. A pooled
// HTTP/1.1 connection (h1_upstream_side) is one such side; a stream of a pooled HTTP/2 connection
// is another. The exchange never touches the upstream's bytes itself: it sends the head and the
// body in pieces, reads the response head and its body in pieces, and gives the side back when
// the response came whole. Letting go of a side before then ends what it carried (an HTTP/1.1
// connection is closed, an HTTP/2 stream reset).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/asio.hpp"
#include "base/deadline.hpp"
#include "config/policy.hpp"
#include "http/message.hpp"
#include "live/timeouts.hpp"
#include "proxy/client_side.hpp"
#include "session/audit_record.hpp"

namespace broker::proxy {

class upstream_pool;

class upstream_side {
 public:
  virtual ~upstream_side() = default;

  // The exchange the side now carries: its deadline, re-armed for `silence` whenever the upstream
  // sends something, and its record, where the bytes each way are counted.
  void bind(live::connection_deadline& timer, std::chrono::steady_clock::duration silence,
            session::audit_entry& counts) {
    timer_ = &timer;
    silence_ = silence;
    counts_ = &counts;
  }

  // Body bytes go up and come down framed as HTTP/1.1 frames them, so a client side that
  // carries_wire() too can pass them through as they are.
  virtual bool carries_wire() const = 0;

  // The request's head as the brokers left it (`target` is its request-target), to `dest`;
  // `websocket` when it asks for an upgrade. An error before any of the response: nothing was
  // answered, the exchange may refuse.
  virtual asio::awaitable<error_code> send_head(const http::message_head& head,
                                                const std::string& target,
                                                const config::destination& dest, bool https,
                                                bool websocket) = 0;
  // Request body bytes, framed by the side as the head it sent says; `last` ends the body.
  virtual asio::awaitable<error_code> send_body(std::string_view data, bool last) = 0;
  // Request body bytes already framed as HTTP/1.1 frames them (the client's own framing, passed
  // through); only on a side that carries_wire().
  virtual asio::awaitable<error_code> send_wire(std::string_view framed) = 0;

  // The next response head (interim ones too): `head` (the side's, valid until the next call),
  // or why there is none.
  struct response_head {
    enum class failure { none, abandoned, malformed, closed };
    http::message_head* head = nullptr;
    bool complete = false;  // no body follows
    failure failed = failure::none;
    std::string detail;  // what was malformed
  };
  virtual asio::awaitable<response_head> read_head(const std::string& method) = 0;
  // Whether read_body() has bytes to give without waiting for the upstream.
  virtual bool has_buffered() const = 0;
  // The next piece of the response body, valid until the next call: `data` without framing when
  // `decode` is set (or the side has none), `wire` as the upstream framed it on a side that
  // carries_wire(). `at_close`: a body delimited by the upstream's close ended (no framing
  // bytes to pass on). `trailers`: the fields that ended the body, if any (with `last`). Throws
  // upstream_error when the body is malformed or cut short.
  struct body_piece {
    std::string_view data;
    std::string_view wire;
    bool last = false;
    bool at_close = false;
    const std::vector<http::header_field>* trailers = nullptr;
  };
  virtual asio::awaitable<body_piece> read_body(bool decode) = 0;

  // After a response read whole: the side may carry another request.
  virtual bool reusable() = 0;
  // Back to the pool for the next exchange (only when reusable()).
  virtual void give_back(upstream_pool& pool) = 0;
  // The connection, taken over for a WebSocket after a 101; nullopt when this side cannot be.
  virtual std::optional<client_side::raw_connection> raw() = 0;

 protected:
  void heard_from_upstream() {
    if (timer_) timer_->arm(silence_, live::waiting_for::upstream);
  }
  void count_in(std::size_t n) {
    if (counts_) counts_->bytes_in += n;
  }
  void count_out(std::size_t n) {
    if (counts_) counts_->bytes_out += n;
  }

 private:
  live::connection_deadline* timer_ = nullptr;
  std::chrono::steady_clock::duration silence_{};
  session::audit_entry* counts_ = nullptr;
};

}  // namespace broker::proxy
