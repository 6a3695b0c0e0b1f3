// pin_server (pin_client.hpp).
#include "mcp/pin_client.hpp"

#include <map>
#include <stdexcept>

#include "mcp/messages.hpp"
#include "mcp/pins.hpp"

namespace broker::mcp {
namespace {

std::string lower(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return text;
}

std::string header_of(const brokers::provider_answer& a, const std::string& name) {
  for (const auto& [n, v] : a.headers)
    if (lower(n) == name) return v;
  return {};
}

// The JSON-RPC message answering `id` in a JSON body or an event stream; throws when none.
nlohmann::json answer_to(const brokers::provider_answer& a, int id, const std::string& step) {
  std::vector<std::string> documents;
  if (lower(header_of(a, "content-type")).starts_with("text/event-stream")) {
    // Each event's data lines, joined by newlines (WHATWG's event stream).
    std::string data;
    bool has_data = false;
    std::size_t at = 0;
    const std::string& body = a.body;
    while (at <= body.size()) {
      std::size_t end = body.find('\n', at);
      if (end == std::string::npos) end = body.size();
      std::string line = body.substr(at, end - at);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) {
        if (has_data) documents.push_back(data);
        data.clear();
        has_data = false;
      } else if (line.starts_with("data:")) {
        std::string value = line.substr(5);
        if (!value.empty() && value.front() == ' ') value.erase(0, 1);
        if (has_data) data.push_back('\n');
        data += value;
        has_data = true;
      }
      at = end + 1;
    }
    if (has_data) documents.push_back(data);
  } else {
    documents.push_back(a.body);
  }
  for (const auto& text : documents) {
    std::string why;
    auto j = parse_strict(text, why);
    if (!j) continue;
    for (auto& m : j->is_array() ? *j : nlohmann::json::array({*j})) {
      if (!m.is_object() || m.value("id", nlohmann::json()) != id) continue;
      if (m.contains("error"))
        throw std::runtime_error(step + ": the server answered with an error: " +
                                 m["error"].value("message", std::string("(no message)")));
      if (!m.contains("result") || !m["result"].is_object())
        throw std::runtime_error(step + ": the answer has no result");
      return m["result"];
    }
  }
  throw std::runtime_error(step + ": no answer to the request in what the server sent (HTTP " +
                           std::to_string(a.status) + ")");
}

}  // namespace

nlohmann::ordered_json pin_server(const std::string& url,
                                  const brokers::provider_transport& transport,
                                  const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string session;
  std::string version;
  const auto post = [&](const nlohmann::json& message, const std::string& step) {
    brokers::provider_request r;
    r.method = "POST";
    r.url = url;
    r.headers = headers;
    r.headers.emplace_back("Content-Type", "application/json");
    r.headers.emplace_back("Accept", "application/json, text/event-stream");
    if (!session.empty()) r.headers.emplace_back("Mcp-Session-Id", session);
    if (!version.empty()) r.headers.emplace_back("MCP-Protocol-Version", version);
    r.body = message.dump();
    auto a = transport(r);
    if (a.status / 100 != 2)
      throw std::runtime_error(step + ": the server answered HTTP " + std::to_string(a.status));
    return a;
  };

  const nlohmann::json initialize = {
      {"jsonrpc", "2.0"},
      {"id", 1},
      {"method", "initialize"},
      {"params",
       {{"protocolVersion", "2025-06-18"},
        {"capabilities", nlohmann::json::object()},
        {"clientInfo", {{"name", "broker-mcp-pin"}, {"version", "1"}}}}}};
  const auto opened = post(initialize, "initialize");
  session = header_of(opened, "mcp-session-id");
  const auto result = answer_to(opened, 1, "initialize");
  version = result.value("protocolVersion", std::string());
  post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, "notifications/initialized");

  std::map<std::string, tool_digest> tools;
  nlohmann::json cursor;
  for (int page = 0; page < 1000; ++page) {
    nlohmann::json params = nlohmann::json::object();
    if (!cursor.is_null()) params["cursor"] = cursor;
    const int id = 2 + page;
    const auto listed = answer_to(
        post({{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/list"}, {"params", params}},
             "tools/list"),
        id, "tools/list");
    if (!listed.contains("tools") || !listed["tools"].is_array())
      throw std::runtime_error("tools/list: the result has no \"tools\" array");
    for (const auto& tool : listed["tools"]) {
      if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string())
        throw std::runtime_error("tools/list: a tool without a name");
      tools[tool["name"].get<std::string>()] = digest_of(tool);
    }
    cursor = listed.value("nextCursor", nlohmann::json());
    if (cursor.is_null()) break;
  }

  nlohmann::ordered_json out;
  out["version"] = 1;
  out["url"] = url.substr(0, url.find('?'));  // a query could hold a key: never written
  auto& list = out["tools"] = nlohmann::ordered_json::object();
  for (const auto& [name, d] : tools)
    list[name] = {{"description", d.description},
                  {"inputSchema", d.input_schema},
                  {"annotations", d.annotations}};
  return out;
}

}  // namespace broker::mcp
