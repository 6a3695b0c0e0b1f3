// An ask in words (ask_text.hpp).
#include "live/ask_text.hpp"

#include <sstream>

#include "base/text.hpp"

namespace broker::live {

std::string asked_what(const nlohmann::ordered_json& ask) {
  if (!ask.contains("mcp") || !ask["mcp"].is_object())
    return ask.value("method", "") + " " + ask.value("url", "");
  const auto& m = ask["mcp"];
  std::string target;
  for (const char* kind : {"tool", "prompt", "resource"})
    if (m.contains(kind) && m[kind].is_string()) target = m[kind].get<std::string>();
  return "MCP " + m.value("method", "") + " " + target + " on " + m.value("server", "");
}

std::string argument_lines(const nlohmann::ordered_json& ask, std::string_view indent) {
  if (!ask.contains("mcp") || !ask["mcp"].is_object() || !ask["mcp"].contains("arguments") ||
      !ask["mcp"]["arguments"].is_string())
    return {};
  std::string out;
  std::istringstream lines(ask["mcp"]["arguments"].get<std::string>());
  for (std::string line; std::getline(lines, line);)
    out.append(indent).append(base::printable(line)).push_back('\n');
  return out;
}

}  // namespace broker::live
