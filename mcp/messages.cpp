// JSON-RPC 2.0 as MCP clients send it (messages.hpp).
#include "mcp/messages.hpp"

#include <set>

namespace broker::mcp {
namespace {

// Thrown from the parser's callback: the document is refused whole.
struct unreadable_json {
  std::string why;
};

// Reads a message's "params" for the call it makes.
void read_call(const nlohmann::json& params, client_message& m) {
  const char* key = nullptr;
  if (m.method == "tools/call") {
    m.kind = call_kind::tool;
    key = "name";
  } else if (m.method == "resources/read") {
    m.kind = call_kind::resource;
    key = "uri";
  } else if (m.method == "prompts/get") {
    m.kind = call_kind::prompt;
    key = "name";
  } else {
    return;
  }
  if (!params.is_object()) {
    m.unreadable = m.method + " without a params object";
    return;
  }
  const auto it = params.find(key);
  if (it == params.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    m.unreadable = m.method + " whose params." + key + " is not a non-empty string";
    return;
  }
  m.target = it->get<std::string>();
  if (m.kind != call_kind::tool) return;
  const auto args = params.find("arguments");
  if (args == params.end() || args->is_null()) return;
  if (!args->is_object()) {
    m.unreadable = "tools/call whose params.arguments is not an object";
    return;
  }
  m.arguments = *args;
}

std::optional<client_message> read_message(const nlohmann::json& j, std::string& why) {
  if (!j.is_object()) {
    why = "a JSON-RPC message that is not an object";
    return std::nullopt;
  }
  const auto version = j.find("jsonrpc");
  if (version == j.end() || *version != "2.0") {
    why = "a message without \"jsonrpc\": \"2.0\"";
    return std::nullopt;
  }
  client_message m;
  if (const auto id = j.find("id"); id != j.end()) {
    if (!id->is_string() && !id->is_number_integer()) {
      why = "a JSON-RPC id that is neither a string nor an integer";
      return std::nullopt;
    }
    m.id = *id;
  }
  const auto method = j.find("method");
  if (method == j.end()) {
    // A response to one of the server's requests (sampling, elicitation, roots).
    if (m.id.is_null() || (!j.contains("result") && !j.contains("error"))) {
      why = "a message with neither a method nor a result or error";
      return std::nullopt;
    }
    return m;
  }
  if (!method->is_string() || method->get_ref<const std::string&>().empty()) {
    why = "a JSON-RPC method that is not a non-empty string";
    return std::nullopt;
  }
  m.method = method->get<std::string>();
  const auto params = j.find("params");
  read_call(params == j.end() ? nlohmann::json() : *params, m);
  return m;
}

}  // namespace

std::string_view kind_name(call_kind kind) {
  switch (kind) {
    case call_kind::tool:
      return "tool";
    case call_kind::resource:
      return "resource";
    case call_kind::prompt:
      return "prompt";
    case call_kind::other:
      break;
  }
  return "";
}

std::optional<nlohmann::json> parse_strict(std::string_view text, std::string& why) {
  if (text.size() > max_message_bytes) {
    why = "a message over " + std::to_string(max_message_bytes) + " bytes";
    return std::nullopt;
  }
  // Keys seen in each object open at each depth.
  std::vector<std::set<std::string>> keys;
  const nlohmann::json::parser_callback_t check =
      [&keys](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using event_t = nlohmann::json::parse_event_t;
        if (depth > max_depth) throw unreadable_json{"JSON nested deeper than 64 levels"};
        if (event == event_t::object_start) {
          keys.emplace_back();
        } else if (event == event_t::object_end) {
          if (!keys.empty()) keys.pop_back();
        } else if (event == event_t::key) {
          if (keys.empty() || !keys.back().insert(parsed.get<std::string>()).second)
            throw unreadable_json{"a JSON object with a duplicate key \"" +
                                  parsed.get<std::string>().substr(0, 64) + "\""};
        }
        return true;
      };
  try {
    nlohmann::json j = nlohmann::json::parse(text, check, true, false);
    return j;
  } catch (const unreadable_json& e) {
    why = e.why;
  } catch (const nlohmann::json::exception&) {
    why = "not JSON (or not UTF-8)";
  }
  return std::nullopt;
}

std::optional<client_body> read_client_body(std::string_view body, std::string& why) {
  auto j = parse_strict(body, why);
  if (!j) return std::nullopt;
  client_body out;
  if (j->is_array()) {
    out.batch = true;
    if (j->empty()) {
      why = "an empty batch";
      return std::nullopt;
    }
    for (const auto& item : *j) {
      auto m = read_message(item, why);
      if (!m) return std::nullopt;
      out.messages.push_back(std::move(*m));
    }
    return out;
  }
  auto m = read_message(*j, why);
  if (!m) return std::nullopt;
  out.messages.push_back(std::move(*m));
  return out;
}

nlohmann::json refusal(const nlohmann::json& id, const std::string& message,
                       const std::string& error, const std::string& rule) {
  return {{"jsonrpc", "2.0"},
          {"id", id},
          {"error",
           {{"code", -32001}, {"message", message}, {"data", {{"error", error}, {"rule", rule}}}}}};
}

}  // namespace broker::mcp
