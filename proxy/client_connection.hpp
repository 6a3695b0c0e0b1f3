// One client connection: reads request heads, and per request either opens a CONNECT tunnel,
// intercepts a CONNECT (TLS toward the client with a leaf for the host, then each request inside
// is forwarded like a plain one), or forwards an absolute-form http:// request. The halves live
// in interception.cpp (after CONNECT), http_forward.cpp (one request, policy and credentials)
// and message_relay.cpp (bodies and responses).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "http/parser.hpp"
#include "proxy/asio.hpp"
#include "proxy/deadline.hpp"
#include "proxy/held_bytes.hpp"
#include "proxy/proxy_context.hpp"
#include "proxy/read_buffer.hpp"
#include "proxy/refusal.hpp"
#include "proxy/stream.hpp"
#include "proxy/upstream_pool.hpp"
#include "session/log.hpp"

namespace broker::brokers {
class stream_scrubber;
}
namespace broker::session {
class llm_usage_meter;
enum class llm_api;
}  // namespace broker::session

namespace broker::proxy {

class client_connection {
 public:
  // `pool` belongs to the thread whose io_context owns `socket`.
  client_connection(tcp::socket socket, std::shared_ptr<proxy_context> ctx, upstream_pool& pool);

  // Serves the connection to its end. Never throws for client or upstream behaviour.
  asio::awaitable<void> run();
  // Ask the connection to end: at once if it waits for a request, after the current one if not;
  // with `now`, at once whatever it is doing (its exchange is audited as cut short). Must run on
  // the connection's executor.
  void drain(bool now);
  asio::any_io_executor executor() { return client_.get_executor(); }
  const session::log_tag& tag() const { return tag_; }

 private:
  // A request body read whole before anything of it goes upstream, and its share of the
  // process-wide allowance for such bodies.
  struct whole_body {
    std::string bytes;
    held_bytes hold;
  };
  // The request in flight, so a deadline that fires mid-exchange can still answer and audit it.
  struct exchange {
    audit_entry entry;
    std::chrono::steady_clock::time_point start;
    bool active = false;
    bool response_started = false;
    bool websocket = false;  // the request asked for Upgrade: websocket
    // The upstream connection may carry another request: its response was relayed whole.
    bool upstream_reusable = false;
    // Request header values the brokers rewrote: (as sent upstream, as the client sent them),
    // so that an upstream echoing one back is answered with the client's form.
    std::vector<std::pair<brokers::secret, std::string>> swapped;
    session::llm_api llm{};  // which LLM API the request calls, if any
    // What the credential brokers decided for the request, and what it still needs: the body
    // read whole first, a body rewriter while it streams.
    std::optional<brokers::request_plan> plan;
    std::optional<whole_body> body;
  };
  // After an intercepted CONNECT: every request on this connection goes to `dest`.
  struct interception {
    config::destination dest;
    std::string scheme;              // "https" after a TLS handshake, "http" for plain bytes
    std::optional<refusal> refused;  // decided at CONNECT time, answered to every request
  };
  // Where one request goes, once its target is known.
  struct request_target {
    config::destination dest;
    std::string scheme;
    std::string path_and_query;
    bool keep_after_refusal = false;
  };
  enum class head_result { ok, closed, refused };

  // Finds the process that opened this connection (wrap sessions), for the audit records.
  void attribute();
  asio::awaitable<void> serve();
  asio::awaitable<head_result> read_request_head(http::parser& parser, bool first);
  asio::awaitable<void> handle_connect(const http::message_head& head);
  // Charges a tunnel's bytes to the budget as they move; returns when a byte budget is spent.
  asio::awaitable<void> watch_tunnel_budget();
  asio::awaitable<bool> start_interception(const config::destination& dest,
                                           std::optional<refusal> refused);
  asio::awaitable<bool> handle_intercepted(http::parser& request);
  asio::awaitable<bool> handle_forward(http::parser& request);
  asio::awaitable<bool> forward_request(http::parser& request, const request_target& to);
  // Policy on host, port, method and path, then the budget: the refusal, if any.
  std::optional<refusal> admit(const config::policy_set& policy, const http::message_head& head,
                               const request_target& to);
  // The response will be scrubbed of real values, and of the header values the brokers
  // rewrote (`before`: the values as the client sent them) back to the client's form.
  void prepare_response_scrub(const std::vector<std::string>& before,
                              const http::message_head& head);
  asio::awaitable<bool> exchange_with_upstream(http::parser& request, std::string head,
                                               const brokers::request_context& where);
  void release_upstream();
  // Reads the whole request body into exchange_.body (scanned like a streamed one), as the
  // plan asks (at most need.limit decoded bytes). Returns the refusal when it cannot.
  asio::awaitable<std::optional<refusal>> read_whole_body(http::parser& request,
                                                          const brokers::request_context& where,
                                                          const brokers::whole_body_need& need);
  // Real values (and this exchange's rewritten header values) back to what the client knows.
  void scrub_head(http::message_head& head) const;
  asio::awaitable<void> pump_request_body(http::parser& request, brokers::stream_scrubber* scan,
                                          bool& done);
  asio::awaitable<void> relay_response(const std::string& method, bool client_keep_alive,
                                       bool& keep_alive);
  asio::awaitable<void> relay_body(http::parser& response, const http::message_head& head,
                                   std::string pending_head, session::llm_usage_meter* meter);
  // The finished meter's tokens into the record and the budget.
  void account_llm_usage(session::llm_usage_meter& meter);
  asio::awaitable<void> relay_websocket();
  asio::awaitable<bool> refuse(const refusal& r, bool keep_alive);
  // A 200 application/json answer made by the broker itself (request_plan::answer), audited.
  asio::awaitable<bool> answer_locally(const std::string& credential, const std::string& json,
                                       bool keep_alive);
  asio::awaitable<void> write_client(std::string_view data);
  bool finish_exchange(int status, bool allowed, const std::string& error = {});
  // A 429 budget_exhausted when the session's (or the host's) budget refuses one more request.
  std::optional<refusal> admit_by_budget(const std::string& host);
  void begin_exchange(std::string method);
  double elapsed_ms() const;
  void arm_for_dial();
  const proxy::timeouts& timeouts() const { return ctx_->options().timeouts; }

  stream client_;
  std::shared_ptr<proxy_context> ctx_;
  upstream_pool& pool_;
  session::log_tag tag_;
  read_buffer in_;
  deadline deadline_;
  std::unique_ptr<upstream_connection> upstream_;  // during one exchange
  std::optional<interception> intercept_;
  exchange exchange_;
  std::vector<brokers::scrub_pattern> scrub_patterns_;  // for the response in flight
  bool draining_ = false;
  bool cut_short_ = false;
  int owner_pid_ = 0;
  std::string owner_exe_;
};

}  // namespace broker::proxy
