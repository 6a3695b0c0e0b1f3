// An exchange's response half: interim heads passed on, the final head, then the body down to
// the client as it arrives (a 101 goes on to a websocket_relay). With brokered credentials in the
// session the body is decoded on the way and has real values replaced by their dummies across
// chunk and read boundaries, then framed again (same length, same coding); LLM usage is metered
// from it. It carries its exchange's state (the upstream, the plan, the record) and writes the
// record before the response completes (docs/audit-log.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.hpp"
#include "live/refusal.hpp"
#include "proxy/client_side.hpp"
#include "proxy/upstream_side.hpp"

namespace broker::mcp {
struct call_outcome;
}  // namespace broker::mcp

namespace broker::brokers {
class scrub_index;
}

namespace broker::session {
class llm_usage_meter;
}

namespace broker::proxy {

class http_exchange;
struct exchange_state;

class response_relay {
 public:
  // The exchange's response half: its steps, and its state (http_exchange::state()).
  explicit response_relay(http_exchange& ex);

  // The response to the request (its `method`) relayed; what the client's connection does next.
  asio::awaitable<next_step> run(const std::string& method, bool client_keep_alive);

 private:
  // Up to the final response's head (or a 101's), interim (1xx) responses passed on; no head
  // when the exchange ended first (answered with a refusal, or abandoned).
  asio::awaitable<upstream_side::response_head> read_final_head(const std::string& method);
  // A body a credential step rewrites whole (an OAuth token response's new tokens become
  // dummies): read decoded, at most `limit` bytes, and sent with its new length. False when its
  // record could not be written: the client got 503 audit_unavailable instead.
  asio::awaitable<bool> relay_rewritten_body(http::message_head& head, std::size_t limit,
                                             bool keep_client);
  // An MCP server's event stream, filtered as it passes (relay_body), so sent chunked
  // (reframe_as_chunked): its length changes.
  bool mcp_event_stream(const http::message_head& head) const;
  static void reframe_as_chunked(http::message_head& head);
  // How much of the response is read whole before any goes on (a credential step rewrites it,
  // or it is an MCP server's JSON answer); 0: it streams.
  std::size_t whole_body_limit(const http::message_head& head) const;
  // An MCP server's JSON answer, its tools/list results filtered (mcp/answer_filter.hpp); throws
  // mcp::unreadable_answer.
  void filter_mcp_answer(std::string& body);
  // How many tools a tools/list answer lost, and the tools that changed since pinned (hidden, or
  // kept to be asked about at their calls), into the record.
  void note_tools_hidden(std::size_t n, const std::vector<std::string>& changed);
  // What the server's answer said of the request, into the record.
  void note_outcome(const mcp::call_outcome& o);
  // A coded body cannot be scrubbed: whether the response has one and must be refused.
  bool coded_body_refused(const http::message_head& head) const;
  // The refusals run() may end with, each in a frame of its own that ends with it: run()'s frame
  // lives as long as the response, a streamed answer's for minutes.
  asio::awaitable<next_step> refuse_coded_body(const http::message_head& head);
  asio::awaitable<next_step> refuse_unrecorded();
  // LLM API answers are metered as they pass (docs/audit-log.md llm_tokens); errors carry no usage.
  std::optional<session::llm_usage_meter> usage_meter(const http::message_head& head) const;
  asio::awaitable<void> relay_body(const http::message_head& head, session::llm_usage_meter* meter);
  // A response body on its way down, and its buffers.
  struct body_relay;
  // One piece of the body to the client: metered, recorded at the end, scrubbed.
  asio::awaitable<void> relay_piece(body_relay& b, const upstream_side::body_piece& piece);
  // The finished meter's tokens into the record and the budget.
  void account_llm_usage(session::llm_usage_meter& meter);
  // Real values (and the exchange's rewritten header values) back to what the client knows.
  void scrub_head(http::message_head& head) const;
  // The same for trailer fields.
  void scrub_fields(std::vector<http::header_field>& fields) const;
  static void scrub_fields(std::vector<http::header_field>& fields,
                           const brokers::scrub_index& index);

  http_exchange& ex_;
  exchange_state& s_;
};

}  // namespace broker::proxy
