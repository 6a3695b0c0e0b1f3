// Metering each API's responses as they are sent: classification, JSON and SSE usage, estimates.
#include "session/llm_usage.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "tests/unit/session/llm_usage_fixtures.hpp"

using broker::session::classify_llm_request;
using namespace llm_usage_testing;

TEST_CASE("LLM requests are classified by host, method and path", "[llm_usage]") {
  CHECK(classify_llm_request("api.openai.com", "POST", "/v1/chat/completions") ==
        llm_api::openai_chat);
  CHECK(classify_llm_request("api.openai.com", "POST", "/v1/completions") == llm_api::openai_chat);
  CHECK(classify_llm_request("api.openai.com", "POST", "/v1/responses") ==
        llm_api::openai_responses);
  CHECK(classify_llm_request("api.anthropic.com", "POST", "/v1/messages") ==
        llm_api::anthropic_messages);
  CHECK(classify_llm_request("api.anthropic.com", "POST", "/v1/messages?beta=true") ==
        llm_api::anthropic_messages);
  CHECK(classify_llm_request("api.openai.com:443", "POST", "/v1/responses?x=1") ==
        llm_api::openai_responses);

  CHECK(classify_llm_request("api.openai.com", "GET", "/v1/chat/completions") == llm_api::none);
  CHECK(classify_llm_request("api.openai.com", "GET", "/v1/responses") == llm_api::none);
  CHECK(classify_llm_request("api.anthropic.com", "POST", "/v1/messages/count_tokens") ==
        llm_api::none);
  CHECK(classify_llm_request("api.anthropic.com", "POST", "/v1/messages/batches") == llm_api::none);
  CHECK(classify_llm_request("api.anthropic.com", "POST", "/v1/chat/completions") == llm_api::none);
  CHECK(classify_llm_request("api.openai.com", "POST", "/v1/messages") == llm_api::none);
  CHECK(classify_llm_request("api.openai.com", "POST", "/v1/embeddings") == llm_api::none);
  CHECK(classify_llm_request("api.openai.com", "POST", "/v1/responses/resp_1/cancel") ==
        llm_api::none);
  CHECK(classify_llm_request("evil.example", "POST", "/v1/chat/completions") == llm_api::none);
  CHECK(classify_llm_request("api.openai.com.evil.example", "POST", "/v1/responses") ==
        llm_api::none);
  CHECK(classify_llm_request("api.openai.com:8443", "POST", "/v1/responses") == llm_api::none);
  CHECK(classify_llm_request("", "", "") == llm_api::none);
}

TEST_CASE("OpenAI chat JSON usage", "[llm_usage]") {
  check_every_split(llm_api::openai_chat, json_type, openai_chat_json,
                    usage(12, 34, false, "gpt-4o-mini-2024-07-18"));
  // The content type's parameters and case do not matter.
  CHECK(same(meter_whole(llm_api::openai_chat, "Application/JSON; charset=utf-8", openai_chat_json),
             usage(12, 34, false, "gpt-4o-mini-2024-07-18")));
}

TEST_CASE("OpenAI chat SSE with the final usage chunk", "[llm_usage]") {
  const std::string body = cat(openai_chat_sse_head, openai_chat_sse_usage_chunk, openai_done);
  check_every_split(llm_api::openai_chat, sse_type, body,
                    usage(9, 5, false, "gpt-4o-mini-2024-07-18"), 4000);
}

TEST_CASE("OpenAI chat SSE without usage is estimated from the deltas", "[llm_usage]") {
  const std::string body = cat(openai_chat_sse_head, openai_done);
  // 14 bytes of content -> 4 tokens; a 401-byte request -> 101 tokens.
  check_every_split(llm_api::openai_chat, sse_type, body,
                    usage(101, 4, true, "gpt-4o-mini-2024-07-18"), 401);
  // No request size given: the input is unknown, counted as 0.
  CHECK(same(meter_whole(llm_api::openai_chat, sse_type, body),
             usage(0, 4, true, "gpt-4o-mini-2024-07-18")));
}

TEST_CASE("OpenAI chat SSE estimates tool-call arguments and legacy completions text",
          "[llm_usage]") {
  const std::string tools =
      R"(data: {"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,)"
      R"("id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]})"
      "\n\n"
      R"(data: {"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,)"
      R"("function":{"arguments":"{\"location\":"}}]}}]})"
      "\n\n"
      R"(data: {"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,)"
      R"("function":{"arguments":"\"Paris\"}"}}]}}]})"
      "\n\ndata: [DONE]\n\n";
  // 12 + 8 bytes of arguments -> 5 tokens.
  check_every_split(llm_api::openai_chat, sse_type, tools, usage(0, 5, true, "gpt-4o"));

  const std::string legacy =
      R"(data: {"id":"cmpl-1","object":"text_completion","model":"gpt-3.5-turbo-instruct",)"
      R"("choices":[{"text":"Once upon","index":0,"logprobs":null,"finish_reason":null}]})"
      "\n\n"
      R"(data: {"id":"cmpl-1","object":"text_completion","model":"gpt-3.5-turbo-instruct",)"
      R"("choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}})"
      "\n\ndata: [DONE]\n\n";
  check_every_split(llm_api::openai_chat, sse_type, legacy,
                    usage(4, 3, false, "gpt-3.5-turbo-instruct"));
}

TEST_CASE("OpenAI responses JSON usage", "[llm_usage]") {
  check_every_split(llm_api::openai_responses, json_type, openai_responses_json,
                    usage(328, 52, false, "gpt-4.1-2025-04-14"));
}

TEST_CASE("OpenAI responses SSE usage from response.completed", "[llm_usage]") {
  const std::string body = cat(openai_responses_sse_head, openai_responses_sse_completed);
  check_every_split(llm_api::openai_responses, sse_type, body,
                    usage(37, 11, false, "gpt-4.1-2025-04-14"), 999);
}

TEST_CASE("OpenAI responses SSE cut before response.completed is estimated", "[llm_usage]") {
  // 9 bytes of deltas -> 3 tokens; the completed event's own copy of the text is not counted.
  check_every_split(llm_api::openai_responses, sse_type, openai_responses_sse_head,
                    usage(10, 3, true, "gpt-4.1-2025-04-14"), 40);
}

TEST_CASE("OpenAI responses SSE incomplete response still reports usage", "[llm_usage]") {
  const std::string body =
      cat(openai_responses_sse_head,
          "event: response.incomplete\n"
          R"(data: {"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete",)"
          R"("incomplete_details":{"reason":"max_output_tokens"},"model":"gpt-4.1-2025-04-14",)"
          R"("usage":{"input_tokens":37,"output_tokens":16,"total_tokens":53}}})"
          "\n\n");
  check_every_split(llm_api::openai_responses, sse_type, body,
                    usage(37, 16, false, "gpt-4.1-2025-04-14"));
}

TEST_CASE("Anthropic JSON usage counts cache tokens as input", "[llm_usage]") {
  check_every_split(llm_api::anthropic_messages, json_type, anthropic_json,
                    usage(2095 + 10 + 20, 503, false, "claude-sonnet-4-20250514"));
}

TEST_CASE("Anthropic SSE usage from message_start and message_delta", "[llm_usage]") {
  const std::string body = cat(anthropic_sse_head, anthropic_sse_tail);
  check_every_split(llm_api::anthropic_messages, sse_type, body,
                    usage(25 + 100 + 1000, 15, false, "claude-sonnet-4-20250514"), 7777);
}

TEST_CASE("Anthropic message_delta output is cumulative: the last one wins", "[llm_usage]") {
  const std::string body = cat(
      anthropic_sse_head,
      "event: message_delta\n"
      R"(data: {"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":7}})"
      "\n\n",
      anthropic_sse_tail);
  check_every_split(llm_api::anthropic_messages, sse_type, body,
                    usage(1125, 15, false, "claude-sonnet-4-20250514"));

  // Newer API versions repeat the input counts in message_delta; those win too.
  const std::string repeated =
      cat(anthropic_sse_head,
          "event: message_delta\n"
          R"(data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{)"
          R"("input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":1000,)"
          R"("output_tokens":42}})"
          "\n\n");
  CHECK(same(meter_whole(llm_api::anthropic_messages, sse_type, repeated),
             usage(1030, 42, false, "claude-sonnet-4-20250514")));
}

TEST_CASE("Anthropic SSE cut before message_delta estimates only the output", "[llm_usage]") {
  // Input was reported by message_start; output: max(placeholder 1, 6 bytes -> 2 tokens).
  check_every_split(llm_api::anthropic_messages, sse_type, anthropic_sse_head,
                    usage(1125, 2, true, "claude-sonnet-4-20250514"), 5000);

  // Thinking and tool input deltas are generated text too.
  const std::string body =
      cat("event: message_start\n"
          R"(data: {"type":"message_start","message":{"model":"claude-opus-4-1","usage":{)"
          R"("input_tokens":3,"output_tokens":1}}})"
          "\n\n",
          "event: content_block_delta\n"
          R"(data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta",)"
          R"("thinking":"Let me think about this."}})"
          "\n\n",
          "event: content_block_delta\n"
          R"(data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta",)"
          R"("partial_json":"{\"city\": \"Paris\"}"}})"
          "\n\n"
          "event: error\n"
          R"(data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"
          "\n\n");
  // 24 + 17 bytes -> 11 tokens.
  check_every_split(llm_api::anthropic_messages, sse_type, body,
                    usage(3, 11, true, "claude-opus-4-1"));
}

// Gemini (generativelanguage.googleapis.com), as Gemini CLI calls it.
namespace {

constexpr std::string_view gemini_json = R"({"candidates":[{"content":{"parts":[
  {"text":"Hello there"},{"functionCall":{"name":"ls","args":{"path":"."}}}],"role":"model"},
  "finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":30,
  "thoughtsTokenCount":50,"totalTokenCount":200},"modelVersion":"gemini-2.5-pro",
  "responseId":"abc"})";

// alt=sse: each chunk its own new text and the usage so far.
constexpr std::string_view gemini_sse =
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}],\"role\":\"model\"}}],"
    "\"usageMetadata\":{\"promptTokenCount\":80,\"totalTokenCount\":80},"
    "\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n"
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}],\"role\":\"model\"},"
    "\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":80,"
    "\"candidatesTokenCount\":7,\"toolUsePromptTokenCount\":5,\"totalTokenCount\":92},"
    "\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n";

}  // namespace

TEST_CASE("Gemini generateContent and streamGenerateContent are classified", "[llm_usage]") {
  const auto gen = "generativelanguage.googleapis.com";
  CHECK(classify_llm_request(gen, "POST", "/v1beta/models/gemini-2.5-pro:generateContent") ==
        llm_api::gemini_generate);
  CHECK(classify_llm_request(gen, "POST",
                             "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse") ==
        llm_api::gemini_generate);
  CHECK(classify_llm_request(gen, "POST", "/v1/tunedModels/mine:generateContent") ==
        llm_api::gemini_generate);
  CHECK(classify_llm_request(gen, "POST", "/v1beta/models/gemini-2.5-pro:countTokens") ==
        llm_api::none);
  CHECK(classify_llm_request(gen, "GET", "/v1beta/models") == llm_api::none);
  CHECK(classify_llm_request(gen, "POST", "/v1beta/models/x:embedContent") == llm_api::none);
  CHECK(classify_llm_request("evil.example", "POST", "/v1beta/models/x:generateContent") ==
        llm_api::none);
}

TEST_CASE("Gemini JSON usageMetadata: thoughts count as output", "[llm_usage]") {
  check_every_split(llm_api::gemini_generate, json_type, gemini_json,
                    usage(120, 30 + 50, false, "gemini-2.5-pro"));
}

TEST_CASE("Gemini SSE: the last chunk's usage, tool-use prompt tokens as input", "[llm_usage]") {
  check_every_split(llm_api::gemini_generate, sse_type, gemini_sse,
                    usage(80 + 5, 7, false, "gemini-2.5-flash"));
  // Cut before the last chunk: input reported, output estimated from the text (3 bytes -> 1).
  const std::string first(gemini_sse.substr(0, gemini_sse.find("data:", 10)));
  CHECK(same(meter_whole(llm_api::gemini_generate, sse_type, first),
             usage(80, 1, true, "gemini-2.5-flash")));
}

TEST_CASE("Gemini streamGenerateContent without alt=sse is a JSON array of chunks", "[llm_usage]") {
  const std::string array = "[" + std::string(gemini_json) + "," +
                            replace_all(std::string(gemini_json), "\"candidatesTokenCount\":30",
                                        "\"candidatesTokenCount\":45") +
                            "]";
  CHECK(same(meter_whole(llm_api::gemini_generate, json_type, array),
             usage(120, 45 + 50, false, "gemini-2.5-pro")));
}

TEST_CASE("Gemini JSON over the buffered size is scanned for its usageMetadata", "[llm_usage]") {
  std::string big = std::string(gemini_json);
  big.insert(big.find("Hello there"), std::string(2 * 1024 * 1024, 'x'));
  CHECK(same(meter_whole(llm_api::gemini_generate, json_type, big),
             usage(120, 80, false, "gemini-2.5-pro")));
}

TEST_CASE(
    "the agents' other model endpoints are classified: ChatGPT Codex, Code Assist, Vertex, "
    "Bedrock",
    "[llm_usage]") {
  CHECK(classify_llm_request("chatgpt.com", "POST", "/backend-api/codex/responses") ==
        llm_api::openai_responses);
  CHECK(classify_llm_request("chatgpt.com", "POST", "/backend-api/conversation") == llm_api::none);
  CHECK(classify_llm_request("cloudcode-pa.googleapis.com", "POST",
                             "/v1internal:streamGenerateContent?alt=sse") ==
        llm_api::gemini_generate);
  CHECK(classify_llm_request("cloudcode-pa.googleapis.com", "POST", "/v1internal:loadCodeAssist") ==
        llm_api::none);
  CHECK(classify_llm_request(
            "us-central1-aiplatform.googleapis.com", "POST",
            "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:"
            "generateContent") == llm_api::gemini_generate);
  CHECK(classify_llm_request("us-east5-aiplatform.googleapis.com", "POST",
                             "/v1/projects/p/locations/us-east5/publishers/anthropic/models/"
                             "claude-sonnet-4:streamRawPredict") == llm_api::anthropic_messages);
  CHECK(classify_llm_request("bedrock-runtime.us-east-1.amazonaws.com", "POST",
                             "/model/anthropic.claude-sonnet-4-v1:0/invoke") ==
        llm_api::anthropic_messages);
  CHECK(classify_llm_request("bedrock-runtime.us-east-1.amazonaws.com", "POST",
                             "/model/anthropic.claude-sonnet-4-v1:0/invoke-with-response-stream") ==
        llm_api::none);
}

TEST_CASE("Code Assist chunks wrap the GenerateContentResponse in \"response\"", "[llm_usage]") {
  std::string one_line = replace_all(std::string(gemini_json), "\n", "");
  const std::string wrapped = "data: {\"response\":" + one_line + ",\"traceId\":\"abc\"}\r\n\r\n";
  CHECK(same(meter_whole(llm_api::gemini_generate, sse_type, wrapped),
             usage(120, 30 + 50, false, "gemini-2.5-pro")));
}

// ---- Responses API over a WebSocket (Codex): one JSON event per message ------------------

using broker::session::classify_llm_websocket;
using broker::session::is_llm_request_message;
using broker::session::llm_message_meter;

TEST_CASE("a WebSocket to the Responses API is an LLM API; nothing else is", "[llm_usage]") {
  CHECK(classify_llm_websocket("api.openai.com", "/v1/responses") == llm_api::openai_responses);
  CHECK(classify_llm_websocket("api.openai.com:443", "/v1/responses?x=1") ==
        llm_api::openai_responses);
  CHECK(classify_llm_websocket("api.openai.com", "/v1/realtime") == llm_api::none);
  CHECK(classify_llm_websocket("api.openai.com.evil.example", "/v1/responses") == llm_api::none);
  CHECK(classify_llm_websocket("api.anthropic.com", "/v1/responses") == llm_api::none);
  // Codex signed in with ChatGPT.
  CHECK(classify_llm_websocket("chatgpt.com", "/backend-api/codex/responses") ==
        llm_api::openai_responses);
}

TEST_CASE(
    "a response.create message is a request; its nested types are not looked at, and "
    "what does not parse counts as one",
    "[llm_usage]") {
  const auto responses = llm_api::openai_responses;
  CHECK(is_llm_request_message(responses, R"({"type":"response.create","model":"gpt-5"})"));
  CHECK(is_llm_request_message(responses,
                               R"({"input":[{"type":"message","content":[{"type":"input_text"}]}],)"
                               R"("type":"response.create"})"));
  CHECK_FALSE(is_llm_request_message(responses, R"({"type":"response.cancel"})"));
  CHECK_FALSE(is_llm_request_message(responses, R"({"input":[{"type":"response.create"}]})"));
  CHECK_FALSE(is_llm_request_message(responses, R"({"x":{"type":"response.create"}})"));
  CHECK_FALSE(is_llm_request_message(responses, R"({"input":"x"})"));
  CHECK(is_llm_request_message(responses, R"({"type":"response\u002ecreate"})"));
  // Which of two keys wins depends on the parser: either may.
  CHECK(is_llm_request_message(responses, R"({"type":"x","type":"response.create"})"));
  CHECK(is_llm_request_message(responses, R"({"type":"response.create","type":"x"})"));
  // The API might read what does not parse here (cut, not JSON, not an object): failing closed.
  CHECK(is_llm_request_message(responses, R"({"type":"response.create")"));
  CHECK(is_llm_request_message(responses, R"({"type":"response.cancel")"));
  CHECK(is_llm_request_message(responses, "not json"));
  CHECK(is_llm_request_message(responses, R"(["response.create"])"));
  CHECK_FALSE(is_llm_request_message(llm_api::none, R"({"type":"response.create"})"));
}

TEST_CASE("a WebSocket's responses are metered one after another", "[llm_usage]") {
  llm_message_meter meter(llm_api::openai_responses);
  meter.set_request_bytes(400);
  CHECK_FALSE(meter.feed(R"({"type":"response.created","response":{"model":"gpt-5"}})"));
  CHECK_FALSE(meter.feed(R"({"type":"response.output_text.delta","delta":"Hello"})"));
  auto first = meter.feed(R"({"type":"response.completed","response":{"model":"gpt-5","usage":)"
                          R"({"input_tokens":21,"output_tokens":9,"total_tokens":30}}})");
  REQUIRE(first);
  CHECK(same(*first, usage(21, 9, false, "gpt-5")));

  // The next one reports no usage: estimated from its own request and text alone.
  meter.set_request_bytes(40);
  CHECK_FALSE(meter.feed(R"({"type":"response.output_text.delta","delta":"12345678"})"));
  auto second = meter.feed(R"({"type":"response.incomplete","response":{"model":"gpt-5"}})");
  REQUIRE(second);
  CHECK(same(*second, usage(10, 2, true, "gpt-5")));

  // An error event ends a response with nothing counted; a failed one counts what it reports.
  CHECK_FALSE(meter.feed(R"({"type":"response.output_text.delta","delta":"xx"})"));
  CHECK_FALSE(meter.feed(R"({"type":"error","error":{"message":"bad request"}})"));
  auto failed = meter.feed(
      R"({"type":"response.failed","response":{"usage":{"input_tokens":5,"output_tokens":0}}})");
  REQUIRE(failed);
  CHECK(same(*failed, usage(5, 0, false, "")));
  CHECK_FALSE(meter.feed("not json"));
  CHECK_FALSE(llm_message_meter(llm_api::none).feed(R"({"type":"response.completed"})"));
}
