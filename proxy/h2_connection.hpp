// An intercepted connection whose client chose HTTP/2 (ALPN h2; docs/architecture.md). One reader
// feeds the client's bytes to an h2_server_session, one writer sends what the session has to say,
// and each stream is one http_exchange, driven through that stream's client_side (h2_stream): the
// same policy, brokers, checks, scrubbing, metering, budgets and record as a request on HTTP/1.1. A
// refusal is that stream's response; the other streams go on. A stream has a deadline of its own.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/asio.hpp"
#include "config/policy_set.hpp"
#include "http/h2_server_session.hpp"
#include "live/live_session.hpp"
#include "live/refusal.hpp"
#include "live/timeouts.hpp"
#include "proxy/interception.hpp"
#include "proxy/stream.hpp"
#include "proxy/upstream_pool.hpp"
#include "session/log.hpp"

namespace broker::proxy {

class http_exchange;

class h2_connection final : private http::h2_server_session::handler {
 public:
  struct setup {
    stream& client;  // TLS, handshake done, h2 chosen
    // The connection's watchdog: armed for idleness while no stream is open.
    live::connection_deadline& idle;
    std::shared_ptr<live::live_session> ctx;
    upstream_pool& pool;
    const session::log_tag& tag;
    // The CONNECT (or captured) target, and the refusal decided before the handshake, which
    // every stream then gets.
    const interception& target;
    bool captured = false;
    std::shared_ptr<const config::client_identity> holders;  // who holds the socket; null: unknown
  };

  explicit h2_connection(setup s);
  ~h2_connection() override;
  h2_connection(const h2_connection&) = delete;
  h2_connection& operator=(const h2_connection&) = delete;

  // Serves the connection until the client ends it, or the session drains it and its streams
  // are done. Never throws for the client's or an upstream's behaviour.
  asio::awaitable<void> run();
  // No new streams (GOAWAY); with `now`, the open ones end too (recorded as cut short).
  void drain(bool now);

 private:
  class h2_stream;

  void on_request(std::int32_t id, http::h2_request request, bool end_stream) override;
  void on_head_too_large(std::int32_t id) override;
  void on_data(std::int32_t id, std::string_view data, bool last) override;
  void on_trailers(std::int32_t id, std::vector<http::header_field> fields) override;
  void on_reset(std::int32_t id, std::uint32_t error_code) override;

  asio::awaitable<void> reader();
  asio::awaitable<void> writer();
  // One stream's exchange, from its checks to its record.
  asio::awaitable<void> serve_stream(std::shared_ptr<h2_stream> st);
  // What serve_stream ends with on a refused request or an expired deadline, each made outside
  // its frame, which lives as long as the response.
  static inner_request inner_request_of(const h2_stream& st);
  asio::awaitable<void> refuse_inner(http_exchange& ex, const h2_stream& st);
  void expire_stream(http_exchange& ex, h2_stream& st);
  void wake_writer();
  // The reader stops (the session has nothing more to read).
  void stop_reading();
  // A refusal as the stream's whole response: the JSON of docs/cli.md, or for a `grpc` call the
  // gRPC status clients show.
  void respond_refused(std::int32_t id, bool grpc, const live::refusal& r, std::string_view host,
                       std::string_view session);
  // The connection's deadline: idle while no stream is open, else the streams' own.
  void arm_idle();
  // Streams waiting for the client's window: what they gave may have left.
  void wake_senders();

  setup s_;
  http::h2_server_session session_;
  std::map<std::int32_t, std::shared_ptr<h2_stream>> streams_;
  asio::steady_timer writer_wake_;
  bool reading_done_ = false;
  bool records_staged_ = false;  // by a stream since the writer last flushed
  bool cut_short_ = false;
};

}  // namespace broker::proxy
