// An ask as `broker pending --json` lists it (ask_desk::pending), in words for a person: what is
// asked about, and an MCP call's arguments. For wrap's stderr line and `broker pending`.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace broker::live {

// "GET https://host/path", or an MCP call: "MCP tools/call create_issue on host:443". As the
// child chose it: escape it before it reaches a terminal.
std::string asked_what(const nlohmann::ordered_json& ask);

// An MCP call's arguments, one line each after `indent`, each escaped (base::printable) and
// ended by a newline; "" when the ask has none.
std::string argument_lines(const nlohmann::ordered_json& ask, std::string_view indent);

}  // namespace broker::live
