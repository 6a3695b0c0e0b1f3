// Each MCP call judged by the "mcp" of the allow rules that admitted its request (config/
// mcp_rules.hpp): a tools/call by its tool's name and arguments, resources/read by its URI,
// prompts/get by its name; every other method passes. A call must pass the rules of every layer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/policy_set.hpp"
#include "mcp/messages.hpp"

namespace broker::mcp {

using scopes = std::vector<config::verdict::mcp_scope>;

struct call_verdict {
  bool allowed = true;
  // The refusing part of a rule: "allow[2].mcp.tools.deny[0]", "allow[2].mcp.tools.allow" (the
  // name is in no allow glob), "allow[2].mcp.tools.arguments.create_issue./owner".
  std::string rule;
  std::string why;  // a sentence naming the call
  // A refusal a person may approve: every scope that refused it asks, and refused it for want
  // of an allow glob or by an argument check (a deny glob, or a call the broker cannot read,
  // is never asked about).
  bool askable = false;
};

// `approved`: a person approved this call's tool (or prompt, or resource) on its server for the
// session; the refusals they could approve no longer hold, a deny glob still does.
call_verdict judge_call(const client_message& m, const scopes& rules, bool approved = false);

// A name or URI as a refusal shows it: cut at 128 bytes (not inside a UTF-8 sequence), control
// bytes as '?'.
std::string shown_name(std::string_view name);

// A call's arguments as a person is shown them in an ask: pretty-printed (two spaces), the value
// of every member whose name says it holds a secret ("token", "secret", "password", "key",
// "auth", "cookie", "credential", any case, anywhere in the name) as "<redacted>", cut at
// `max_bytes` (not inside a UTF-8 sequence) with a note of what was left out. "" for null.
std::string shown_arguments(const nlohmann::json& arguments, std::size_t max_bytes = 4096);

// Whether a tool of this name may be called at all (its arguments aside), or asked about: what a
// tools/list answer keeps. A deny glob, or an allow list of a layer that does not ask, hides it.
bool tool_listed(std::string_view name, const scopes& rules);

// Whether a tool that changed since its pin is asked about ("on_change": "ask" in every scope, on
// a host no layer says "never" of) rather than hidden and refused.
bool asks_on_change(const scopes& rules);

}  // namespace broker::mcp
