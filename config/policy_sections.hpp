// The parts of parse_policy, one per top-level section. Private to config/.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/located_json.hpp"
#include "config/policy.hpp"

namespace broker::config {

// "allow" or "deny": an array of rule objects, named after the node ("allow[0]").
std::vector<rule> parse_rules(const json_node& list, bool allow_list);

// "credentials": checked against `allow` so no credential is bound to a tunnelled host.
std::map<std::string, credential_spec> parse_credentials(const json_node& section,
                                                         const std::vector<rule>& allow);

// "methods" and "paths" of an allow rule or a scope's "allow" entry.
std::vector<std::string> parse_methods(const json_node& node);
std::vector<path_pattern> parse_path_patterns(const json_node& node);

// A credential's "scope", for a credential of `type` (config/credential_scope.hpp).
credential_scope parse_scope(const json_node& node, std::string_view type);

// An allow rule's "mcp" (config/mcp_rules.hpp).
mcp_rules parse_mcp(const json_node& node);
// An array of MCP names or globs (`what`: "tool name"...), each non-empty and mcp_printable,
// duplicates dropped; empty is allowed (an empty "allow": none at all).
std::vector<std::string> parse_mcp_globs(const json_node& node, const char* what);

// "programs" (allow rules, credentials): paths or globs of executables, and the line of each.
void parse_programs(const json_node& node, std::vector<std::string>& programs,
                    std::vector<int>& lines);

// "approvals": {"never": [host patterns]}.
std::vector<host_pattern> parse_approvals(const json_node& section);

budget_spec parse_budgets(const json_node& section);
env_spec parse_env(const json_node& section);
files_spec parse_files(const json_node& section);
ssh_spec parse_ssh(const json_node& section);

// True when some host name could match both patterns (used for the tunnel/credential check).
bool patterns_overlap(const host_pattern& a, const host_pattern& b);

}  // namespace broker::config
