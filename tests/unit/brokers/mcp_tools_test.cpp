// Credentials per MCP tool (docs/policy.md, "MCP servers"): a credential with "mcp_tools" is
// swapped only on a call of those tools; sharing a variable with one without, it stands in for
// that one on those calls, so one dummy in the child gets the write token for create_* and the
// read token for the rest.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "brokers/credential_set.hpp"
#include "config/policy.hpp"
#include "value_broker_test_support.hpp"

using broker::brokers::credential_set;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::brokers::value_broker;
using broker::brokers::testing::brokers_of;
using broker::brokers::testing::value_init;
using broker::http::header_field;

namespace {

const std::string read_real = "mcp_READreal0123456789readREADread01";
const std::string read_dummy = "mcp_DUMMYrd" + std::string(read_real.size() - 11, 'r');
// Not as long as the read token: a stand-in's real value need not be.
const std::string write_real = "mcp_WRITEreal0123456789writeWRITEwrite0123";
const std::string write_dummy = "mcp_DUMMYwr" + std::string(write_real.size() - 11, 'w');

value_broker::init bearer(std::string name, std::string var, const std::string& real,
                          const std::string& dummy) {
  auto c = value_init(std::move(name), "bearer", {"mcp.example.com"}, real, dummy);
  c.spec.env = {std::move(var)};
  return c;
}

// Sends `dummy` as a bearer token in a call of `tool` (none: not one tools/call); the header
// after the set's decision, and the decision.
struct sent {
  broker::brokers::request_decision decision;
  std::string authorization;
};

sent send(const credential_set& set, const std::string& dummy,
          std::optional<std::string_view> tool) {
  request_context where{"mcp.example.com", false, false};
  where.mcp_tool = tool;
  std::vector<header_field> headers{{"Authorization", "Bearer " + dummy}};
  std::string target = "/mcp";
  auto plan = set.plan(where, "POST", target, headers, true);
  return {plan.decision(), headers[0].value};
}

}  // namespace

TEST_CASE("mcp_tools: a write token stands in for the read token on its tools' calls",
          "[brokers][mcp]") {
  std::vector<value_broker::init> list;
  list.push_back(bearer("github_write", "GITHUB_PAT", write_real, write_dummy));
  list.back().spec.mcp_tools = std::vector<std::string>{"create_*", "merge_pull_request"};
  list.push_back(bearer("github_read", "GITHUB_PAT", read_real, read_dummy));
  const credential_set set(brokers_of(std::move(list)));

  // The child holds one dummy, the read token's, though the write token comes first.
  const auto env = set.dummy_environment();
  REQUIRE(env.size() == 1);
  CHECK(env[0] == std::pair<std::string, std::string>{"GITHUB_PAT", read_dummy});

  auto create = send(set, read_dummy, "create_pull_request");
  CHECK(create.decision.action == request_action::pass);
  CHECK(create.decision.credential == "github_write");
  CHECK(create.authorization == "Bearer " + write_real);
  auto merge = send(set, read_dummy, "merge_pull_request");
  CHECK(merge.authorization == "Bearer " + write_real);

  // Every other call, and every request that is no single call, gets the read token.
  for (const std::optional<std::string_view> tool :
       {std::optional<std::string_view>("get_issue"), std::optional<std::string_view>()}) {
    auto other = send(set, read_dummy, tool);
    CHECK(other.decision.action == request_action::pass);
    CHECK(other.decision.credential == "github_read");
    CHECK(other.authorization == "Bearer " + read_real);
  }

  // The write token's own dummy (which the child never got) goes only with its tools.
  CHECK(send(set, write_dummy, "create_issue").authorization == "Bearer " + write_real);
  auto outside = send(set, write_dummy, "get_issue");
  CHECK(outside.decision.action == request_action::credential_out_of_scope);
  CHECK(outside.decision.scope_key == "mcp_tools");
  CHECK(outside.authorization == "Bearer " + write_dummy);  // nothing swapped

  // Responses: each real value back to its own dummy.
  std::vector<std::string> finds;
  for (const auto& p : set.response_patterns()) finds.emplace_back(p.find);
  CHECK(std::find(finds.begin(), finds.end(), write_real) != finds.end());
}

TEST_CASE("mcp_tools: alone, a credential is swapped only on its tools' calls", "[brokers][mcp]") {
  std::vector<value_broker::init> list;
  list.push_back(bearer("deploy", "DEPLOY_TOKEN", write_real, write_dummy));
  list.back().spec.mcp_tools = std::vector<std::string>{"deploy"};
  const credential_set set(brokers_of(std::move(list)));
  CHECK(set.dummy_environment().at(0).second == write_dummy);
  CHECK(send(set, write_dummy, "deploy").authorization == "Bearer " + write_real);
  for (const std::optional<std::string_view> tool :
       {std::optional<std::string_view>("deploy_all"), std::optional<std::string_view>()}) {
    auto refused = send(set, write_dummy, tool);
    CHECK(refused.decision.action == request_action::credential_out_of_scope);
    CHECK(refused.decision.credential == "deploy");
    CHECK(refused.authorization == "Bearer " + write_dummy);
  }
}

TEST_CASE("mcp_tools: what the policy accepts", "[config][policy][mcp]") {
  using broker::config::parse_policy;
  const auto p = parse_policy(R"({"credentials": {"w": {"type": "github", "env": ["T"],
      "hosts": ["api.githubcopilot.com"], "mcp_tools": ["create_*"]}}})",
                              "p.json");
  CHECK(*p.credentials.at("w").mcp_tools == std::vector<std::string>{"create_*"});
  CHECK(broker::config::to_json(p)["credentials"]["w"]["mcp_tools"] ==
        nlohmann::ordered_json({"create_*"}));
  for (const char* bad :
       {R"({"type": "aws-sigv4", "env": ["A", "B"], "hosts": ["*"], "mcp_tools": ["x"]})",
        R"({"type": "bearer", "env": ["T"], "hosts": ["h"], "mcp_tools": []})",
        R"({"type": "bearer", "env": ["T"], "hosts": ["h"], "mcp_tools": [""]})",
        R"({"type": "bearer", "env": ["T"], "hosts": ["h"], "mcp_tools": "x"})"}) {
    INFO(bad);
    try {
      parse_policy(std::string(R"({"credentials": {"c": )") + bad + "}}", "p.json");
      FAIL("accepted");
    } catch (const broker::config::policy_error& e) {
      CHECK(std::string(e.what()).find("credentials.c.mcp_tools") != std::string::npos);
    }
  }
}

TEST_CASE("mcp_tools: a stand-in whose scope needs the body is not made", "[brokers][mcp]") {
  // The write token may only read GraphQL: its scope is judged on the body by the plan, for the
  // credential the request carries, so on /graphql the base (read) token goes instead.
  std::vector<value_broker::init> list;
  list.push_back(bearer("github_write", "GITHUB_PAT", write_real, write_dummy));
  list.back().spec.type = "github";
  list.back().spec.hosts = {*broker::config::host_pattern::parse("api.github.com")};
  list.back().spec.mcp_tools = std::vector<std::string>{"create_*"};
  list.back().spec.scope = broker::config::parse_policy(
                               R"({"credentials": {"c": {"type": "github", "env": ["T"],
                                   "hosts": ["*"], "scope": {"graphql": "read"}}}})",
                               "p.json")
                               .credentials.at("c")
                               .scope;
  list.push_back(bearer("github_read", "GITHUB_PAT", read_real, read_dummy));
  list.back().spec.type = "github";
  list.back().spec.hosts = {*broker::config::host_pattern::parse("api.github.com")};
  const credential_set set(brokers_of(std::move(list)));
  request_context where{"api.github.com", false, false};
  where.mcp_tool = "create_issue";
  std::vector<header_field> headers{{"Authorization", "Bearer " + read_dummy}};
  std::string target = "/graphql";
  auto plan = set.plan(where, "POST", target, headers, true);
  CHECK(plan.decision().credential == "github_read");
  CHECK(headers[0].value == "Bearer " + read_real);
}
