// The message-level WebSocket inspection (docs/security-model.md) without sockets: what reaches
// each side, re-framed, and how the connection ends when a client message must not leave, a budget
// is spent, or either side breaks the protocol.
#include "proxy/websocket_inspector.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/unit/brokers/value_broker_test_support.hpp"

using broker::brokers::body_scan;
using broker::brokers::credential_set;
using broker::brokers::request_context;
using broker::brokers::value_broker;
using broker::brokers::testing::brokers_of;
using broker::brokers::testing::value_init;
using broker::live::refusal;
using broker::proxy::websocket_checks;
using broker::proxy::websocket_hooks;
using broker::proxy::websocket_inspector;
using broker::session::llm_api;
using broker::session::llm_usage;
namespace ws = broker::http::websocket;

namespace {

const std::string gh_real = "ghp_REALreal9876543210realREALreal98765";
const std::string gh_dummy = "ghp_DUMMYdummy0123456789dummyDUMMY01234";
const std::string ai_real = "sk-proj-REALreal9876543210realREALreal9";
const std::string ai_dummy = "sk-proj-DUMMYdummy0123456789dummyDUMMY0";
const std::string openai = "api.openai.com";

credential_set make_set() {
  std::vector<value_broker::init> list;
  list.push_back(value_init("github", "github", {"api.github.com"}, gh_real, gh_dummy));
  list.push_back(value_init("openai", "bearer", {"api.openai.com"}, ai_real, ai_dummy));
  return credential_set(brokers_of(std::move(list)));
}

// A frame as a peer writes it: FIN as given, masked (a client's) or not.
std::string frame(ws::opcode op, std::string_view payload, bool masked, bool fin = true) {
  std::string f = ws::encode_frame(
      op, payload, masked ? std::optional<std::uint32_t>(0x1234abcd) : std::nullopt);
  if (!fin) f[0] = static_cast<char>(f[0] & 0x7F);
  return f;
}
std::string from_client(ws::opcode op, std::string_view payload, bool fin = true) {
  return frame(op, payload, true, fin);
}
std::string from_server(ws::opcode op, std::string_view payload) {
  return frame(op, payload, false);
}

// What one side reads from bytes the inspector wrote toward it.
std::vector<ws::message> read_as(bool client_frames, std::string_view bytes) {
  ws::reader r(client_frames);
  r.feed(bytes);
  std::vector<ws::message> out;
  while (auto m = r.next()) out.push_back(std::move(*m));
  REQUIRE_FALSE(r.failed());
  REQUIRE(r.pending() == 0);
  return out;
}

std::uint16_t close_code(const ws::message& m) {
  REQUIRE(m.type == ws::opcode::close);
  REQUIRE(m.payload.size() >= 2);
  return static_cast<std::uint16_t>(static_cast<unsigned char>(m.payload[0]) << 8 |
                                    static_cast<unsigned char>(m.payload[1]));
}

// An inspector for a connection to `host` with the test credentials, and what it was asked.
struct fixture {
  credential_set set = make_set();
  body_scan scan;
  std::uint32_t keys = 0;
  std::vector<llm_usage> usages;
  std::optional<refusal> budget;  // the budget's verdict on the next request message
  int requests = 0;
  websocket_inspector inspect;

  explicit fixture(const std::string& host = "api.github.com", llm_api llm = llm_api::none,
                   std::size_t max_message = 1024 * 1024)
      : scan(set.request_body_scan(request_context{host, false, false})),
        inspect(websocket_checks{&scan, host, false, set.response_patterns(), llm, max_message},
                hooks()) {}

  websocket_hooks hooks() {
    websocket_hooks h;
    h.mask_key = [this] { return 0x01020304u + keys++; };
    h.admit_llm_request = [this] {
      ++requests;
      return budget;
    };
    h.llm_usage = [this](const llm_usage& u) {
      usages.push_back(u);
      return true;
    };
    return h;
  }

  // Feeds `bytes` one byte at a time (every split point at once) or whole.
  std::string client(std::string_view bytes, bool bytewise = false) {
    std::string up;
    if (!bytewise) {
      inspect.from_client(bytes, up);
    } else {
      for (char c : bytes) inspect.from_client(std::string_view(&c, 1), up);
    }
    return up;
  }
  std::string server(std::string_view bytes, bool bytewise = false) {
    std::string down;
    if (!bytewise) {
      inspect.from_server(bytes, down);
    } else {
      for (char c : bytes) inspect.from_server(std::string_view(&c, 1), down);
    }
    return down;
  }
};

}  // namespace

TEST_CASE("messages pass both ways whole, masked toward the upstream only", "[websocket]") {
  const bool bytewise = GENERATE(false, true);
  fixture f;
  const std::string binary("\x00\x01\xff payload", 11);
  const std::string up =
      f.client(from_client(ws::opcode::text, "hello") + from_client(ws::opcode::binary, binary) +
                   from_client(ws::opcode::ping, "p"),
               bytewise);
  const auto got = read_as(true, up);  // the upstream's reader insists on masked frames
  REQUIRE(got.size() == 3);
  CHECK((got[0].type == ws::opcode::text && got[0].payload == "hello"));
  CHECK((got[1].type == ws::opcode::binary && got[1].payload == binary));
  CHECK((got[2].type == ws::opcode::ping && got[2].payload == "p"));
  CHECK(f.keys == 3);  // a fresh masking key for every frame

  const std::string down = f.server(
      from_server(ws::opcode::text, "world") + from_server(ws::opcode::pong, "p"), bytewise);
  const auto back = read_as(false, down);  // the client's reader insists on unmasked frames
  REQUIRE(back.size() == 2);
  CHECK((back[0].type == ws::opcode::text && back[0].payload == "world"));
  CHECK(back[1].type == ws::opcode::pong);
  CHECK(f.inspect.messages_out() == 2);
  CHECK(f.inspect.messages_in() == 1);
  CHECK_FALSE(f.inspect.ending());
}

TEST_CASE("a fragmented message goes on as one, a ping between its fragments first",
          "[websocket]") {
  fixture f;
  const std::string up = f.client(from_client(ws::opcode::text, "frag", false) +
                                  from_client(ws::opcode::ping, "between") +
                                  from_client(ws::opcode::continuation, "men", false) +
                                  from_client(ws::opcode::continuation, "ted"));
  const auto got = read_as(true, up);
  REQUIRE(got.size() == 2);
  CHECK((got[0].type == ws::opcode::ping && got[0].payload == "between"));
  CHECK((got[1].type == ws::opcode::text && got[1].payload == "fragmented"));
  CHECK(f.inspect.pending_from_client() == 0);
}

TEST_CASE("a half-received message waits; nothing of it goes on", "[websocket]") {
  fixture f;
  const std::string whole = from_client(ws::opcode::text, "x" + gh_real);
  CHECK(f.client(whole.substr(0, whole.size() - 1)).empty());
  CHECK(f.inspect.pending_from_client() == whole.size() - 1);
  CHECK_FALSE(f.inspect.ending());
  CHECK(f.client(whole.substr(whole.size() - 1)).empty());  // and then it is refused whole
  CHECK(f.inspect.ending());
}

TEST_CASE("a real value in a client message closes with 1008 before any of it leaves",
          "[websocket]") {
  fixture f;
  const std::string body = GENERATE(
      std::string("{\"token\":\"") + "ghp_REALreal9876543210realREALreal98765" + "\"}",
      // base64 of "token=ghp_REAL..." and its percent-encoded form are caught too.
      std::string("dG9rZW49Z2hwX1JFQUxyZWFsOTg3NjU0MzIxMHJlYWxSRUFMcmVhbDk4NzY1"),
      std::string("%67%68%70%5F%52%45%41%4C%72%65%61%6C%39%38%37%36%35%34%33%32%31%30%72%65%61%6C"
                  "%52%45%41%4C%72%65%61%6C%39%38%37%36%35"));
  const std::string up =
      f.client(from_client(ws::opcode::text, "before") + from_client(ws::opcode::text, body) +
               from_client(ws::opcode::text, "after"));
  const auto passed = read_as(true, up);
  REQUIRE(passed.size() == 1);  // what came before it passed; nothing after it
  CHECK(passed[0].payload == "before");
  REQUIRE(f.inspect.ending());
  const auto& end = *f.inspect.ending();
  CHECK(end.error == "real_secret_blocked");
  REQUIRE(end.refused);
  CHECK(end.refused->code == "real_secret_blocked");
  CHECK(end.credential == "github");
  CHECK(end.refused->message.find(gh_real) == std::string::npos);
  const auto to_client = read_as(false, end.to_client);
  REQUIRE(to_client.size() == 1);
  CHECK(close_code(to_client[0]) == 1008);
  CHECK(to_client[0].payload.substr(2) == "real_secret_blocked");
  const auto to_upstream = read_as(true, end.to_upstream);
  REQUIRE(to_upstream.size() == 1);
  CHECK(to_upstream[0].type == ws::opcode::close);
  // Nothing more passes either way once it ends.
  CHECK(f.client(from_client(ws::opcode::text, "later")).empty());
  CHECK(f.server(from_server(ws::opcode::text, "later")).empty());
}

TEST_CASE("a real value in a ping or pong payload is refused too", "[websocket]") {
  fixture f;
  const auto op = GENERATE(ws::opcode::ping, ws::opcode::pong);
  CHECK(f.client(from_client(op, gh_real)).empty());
  REQUIRE(f.inspect.ending());
  CHECK(f.inspect.ending()->error == "real_secret_blocked");
}

TEST_CASE("a bound dummy passes as it is; another credential's dummy is the canary",
          "[websocket]") {
  fixture f("api.openai.com");
  const std::string mine = "Bearer " + ai_dummy;
  const auto passed = read_as(true, f.client(from_client(ws::opcode::text, mine)));
  REQUIRE(passed.size() == 1);
  CHECK(passed[0].payload == mine);  // not swapped: messages carry no credentials to swap

  CHECK(f.client(from_client(ws::opcode::text, "leak " + gh_dummy)).empty());
  REQUIRE(f.inspect.ending());
  CHECK(f.inspect.ending()->error == "credential_not_bound");
  CHECK(f.inspect.ending()->credential == "github");
  CHECK(close_code(read_as(false, f.inspect.ending()->to_client).at(0)) == 1008);
}

TEST_CASE("server messages reach the client with real values replaced by their dummies",
          "[websocket]") {
  const bool bytewise = GENERATE(false, true);
  fixture f;
  const std::string text = "your token is " + gh_real + ", keep it";
  const auto got = read_as(false, f.server(from_server(ws::opcode::text, text), bytewise));
  REQUIRE(got.size() == 1);
  CHECK(got[0].payload == "your token is " + gh_dummy + ", keep it");
}

TEST_CASE("a protocol error closes both sides with the reader's code", "[websocket]") {
  SECTION("an unmasked client frame: 1002") {
    fixture f;
    CHECK(f.client(from_server(ws::opcode::text, "unmasked")).empty());
    REQUIRE(f.inspect.ending());
    CHECK(f.inspect.ending()->error == "websocket_protocol_error");
    CHECK_FALSE(f.inspect.ending()->refused);
    CHECK(close_code(read_as(false, f.inspect.ending()->to_client).at(0)) == 1002);
    CHECK(close_code(read_as(true, f.inspect.ending()->to_upstream).at(0)) == 1002);
  }
  SECTION("a compressed (RSV1) server frame: 1002, as no extension was agreed") {
    fixture f;
    std::string compressed = from_server(ws::opcode::text, "x");
    compressed[0] = static_cast<char>(compressed[0] | 0x40);
    CHECK(f.server(compressed).empty());
    REQUIRE(f.inspect.ending());
    CHECK(close_code(read_as(false, f.inspect.ending()->to_client).at(0)) == 1002);
  }
  SECTION("a message over the limit: 1009, announced by its length alone") {
    fixture f("api.github.com", llm_api::none, 1000);
    const std::string big = from_client(ws::opcode::binary, std::string(1001, 'a'));
    CHECK(f.client(big.substr(0, 8)).empty());
    REQUIRE(f.inspect.ending());
    CHECK(f.inspect.ending()->error == "websocket_message_too_big");
    CHECK(close_code(read_as(false, f.inspect.ending()->to_client).at(0)) == 1009);
  }
}

TEST_CASE("closes both ways end the connection", "[websocket]") {
  fixture f;
  const std::string close = ws::close_payload(1000, "bye");
  CHECK(read_as(true, f.client(from_client(ws::opcode::close, close))).at(0).payload == close);
  CHECK_FALSE(f.inspect.closed());
  CHECK(read_as(false, f.server(from_server(ws::opcode::close, close))).at(0).payload == close);
  CHECK(f.inspect.closed());
}

namespace {

const std::string create_request =
    R"({"type":"response.create","model":"gpt-5","input":[{"type":"message","role":"user",)"
    R"("content":[{"type":"input_text","text":"hi"}]}]})";

std::string completed(int in, int out) {
  return R"({"type":"response.completed","response":{"id":"resp_1","model":"gpt-5","usage":)"
         R"({"input_tokens":)" +
         std::to_string(in) + R"(,"output_tokens":)" + std::to_string(out) + "}}}";
}

}  // namespace

TEST_CASE("each Responses API response over a WebSocket is metered", "[websocket]") {
  fixture f(openai, llm_api::openai_responses);
  for (int i = 1; i <= 2; ++i) {
    CHECK(read_as(true, f.client(from_client(ws::opcode::text, create_request))).size() == 1);
    CHECK(f.requests == i);
    f.server(
        from_server(ws::opcode::text, R"({"type":"response.created","response":{}})") +
        from_server(ws::opcode::text, R"({"type":"response.output_text.delta","delta":"hi"})") +
        from_server(ws::opcode::text, completed(30 * i, 12)));
    REQUIRE(f.usages.size() == static_cast<std::size_t>(i));
    CHECK(f.usages.back().input_tokens == static_cast<std::uint64_t>(30 * i));
    CHECK(f.usages.back().output_tokens == 12);
    CHECK(f.usages.back().model == "gpt-5");
    CHECK_FALSE(f.usages.back().estimated);
  }
  // Other client messages are not requests; an error event ends a response with nothing metered.
  f.client(from_client(ws::opcode::text, R"({"type":"response.cancel"})"));
  CHECK(f.requests == 2);
  f.server(from_server(ws::opcode::text, R"({"type":"error","error":{"message":"x"}})"));
  CHECK(f.usages.size() == 2);
}

TEST_CASE("a spent budget refuses the next request message with an error event and 1008",
          "[websocket]") {
  fixture f(openai, llm_api::openai_responses);
  f.budget = refusal::budget_exhausted("llm_tokens", "100", "120", 0);
  // In a binary message too: the API might read it as a request.
  const auto op = GENERATE(ws::opcode::text, ws::opcode::binary);
  CHECK(f.client(from_client(op, create_request)).empty());
  REQUIRE(f.inspect.ending());
  const auto& end = *f.inspect.ending();
  CHECK(end.error == "budget_exhausted");
  const auto told = read_as(false, end.to_client);
  REQUIRE(told.size() == 2);
  CHECK(told[0].type == ws::opcode::text);
  const auto event = nlohmann::json::parse(told[0].payload);
  CHECK(event["type"] == "error");
  CHECK(event["error"]["type"] == "budget_exhausted");
  CHECK(event["error"]["code"] == "budget_exhausted");
  CHECK(event["error"]["message"] ==
        "the session's llm_tokens budget is spent (limit 100, used 120)");
  CHECK(event["error"]["budget"] == "llm_tokens");
  CHECK(close_code(told[1]) == 1008);
}

TEST_CASE("without an LLM API nothing is metered or admitted", "[websocket]") {
  fixture f("api.github.com", llm_api::none);
  f.budget = refusal::budget_exhausted("llm_tokens", "100", "120", 0);
  CHECK(read_as(true, f.client(from_client(ws::opcode::text, create_request))).size() == 1);
  f.server(from_server(ws::opcode::text, completed(1, 1)));
  CHECK(f.requests == 0);
  CHECK(f.usages.empty());
}

TEST_CASE("ended from outside (too many bytes held): 1013 both ways, nothing more passes",
          "[websocket]") {
  fixture f;
  f.inspect.end_overloaded();
  REQUIRE(f.inspect.ending());
  CHECK(f.inspect.ending()->error == "overloaded");
  CHECK_FALSE(f.inspect.ending()->refused);
  CHECK(close_code(read_as(false, f.inspect.ending()->to_client).at(0)) == 1013);
  CHECK(close_code(read_as(true, f.inspect.ending()->to_upstream).at(0)) == 1013);
  CHECK(f.client(from_client(ws::opcode::text, "later")).empty());
}
