// One audited unit on a client connection, from policy to its record (docs/architecture.md,
// docs/audit-log.md): a request forwarded upstream (admit: policy, then budget → the credential
// plan → the body read whole when the plan asks → an upstream from the pool → the request body up
// while the response comes down, scrubbed and metered → the record, written before the response
// completes), or a tunnel, or a refusal. The connection reads heads and routes (client_connection,
// h1_request_loop, h2_connection); an exchange does the rest, reading the request body from and
// answering through its client_side (an HTTP/1.1 connection's, h1_client_side.hpp; an HTTP/2
// stream's). Its parts, each a type working on its exchange_state: this class (admit, plan,
// upstream, record), a whole_body_reader (a body read whole), a request_relay (the request head
// and body up), a response_relay (the response down) and after a 101 a websocket_relay.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/asio.hpp"
#include "base/deadline.hpp"
#include "brokers/credential_set.hpp"
#include "http/content_coding.hpp"
#include "http/parser.hpp"
#include "live/live_session.hpp"
#include "live/refusal.hpp"
#include "live/timeouts.hpp"
#include "proxy/client_side.hpp"
#include "proxy/held_bytes.hpp"
#include "proxy/upstream_pool.hpp"
#include "proxy/upstream_side.hpp"
#include "session/log.hpp"

namespace broker::mcp {
struct judged_request;
}  // namespace broker::mcp

namespace broker::brokers {
class stream_scrubber;
}
namespace broker::session {
class llm_usage_meter;
enum class llm_api;
}  // namespace broker::session

namespace broker::proxy {

class body_search;
using search_stop = std::variant<std::size_t, live::refusal>;

// Where one request goes, once its target is known.
struct request_target {
  config::destination dest;
  std::string scheme;
  std::string path_and_query;
  bool keep_after_refusal = false;  // a refused request leaves the connection usable
};

// What of its client connection an exchange uses; all of it outlives the exchange.
struct exchange_connection {
  client_side& client;  // where the request comes from and the response goes
  live::connection_deadline& timer;
  live::live_session& ctx;
  upstream_pool& pool;
  const session::log_tag& tag;
};

// A request body read whole before anything of it goes upstream, and its share of the
// process-wide allowance for such bodies.
struct whole_body {
  std::string bytes;
  held_bytes hold;
};

// What the exchange carries from its request to its record. Its parts work on it: the request
// half (this class), the response half (response_relay) and the WebSocket half
// (websocket_relay), each through state() and the steps below (refuse, finish, admit).
struct exchange_state {
  exchange_connection io;
  session::audit_entry entry;
  bool response_started = false;
  bool websocket = false;  // the request asked for Upgrade: websocket
  bool loopback = false;   // the destination is a loopback address (brokers::request_context)
  // The upstream connection may carry another request: its response was relayed whole.
  bool upstream_reusable = false;
  std::unique_ptr<upstream_side> upstream;
  std::vector<brokers::scrub_pattern> scrub_patterns;  // for the response (views into plan)
  session::llm_api llm{};                              // which LLM API the request calls, if any
  // What the credential brokers decided for the request, and what it still needs: the body
  // read whole first, a body rewriter while it streams.
  std::optional<brokers::request_plan> plan;
  std::optional<whole_body> body;  // read whole before the request went up (whole_body_reader)
  // The request body's content codings, searched through (docs/security-model.md); empty when it
  // has none or is not searched.
  std::vector<http::content_coding> body_codings;
  // The "mcp" of the rules that admitted the request (docs/policy.md, "MCP"): a POST's body is
  // judged as MCP's JSON-RPC before it goes up, and what the server answers is filtered on its
  // way down. Empty for every other request.
  std::vector<config::verdict::mcp_scope> mcp;
  // The MCP request's id (compact JSON) whose answer's outcome the record takes; "" for none.
  std::string mcp_call_id;
  // The MCP server the request goes to, as the session's pins name it.
  std::string mcp_server() const { return entry.host + ":" + std::to_string(entry.port); }
};

class http_exchange {
 public:
  using connection = exchange_connection;

  // Starts the exchange's clock; `client`: the processes holding the client socket (null when
  // unknown), the first of which is the record's pid and exe.
  http_exchange(connection io, std::string method,
                std::shared_ptr<const config::client_identity> client);
  ~http_exchange();
  http_exchange(const http_exchange&) = delete;
  http_exchange& operator=(const http_exchange&) = delete;

  // Forwards the request (its head read, its body still to read from the client side) to `to`,
  // answering the client.
  asio::awaitable<next_step> forward(http::message_head& head, const request_target& to);
  // Answers with the refusal and records it; keep_alive when `keep_alive`, else close.
  asio::awaitable<next_step> refuse(const live::refusal& r, bool keep_alive);
  // Writes the record once (later calls do nothing); false when the audit log failed.
  bool finish(int status, bool allowed, const std::string& error = {});
  // Whether the session takes one more request: 407 when it was revoked or has expired (a
  // gateway's), 429 budget_exhausted when its (or the host's) budget refuses.
  std::optional<live::refusal> admit_by_session(const std::string& host);
  // Then what other processes share (a gateway's budgets across replicas, one round trip).
  asio::awaitable<std::optional<live::refusal>> admit_shared(const std::string& host);
  // Keeps an earlier phase's deadline from cutting a dial short (dials bound their own steps).
  void arm_for_dial();

  session::audit_entry& entry() { return s_.entry; }
  exchange_state& state() { return s_; }
  const live::timeouts& timeouts() const { return s_.io.ctx.options().timeouts; }
  bool active() const { return active_; }
  void response_started(bool started) { s_.response_started = started; }
  // The CONNECT of an interception is no record of its own: the exchanges inside it are.
  void dismiss() { active_ = false; }
  // Who the record says the request was for: the scheme ("" for a tunnel or when unknown), the
  // destination, and the target (path and query) as the client sent it.
  void identify(std::string_view scheme, const config::destination& dest, std::string_view target);
  // The connection's deadline passed while the exchange waited for `what`: it is recorded as
  // cut short (`shutdown`), or as timed out; when the upstream was silent before any of the
  // response, the upstream is let go of and the refusal to answer with is returned (504).
  std::optional<live::refusal> expire(live::waiting_for what, bool shutdown);

 private:
  // Policy on host, port, method and path (a refusal a person may approve held while the
  // session asks), then the budget: the refusal, if any.
  asio::awaitable<std::optional<live::refusal>> admit(const config::policy_set& policy,
                                                      const http::message_head& head,
                                                      const request_target& to);
  // The request held until a person decides (docs/policy.md): nullopt when approved (the record's
  // rule then names the approval), else the refusal (403 approval_denied).
  asio::awaitable<std::optional<live::refusal>> ask_person(const config::destination& dest);
  // The body's codings checked (docs/security-model.md) and, when the plan asks, the body read
  // whole before anything goes up: the refusal when either fails.
  asio::awaitable<std::optional<live::refusal>> prepare_body(http::message_head& head,
                                                             const brokers::request_context& where);
  // What forward's checks leave for the send: the target as the brokers left it, where it goes,
  // the policy that admitted it, and whether the head and target now hold real values.
  struct forward_plan {
    std::string target;
    brokers::request_context where{};
    std::shared_ptr<const config::policy_set> policy;
    bool holds_real = false;
  };
  // forward's checks, in order: the audit, the head, policy and budgets, the brokers' plan, the
  // body. nullopt when the request goes up (`out` filled); else how the exchange ended (refused,
  // or answered by the broker itself).
  asio::awaitable<std::optional<next_step>> decide(http::message_head& head,
                                                   const request_target& to, forward_plan& out);
  // The request's upstream (s_.upstream), from the pool or dialed; nullopt when found, else how
  // the exchange ended (refused).
  asio::awaitable<std::optional<next_step>> find_upstream(const http::message_head& head,
                                                          const request_target& to,
                                                          const config::policy_set& policy);
  // A stream of a pooled HTTP/2 connection (`may_h2`), else an idle HTTP/1.1 connection (not for
  // gRPC); null when neither.
  std::unique_ptr<upstream_side> pooled_upstream(const std::string& key, bool may_h2, bool grpc);
  // A 200 application/json answer made by the broker itself (request_plan::answer), audited.
  asio::awaitable<next_step> answer_locally(const std::string& credential, const std::string& json,
                                            bool keep_alive);
  // The body read whole as an MCP request, judged by s_.mcp (mcp/request_judge.hpp): nullopt when
  // it goes on; else the exchange ends here, its calls answered as refused (a JSON-RPC error, or
  // the HTTP refusal when the body held no request to answer) or the body refused as unreadable.
  asio::awaitable<std::optional<next_step>> judge_mcp(bool keep_alive);
  // A POST on a host whose rule says "mcp": its body is read whole and judged (judge_mcp).
  bool carries_mcp_calls(const http::message_head& head) const;
  // A refused MCP call a person may approve, held on the session's ask desk: nullopt when
  // approved (it goes up), else the JSON-RPC answer to send ("" for the refusal as it was).
  asio::awaitable<std::optional<std::string>> ask_about_call(const mcp::judged_request& judged,
                                                             const std::string& server);
  // A 200 JSON answer of the broker's own, recorded first (as `allowed`, with `error`).
  asio::awaitable<next_step> send_json(const std::string& json, bool keep_alive, bool allowed,
                                       const std::string& error);
  double elapsed_ms() const;

  exchange_state s_;
  std::chrono::steady_clock::time_point start_;
  bool active_ = true;
  bool http2_allowed_ = true;  // no rule keeps the host on HTTP/1.1 ("http2": false)
};

}  // namespace broker::proxy
