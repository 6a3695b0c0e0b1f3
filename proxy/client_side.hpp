// Where an exchange's request comes from and where its response goes: the seam between one
// http_exchange and the connection that carries it. An HTTP/1.1 connection (h1_client_side) is one
// such side; an HTTP/2 stream is another. The exchange never touches the client's bytes itself: it
// reads the request body in pieces, sends heads, body and refusals, and hands
// the connection over after a 101. What the connection does next is the exchange's result
// (next_step), not a flag it sets.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "base/asio.hpp"

namespace broker::http {
struct message_head;
struct header_field;
}  // namespace broker::http

namespace broker::live {
struct refusal;
}  // namespace broker::live

namespace broker::proxy {

class read_buffer;
class stream;

// What the client's connection does once an exchange is over.
enum class next_step {
  keep_alive,   // reads the next request
  close,        // ends: the client asked, the connection is draining, or its stream is out of step
  handed_over,  // ends: the exchange relayed the connection itself to its end (a WebSocket)
};

class client_side {
 public:
  virtual ~client_side() = default;

  // The connection may carry another request after this one (the client wants it, and nothing is
  // ending the connection).
  virtual bool keep_alive() const = 0;
  // The request body comes framed as HTTP/1.1 frames it, so its bytes can go up as they are.
  virtual bool carries_wire() const = 0;
  // The connection writes the session's staged audit records before anything it sends, so an
  // exchange's record may be staged (audit_log::stage) rather than written at once.
  virtual bool flushes_records() const = 0;
  // The exchange's record was staged: what the connection sends next waits for it to be written.
  virtual void record_staged() = 0;

  // The next piece of the request body, valid until the next call. `data` holds its bytes with
  // any framing taken off when `decode` is set (or the side has no framing); `wire` the same
  // bytes as the client framed them, on a side that carries_wire(). Throws body_error when the
  // body is malformed or the client ends mid-body.
  struct body_piece {
    std::string_view data;
    std::string_view wire;
    bool last = false;
  };
  virtual asio::awaitable<body_piece> read_body(bool decode) = 0;
  // The whole request body is here, at most `bytes` of it, none read yet: reading it never waits
  // for the client (nor does learning that the client reset its stream).
  virtual bool body_here(std::size_t bytes) const = 0;

  // An interim (1xx) response, passed on at once.
  virtual asio::awaitable<void> send_interim(const http::message_head& head) = 0;
  // The final response's head; `complete` when no body follows. A side may hold the head back to
  // send it with the first body bytes (flush() sends what it holds).
  virtual asio::awaitable<void> send_head(const http::message_head& head, bool keep_alive,
                                          bool complete) = 0;
  // Body bytes, framed by the side as the head it sent says; `last` ends the body.
  virtual asio::awaitable<void> send_body(std::string_view data, bool last) = 0;
  // Body bytes already framed as HTTP/1.1 frames them under the head sent (the upstream's own
  // framing, passed through); only on a side that carries_wire().
  virtual asio::awaitable<void> send_wire(std::string_view framed) = 0;
  // Trailer fields after the body's last bytes: the response's end. A side that cannot carry
  // them ends the body without them.
  virtual asio::awaitable<void> send_trailers(const std::vector<http::header_field>& fields) = 0;
  virtual asio::awaitable<void> flush() = 0;

  // A refusal (docs/cli.md) as the whole response.
  virtual asio::awaitable<void> send_refusal(const live::refusal& r, std::string_view host,
                                             std::string_view session, bool keep_alive) = 0;

  // The connection, taken over for a WebSocket the upstream agreed to with `head` (a 101): the
  // client told so, then its byte stream and what it already sent behind the request; nullopt
  // when this side cannot be taken over.
  struct raw_connection {
    stream& io;
    read_buffer& in;
  };
  virtual asio::awaitable<std::optional<raw_connection>> accept_websocket(
      const http::message_head& head) = 0;
};

}  // namespace broker::proxy
