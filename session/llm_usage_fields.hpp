// Where each LLM API's JSON reports token usage and carries generated text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "session/llm_usage.hpp"

namespace broker::session {

// What one response has said so far. Reported counts are final; the rest feeds the estimate.
struct llm_usage_tally {
  std::optional<std::uint64_t> input;
  std::optional<std::uint64_t> output;
  std::uint64_t provisional_output = 0;  // Anthropic message_start's placeholder (usually 1)
  std::uint64_t text_bytes = 0;          // generated text seen: deltas, or a whole answer
  std::string model;                     // the first one named, at most 256 bytes

  // Reported counts where there are some; elsewhere 4 bytes a token, the usual rule of thumb
  // for English text and code: output from text_bytes, input from the request's size.
  llm_usage to_usage(std::uint64_t request_bytes) const;
};

// Each reads one JSON text and adds to t what it says in the shape the API documents; anything
// else (not JSON, other shapes, negative or fractional counts) adds nothing. None throws.

// One SSE event's data. OpenAI's "[DONE]" is skipped.
void tally_stream_event(llm_api api, std::string_view data, llm_usage_tally& t);

// Where one event leaves its response, for a transport that carries one response after
// another (a WebSocket).
enum class response_progress { going_on, ended, failed };
// One event, tallied as tally_stream_event does, and where it leaves its response: ended by
// the Responses API's response.completed / .incomplete / .failed (their usage is final), failed
// by an "error" event (no usage).
response_progress tally_message_event(llm_api api, std::string_view data, llm_usage_tally& t);
// Whether one client message may ask for a response (is_llm_request_message).
bool is_request_event(llm_api api, std::string_view data);
// A whole JSON response body. False when it does not parse.
bool tally_body(llm_api api, std::string_view body, llm_usage_tally& t);
// A usage object on its own (see usage_scanner).
void tally_usage_object(llm_api api, std::string_view usage, llm_usage_tally& t);
// A JSON string's raw contents (escapes undecoded) as the model's name, unless one is known.
void tally_model(std::string_view raw, llm_usage_tally& t);
void tally_text_bytes(std::uint64_t bytes, llm_usage_tally& t);

}  // namespace broker::session
