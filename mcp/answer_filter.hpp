// What an MCP server sends, on its way to the client (docs/policy.md, "MCP"): a tools/list result
// loses the tools the rules do not allow, so the model never sees them. Servers answer a POST
// with one JSON document or with a text/event-stream whose events carry messages, and push
// messages on a GET's event stream; each is read as it comes.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mcp/call_rules.hpp"
#include "mcp/pins.hpp"

namespace broker::mcp {

// What a server's answer says of one request (docs/audit-log.md, the record's mcp.outcome): "ok"
// (a result; for tools/call, one without "isError": true), "tool_error" (a tools/call result
// with "isError": true) or "error" (a JSON-RPC error, its code).
struct call_outcome {
  std::string outcome;
  std::optional<long long> code;
};

// The outcome `message` (or a batch's array) gives the request whose id is `id` (compact JSON);
// nullopt when it holds no answer to it.
std::optional<call_outcome> outcome_in(const nlohmann::json& message, std::string_view id);

// A message (or a batch's array of them): each tools/list result (a "result" whose "tools" is
// an array) keeps only the tools tool_listed allows and, with `pins`, that have not changed since
// the session first listed them (pins.hpp) unless the rules ask about changes (asks_on_change);
// each changed one is noted in `changed` as "name (description, inputSchema)". Returns how many
// tools it removed.
std::size_t filter_tools(nlohmann::json& message, const scopes& rules,
                         const server_pins* pins = nullptr,
                         std::vector<std::string>* changed = nullptr);

// Whether a message's text could hold a tools/list result: its key "tools" appears as such, or
// the text has a \u escape (which could spell it). Text that cannot is passed without parsing.
bool may_list_tools(std::string_view text);

// A whole JSON answer: nullopt when it goes as it is, else its rewritten text. Throws
// unreadable_answer when it could list tools but is not JSON the broker reads (messages.hpp).
std::optional<std::string> filter_json_answer(std::string_view body, const scopes& rules,
                                              const server_pins* pins = nullptr,
                                              std::vector<std::string>* changed = nullptr);

// The outcome a whole JSON answer gives the request `id` (outcome_in); nullopt when it gives
// none or is not JSON the broker reads (an answer only recorded, never refused for it).
std::optional<call_outcome> json_answer_outcome(std::string_view body, std::string_view id);

struct unreadable_answer : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An event stream filtered event by event: each event goes on whole when its blank line has
// come (SSE clients act on nothing before), as it came unless its data is a tools/list result,
// which is written again (its other fields as they were, one data line). An event whose data could
// list tools but is not JSON the broker reads is dropped. Memory: one event, at most
// max_message_bytes (more throws unreadable_answer).
class sse_filter {
 public:
  // Keeps its own copies of the rules' list (the rules themselves belong to the policy) and of
  // `pins` (the store belongs to the session).
  // `watch`: the id (compact JSON) of the request the stream answers, whose outcome() it reads;
  // "" for none (a GET's stream).
  explicit sse_filter(scopes rules, std::optional<server_pins> pins = std::nullopt,
                      std::string watch = {})
      : rules_(std::move(rules)), pins_(std::move(pins)), watch_(std::move(watch)) {}

  // Appends to `out` the events `piece` completes.
  void feed(std::string_view piece, std::string& out);
  // End of stream: an event not ended by a blank line goes as it came would (SSE clients drop
  // it; so does this).
  void finish(std::string& out);
  std::size_t removed() const { return removed_; }
  // The changed tools it met so far: dropped, or kept where changes are asked about (filter_tools).
  const std::vector<std::string>& changed() const { return changed_; }
  // The watched request's outcome, once an event answered it.
  const std::optional<call_outcome>& outcome() const { return outcome_; }

 private:
  // The event in pending_[begin, end): to `out`, filtered.
  void emit_range(std::size_t begin, std::size_t end, std::string& out);

  scopes rules_;
  std::optional<server_pins> pins_;
  std::vector<std::string> changed_;
  std::string watch_;
  std::optional<call_outcome> outcome_;
  std::string pending_;     // the current event's bytes so far
  std::size_t line_ = 0;    // where in pending_ the current line starts
  std::size_t search_ = 0;  // where the search for its end goes on
  std::size_t removed_ = 0;
};

}  // namespace broker::mcp
