// An MCP request's body judged whole before anything of it goes upstream (docs/policy.md, "MCP"):
// what the exchange does with it, and what its record says of the call.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcp/approvals.hpp"
#include "mcp/call_rules.hpp"
#include "mcp/pins.hpp"

namespace broker::mcp {

// What the record says of an MCP request (docs/audit-log.md): its first call.
struct call_record {
  std::string method;
  call_kind kind = call_kind::other;
  std::string target;            // the tool or prompt name, or the resource URI
  std::string arguments_sha256;  // of a tools/call's arguments as parsed, compact; "" for none
  std::size_t messages = 0;      // in the body (more than one: a batch)
  // The request's id as compact JSON, for reading its answer's outcome; "" for a batch or a
  // notification.
  std::string id;
};

// The one call of a refused request that a person may be asked about, as the ask shows it.
struct asked_call {
  call_kind kind = call_kind::other;
  std::string method;
  std::string target;
  nlohmann::json arguments;  // a tools/call's, as the client sent them; else null
  // A tool refused by its pin (pins.hpp): the fields that changed ("not in the pins file" for
  // one a team's file lacks), and its last listing (pin_store::latest, "" when never listed),
  // which an approval for the session accepts.
  bool pin = false;
  std::vector<std::string> changed;
  std::string shown;
};

struct judged_request {
  // Not JSON-RPC the broker can read: why (the exchange answers 400 bad_request).
  std::string unreadable;
  // A call refused: the whole request is. The rule and sentence of the first refused call, and
  // the JSON-RPC body answering the client's requests (each refused call with its own reason,
  // the others of a batch as refused with it); `answer` is empty when the body held no request
  // to answer (only notifications), and the exchange answers with the HTTP refusal instead.
  bool refused = false;
  std::string rule;
  std::string why;
  std::string answer;
  call_record record;
  // Set when the refusal may be asked about (call_rules.hpp, "on_change": "ask"): the request is
  // one call (not a batch), and its refusal is askable.
  std::optional<asked_call> ask;
};

// The JSON-RPC answer of a refused request again, as refused for `error` (docs/cli.md) with
// `prefix` before each message: what a person's denial of the ask answers.
std::string answer_as(const judged_request& judged, const std::string& error,
                      const std::string& prefix);

// With `pins`, a call of a tool that changed since the session first listed it (pins.hpp) is
// refused too, its rule the first scope's "<rule>.mcp.pins". With `approved`, the calls a person
// approved for the session on `pins->server` pass where their refusal was askable.
judged_request judge_request(std::string_view body, const scopes& rules,
                             const server_pins* pins = nullptr,
                             const call_approvals* approved = nullptr);

}  // namespace broker::mcp
