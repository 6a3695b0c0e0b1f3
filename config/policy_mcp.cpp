// An allow rule's "mcp" (docs/policy.md, "MCP"): every key checked, none silently ignored.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "base/text.hpp"
#include "config/policy_sections.hpp"

namespace broker::config {

std::vector<std::string> parse_mcp_globs(const json_node& node, const char* what) {
  std::vector<std::string> globs;
  for (const json_node& item : node.elements("expected array of strings")) {
    if (!item.value().is_string()) item.fail("expected a string");
    const std::string text = item.value().get<std::string>();
    if (text.empty() || !mcp_printable(text))
      item.fail(std::string("expected a ") + what + " or a glob ('*' matches any run)");
    if (std::find(globs.begin(), globs.end(), text) == globs.end()) globs.push_back(text);
  }
  return globs;
}

namespace {

// {"allow": [globs], "deny": [globs]}, and for tools "arguments".
mcp_names parse_names(const json_node& node, const char* what) {
  mcp_names names;
  if (auto allow = node.find("allow")) names.allow = parse_mcp_globs(*allow, what);
  if (auto deny = node.find("deny")) names.deny = parse_mcp_globs(*deny, what);
  return names;
}

// RFC 6901: "" (the whole arguments object) or '/'-separated tokens, '~' only as ~0 or ~1.
bool is_json_pointer(std::string_view p) {
  if (!p.empty() && p.front() != '/') return false;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] == '~' && (i + 1 == p.size() || (p[i + 1] != '0' && p[i + 1] != '1'))) return false;
  return mcp_printable(p);
}

mcp_argument_check parse_check(const std::string& pointer, const json_node& node) {
  mcp_argument_check check;
  if (!is_json_pointer(pointer))
    node.fail("\"" + pointer + "\" is not a JSON pointer (\"/owner\", \"/options/0/name\")");
  check.pointer = pointer;
  const auto& v = node.value();
  if (v.is_object()) {
    node.reject_unknown_keys({"glob", "equals"});
    auto glob = node.find("glob");
    auto equals = node.find("equals");
    if (glob.has_value() == equals.has_value())
      node.fail("expected exactly one of {\"glob\": \"...\"} or {\"equals\": value}");
    if (glob) {
      check.glob = glob->as_string();
      if (check.glob->empty() || !mcp_printable(*check.glob))
        glob->fail("expected a non-empty glob ('*' matches any run)");
    } else {
      check.equals = equals->value().dump();
    }
    return check;
  }
  if (v.is_array()) node.fail("expected a value to equal, or {\"glob\": \"...\"}");
  check.equals = v.dump();
  return check;
}

std::vector<mcp_tool_arguments> parse_arguments(const json_node& node) {
  std::vector<mcp_tool_arguments> out;
  for (auto& [tool, checks] : node.members("expected an object: tool glob → {pointer: value}")) {
    if (tool.empty() || !mcp_printable(tool)) checks.fail("expected a tool name or glob");
    mcp_tool_arguments a;
    a.tool = tool;
    auto members = checks.members("expected an object: JSON pointer → value or {\"glob\": ...}");
    if (members.empty())
      checks.fail("no checks: name the argument (a JSON pointer) and the value it must have");
    for (auto& [pointer, value] : members) a.checks.push_back(parse_check(pointer, value));
    out.push_back(std::move(a));
  }
  return out;
}

bool is_digest(const nlohmann::json& v) {
  return v.is_string() && base::is_lower_hex(v.get_ref<const std::string&>(), 64);
}

// "pins": a file `broker mcp pin` wrote, beside the policy unless the path is absolute.
mcp_pins_file parse_pins(const json_node& node) {
  mcp_pins_file pins;
  pins.path = node.as_string();
  if (pins.path.empty()) node.fail("expected the path of a pins file (broker mcp pin URL)");
  std::filesystem::path path(pins.path);
  if (path.is_relative()) path = std::filesystem::path(node.source()).parent_path() / path;
  std::ifstream in(path);
  if (!in) node.fail("cannot read the pins file " + path.string());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bad = [&](const std::string& why) {
    node.fail("the pins file " + path.string() + " is not one broker mcp pin writes: " + why);
  };
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("tools") || !doc["tools"].is_object())
    bad("expected an object with \"tools\"");
  for (const auto& [name, tool] : doc["tools"].items()) {
    if (name.empty() || !mcp_printable(name)) bad("a tool name is empty or has control bytes");
    if (!tool.is_object() || !is_digest(tool.value("description", nlohmann::json())) ||
        !is_digest(tool.value("inputSchema", nlohmann::json())) ||
        !is_digest(tool.value("annotations", nlohmann::json())))
      bad("tool \"" + name +
          "\" needs \"description\", \"inputSchema\" and \"annotations\" as SHA-256 hex");
    pins.tools.emplace(name,
                       mcp_tool_pin{tool["description"], tool["inputSchema"], tool["annotations"]});
  }
  return pins;
}

}  // namespace

mcp_rules parse_mcp(const json_node& node) {
  node.expect_object(
      "expected an object: {\"tools\", \"resources\", \"prompts\", \"on_change\", \"pins\"} "
      "(each optional)");
  node.reject_unknown_keys({"tools", "resources", "prompts", "on_change", "pins"});
  mcp_rules rules;
  rules.line = node.line();
  if (auto on_change = node.find("on_change")) {
    const std::string word = on_change->as_string();
    if (word == "ask")
      rules.on_change = mcp_on_change::ask;
    else if (word != "deny")
      on_change->fail("expected \"deny\" (the default) or \"ask\"");
  }
  if (auto pins = node.find("pins")) rules.pins = parse_pins(*pins);
  if (auto tools = node.find("tools")) {
    tools->expect_object("expected an object: {\"allow\", \"deny\", \"arguments\"}");
    tools->reject_unknown_keys({"allow", "deny", "arguments"});
    rules.tools = parse_names(*tools, "tool name");
    if (auto arguments = tools->find("arguments")) rules.arguments = parse_arguments(*arguments);
  }
  if (auto resources = node.find("resources")) {
    resources->expect_object("expected an object: {\"allow\", \"deny\"} of URI globs");
    resources->reject_unknown_keys({"allow", "deny"});
    rules.resources = parse_names(*resources, "resource URI");
  }
  if (auto prompts = node.find("prompts")) {
    prompts->expect_object("expected an object: {\"allow\", \"deny\"} of prompt names");
    prompts->reject_unknown_keys({"allow", "deny"});
    rules.prompts = parse_names(*prompts, "prompt name");
  }
  return rules;
}

bool mcp_printable(std::string_view text) {
  return std::none_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

bool mcp_glob_matches(std::string_view glob, std::string_view name) {
  // Iterative wildcard match: on a mismatch after a '*', that '*' takes one more character.
  std::size_t g = 0, n = 0;
  std::size_t star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = n;
    } else if (g < glob.size() && glob[g] == name[n]) {
      ++g;
      ++n;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

}  // namespace broker::config
