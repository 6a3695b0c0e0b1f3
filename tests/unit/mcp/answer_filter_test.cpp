// What an MCP server sends, filtered on its way to the client: tools/list results lose the
// tools the rules do not allow, in a JSON answer or an event stream cut anywhere.
#include "mcp/answer_filter.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "config/policy.hpp"

using broker::config::parse_policy;
using broker::mcp::filter_json_answer;
using broker::mcp::sse_filter;

namespace {

struct layer {
  broker::config::policy policy = parse_policy(
      R"({"allow": [{"host": "m.example", "mcp": {"tools": {"allow": ["get_*"]}}}]})", "p.json");
  broker::mcp::scopes rules() const { return {{&*policy.allow.at(0).mcp, "allow[0]"}}; }
};

const std::string tools_list =
    R"({"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"get_issue","description":"d1",)"
    R"("inputSchema":{"type":"object"}},{"name":"delete_repo","description":"d2",)"
    R"("inputSchema":{"type":"object"}}],"nextCursor":"c"}})";

std::vector<std::string> names_in(const nlohmann::json& message) {
  std::vector<std::string> out;
  for (const auto& t : message["result"]["tools"]) out.push_back(t["name"]);
  return out;
}

// The stream fed in pieces of `size` bytes.
std::string filtered(const std::string& stream, std::size_t size, const broker::mcp::scopes& r,
                     std::size_t* removed = nullptr) {
  sse_filter f(r);
  std::string out;
  for (std::size_t i = 0; i < stream.size(); i += size)
    f.feed(std::string_view(stream).substr(i, size), out);
  f.finish(out);
  if (removed) *removed = f.removed();
  return out;
}

}  // namespace

TEST_CASE("mcp answers: a JSON tools/list loses the tools the rules do not allow", "[mcp]") {
  const layer l;
  auto out = filter_json_answer(tools_list, l.rules());
  REQUIRE(out);
  const auto j = nlohmann::json::parse(*out);
  CHECK(names_in(j) == std::vector<std::string>{"get_issue"});
  CHECK(j["result"]["nextCursor"] == "c");
  CHECK(j["id"] == 2);
  // Everything allowed, or no tools at all: it goes as it came.
  const std::string only_allowed =
      R"({"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"get_x"}]}})";
  CHECK_FALSE(filter_json_answer(only_allowed, l.rules()));
  CHECK_FALSE(filter_json_answer(R"({"jsonrpc":"2.0","id":3,"result":{"content":[]}})", l.rules()));
  // A batch answer: each message.
  auto batch = filter_json_answer("[" + tools_list + "," + only_allowed + "]", l.rules());
  REQUIRE(batch);
  CHECK(names_in(nlohmann::json::parse(*batch)[0]) == std::vector<std::string>{"get_issue"});
  // A tool without a readable name is not listed.
  auto nameless = filter_json_answer(
      R"({"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":5},{"description":"x"},"get_a"]}})",
      l.rules());
  REQUIRE(nameless);
  CHECK(nlohmann::json::parse(*nameless)["result"]["tools"].empty());
}

TEST_CASE("mcp answers: spelling \"tools\" with escapes does not get past", "[mcp]") {
  const layer l;
  const std::string escaped =
      R"({"jsonrpc":"2.0","id":2,"result":{"\u0074ools":[{"name":"delete_repo"}]}})";
  auto out = filter_json_answer(escaped, l.rules());
  REQUIRE(out);
  CHECK(nlohmann::json::parse(*out)["result"]["tools"].empty());
  // Text that cannot hold the key is not parsed at all.
  CHECK_FALSE(broker::mcp::may_list_tools(R"({"result":{"content":[{"text":"tool"}]}})"));
  CHECK(broker::mcp::may_list_tools(R"({"a":"\u0041"})"));
}

TEST_CASE("mcp answers: an answer that could list tools but cannot be read is refused", "[mcp]") {
  const layer l;
  CHECK_THROWS_AS(
      filter_json_answer(R"({"result":{"tools":[{"name":"get_a"}],"tools":[{"name":"del"}]}})",
                         l.rules()),
      broker::mcp::unreadable_answer);
  CHECK_THROWS_AS(filter_json_answer(R"({"result":{"tools":[)", l.rules()),
                  broker::mcp::unreadable_answer);
  // Not JSON, and no "tools": it goes on (the client makes of it what it will).
  CHECK_FALSE(filter_json_answer("plain text", l.rules()));
}

TEST_CASE("mcp answers: an event stream is filtered event by event, cut anywhere", "[mcp]") {
  const layer l;
  const std::string other = R"({"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text"}]}})";
  // As the SDK writes it, with an event type and id, then a CRLF event and a comment.
  const std::string stream = "event: message\nid: 1\ndata: " + other + "\n\n" +
                             "event: message\r\nid: 2\r\ndata: " + tools_list + "\r\n\r\n" +
                             ": keep-alive\n\n" + "data: " + other + "\n\n";
  for (std::size_t size : {std::size_t{1}, std::size_t{2}, std::size_t{7}, stream.size()}) {
    INFO(size);
    std::size_t removed = 0;
    const std::string out = filtered(stream, size, l.rules(), &removed);
    CHECK(removed == 1);
    // The first and last events as they came; the list written again, its fields kept.
    CHECK(out.starts_with("event: message\nid: 1\ndata: " + other + "\n\n"));
    CHECK(out.ends_with(": keep-alive\n\ndata: " + other + "\n\n"));
    // Written again with LF endings, its event type and id kept.
    const auto list_at = out.find("event: message\nid: 2\ndata: ");
    REQUIRE(list_at != std::string::npos);
    CHECK(out.find("id: 2\r\n") == std::string::npos);
    const auto data_at = out.find("data: ", list_at);
    const auto end = out.find("\n\n", data_at);
    const auto list = nlohmann::json::parse(out.substr(data_at + 6, end - data_at - 6));
    CHECK(names_in(list) == std::vector<std::string>{"get_issue"});
    CHECK(out.find("delete_repo") == std::string::npos);
  }
}

TEST_CASE("mcp answers: events of an event stream, as the spec splits them", "[mcp]") {
  const layer l;
  // Multi-line data joins with '\n' before it is parsed; CR alone ends a line too.
  const std::string split_list =
      "data: {\"jsonrpc\":\"2.0\",\"id\":2,\n"
      "data: \"result\":{\"tools\":[{\"name\":\"delete_repo\"}]}}\r\r";
  std::size_t removed = 0;
  const std::string out = filtered(split_list, 3, l.rules(), &removed);
  CHECK(removed == 1);
  CHECK(out.find("delete_repo") == std::string::npos);
  CHECK(out.ends_with("\n\n"));
  // An event that could list tools but does not parse is dropped, not passed.
  CHECK(filtered("data: {\"result\":{\"tools\":[{\"name\":\"x\"}]\n\n", 5, l.rules()).empty());
  // An event never ended by a blank line goes nowhere (SSE clients drop it too).
  CHECK(filtered("data: " + tools_list + "\n", 4, l.rules()).empty());
  // The old transport's endpoint event passes as it came.
  const std::string endpoint = "event: endpoint\ndata: /messages?sessionId=abc\n\n";
  CHECK(filtered(endpoint, 1, l.rules()) == endpoint);
}

TEST_CASE("mcp answers: an event larger than a message is refused", "[mcp]") {
  const layer l;
  sse_filter f(l.rules());
  std::string out;
  const std::string chunk(1024 * 1024, 'a');
  f.feed("data: ", out);
  CHECK_THROWS_AS(
      [&] {
        for (int i = 0; i < 20; ++i) f.feed(chunk, out);
      }(),
      broker::mcp::unreadable_answer);
  CHECK(out.empty());
}

TEST_CASE("mcp answers: the outcome of the request the record is about", "[mcp]") {
  using broker::mcp::outcome_in;
  const auto ok = nlohmann::json::parse(R"({"jsonrpc":"2.0","id":7,"result":{"content":[]}})");
  REQUIRE(outcome_in(ok, "7"));
  CHECK(outcome_in(ok, "7")->outcome == "ok");
  CHECK_FALSE(outcome_in(ok, "8"));
  CHECK_FALSE(outcome_in(ok, "\"7\""));  // a string id is another id
  const auto tool_error =
      nlohmann::json::parse(R"({"jsonrpc":"2.0","id":"a","result":{"isError":true}})");
  CHECK(outcome_in(tool_error, "\"a\"")->outcome == "tool_error");
  const auto error = nlohmann::json::parse(
      R"([{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad"}}])");
  const auto o = outcome_in(error, "2");
  REQUIRE(o);
  CHECK(o->outcome == "error");
  CHECK(*o->code == -32602);
  // A notification, or a request from the server, is no answer.
  CHECK_FALSE(outcome_in(nlohmann::json::parse(R"({"jsonrpc":"2.0","method":"x","id":7})"), "7"));
  CHECK_FALSE(broker::mcp::json_answer_outcome("not json", "7"));

  // In an event stream: the event answering it, whatever came before.
  broker::mcp::sse_filter stream({}, std::nullopt, "7");
  std::string out;
  stream.feed(
      "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n", out);
  CHECK_FALSE(stream.outcome());
  stream.feed("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"isError\":true}}\n\n", out);
  REQUIRE(stream.outcome());
  CHECK(stream.outcome()->outcome == "tool_error");
  CHECK(out.find("isError") != std::string::npos);  // passed on as it came
}
