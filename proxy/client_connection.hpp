// One client connection: reads request heads, and per request either opens a CONNECT tunnel
// or forwards an absolute-form http:// request (keep-alive on both sides, bodies streamed).
// The forwarding half lives in http_forward.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "proxy/asio.hpp"
#include "proxy/deadline.hpp"
#include "proxy/http_parser.hpp"
#include "proxy/proxy_context.hpp"
#include "proxy/read_buffer.hpp"
#include "proxy/refusal.hpp"

namespace broker::proxy {

class client_connection {
 public:
  client_connection(tcp::socket socket, std::shared_ptr<proxy_context> ctx);

  // Serves the connection to its end. Never throws for client or upstream behaviour.
  asio::awaitable<void> run();
  // Ask the connection to end: at once if it waits for a request, after the current one if not;
  // with `now`, at once whatever it is doing (its exchange is audited as cut short). Must run on
  // the connection's executor.
  void drain(bool now);
  asio::any_io_executor executor() { return client_.get_executor(); }
  const std::string& tag() const { return tag_; }

 private:
  struct upstream_connection {
    tcp::socket socket;
    std::string host;
    std::uint16_t port;
    read_buffer in;
  };
  // The request in flight, so a deadline that fires mid-exchange can still answer and audit it.
  struct exchange {
    audit_entry entry;
    std::chrono::steady_clock::time_point start;
    bool active = false;
    bool response_started = false;
  };
  enum class head_result { ok, closed, refused };

  asio::awaitable<void> serve();
  asio::awaitable<head_result> read_request_head(http_parser& parser, bool first);
  asio::awaitable<void> handle_connect(const message_head& head);
  asio::awaitable<bool> handle_forward(http_parser& request);
  asio::awaitable<bool> exchange_with_upstream(http_parser& request, const std::string& head);
  asio::awaitable<void> pump_request_body(http_parser& request, bool& done);
  asio::awaitable<void> relay_response(const std::string& method, bool client_keep_alive,
                                       bool& keep_alive);
  asio::awaitable<bool> refuse(const refusal& r, bool keep_alive);
  asio::awaitable<void> write_client(std::string_view data);
  bool finish_exchange(int status, bool allowed, const std::string& error = {});
  void begin_exchange(std::string method);
  double elapsed_ms() const;
  void arm_for_dial();
  const proxy::timeouts& timeouts() const { return ctx_->options().timeouts; }

  tcp::socket client_;
  std::shared_ptr<proxy_context> ctx_;
  std::string tag_;
  read_buffer in_;
  deadline deadline_;
  std::optional<upstream_connection> upstream_;
  exchange exchange_;
  bool draining_ = false;
  bool cut_short_ = false;
};

}  // namespace broker::proxy
