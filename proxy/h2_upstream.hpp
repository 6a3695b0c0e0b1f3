// An HTTP/2 connection to an upstream (ALPN h2; docs/architecture.md), shared by the exchanges of
// one worker: each exchange gets a stream of it as its upstream_side. One reader feeds what the
// upstream sends to an h2_client_session, one writer sends what the session has to say; both run
// on the worker's thread while the connection is alive, and the pool (upstream_pool) keeps it for
// the next stream while it can take one. A stream let go of before its response ended is reset
// (CANCEL); the upstream's reset or the connection's end reaches the exchange as an error.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "base/asio.hpp"
#include "http/h2_client_session.hpp"
#include "proxy/upstream_connection.hpp"
#include "proxy/upstream_side.hpp"

namespace broker::proxy {

class h2_upstream final : public std::enable_shared_from_this<h2_upstream>,
                          private http::h2_client_session::handler {
 public:
  // `conn`: TLS done, h2 chosen.
  explicit h2_upstream(std::unique_ptr<upstream_connection> conn);
  ~h2_upstream() override;
  h2_upstream(const h2_upstream&) = delete;
  h2_upstream& operator=(const h2_upstream&) = delete;

  // Starts its reader and writer (they hold the connection until it ends).
  void start();
  const std::string& key() const { return conn_->key; }
  // Another stream may start on it now.
  bool can_start() const { return !closed_ && session_.can_start(); }
  bool closed() const { return closed_; }
  // No stream is open; since when.
  bool idle() const { return streams_.empty(); }
  std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }
  // Ends the connection (the streams open on it get an error).
  void close();
  // A stream for one exchange, to start with its send_head(); null when none can start.
  std::unique_ptr<upstream_side> open_stream();

 private:
  class stream_side;

  void on_response(std::int32_t id, http::message_head head, bool end_stream) override;
  void on_data(std::int32_t id, std::string_view data, bool last) override;
  void on_trailers(std::int32_t id, std::vector<http::header_field> fields) override;
  void on_reset(std::int32_t id, std::uint32_t error_code) override;

  asio::awaitable<void> reader();
  asio::awaitable<void> writer();
  void wake_writer();
  // The connection ended: every open stream hears of it.
  void end(const std::string& why);

  std::unique_ptr<upstream_connection> conn_;
  http::h2_client_session session_;
  std::map<std::int32_t, stream_side*> streams_;  // open streams with a request sent
  asio::steady_timer writer_wake_;
  std::chrono::steady_clock::time_point idle_since_;
  bool closed_ = false;
};

}  // namespace broker::proxy
