// Token usage of intercepted LLM API responses, for the audit record's `llm_tokens`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace broker::session {

enum class llm_api { none, openai_chat, openai_responses, anthropic_messages, gemini_generate };

// Which API a request calls: a POST to api.openai.com /v1/chat/completions (and the legacy
// /v1/completions, which reports usage the same way), api.openai.com /v1/responses,
// api.anthropic.com /v1/messages, or generativelanguage.googleapis.com
// /{version}/{models|tunedModels}/NAME:generateContent or :streamGenerateContent (Gemini CLI).
// Anything else is none. host is lower-case and may carry
// ":443"; path may carry a query.
llm_api classify_llm_request(std::string_view host, std::string_view method, std::string_view path);

// Which API a WebSocket upgrade opens: api.openai.com /v1/responses (and ChatGPT-login Codex's
// chatgpt.com /backend-api/codex/responses) is the Responses API over
// WebSocket (Codex: one response.create message per response, JSON events back). Anything else
// is none. host and path as for classify_llm_request.
llm_api classify_llm_websocket(std::string_view host, std::string_view path);

// Whether a client's message on such a WebSocket may ask for a response: a JSON object with a
// top-level "type" of "response.create" (escaped or not, beside another "type" or not), and,
// failing closed, anything that is not a JSON object. An object of another type, or of none,
// is not a request. Never throws.
bool is_llm_request_message(llm_api api, std::string_view message);

struct llm_usage {
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  bool estimated = false;  // the response reported no (complete) usage; counts are guesses
  std::string model;       // as the response names it; "" when it does not

  std::uint64_t total() const { return input_tokens + output_tokens; }
};

// Counts one response's tokens from its decoded body as it passes, in pieces split anywhere
// (mid-line, mid-UTF-8, mid-JSON). Never throws from feed or finish: a malformed body or event
// is ignored and the count falls back to an estimate.
//
// `text/event-stream` is read event by event (see sse_reader), each event's JSON parsed on its
// own, nothing else kept. A JSON body (`application/json`, `+json`) is buffered up to
// max_json_body and parsed at the end; a larger one is scanned instead for its last
// `"usage":{...}` object, holding only that object. Any other content type is sniffed from
// the body's first byte ('{' or '[' is JSON, anything else is read as SSE).
//
// Usage reported by the API wins: OpenAI chat's `usage` (stream_options.include_usage puts it
// in the last chunk), Responses' `response.usage` (response.completed / incomplete / failed),
// Anthropic's message_start input and message_delta cumulative output (cache tokens count as
// input), Gemini's `usageMetadata` (in every chunk of a stream, cumulative; thinking tokens count
// as output, tool-use prompt tokens as input; a non-SSE stream is a JSON array of chunks). What is
// not reported is estimated at 4 bytes a token: output from the generated text seen (content,
// tool-call arguments, reasoning deltas), input from set_request_bytes.
//
// Callers should meter successful (2xx) responses only: an error body has no usage, and the
// estimate would count a request the API rejected.
class llm_usage_meter {
 public:
  static constexpr std::size_t max_json_body = 1024 * 1024;

  // api none meters nothing: finish() returns zero tokens, not estimated.
  llm_usage_meter(llm_api api, std::string_view content_type);
  ~llm_usage_meter();
  llm_usage_meter(llm_usage_meter&&) noexcept;
  llm_usage_meter& operator=(llm_usage_meter&&) noexcept;

  void feed(std::string_view body_piece);
  void set_request_bytes(std::uint64_t n);

  // End of body. Later calls return the same usage; pieces fed after it are ignored.
  llm_usage finish();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

// Counts the responses of an LLM API WebSocket one server message at a time: each message is
// one JSON event, read as the same event in an SSE stream is (llm_usage_meter). A Responses API
// response ends with response.completed, response.incomplete or response.failed, whose usage
// is final (estimated, as for a stream, where it is missing); an "error" event ends it with
// nothing to count (as an HTTP error answer is not metered). Never throws.
class llm_message_meter {
 public:
  explicit llm_message_meter(llm_api api);
  ~llm_message_meter();
  llm_message_meter(llm_message_meter&&) noexcept;
  llm_message_meter& operator=(llm_message_meter&&) noexcept;

  // The size of the message that asked for the next response (for the input estimate).
  void set_request_bytes(std::uint64_t n);
  // One whole message from the server: the usage of the response it ends, if it ends one.
  std::optional<llm_usage> feed(std::string_view message);

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace broker::session
