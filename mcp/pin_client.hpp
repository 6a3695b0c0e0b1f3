// `broker mcp pin URL` (docs/policy.md, "Pins"): asks an MCP server (streamable HTTP) for its
// tools, as a client does (initialize, notifications/initialized, tools/list page by page), and
// makes the pins file a team ships beside its policy: each tool's description, input schema and
// annotations as digests (pins.hpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "brokers/provider_transport.hpp"

namespace broker::mcp {

// The pins file for the server at `url` ("https://host[:port]/path"), asked through `transport`
// with `headers` on every request (an Authorization). Throws std::runtime_error naming the step
// and the server's status or why (never a header's value).
nlohmann::ordered_json pin_server(const std::string& url,
                                  const brokers::provider_transport& transport,
                                  const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace broker::mcp
