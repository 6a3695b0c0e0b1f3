// Pins against changed tools (docs/policy.md, "MCP servers"): the first tools/list of a server in
// a session fixes what each tool is (its description, input schema and annotations, each as a
// digest); a tool that later comes back different (a "rug pull": the same name, new instructions
// to the model) is dropped from the list and its calls are refused for the rest of the session.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/mcp_rules.hpp"

namespace broker::mcp {

// A tools/list entry's fields that a model reads, each as the SHA-256 of its compact JSON
// (nlohmann's, keys sorted; an absent field as null), in lower-case hex (as a pins file holds
// them, `broker mcp pin`).
// The same three digests a team's pins file holds (config::mcp_tool_pin).
using tool_digest = config::mcp_tool_pin;

tool_digest digest_of(const nlohmann::json& tool);

// The fields of `now` that differ from `pinned`, as MCP names them ("description",
// "inputSchema", "annotations"); empty when none.
std::vector<std::string> changed_fields(const tool_digest& pinned, const tool_digest& now);

// A session's pins, per server ("host:port"). Thread-safe: a session's exchanges share it.
class pin_store {
 public:
  // Compares a listed tool with its pin, pinning it when it has none: the fields that changed
  // (empty when it is new or the same). A changed tool stays changed for the session, whatever
  // later lists say.
  std::vector<std::string> check(const std::string& server, const std::string& tool,
                                 const tool_digest& now);
  // The fields in which the tool last differed from its pin; empty when it never did (or was
  // never listed).
  // The same against a team's pins file (config::mcp_rules::pins): its pin of the tool (null
  // when the file has none: the tool is changed from the start, field `not_pinned`).
  std::vector<std::string> check_against(const std::string& server, const std::string& tool,
                                         const tool_digest& now, const tool_digest* pinned);
  static constexpr std::string_view not_pinned = "not in the pins file";
  std::vector<std::string> changed(const std::string& server, const std::string& tool) const;
  // A person accepted the tool as it was last listed (an ask about a changed tool, approved for
  // the session): that becomes its pin, and it is no longer changed. Only when what was last
  // listed is still `shown` (latest() when the person was asked): a tool that changed again
  // while the ask waited stays changed. A tool never listed (a pins file lacks it) is pinned by
  // its first listing.
  void accept(const std::string& server, const std::string& tool, const std::string& shown);
  // The tool's last listing as one key (its digests joined); "" when never listed.
  std::string latest(const std::string& server, const std::string& tool) const;
  // Whether the session has listed the tool, or a person accepted it.
  bool known(const std::string& server, const std::string& tool) const;

 private:
  struct pin {
    tool_digest first;
    tool_digest latest;
    std::vector<std::string> changed;
    bool unset = false;  // accepted before it was ever listed: its first listing pins it
  };
  mutable std::mutex mutex_;
  std::map<std::string, std::map<std::string, pin, std::less<>>, std::less<>> servers_;
};

// The session's pins and the server a message came from.
struct server_pins {
  pin_store* store;
  std::string server;
};

}  // namespace broker::mcp
