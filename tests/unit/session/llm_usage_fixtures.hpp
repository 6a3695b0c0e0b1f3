// Shared by the llm_usage tests: realistic bodies as the APIs send them, and a check that
// feeds a body in every possible split.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "session/llm_usage.hpp"

namespace llm_usage_testing {

using broker::session::llm_api;
using broker::session::llm_usage;
using broker::session::llm_usage_meter;

constexpr std::string_view json_type = "application/json";
constexpr std::string_view sse_type = "text/event-stream; charset=utf-8";

inline bool same(const llm_usage& a, const llm_usage& b) {
  return a.input_tokens == b.input_tokens && a.output_tokens == b.output_tokens &&
         a.estimated == b.estimated && a.model == b.model;
}

inline std::string show(const llm_usage& u) {
  return "{in " + std::to_string(u.input_tokens) + ", out " + std::to_string(u.output_tokens) +
         (u.estimated ? ", estimated" : "") + ", model \"" + u.model + "\"}";
}

inline llm_usage meter_whole(llm_api api, std::string_view type, std::string_view body,
                             std::uint64_t request_bytes = 0) {
  llm_usage_meter meter(api, type);
  meter.set_request_bytes(request_bytes);
  meter.feed(body);
  return meter.finish();
}

// The body in two pieces split at every position, then one byte at a time: every way of
// cutting it must count the same as the whole.
inline void check_every_split(llm_api api, std::string_view type, std::string_view body,
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

inline std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

inline llm_usage usage(std::uint64_t in, std::uint64_t out, bool estimated, std::string model) {
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

inline std::string cat(std::string_view a, std::string_view b, std::string_view c = {}) {
  return std::string(a) + std::string(b) + std::string(c);
}

}  // namespace llm_usage_testing
