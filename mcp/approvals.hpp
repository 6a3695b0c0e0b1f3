// What a person approved for a session (docs/policy.md, "Asks about MCP calls"): per server
// ("host:port"), the tools, prompts and resources whose askable refusals no longer hold. An
// approval never reaches past the session: a tool allowed for good belongs in the policy.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "mcp/messages.hpp"

namespace broker::mcp {

// Thread-safe: a session's exchanges share it.
class call_approvals {
 public:
  void approve(const std::string& server, call_kind kind, const std::string& target);
  bool approved(const std::string& server, call_kind kind, const std::string& target) const;

 private:
  mutable std::mutex mutex_;
  std::set<std::tuple<std::string, call_kind, std::string>> approved_;
};

}  // namespace broker::mcp
