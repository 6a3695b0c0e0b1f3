// An allow rule's "mcp" (docs/policy.md, "MCP"): the broker reads the JSON-RPC of MCP servers on
// the rule's hosts and judges each call by these rules (mcp/call_rules.hpp). This is only what
// the policy says.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::config {

// Names (tools, prompts) or URIs (resources) as globs: '*' matches any run of characters, every
// other character itself (case-sensitive, as MCP names are).
struct mcp_names {
  // Absent: every name the deny list leaves; present: only these.
  std::optional<std::vector<std::string>> allow;
  std::vector<std::string> deny;  // wins over allow
};

// One constraint on a tool call's arguments: the value at `pointer` (RFC 6901, into the call's
// "arguments" object) exists and equals `equals`, or is a string matching `glob`.
struct mcp_argument_check {
  std::string pointer;              // "/owner", "/options/0/name"
  std::string equals;               // a JSON value, compact (nlohmann's dump); "" with `glob`
  std::optional<std::string> glob;  // a string matching this glob
};

// The checks for the tools whose names match `tool`; every one must hold.
struct mcp_tool_arguments {
  std::string tool;  // a glob
  std::vector<mcp_argument_check> checks;
};

// What a tool that changed since it was pinned (mcp/pins.hpp) gets: hidden from lists and its
// calls refused, or kept listed with each call asked about (a person approves it once, or accepts
// the tool as it now is for the session).
enum class mcp_on_change { deny, ask };

// A team's pins file ("pins": "FILE", made by `broker mcp pin URL`): each tool as it was pinned,
// its fields' digests in hex (mcp/pins.hpp). A listed tool that differs from its pin, or that the
// file lacks, is changed from the start of every session (then "on_change" decides).
struct mcp_tool_pin {
  std::string description;
  std::string input_schema;
  std::string annotations;
};
struct mcp_pins_file {
  std::string path;  // as the policy names it, resolved against the policy file's directory
  std::map<std::string, mcp_tool_pin, std::less<>> tools;
};

struct mcp_rules {
  int line = 0;
  mcp_on_change on_change = mcp_on_change::deny;
  std::optional<mcp_pins_file> pins;
  mcp_names tools;
  std::vector<mcp_tool_arguments> arguments;  // under "tools": {"arguments": {...}}
  mcp_names resources;                        // resources/read URIs
  mcp_names prompts;                          // prompts/get names
};

// A name, URI or glob a policy can hold: no control bytes (a JSON string may hold any; a name
// that differs from what is shown only by one must never match by accident).
bool mcp_printable(std::string_view text);

// Whether `name` matches `glob` ('*' = any run, possibly empty; nothing else is special).
bool mcp_glob_matches(std::string_view glob, std::string_view name);

}  // namespace broker::config
