// An exchange's upstream over one HTTP/1.1 connection from the pool (upstream_side.hpp): the
// head serialized (a Host field for HTTP/1.0 clients, the upgrade fields for a WebSocket), the
// body framed as the head says (chunked for a body of unknown length, e.g. from an HTTP/2
// client), the response parsed from the connection's buffer. The connection goes back to the
// pool only after a response read whole with nothing unread behind it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "http/parser.hpp"
#include "proxy/upstream_pool.hpp"
#include "proxy/upstream_side.hpp"

namespace broker::proxy {

class h1_upstream_side final : public upstream_side {
 public:
  explicit h1_upstream_side(std::unique_ptr<upstream_connection> c);

  bool carries_wire() const override { return true; }
  asio::awaitable<error_code> send_head(const http::message_head& head, const std::string& target,
                                        const config::destination& dest, bool https,
                                        bool websocket) override;
  asio::awaitable<error_code> send_body(std::string_view data, bool last) override;
  asio::awaitable<error_code> send_wire(std::string_view framed) override;
  asio::awaitable<response_head> read_head(const std::string& method) override;
  bool has_buffered() const override { return !conn_->in.empty(); }
  asio::awaitable<body_piece> read_body(bool decode) override;
  bool reusable() override;
  void give_back(upstream_pool& pool) override;
  std::optional<client_side::raw_connection> raw() override;

 private:
  asio::awaitable<error_code> write(std::string_view bytes);
  // The bytes the last piece handed out were parsed from: let go of once it has been used.
  void consume_last_piece();

  std::unique_ptr<upstream_connection> conn_;
  bool chunked_ = false;  // the request body goes up chunked
  std::optional<http::parser> response_;
  std::size_t handed_out_ = 0;  // bytes of conn_->in the last piece views
  std::string framed_, decoded_;
};

// The request head as an HTTP/1.1 upstream gets it (`target` as its request-target); a body of
// unknown length (an HTTP/2 client's) gets Transfer-Encoding: chunked.
std::string upstream_head(const http::message_head& head, std::string_view target,
                          const config::destination& dest, bool https, bool websocket);

}  // namespace broker::proxy
