// MCP's JSON-RPC 2.0 messages (docs/policy.md, "MCP"), read strictly enough that the broker and
// the server cannot read one differently: a body with a duplicate key anywhere, nesting deeper
// than max_depth, or anything but UTF-8 JSON is not read at all (the exchange refuses it).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace broker::mcp {

// Deeper JSON is refused: no MCP message needs it, and every reader's stack stays small.
inline constexpr int max_depth = 64;
// A client's POST body, or a server's JSON answer, read whole (a tool call may carry a file).
inline constexpr std::size_t max_message_bytes = 16 * 1024 * 1024;

// What a client's message asks for, where the rules look (mcp/call_rules.hpp).
enum class call_kind {
  tool,      // tools/call: `target` is the tool's name
  resource,  // resources/read: `target` is the URI
  prompt,    // prompts/get: `target` is the prompt's name
  other,     // initialize, tools/list, ping, notifications, responses to the server...
};

// "tool", "resource", "prompt"; "" for other.
std::string_view kind_name(call_kind kind);

struct client_message {
  nlohmann::json id;   // a request's id (string or number); null for a notification or response
  std::string method;  // "" for a response to a server's request
  call_kind kind = call_kind::other;
  std::string target;
  nlohmann::json arguments;  // tools/call's "arguments" (an object), else null
  // Set when the message is a call whose params the broker cannot read (a tool name that is
  // not a string): such a call is refused, never guessed at.
  std::string unreadable;
  bool request() const { return !id.is_null() && !method.empty(); }
};

struct client_body {
  bool batch = false;  // a JSON array of messages
  std::vector<client_message> messages;
};

// A client's POST body: one message or a batch. nullopt, with `why`, when it is not JSON-RPC 2.0
// the broker can read (see above; also an empty batch, a message that is not an object or has
// no "jsonrpc": "2.0", an id that is neither string nor number).
std::optional<client_body> read_client_body(std::string_view body, std::string& why);

// A JSON document parsed as read_client_body parses (duplicate keys, depth, UTF-8); nullopt
// with `why` otherwise. For what servers send.
std::optional<nlohmann::json> parse_strict(std::string_view text, std::string& why);

// The JSON-RPC error answering a refused request (docs/policy.md): code -32001, the message, and
// data {"error": code, "rule": rule}.
nlohmann::json refusal(const nlohmann::json& id, const std::string& message,
                       const std::string& error, const std::string& rule);

}  // namespace broker::mcp
