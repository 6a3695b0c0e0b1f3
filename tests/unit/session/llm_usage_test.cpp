#include "session/llm_usage.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

using broker::session::classify_llm_request;
using broker::session::llm_api;
using broker::session::llm_usage;
using broker::session::llm_usage_meter;

namespace {

constexpr std::string_view json_type = "application/json";
constexpr std::string_view sse_type = "text/event-stream; charset=utf-8";

bool same(const llm_usage& a, const llm_usage& b) {
  return a.input_tokens == b.input_tokens && a.output_tokens == b.output_tokens &&
         a.estimated == b.estimated && a.model == b.model;
}

std::string show(const llm_usage& u) {
  return "{in " + std::to_string(u.input_tokens) + ", out " + std::to_string(u.output_tokens) +
         (u.estimated ? ", estimated" : "") + ", model \"" + u.model + "\"}";
}

llm_usage meter_whole(llm_api api, std::string_view type, std::string_view body,
                      std::uint64_t request_bytes = 0) {
  llm_usage_meter meter(api, type);
  meter.set_request_bytes(request_bytes);
  meter.feed(body);
  return meter.finish();
}

// The body in two pieces split at every position, then one byte at a time: every way of
// cutting it must count the same as the whole.
void check_every_split(llm_api api, std::string_view type, std::string_view body,
                       const llm_usage& expected, std::uint64_t request_bytes = 0) {
  const llm_usage whole = meter_whole(api, type, body, request_bytes);
  INFO("whole body: " << show(whole) << ", expected " << show(expected));
  REQUIRE(same(whole, expected));

  for (std::size_t at = 0; at <= body.size(); ++at) {
    llm_usage_meter meter(api, type);
    meter.set_request_bytes(request_bytes);
    meter.feed(body.substr(0, at));
    meter.feed(body.substr(at));
    const llm_usage got = meter.finish();
    if (!same(got, expected)) FAIL("split at " << at << ": " << show(got));
  }

  llm_usage_meter meter(api, type);
  meter.set_request_bytes(request_bytes);
  for (const char c : body) meter.feed(std::string_view(&c, 1));
  const llm_usage got = meter.finish();
  INFO("byte by byte: " << show(got));
  CHECK(same(got, expected));
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

llm_usage usage(std::uint64_t in, std::uint64_t out, bool estimated, std::string model) {
  llm_usage u;
  u.input_tokens = in;
  u.output_tokens = out;
  u.estimated = estimated;
  u.model = std::move(model);
  return u;
}

// --- Fixtures, as the APIs send them (ids shortened) ---

constexpr std::string_view openai_chat_json =
    R"({"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion",)"
    R"("created":1741570283,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,)"
    R"("message":{"role":"assistant","content":"Hello! How can I help you today? \u00e9",)"
    R"("refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],)"
    R"("usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46,)"
    R"("prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},)"
    R"("completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,)"
    R"("accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},)"
    R"("service_tier":"default","system_fingerprint":"fp_06737a9306"})"
    "\n";

// Content deltas "Hel", "lo, w", "örld!" (ö is two bytes in UTF-8; the split tests cut it) —
// 3 + 5 + 6 = 14 bytes of generated text.
constexpr std::string_view openai_chat_sse_head =
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,)"
    R"("model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_06737a9306","choices":[{"index":0,)"
    R"("delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],)"
    R"("usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,)"
    R"("model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"Hel"},)"
    R"("logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,)"
    R"("model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"lo, w"},)"
    R"("logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,)"
    R"("model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"örld!"},)"
    R"("logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,)"
    R"("model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"logprobs":null,)"
    R"("finish_reason":"stop"}],"usage":null})"
    "\n\n";

constexpr std::string_view openai_chat_sse_usage_chunk =
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,)"
    R"("model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":9,)"
    R"("completion_tokens":5,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":0},)"
    R"("completion_tokens_details":{"reasoning_tokens":0}}})"
    "\n\n";

constexpr std::string_view openai_done = "data: [DONE]\n\n";

constexpr std::string_view openai_responses_json =
    R"({"id":"resp_67ccd3a9da748190baa7f1570fe91ac6","object":"response","created_at":1741476777,)"
    R"("status":"completed","error":null,"model":"gpt-4.1-2025-04-14","output":[{"type":"message",)"
    R"("id":"msg_67ccd3acc8d48190a77525dc6de64b4","status":"completed","role":"assistant",)"
    R"("content":[{"type":"output_text","text":"The image depicts a scenic landscape.",)"
    R"("annotations":[]}]}],"parallel_tool_calls":true,"usage":{"input_tokens":328,)"
    R"("input_tokens_details":{"cached_tokens":0},"output_tokens":52,)"
    R"("output_tokens_details":{"reasoning_tokens":0},"total_tokens":380},"user":null,)"
    R"("metadata":{}})";

// Deltas "Hi" and " there!" — 9 bytes.
constexpr std::string_view openai_responses_sse_head =
    "event: response.created\n"
    R"(data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1",)"
    R"("object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-4.1-2025-04-14",)"
    R"("output":[],"usage":null}})"
    "\n\n"
    "event: response.in_progress\n"
    R"(data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1",)"
    R"("object":"response","status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}})"
    "\n\n"
    "event: response.output_item.added\n"
    R"(data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,)"
    R"("item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}})"
    "\n\n"
    "event: response.content_part.added\n"
    R"(data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1",)"
    R"("output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}})"
    "\n\n"
    "event: response.output_text.delta\n"
    R"(data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1",)"
    R"("output_index":0,"content_index":0,"delta":"Hi"})"
    "\n\n"
    "event: response.output_text.delta\n"
    R"(data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1",)"
    R"("output_index":0,"content_index":0,"delta":" there!"})"
    "\n\n"
    "event: response.output_text.done\n"
    R"(data: {"type":"response.output_text.done","sequence_number":6,"item_id":"msg_1",)"
    R"("output_index":0,"content_index":0,"text":"Hi there!"})"
    "\n\n";

constexpr std::string_view openai_responses_sse_completed =
    "event: response.completed\n"
    R"(data: {"type":"response.completed","sequence_number":7,"response":{"id":"resp_1",)"
    R"("object":"response","created_at":1741290958,"status":"completed","model":"gpt-4.1-2025-04-14",)"
    R"("output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant",)"
    R"("content":[{"type":"output_text","text":"Hi there!","annotations":[]}]}],)"
    R"("usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,)"
    R"("output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}})"
    "\n\n";

constexpr std::string_view anthropic_json =
    R"({"id":"msg_013Zva2CMHLNnXjNJJKqJ2EF","type":"message","role":"assistant",)"
    R"("model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"Hi! My name is Claude."}],)"
    R"("stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2095,)"
    R"("cache_creation_input_tokens":10,"cache_read_input_tokens":20,"output_tokens":503,)"
    R"("service_tier":"standard"}})";

// Text deltas "Hello" and "!" — 6 bytes.
constexpr std::string_view anthropic_sse_head =
    "event: message_start\n"
    R"(data: {"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",)"
    R"("type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-20250514",)"
    R"("stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,)"
    R"("cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}})"
    "\n\n"
    "event: content_block_start\n"
    R"(data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"
    "\n\n"
    "event: ping\n"
    R"(data: {"type": "ping"})"
    "\n\n"
    "event: content_block_delta\n"
    R"(data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}})"
    "\n\n"
    "event: content_block_delta\n"
    R"(data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}})"
    "\n\n"
    "event: content_block_stop\n"
    R"(data: {"type":"content_block_stop","index":0})"
    "\n\n";

constexpr std::string_view anthropic_sse_tail =
    "event: message_delta\n"
    R"(data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},)"
    R"("usage":{"output_tokens":15}})"
    "\n\n"
    "event: message_stop\n"
    R"(data: {"type":"message_stop"})"
    "\n\n";

std::string cat(std::string_view a, std::string_view b, std::string_view c = {}) {
  return std::string(a) + std::string(b) + std::string(c);
}

}  // namespace

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

TEST_CASE("SSE with CRLF and CR line endings counts the same", "[llm_usage]") {
  const std::string lf = cat(anthropic_sse_head, anthropic_sse_tail);
  const llm_usage expected = usage(1125, 15, false, "claude-sonnet-4-20250514");
  check_every_split(llm_api::anthropic_messages, sse_type, replace_all(lf, "\n", "\r\n"), expected);
  check_every_split(llm_api::anthropic_messages, sse_type, replace_all(lf, "\n", "\r"), expected);

  const std::string chat = cat(openai_chat_sse_head, openai_chat_sse_usage_chunk, openai_done);
  const llm_usage chat_expected = usage(9, 5, false, "gpt-4o-mini-2024-07-18");
  check_every_split(llm_api::openai_chat, sse_type, replace_all(chat, "\n", "\r\n"), chat_expected);
  check_every_split(llm_api::openai_chat, sse_type, replace_all(chat, "\n", "\r"), chat_expected);
}

TEST_CASE("SSE comments, bare fields, multi-line data and a BOM", "[llm_usage]") {
  const std::string body =
      "\xEF\xBB\xBF: stream opened\n\n"
      ": OPENROUTER PROCESSING\n"
      "event:message_start\n"
      "id: 1\n"
      "retry: 3000\n"
      R"(data:{"type":"message_start","message":{"model":"claude-3-5-haiku-latest",)"
      "\n"
      R"(data: "usage":{"input_tokens":8,"output_tokens":1}}})"
      "\n\n"
      ": keep-alive\n\n"
      "event: message_delta\n"
      R"(data: {"type":"message_delta",)"
      "\n: a comment between data lines\n"
      "data\n"  // a bare field name is an empty data line
      R"(data:  "usage":{"output_tokens":21}})"
      "\n\n";
  check_every_split(llm_api::anthropic_messages, sse_type, body,
                    usage(8, 21, false, "claude-3-5-haiku-latest"));
  check_every_split(llm_api::anthropic_messages, sse_type, replace_all(body, "\n", "\r\n"),
                    usage(8, 21, false, "claude-3-5-haiku-latest"));
  check_every_split(llm_api::anthropic_messages, sse_type, replace_all(body, "\n", "\r"),
                    usage(8, 21, false, "claude-3-5-haiku-latest"));
}

TEST_CASE("a last SSE event without a closing blank line still counts", "[llm_usage]") {
  const std::string body = cat(
      anthropic_sse_head,
      "event: message_delta\n"
      R"(data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}})");
  check_every_split(llm_api::anthropic_messages, sse_type, body,
                    usage(1125, 15, false, "claude-sonnet-4-20250514"));
  check_every_split(llm_api::anthropic_messages, sse_type, body + "\r",
                    usage(1125, 15, false, "claude-sonnet-4-20250514"));

  const std::string chat =
      cat(openai_chat_sse_head,
          openai_chat_sse_usage_chunk.substr(0, openai_chat_sse_usage_chunk.size() - 2));
  check_every_split(llm_api::openai_chat, sse_type, chat,
                    usage(9, 5, false, "gpt-4o-mini-2024-07-18"));
}

TEST_CASE("an unknown content type is sniffed from the body", "[llm_usage]") {
  CHECK(same(
      meter_whole(llm_api::openai_chat, "", std::string("\r\n  ") + std::string(openai_chat_json)),
      usage(12, 34, false, "gpt-4o-mini-2024-07-18")));
  CHECK(same(meter_whole(llm_api::anthropic_messages, "application/octet-stream",
                         cat(anthropic_sse_head, anthropic_sse_tail)),
             usage(1125, 15, false, "claude-sonnet-4-20250514")));
  CHECK(same(meter_whole(llm_api::anthropic_messages, "application/vnd.api+json", anthropic_json),
             usage(2125, 503, false, "claude-sonnet-4-20250514")));
}

TEST_CASE("a JSON body without usage is estimated from its answer", "[llm_usage]") {
  // 32 bytes of content -> 8 tokens; 12 bytes of request -> 3.
  const std::string chat = R"({"model":"gpt-4o","choices":[{"message":{"role":"assistant",)"
                           R"("content":"0123456789abcdef0123456789abcdef"}}]})";
  check_every_split(llm_api::openai_chat, json_type, chat, usage(3, 8, true, "gpt-4o"), 12);

  // "abcde" and the tool input {"city":"Paris"} (16 bytes as JSON) -> 21 bytes, 6 tokens.
  const std::string anthropic =
      R"({"type":"message","model":"claude-x","content":[{"type":"text","text":"abcde"},)"
      R"({"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}]})";
  CHECK(same(meter_whole(llm_api::anthropic_messages, json_type, anthropic),
             usage(0, 6, true, "claude-x")));

  const std::string responses =
      R"({"object":"response","model":"gpt-4.1","output":[{"type":"function_call",)"
      R"("arguments":"{\"a\":1}"},{"type":"message","content":[{"type":"output_text","text":"abc"}]}],)"
      R"("usage":null})";
  CHECK(same(meter_whole(llm_api::openai_responses, json_type, responses),
             usage(0, 3, true, "gpt-4.1")));
}

TEST_CASE("malformed bodies never throw and fall back to estimates", "[llm_usage]") {
  const std::string garbage[] = {
      "",
      "{",
      "}}}]]]",
      "not json at all",
      std::string("\0\xff\xfe{\"usage\":", 12),
      R"({"usage":"lots","model":42})",
      R"({"usage":{"prompt_tokens":-5,"completion_tokens":1.5}})",
      R"({"usage":{"input_tokens":"7","output_tokens":null}})",
      R"({"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":99999999999999999999999}})",
      "data: {\n\n",
      "data: [DONE\n\n",
      "data: {\"type\":\"message_start\",\"message\":[1,2]}\n\n",
      "data: {\"type\":\"message_delta\",\"usage\":[]}\n\n",
      "data: {\"type\":\"response.completed\",\"response\":\"done\"}\n\n",
      "data: {\"choices\":[1,null,{\"delta\":5},{\"delta\":{\"content\":[\"x\"]}}]}\n\n",
      "data: {\"choices\":{\"delta\":{}}}\n\n",
      "data: \"\xc3\x28\"\n\n",
      std::string(100000, '[') + std::string(100000, ']'),
      "data: " + std::string(200000, '[') + "\n\n",
      "event: " + std::string(50000, 'e') + "\r\r\r\n\n\n",
  };
  for (const llm_api api :
       {llm_api::openai_chat, llm_api::openai_responses, llm_api::anthropic_messages}) {
    for (const std::string& body : garbage) {
      for (const std::string_view type : {json_type, sse_type, std::string_view()}) {
        llm_usage got;
        CHECK_NOTHROW(got = meter_whole(api, type, body, 8));
        CHECK(got.estimated);  // none of these has a complete, valid usage
      }
    }
  }
  const llm_usage unknown = meter_whole(llm_api::openai_chat, json_type, "{oops", 400);
  CHECK(same(unknown, usage(100, 0, true, "")));
}

TEST_CASE("a truncated JSON body still yields a usage object that arrived whole", "[llm_usage]") {
  const std::string_view cut = openai_chat_json.substr(0, openai_chat_json.find("\"service_tier"));
  check_every_split(llm_api::openai_chat, json_type, cut,
                    usage(12, 34, false, "gpt-4o-mini-2024-07-18"));
  // Cut inside the usage object: nothing reported; the string values are the estimate.
  const std::string_view inside =
      openai_chat_json.substr(0, openai_chat_json.find("\"total_tokens"));
  const llm_usage partial = meter_whole(llm_api::openai_chat, json_type, inside, 40);
  CHECK(partial.estimated);
  CHECK(partial.input_tokens == 10);
  CHECK(partial.model == "gpt-4o-mini-2024-07-18");
}

TEST_CASE("a JSON body over the buffer limit finds its last usage textually", "[llm_usage]") {
  const std::string filler(5 * 1024 * 1024, 'a');
  const std::string body =
      R"({"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{)"
      R"("message":{"role":"assistant","content":"look: \"usage\":{\"prompt_tokens\":1},)"
      R"( \\\"usage\": {}, \"usage\":{\"prompt_tokens\":2}\\)" +
      filler +
      R"("}}],"usage" : {"prompt_tokens":7,"completion_tokens":1310720,"total_tokens":1310727,)"
      R"("prompt_tokens_details":{"cached_tokens":0}}, "system_fingerprint":"fp_1"})";

  const llm_usage expected = usage(7, 1310720, false, "gpt-4o-mini");
  CHECK(same(meter_whole(llm_api::openai_chat, json_type, body), expected));

  // Fed as a proxy would pass it, 16 KiB at a time, and split at awkward spots.
  llm_usage_meter chunked(llm_api::openai_chat, json_type);
  for (std::size_t at = 0; at < body.size(); at += 16 * 1024) {
    chunked.feed(std::string_view(body).substr(at, 16 * 1024));
  }
  CHECK(same(chunked.finish(), expected));

  const std::size_t usage_at = body.rfind("\"usage\"");
  for (std::size_t at = usage_at - 2; at < body.size(); at += 7) {
    llm_usage_meter meter(llm_api::openai_chat, json_type);
    meter.feed(std::string_view(body).substr(0, at));
    meter.feed(std::string_view(body).substr(at));
    const llm_usage got = meter.finish();
    if (!same(got, expected)) FAIL("split at " << at << ": " << show(got));
  }

  // With no usage at all, the string values stand in for the generated text.
  const std::string no_usage =
      R"({"model":"claude-sonnet-4-20250514","content":[{"type":"text","text":")" + filler +
      R"("}]})";
  const llm_usage estimated = meter_whole(llm_api::anthropic_messages, json_type, no_usage, 4);
  CHECK(estimated.estimated);
  CHECK(estimated.model == "claude-sonnet-4-20250514");
  CHECK(estimated.input_tokens == 1);
  CHECK(estimated.output_tokens >= filler.size() / 4);
  CHECK(estimated.output_tokens < filler.size() / 4 + 20);

  // A usage value too large to be one is dropped; the last whole one stands.
  const std::string huge_usage = R"({"model":"m","usage":{"input_tokens":1,"output_tokens":2},)"
                                 R"("x":")" +
                                 filler + R"(","usage":{"pad":")" + filler + R"("}})";
  CHECK(
      same(meter_whole(llm_api::openai_responses, json_type, huge_usage), usage(1, 2, false, "m")));
}

TEST_CASE("an oversized SSE event is dropped, the rest of the stream still counts", "[llm_usage]") {
  const std::string huge_event =
      "event: content_block_delta\n"
      R"(data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":")" +
      std::string(3 * 1024 * 1024, 'x') + "\"}}\n\n";
  const std::string body = cat(anthropic_sse_head, huge_event, anthropic_sse_tail);
  CHECK(same(meter_whole(llm_api::anthropic_messages, sse_type, body),
             usage(1125, 15, false, "claude-sonnet-4-20250514")));

  llm_usage_meter chunked(llm_api::anthropic_messages, sse_type);
  for (std::size_t at = 0; at < body.size(); at += 1000) {
    chunked.feed(std::string_view(body).substr(at, 1000));
  }
  CHECK(same(chunked.finish(), usage(1125, 15, false, "claude-sonnet-4-20250514")));
}

TEST_CASE("a long model name is cut at a character boundary", "[llm_usage]") {
  std::string name;
  for (int i = 0; i < 200; ++i) name += "\xC3\xA9";  // é, two bytes
  const llm_usage got =
      meter_whole(llm_api::anthropic_messages, json_type,
                  R"({"model":")" + name + R"(","usage":{"input_tokens":1,"output_tokens":1}})");
  CHECK(got.model.size() == 256);
  CHECK(got.model == name.substr(0, 256));

  const llm_usage odd = meter_whole(llm_api::anthropic_messages, json_type,
                                    R"({"model":"x)" + name + R"(","usage":{}})");
  CHECK(odd.model.size() == 255);
  CHECK(odd.model == "x" + name.substr(0, 254));
}

TEST_CASE("finish is idempotent and a non-LLM meter counts nothing", "[llm_usage]") {
  llm_usage_meter meter(llm_api::openai_chat, json_type);
  meter.feed(openai_chat_json);
  const llm_usage first = meter.finish();
  meter.feed(openai_chat_json);
  CHECK(same(meter.finish(), first));
  CHECK(first.total() == 46);

  llm_usage_meter none(llm_api::none, json_type);
  none.set_request_bytes(1000);
  none.feed(openai_chat_json);
  CHECK(same(none.finish(), llm_usage{}));

  llm_usage_meter moved_from(llm_api::openai_chat, sse_type);
  llm_usage_meter moved_to(std::move(moved_from));
  moved_to.feed(cat(openai_chat_sse_head, openai_chat_sse_usage_chunk, openai_done));
  CHECK(same(moved_to.finish(), usage(9, 5, false, "gpt-4o-mini-2024-07-18")));

  // An empty body: nothing reported, nothing generated.
  CHECK(same(meter_whole(llm_api::anthropic_messages, sse_type, "", 40), usage(10, 0, true, "")));
}
