// MCP's JSON-RPC as the broker reads a client's body: strictly, so that it and the server cannot
// read a body two ways.
#include "mcp/messages.hpp"

#include <catch2/catch.hpp>

#include <string>

using broker::mcp::call_kind;
using broker::mcp::read_client_body;

TEST_CASE("mcp messages: calls name their tool, resource or prompt", "[mcp]") {
  std::string why;
  auto call = read_client_body(R"({"jsonrpc":"2.0","id":7,"method":"tools/call",
      "params":{"name":"create_issue","arguments":{"owner":"acme","n":1}}})",
                               why);
  REQUIRE(call);
  CHECK_FALSE(call->batch);
  REQUIRE(call->messages.size() == 1);
  const auto& m = call->messages[0];
  CHECK(m.request());
  CHECK(m.id == 7);
  CHECK(m.kind == call_kind::tool);
  CHECK(m.target == "create_issue");
  CHECK(m.arguments["owner"] == "acme");
  CHECK(m.unreadable.empty());

  auto batch = read_client_body(R"([
      {"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"file:///docs/x.md"}},
      {"jsonrpc":"2.0","id":"b","method":"prompts/get","params":{"name":"review"}},
      {"jsonrpc":"2.0","method":"notifications/initialized"},
      {"jsonrpc":"2.0","id":3,"result":{}}])",
                                why);
  REQUIRE(batch);
  CHECK(batch->batch);
  REQUIRE(batch->messages.size() == 4);
  CHECK(batch->messages[0].kind == call_kind::resource);
  CHECK(batch->messages[0].target == "file:///docs/x.md");
  CHECK(batch->messages[1].kind == call_kind::prompt);
  CHECK(batch->messages[2].kind == call_kind::other);
  CHECK_FALSE(batch->messages[2].request());  // a notification
  CHECK_FALSE(batch->messages[3].request());  // a response to the server
  CHECK(batch->messages[3].method.empty());
}

TEST_CASE("mcp messages: a call whose params cannot be read is marked, never guessed", "[mcp]") {
  std::string why;
  for (const char* params : {R"({"name": 5})", R"({"name": ""})", R"({})", R"("get_issue")",
                             R"({"name": "t", "arguments": [1]})"}) {
    INFO(params);
    auto body = read_client_body(
        std::string(R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":)") + params + "}",
        why);
    REQUIRE(body);
    CHECK(body->messages[0].kind == call_kind::tool);
    CHECK_FALSE(body->messages[0].unreadable.empty());
  }
  // No params at all.
  auto bare = read_client_body(R"({"jsonrpc":"2.0","id":1,"method":"prompts/get"})", why);
  REQUIRE(bare);
  CHECK_FALSE(bare->messages[0].unreadable.empty());
}

TEST_CASE("mcp messages: what is not read at all", "[mcp]") {
  struct bad {
    std::string body;
    const char* why;
  };
  const bad cases[] = {
      // The server's JSON parser keeps one of the two; which one is its own business.
      {R"({"jsonrpc":"2.0","id":1,"method":"tools/call",
           "params":{"name":"get_issue","name":"delete_repo"}})",
       "duplicate key"},
      {R"({"jsonrpc":"2.0","id":1,"id":2,"method":"ping"})", "duplicate key"},
      {std::string(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":)") + std::string(70, '[') +
           std::string(70, ']') + "}",
       "deeper"},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}", "not JSON"},
      {R"({"jsonrpc":"2.0","id":1,"method":"ping"} x)", "not JSON"},
      {"[]", "empty batch"},
      {R"([1])", "not an object"},
      {R"({"id":1,"method":"ping"})", "jsonrpc"},
      {R"({"jsonrpc":"1.0","id":1,"method":"ping"})", "jsonrpc"},
      {R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", "id"},
      {R"({"jsonrpc":"2.0","id":null,"method":"ping"})", "id"},
      {R"({"jsonrpc":"2.0","id":1,"method":7})", "method"},
      {R"({"jsonrpc":"2.0","id":1})", "neither a method"},
      {"", "not JSON"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    std::string why;
    CHECK_FALSE(read_client_body(c.body, why));
    CHECK(why.find(c.why) != std::string::npos);
  }
  // Escaped keys are the same keys.
  std::string why;
  CHECK_FALSE(read_client_body(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","n\u0061me":"b"}})",
      why));
  CHECK(why.find("duplicate") != std::string::npos);
  // The same key in two objects is fine.
  CHECK(read_client_body(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"name":"b"}}})",
      why));
}

TEST_CASE("mcp messages: a refusal is a JSON-RPC error with the call's id", "[mcp]") {
  const auto j = broker::mcp::refusal("abc", "the tool \"x\" is not allowed", "mcp_tool_denied",
                                      "allow[0].mcp.tools.allow");
  CHECK(j["jsonrpc"] == "2.0");
  CHECK(j["id"] == "abc");
  CHECK(j["error"]["code"] == -32001);
  CHECK(j["error"]["message"] == "the tool \"x\" is not allowed");
  CHECK(j["error"]["data"]["error"] == "mcp_tool_denied");
  CHECK(j["error"]["data"]["rule"] == "allow[0].mcp.tools.allow");
}
