// An exchange's client side on an HTTP/1.1 connection: the request body read through the
// connection's parser from its buffer, the response serialized and framed on its stream (a body
// the upstream framed goes through as it came), the head held back to leave in one write with the
// first body bytes.
#pragma once

#include <memory>
#include <string>

#include "http/parser.hpp"
#include "live/live_session.hpp"
#include "live/timeouts.hpp"
#include "proxy/client_side.hpp"
#include "proxy/read_buffer.hpp"
#include "proxy/stream.hpp"

namespace broker::proxy {

class h1_client_side final : public client_side {
 public:
  // All of it belongs to the connection and outlives this side (`ctx` is the connection's, which
  // a gateway rebinds per request). `draining`: the connection ends after the current exchange.
  h1_client_side(stream& client, read_buffer& in, live::connection_deadline& timer,
                 const std::shared_ptr<live::live_session>& ctx, const bool& draining)
      : client_(client), in_(in), timer_(timer), ctx_(ctx), draining_(draining) {}

  // The request whose head `request` holds is the next exchange's (its body still to read).
  void start(http::parser& request);
  // Consumes the last body piece handed out; the connection calls it before reading on.
  void end();

  bool keep_alive() const override;
  bool carries_wire() const override { return true; }
  bool flushes_records() const override { return false; }
  void record_staged() override {}  // never: records are written at once here
  asio::awaitable<body_piece> read_body(bool decode) override;
  bool body_here(std::size_t bytes) const override;
  asio::awaitable<void> send_interim(const http::message_head& head) override;
  asio::awaitable<void> send_head(const http::message_head& head, bool keep_alive,
                                  bool complete) override;
  asio::awaitable<void> send_body(std::string_view data, bool last) override;
  asio::awaitable<void> send_wire(std::string_view framed) override;
  // HTTP/1.1 clients get the body's end without the fields (as an HTTP/1.1 upstream's trailers
  // never reach them either).
  asio::awaitable<void> send_trailers(const std::vector<http::header_field>&) override {
    co_await send_body({}, true);
  }
  asio::awaitable<void> flush() override;
  asio::awaitable<void> send_refusal(const live::refusal& r, std::string_view host,
                                     std::string_view session, bool keep_alive) override;
  asio::awaitable<std::optional<raw_connection>> accept_websocket(
      const http::message_head& head) override;

 private:
  stream& client_;
  read_buffer& in_;
  live::connection_deadline& timer_;
  const std::shared_ptr<live::live_session>& ctx_;
  const bool& draining_;
  http::parser* request_ = nullptr;
  std::size_t lent_ = 0;  // bytes of in_ the last body piece points into
  std::string decoded_;
  bool chunked_ = false;  // the response head sent says chunked
  std::string wire_;      // a head held back, then framed body bytes; none once written
};

}  // namespace broker::proxy
