// An allow rule's "mcp" as the policy reads it, shows it, and the policy set hands it to a
// request's verdict; errors name the file, line and key.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "config/policy.hpp"
#include "config/policy_set.hpp"
#include "tests/unit/config/policy_test_support.hpp"

using broker::config::mcp_glob_matches;
using broker::config::parse_policy;
using broker::config::policy_set;
using broker::config::test::error_of;

namespace {

std::string with_mcp(const std::string& mcp) {
  return R"({"allow": [
  { "host": "mcp.example.com", "paths": ["/mcp"],
    "mcp": )" +
         mcp + "}]}";
}

broker::config::destination mcp_host() {
  return {"mcp.example.com", std::nullopt, 443};
}

}  // namespace

TEST_CASE("mcp: globs match any run with '*', nothing else", "[config][policy][mcp]") {
  CHECK(mcp_glob_matches("get_*", "get_issue"));
  CHECK(mcp_glob_matches("get_*", "get_"));
  CHECK(mcp_glob_matches("*", ""));
  CHECK(mcp_glob_matches("*_pull_*", "create_pull_request"));
  CHECK(mcp_glob_matches("a*b*c", "aXbYbZc"));
  CHECK_FALSE(mcp_glob_matches("get_*", "Get_issue"));  // names are case-sensitive
  CHECK_FALSE(mcp_glob_matches("get_?", "get_x"));      // '?' is itself
  CHECK(mcp_glob_matches("get_?", "get_?"));
  CHECK_FALSE(mcp_glob_matches("get_issue", "get_issues"));
  CHECK_FALSE(mcp_glob_matches("a*b", "a"));
  CHECK_FALSE(mcp_glob_matches("", "x"));
  // A NUL inside a name is a character like any other.
  CHECK_FALSE(mcp_glob_matches("get_x", std::string_view("get_x\0; delete", 14)));
}

TEST_CASE("mcp: rules are parsed and shown by policy check", "[config][policy][mcp]") {
  auto p = parse_policy(with_mcp(R"({
      "tools": { "allow": ["get_*", "create_issue"], "deny": ["get_secret"],
                 "arguments": { "create_issue": { "/owner": "acme", "/repo": {"glob": "web-*"},
                                                  "/labels/0": {"equals": {"a": 1}} } } },
      "resources": { "deny": ["file:///etc/*"] },
      "prompts": { "allow": [] }, "on_change": "ask" })"),
                        "p.json");
  REQUIRE(p.allow.at(0).mcp);
  const auto& m = *p.allow.at(0).mcp;
  CHECK(m.line == 3);
  CHECK(*m.tools.allow == std::vector<std::string>{"get_*", "create_issue"});
  CHECK(m.tools.deny == std::vector<std::string>{"get_secret"});
  REQUIRE(m.arguments.size() == 1);
  CHECK(m.arguments[0].tool == "create_issue");
  REQUIRE(m.arguments[0].checks.size() == 3);
  CHECK(m.arguments[0].checks[1].pointer == "/owner");
  CHECK(m.arguments[0].checks[1].equals == "\"acme\"");
  CHECK(*m.arguments[0].checks[2].glob == "web-*");
  CHECK(m.arguments[0].checks[0].equals == R"({"a":1})");
  CHECK_FALSE(m.resources.allow);
  CHECK(m.resources.deny == std::vector<std::string>{"file:///etc/*"});
  REQUIRE(m.prompts.allow);
  CHECK(m.prompts.allow->empty());  // no prompt at all
  CHECK(m.on_change == broker::config::mcp_on_change::ask);

  const auto j = broker::config::to_json(p)["allow"][0]["mcp"];
  CHECK(j["tools"]["allow"] == nlohmann::ordered_json({"get_*", "create_issue"}));
  CHECK(j["tools"]["arguments"]["create_issue"]["/repo"] ==
        nlohmann::ordered_json({{"glob", "web-*"}}));
  CHECK(j["tools"]["arguments"]["create_issue"]["/labels/0"] ==
        nlohmann::ordered_json::parse(R"({"equals": {"a": 1}})"));
  // What policy check prints reads back as the same rules.
  nlohmann::ordered_json again =
      nlohmann::ordered_json::parse(R"({"allow": [{"host": "h.example"}]})");
  again["allow"][0]["mcp"] = j;
  const auto p2 = parse_policy(again.dump(), "again.json");
  CHECK(broker::config::to_json(p2)["allow"][0]["mcp"] == j);

  // "mcp": {} reads the traffic and allows every call.
  const auto open = parse_policy(with_mcp("{}"), "p.json");
  CHECK_FALSE(open.allow.at(0).mcp->tools.allow);
  CHECK(open.allow.at(0).mcp->on_change == broker::config::mcp_on_change::deny);
  CHECK(broker::config::to_json(open)["allow"][0]["mcp"]["on_change"] == "deny");
}

TEST_CASE("mcp: errors name the line and key", "[config][policy][mcp]") {
  struct bad {
    const char* mcp;
    const char* key;
    const char* error;
  };
  const bad cases[] = {
      {R"("yes")", "allow[0].mcp", "expected an object"},
      {R"({"tool": {}})", "allow[0].mcp.tool", "unknown key"},
      {R"({"tools": {"allow": "get_*"}})", "allow[0].mcp.tools.allow", "expected array of strings"},
      {R"({"tools": {"deny": [""]}})", "allow[0].mcp.tools.deny[0]", "expected a tool name"},
      {R"({"tools": {"deny": ["a\u0000b"]}})", "allow[0].mcp.tools.deny[0]",
       "expected a tool name"},
      {R"({"tools": {"arguments": {"t": {"owner": "x"}}}})", "allow[0].mcp.tools.arguments.t.owner",
       "is not a JSON pointer"},
      {R"({"tools": {"arguments": {"t": {"/a~2": "x"}}}})", "allow[0].mcp.tools.arguments.t./a~2",
       "is not a JSON pointer"},
      {R"({"tools": {"arguments": {"t": {}}}})", "allow[0].mcp.tools.arguments.t", "no checks"},
      {R"({"tools": {"arguments": {"t": {"/a": ["x"]}}}})", "allow[0].mcp.tools.arguments.t./a",
       "expected a value to equal"},
      {R"({"tools": {"arguments": {"t": {"/a": {"glob": "x", "equals": 1}}}}})",
       "allow[0].mcp.tools.arguments.t./a", "exactly one of"},
      {R"({"tools": {"arguments": {"t": {"/a": {"regex": "x"}}}}})",
       "allow[0].mcp.tools.arguments.t./a.regex", "unknown key"},
      {R"({"on_change": "warn"})", "allow[0].mcp.on_change", "expected \"deny\""},
      {R"({"on_change": true})", "allow[0].mcp.on_change", "expected"},
      {R"({"pins": {}})", "allow[0].mcp.pins", "expected string"},
      {R"({"pins": "/nonexistent/pins.json"})", "allow[0].mcp.pins", "cannot read the pins file"},
      {R"({"pin": "x"})", "allow[0].mcp.pin", "unknown key"},
      {R"({"resources": {"allow": ["x"], "other": 1}})", "allow[0].mcp.resources.other",
       "unknown key"},
  };
  for (const auto& c : cases) {
    INFO(c.mcp);
    auto e = error_of(with_mcp(c.mcp));
    REQUIRE(e.thrown);
    CHECK(e.key == c.key);
    CHECK(e.message.find(c.error) != std::string::npos);
    CHECK(e.what.starts_with("policy.json:"));
  }
  auto tunnel = error_of(R"({"allow": [{"host": "m.example", "tunnel": true, "mcp": {}}]})");
  CHECK(tunnel.key == "allow[0].tunnel");
  CHECK(tunnel.message.find("mcp") != std::string::npos);
  auto deny =
      error_of(R"({"allow": [{"host": "x.example"}], "deny": [{"host": "m.example", "mcp": {}}]})");
  CHECK(deny.key == "deny[0].mcp");
}

TEST_CASE("mcp: a request's verdict carries every layer's deciding rule's mcp",
          "[config][policy_set][mcp]") {
  std::vector<broker::config::policy> layers;
  layers.push_back(parse_policy(R"({"allow": [
      {"host": "mcp.example.com", "mcp": {"tools": {"deny": ["delete_*"]}}},
      {"host": "api.example.com"}]})",
                                "team.json"));
  layers.push_back(parse_policy(R"({"allow": [
      {"host": "*.example.com", "mcp": {"tools": {"allow": ["get_*"]}}}]})",
                                "mine.json"));
  const policy_set set(std::move(layers));
  const auto v = set.check_request(mcp_host(), "POST", "/mcp");
  REQUIRE(v.allowed);
  REQUIRE(v.mcp.size() == 2);
  CHECK(v.mcp[0].rule == "team.json#allow[0]");
  CHECK(v.mcp[0].rules->tools.deny == std::vector<std::string>{"delete_*"});
  CHECK(v.mcp[1].rule == "mine.json#allow[0]");
  // Another host: only the second layer's rule reads MCP there.
  const auto other = set.check_request({"api.example.com", std::nullopt, 443}, "POST", "/mcp");
  REQUIRE(other.mcp.size() == 1);
  CHECK(other.mcp[0].rule == "mine.json#allow[0]");
  // A connection's verdict carries none: MCP is read per request.
  CHECK(set.check_connect(mcp_host()).mcp.empty());
}
