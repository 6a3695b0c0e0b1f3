// Judging MCP calls (call_rules.hpp).
#include "mcp/call_rules.hpp"

#include <algorithm>

namespace broker::mcp {
namespace {

using config::mcp_glob_matches;

// The key of the policy's "mcp" that judges this kind of call: "tools", "resources", "prompts".
std::string section_of(call_kind kind) {
  return std::string(kind_name(kind)) + "s";
}

// The names part of one scope: "" when `name` passes, else the refusing rule's suffix.
std::string names_refusal(const config::mcp_names& names, std::string_view name,
                          std::string_view section) {
  for (std::size_t i = 0; i < names.deny.size(); ++i)
    if (mcp_glob_matches(names.deny[i], name))
      return std::string(section) + ".deny[" + std::to_string(i) + "]";
  if (!names.allow) return {};
  for (const auto& glob : *names.allow)
    if (mcp_glob_matches(glob, name)) return {};
  return std::string(section) + ".allow";
}

const config::mcp_names& names_for(const config::mcp_rules& r, call_kind kind) {
  switch (kind) {
    case call_kind::resource:
      return r.resources;
    case call_kind::prompt:
      return r.prompts;
    default:
      return r.tools;
  }
}

bool check_holds(const config::mcp_argument_check& check, const nlohmann::json& arguments) {
  if (!arguments.is_object()) return false;
  try {
    const nlohmann::json::json_pointer pointer(check.pointer);
    if (!arguments.contains(pointer)) return false;
    const nlohmann::json& value = arguments.at(pointer);
    if (check.glob)
      return value.is_string() &&
             mcp_glob_matches(*check.glob, value.get_ref<const std::string&>());
    return value.dump() == check.equals;
  } catch (const nlohmann::json::exception&) {
    return false;  // a pointer through something else than the call has: it does not hold
  }
}

}  // namespace

call_verdict judge_call(const client_message& m, const scopes& rules) {
  call_verdict v;
  if (m.kind == call_kind::other && m.unreadable.empty()) return v;
  for (const auto& scope : rules) {
    const std::string base = scope.rule + ".mcp.";
    if (!m.unreadable.empty()) {
      v = {false, base + section_of(m.kind), "the broker cannot read this call: " + m.unreadable};
      return v;
    }
    const std::string noun(kind_name(m.kind));
    if (auto refusal = names_refusal(names_for(*scope.rules, m.kind), m.target, section_of(m.kind));
        !refusal.empty()) {
      v = {false, base + refusal,
           "the " + noun + " \"" + shown_name(m.target) + "\" is not allowed by " + scope.rule};
      return v;
    }
    if (m.kind != call_kind::tool) continue;
    for (const auto& args : scope.rules->arguments) {
      if (!mcp_glob_matches(args.tool, m.target)) continue;
      for (const auto& check : args.checks) {
        if (check_holds(check, m.arguments)) continue;
        v = {false, base + "tools.arguments." + args.tool + "." + check.pointer,
             "the tool \"" + shown_name(m.target) + "\" was called with arguments outside " +
                 scope.rule + " (at " + check.pointer + ")"};
        return v;
      }
    }
  }
  return v;
}

std::string shown_name(std::string_view name) {
  std::size_t cut = std::min<std::size_t>(name.size(), 128);
  // Not inside a UTF-8 sequence.
  while (cut < name.size() && cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80)
    --cut;
  std::string out;
  for (char c : name.substr(0, cut)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? '?' : c);
  }
  if (cut < name.size()) out += "...";
  return out;
}

bool tool_listed(std::string_view name, const scopes& rules) {
  for (const auto& scope : rules)
    if (!names_refusal(scope.rules->tools, name, "tools").empty()) return false;
  return true;
}

}  // namespace broker::mcp
