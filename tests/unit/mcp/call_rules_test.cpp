// MCP calls judged by "mcp" rules, and a request's body judged whole: what the client gets
// back for a refused call, and what the record says.
#include "mcp/call_rules.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "config/policy.hpp"
#include "mcp/request_judge.hpp"

using broker::config::parse_policy;
using broker::mcp::judge_request;
using broker::mcp::scopes;

namespace {

// One layer's rule with this "mcp", named like a one-layer set names it.
struct layer {
  broker::config::policy policy;
  explicit layer(const std::string& mcp)
      : policy(parse_policy(R"({"allow": [{"host": "mcp.example.com", "mcp": )" + mcp + "}]}",
                            "p.json")) {}
  scopes only() const { return {{&*policy.allow.at(0).mcp, "allow[0]"}}; }
};

std::string tool_call(const std::string& name, const std::string& args = "{}", int id = 1) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/call","params":{"name":")" + name + R"(","arguments":)" + args + "}}";
}

}  // namespace

TEST_CASE("mcp rules: tools by allow and deny globs", "[mcp]") {
  const layer l(R"({"tools": {"allow": ["get_*", "create_issue"], "deny": ["get_secret*"]}})");
  const auto rules = l.only();
  CHECK_FALSE(judge_request(tool_call("get_issue"), rules).refused);
  CHECK_FALSE(judge_request(tool_call("create_issue"), rules).refused);

  auto unlisted = judge_request(tool_call("delete_repo"), rules);
  CHECK(unlisted.refused);
  CHECK(unlisted.rule == "allow[0].mcp.tools.allow");
  CHECK(unlisted.why == "the tool \"delete_repo\" is not allowed by allow[0]");
  const auto answer = nlohmann::json::parse(unlisted.answer);
  CHECK(answer["id"] == 1);
  CHECK(answer["error"]["code"] == -32001);
  CHECK(answer["error"]["data"]["error"] == "mcp_tool_denied");
  CHECK(answer["error"]["data"]["rule"] == "allow[0].mcp.tools.allow");

  auto denied = judge_request(tool_call("get_secret_key"), rules);
  CHECK(denied.rule == "allow[0].mcp.tools.deny[0]");  // deny wins over allow

  // Other methods pass whatever the tool rules say.
  for (const char* method : {"initialize", "tools/list", "ping", "notifications/initialized"})
    CHECK_FALSE(judge_request(std::string(R"({"jsonrpc":"2.0","id":1,"method":")") + method +
                                  R"(","params":{}})",
                              rules)
                    .refused);
  CHECK(broker::mcp::tool_listed("get_issue", rules));
  CHECK_FALSE(broker::mcp::tool_listed("delete_repo", rules));
  CHECK_FALSE(broker::mcp::tool_listed("get_secret", rules));
}

TEST_CASE("mcp rules: argument constraints", "[mcp]") {
  const layer l(R"({"tools": {"arguments": {
      "create_*": {"/owner": "acme", "/repo": {"glob": "web-*"}},
      "merge": {"/options/method": {"equals": "squash"}, "/n": 3}}}})");
  const auto rules = l.only();
  CHECK_FALSE(
      judge_request(tool_call("create_issue", R"({"owner":"acme","repo":"web-app"})"), rules)
          .refused);
  auto other_owner =
      judge_request(tool_call("create_issue", R"({"owner":"evil","repo":"web-app"})"), rules);
  CHECK(other_owner.refused);
  CHECK(other_owner.rule == "allow[0].mcp.tools.arguments.create_*./owner");
  CHECK(other_owner.why.find("(at /owner)") != std::string::npos);
  // Missing, of another type, or a glob on a non-string: refused.
  CHECK(judge_request(tool_call("create_issue", R"({"repo":"web-app"})"), rules).refused);
  CHECK(judge_request(tool_call("create_issue", R"({"owner":["acme"],"repo":"web-x"})"), rules)
            .refused);
  CHECK(judge_request(tool_call("create_issue", R"({"owner":"acme","repo":7})"), rules).refused);
  CHECK(judge_request(tool_call("create_issue"), rules).refused);
  // No arguments at all.
  CHECK(judge_request(
            R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_x"}})", rules)
            .refused);
  CHECK_FALSE(
      judge_request(tool_call("merge", R"({"options":{"method":"squash"},"n":3})"), rules).refused);
  CHECK(
      judge_request(tool_call("merge", R"({"options":{"method":"merge"},"n":3})"), rules).refused);
  CHECK(judge_request(tool_call("merge", R"({"options":{"method":"squash"},"n":3.5})"), rules)
            .refused);
  // Tools the constraints do not name are not constrained.
  CHECK_FALSE(judge_request(tool_call("get_issue"), rules).refused);
}

TEST_CASE("mcp rules: resources and prompts", "[mcp]") {
  const layer l(R"({"resources": {"allow": ["file:///docs/*"]}, "prompts": {"deny": ["*"]}})");
  const auto rules = l.only();
  auto read = [&](const std::string& uri) {
    return judge_request(
        R"({"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":")" + uri + "\"}}",
        rules);
  };
  CHECK_FALSE(read("file:///docs/readme.md").refused);
  auto etc = read("file:///etc/passwd");
  CHECK(etc.refused);
  CHECK(etc.rule == "allow[0].mcp.resources.allow");
  CHECK(etc.why == "the resource \"file:///etc/passwd\" is not allowed by allow[0]");
  auto prompt = judge_request(
      R"({"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"review"}})", rules);
  CHECK(prompt.rule == "allow[0].mcp.prompts.deny[0]");
  CHECK_FALSE(judge_request(tool_call("anything"), rules).refused);  // no tool rules
}

TEST_CASE("mcp rules: every layer's rules hold", "[mcp]") {
  const layer team(R"({"tools": {"deny": ["delete_*"]}})");
  const layer mine(R"({"tools": {"allow": ["get_*", "delete_branch"]}})");
  const scopes both{{&*team.policy.allow[0].mcp, "team.json#allow[0]"},
                    {&*mine.policy.allow[0].mcp, "mine.json#allow[0]"}};
  CHECK_FALSE(judge_request(tool_call("get_issue"), both).refused);
  CHECK(judge_request(tool_call("delete_branch"), both).rule ==
        "team.json#allow[0].mcp.tools.deny[0]");
  CHECK(judge_request(tool_call("create_issue"), both).rule ==
        "mine.json#allow[0].mcp.tools.allow");
}

TEST_CASE("mcp rules: a batch with a refused call is refused whole", "[mcp]") {
  const layer l(R"({"tools": {"allow": ["get_*"]}})");
  auto judged = judge_request("[" + tool_call("get_issue", "{}", 1) + "," +
                                  tool_call("delete_repo", "{}", 2) +
                                  R"(,{"jsonrpc":"2.0","method":"notifications/x"}])",
                              l.only());
  CHECK(judged.refused);
  CHECK(judged.record.messages == 3);
  const auto answer = nlohmann::json::parse(judged.answer);
  REQUIRE(answer.is_array());
  REQUIRE(answer.size() == 2);  // the notification gets no answer
  CHECK(answer[0]["id"] == 1);
  CHECK(answer[0]["error"]["message"].get<std::string>().starts_with("refused with the batch"));
  CHECK(answer[1]["id"] == 2);
  CHECK(answer[1]["error"]["data"]["rule"] == "allow[0].mcp.tools.allow");

  // A refused call sent as a notification (no id): nothing to answer in JSON-RPC.
  auto notification = judge_request(
      R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_repo"}})", l.only());
  CHECK(notification.refused);
  CHECK(notification.answer.empty());
  // A call the broker cannot read is refused, whatever the rules.
  auto unreadable = judge_request(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}})", l.only());
  CHECK(unreadable.refused);
  CHECK(unreadable.why.find("cannot read") != std::string::npos);
  // A body that is not JSON-RPC at all.
  auto garbage = judge_request("not json", l.only());
  CHECK_FALSE(garbage.refused);
  CHECK(garbage.unreadable.starts_with("an MCP request the broker cannot read"));
}

TEST_CASE("mcp rules: the record names the first call and digests its arguments", "[mcp]") {
  const layer l("{}");
  auto judged = judge_request(tool_call("create_issue", R"({"b": 2, "a": "x"})"), l.only());
  CHECK_FALSE(judged.refused);
  CHECK(judged.record.method == "tools/call");
  CHECK(judged.record.kind == broker::mcp::call_kind::tool);
  CHECK(judged.record.target == "create_issue");
  CHECK(judged.record.messages == 1);
  // SHA-256 of {"a":"x","b":2}: the arguments as parsed, compact, keys sorted.
  CHECK(judged.record.arguments_sha256 ==
        "768ca668c0f84dd39bf269e25c9a3f0af4812e41026b6fead9a2666078ef16f6");
  auto init =
      judge_request(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})", l.only());
  CHECK(init.record.method == "initialize");
  CHECK(init.record.target.empty());
  CHECK(init.record.arguments_sha256.empty());
}

TEST_CASE("mcp rules: names in refusals are shown cut and without control bytes", "[mcp]") {
  const layer l(R"({"tools": {"allow": ["get_*"]}})");
  const std::string long_name = std::string(127, 'x') + "\xC3\xA9" + "tail";  // é across the cut
  auto judged = judge_request(tool_call(long_name), l.only());
  REQUIRE(judged.refused);
  CHECK(judged.why.find("xx...\"") != std::string::npos);
  CHECK_NOTHROW(nlohmann::json::parse(judged.answer));
  auto control = judge_request(tool_call("a\\u0007b"), l.only());
  CHECK(control.why.find("\"a?b\"") != std::string::npos);
}

TEST_CASE("mcp asks: what a person may approve, and what an approval lets through", "[mcp]") {
  const layer l(R"({"tools": {"allow": ["get_*", "create_issue"], "deny": ["delete_*"],
                              "arguments": {"create_issue": {"/owner": "acme"}}}})");
  scopes asking = l.only();
  asking[0].asks = true;
  const scopes hard = l.only();

  // Not in the allow list: askable where the layer asks, and listed there (so it can be called
  // and asked about); a layer that does not ask hides it and refuses it for good.
  auto unlisted = judge_request(tool_call("list_repos", R"({"org":"acme"})"), asking);
  REQUIRE(unlisted.refused);
  REQUIRE(unlisted.ask);
  CHECK(unlisted.ask->target == "list_repos");
  CHECK(unlisted.ask->method == "tools/call");
  CHECK(unlisted.ask->arguments == nlohmann::json::parse(R"({"org":"acme"})"));
  CHECK(broker::mcp::tool_listed("list_repos", asking));
  CHECK_FALSE(judge_request(tool_call("list_repos"), hard).ask);
  CHECK_FALSE(broker::mcp::tool_listed("list_repos", hard));

  // An argument outside its check: askable too.
  auto outside = judge_request(tool_call("create_issue", R"({"owner":"evil"})"), asking);
  REQUIRE(outside.ask);
  CHECK(outside.rule == "allow[0].mcp.tools.arguments.create_issue./owner");

  // A deny glob is never asked about, nor listed; an approval does not reach it.
  broker::mcp::call_approvals approvals;
  approvals.approve("mcp.example.com:443", broker::mcp::call_kind::tool, "delete_repo");
  const broker::mcp::server_pins where{nullptr, "mcp.example.com:443"};
  auto denied = judge_request(tool_call("delete_repo"), asking, &where, &approvals);
  CHECK(denied.refused);
  CHECK_FALSE(denied.ask);
  CHECK_FALSE(broker::mcp::tool_listed("delete_repo", asking));

  // Approved for the session on this server: the askable refusals no longer hold, on this
  // server only.
  approvals.approve("mcp.example.com:443", broker::mcp::call_kind::tool, "list_repos");
  CHECK_FALSE(judge_request(tool_call("list_repos"), asking, &where, &approvals).refused);
  const broker::mcp::server_pins other{nullptr, "other.example.com:443"};
  CHECK(judge_request(tool_call("list_repos"), asking, &other, &approvals).refused);
  // ...and only where the layer asks: an approval cannot open what a hard layer refuses.
  CHECK(judge_request(tool_call("list_repos"), hard, &where, &approvals).refused);
  scopes both = asking;
  both.push_back(hard[0]);
  CHECK_FALSE(judge_request(tool_call("list_repos"), both).ask);

  // A batch is never asked about, nor a notification: refused as before.
  CHECK_FALSE(judge_request("[" + tool_call("list_repos") + "]", asking).ask);
  CHECK_FALSE(
      judge_request(R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}})", asking)
          .ask);

  // A person's denial answers the same ids as refused for approval_denied.
  const auto again = nlohmann::json::parse(
      broker::mcp::answer_as(unlisted, "approval_denied", "a person denied it: "));
  CHECK(again["id"] == 1);
  CHECK(again["error"]["code"] == -32001);
  CHECK(again["error"]["data"]["error"] == "approval_denied");
  CHECK(again["error"]["message"].get<std::string>().starts_with("a person denied it: the tool"));
}

TEST_CASE("mcp asks: arguments shown pretty-printed, secrets redacted, cut", "[mcp]") {
  using broker::mcp::shown_arguments;
  CHECK(shown_arguments(nullptr).empty());
  const auto shown = shown_arguments(nlohmann::json::parse(
      R"({"repo":"web","apiToken":"ghp_x","nested":[{"Password":"p","ok":1}],"auth":null})"));
  CHECK(shown.find("ghp_x") == std::string::npos);
  CHECK(shown.find("\"p\"") == std::string::npos);
  CHECK(shown.find("\"apiToken\": \"<redacted>\"") != std::string::npos);
  CHECK(shown.find("\"repo\": \"web\"") != std::string::npos);
  CHECK(shown.find("\n  \"nested\"") != std::string::npos);  // two spaces a level
  const auto long_one = shown_arguments({{"body", std::string(10000, 'x')}}, 100);
  CHECK(long_one.size() < 200);
  CHECK(long_one.find("more bytes not shown") != std::string::npos);
}
