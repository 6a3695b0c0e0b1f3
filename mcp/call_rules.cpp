// Judging MCP calls (call_rules.hpp).
#include "mcp/call_rules.hpp"

#include <algorithm>
#include <cctype>

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

// One scope's refusal of a readable call; allowed when it passes.
call_verdict judge_in_scope(const client_message& m, const config::verdict::mcp_scope& scope) {
  const std::string base = scope.rule + ".mcp.";
  const std::string noun(kind_name(m.kind));
  if (auto refusal = names_refusal(names_for(*scope.rules, m.kind), m.target, section_of(m.kind));
      !refusal.empty())
    return {false, base + refusal,
            "the " + noun + " \"" + shown_name(m.target) + "\" is not allowed by " + scope.rule,
            scope.asks && refusal.ends_with(".allow")};
  if (m.kind != call_kind::tool) return {};
  for (const auto& args : scope.rules->arguments) {
    if (!mcp_glob_matches(args.tool, m.target)) continue;
    for (const auto& check : args.checks)
      if (!check_holds(check, m.arguments))
        return {false, base + "tools.arguments." + args.tool + "." + check.pointer,
                "the tool \"" + shown_name(m.target) + "\" was called with arguments outside " +
                    scope.rule + " (at " + check.pointer + ")",
                scope.asks};
  }
  return {};
}

}  // namespace

call_verdict judge_call(const client_message& m, const scopes& rules, bool approved) {
  if (m.kind == call_kind::other && m.unreadable.empty()) return {};
  if (rules.empty()) return {};
  if (!m.unreadable.empty())
    return {false, rules.front().rule + ".mcp." + section_of(m.kind),
            "the broker cannot read this call: " + m.unreadable};
  // The first refusal names the call's; it is askable only if every scope's refusal is.
  call_verdict first;
  bool all_askable = true;
  for (const auto& scope : rules) {
    call_verdict v = judge_in_scope(m, scope);
    if (v.allowed) continue;
    all_askable = all_askable && v.askable;
    if (first.allowed) first = std::move(v);
  }
  if (first.allowed) return first;
  first.askable = all_askable;
  if (approved && all_askable) return {};
  return first;
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

namespace {

bool names_a_secret(std::string_view member) {
  std::string lower(member);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word :
       {"token", "secret", "password", "passwd", "key", "auth", "cookie", "credential"})
    if (lower.find(word) != std::string::npos) return true;
  return false;
}

void redact_secrets(nlohmann::json& value) {
  if (value.is_array()) {
    for (auto& item : value) redact_secrets(item);
    return;
  }
  if (!value.is_object()) return;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (names_a_secret(it.key()) && !it.value().is_null())
      it.value() = "<redacted>";
    else
      redact_secrets(it.value());
  }
}

}  // namespace

std::string shown_arguments(const nlohmann::json& arguments, std::size_t max_bytes) {
  if (arguments.is_null()) return {};
  nlohmann::json copy = arguments;
  redact_secrets(copy);
  std::string text = copy.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= max_bytes) return text;
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  const std::size_t left = text.size() - cut;
  text.resize(cut);
  return text + "\n... (" + std::to_string(left) + " more bytes not shown)";
}

bool tool_listed(std::string_view name, const scopes& rules) {
  for (const auto& scope : rules) {
    const auto refusal = names_refusal(scope.rules->tools, name, "tools");
    if (!refusal.empty() && !(scope.asks && refusal.ends_with(".allow"))) return false;
  }
  return true;
}

bool asks_on_change(const scopes& rules) {
  if (rules.empty()) return false;
  for (const auto& scope : rules)
    if (scope.rules->on_change != config::mcp_on_change::ask || !scope.approvable) return false;
  return true;
}

}  // namespace broker::mcp
