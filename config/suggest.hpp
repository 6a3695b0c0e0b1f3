// `broker policy suggest` (docs/policy.md): a layer that would have allowed what sessions did, from
// their records. Hosts with their ports, methods and paths; many subdomains of one parent become
// "*.parent", many paths under one first segment "/segment/*"; a host whose requests were read as
// MCP gets "mcp" allowing exactly the tools, resources and prompts called (none where none
// was); counts as comments. The layer parses (`policy check`) and, used as a layer, allows every
// request it was made from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace broker::config {

// One request or tunnel a session made, from its record.
struct observed_request {
  std::string host;  // normalized host name or IP literal
  std::uint16_t port = 0;
  std::string method;  // empty for a tunnel
  std::string path;    // the request's path (a query is ignored)
  bool tunnel = false;
  bool learned = false;  // wrap --learn let it through
  // An MCP request's record (docs/audit-log.md): what its call names ("tool", "resource",
  // "prompt"; "" for another method) and the name or URI; `mcp` for any MCP request.
  bool mcp = false;
  std::string mcp_kind;
  std::string mcp_target;
};

// The layer as policy text (JSON with // comments), headed by `title` (a comment line).
std::string suggest_layer(const std::vector<observed_request>& seen, const std::string& title);

}  // namespace broker::config
