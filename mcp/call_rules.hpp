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
};

call_verdict judge_call(const client_message& m, const scopes& rules);

// A name or URI as a refusal shows it: cut at 128 bytes (not inside a UTF-8 sequence), control
// bytes as '?'.
std::string shown_name(std::string_view name);

// Whether a tool of this name may be called at all (its arguments aside): what a tools/list
// answer keeps.
bool tool_listed(std::string_view name, const scopes& rules);

}  // namespace broker::mcp
