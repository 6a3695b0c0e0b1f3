#include "session/llm_usage.hpp"

#include <algorithm>
#include <optional>

#include "http/message.hpp"
#include "session/llm_usage_fields.hpp"
#include "session/sse_reader.hpp"
#include "session/usage_scanner.hpp"

namespace broker::session {
namespace {

enum class body_kind { unknown, json, event_stream };

body_kind kind_of(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  if (http::iequals(media, "text/event-stream")) return body_kind::event_stream;
  if (http::iequals(media, "application/json")) return body_kind::json;
  if (media.size() >= 5 && http::iequals(media.substr(media.size() - 5), "+json"))
    return body_kind::json;
  return body_kind::unknown;
}

bool is_json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

}  // namespace

llm_api classify_llm_request(std::string_view host, std::string_view method,
                             std::string_view path) {
  if (method != "POST") return llm_api::none;
  if (host.ends_with(":443")) host.remove_suffix(4);
  path = path.substr(0, path.find_first_of("?#"));
  const bool generate =
      path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent");
  if (host == "api.openai.com") {
    if (path == "/v1/chat/completions" || path == "/v1/completions") return llm_api::openai_chat;
    if (path == "/v1/responses") return llm_api::openai_responses;
  } else if (host == "chatgpt.com") {
    // Codex signed in with ChatGPT: the Responses API under the ChatGPT backend.
    if (path == "/backend-api/codex/responses") return llm_api::openai_responses;
  } else if (host == "api.anthropic.com") {
    if (path == "/v1/messages") return llm_api::anthropic_messages;
  } else if (host == "cloudcode-pa.googleapis.com") {
    // Gemini CLI signed in with Google: Code Assist's /v1internal:streamGenerateContent, whose
    // chunks wrap a GenerateContentResponse in "response".
    if (generate && path.starts_with("/v1internal:")) return llm_api::gemini_generate;
  } else if (host == "aiplatform.googleapis.com" || host.ends_with("-aiplatform.googleapis.com")) {
    // Vertex AI: Gemini models (generateContent) and Anthropic's (rawPredict: Messages bodies).
    if (path.find("/publishers/google/models/") != std::string_view::npos && generate)
      return llm_api::gemini_generate;
    if (path.find("/publishers/anthropic/models/") != std::string_view::npos &&
        (path.ends_with(":rawPredict") || path.ends_with(":streamRawPredict")))
      return llm_api::anthropic_messages;
  } else if (host.starts_with("bedrock-runtime.") && host.ends_with(".amazonaws.com")) {
    // Bedrock's InvokeModel answers an Anthropic model with a Messages body; its streaming form
    // (invoke-with-response-stream) is AWS's binary event stream and is not metered.
    if (path.starts_with("/model/") && path.ends_with("/invoke") &&
        path.find("anthropic.") != std::string_view::npos)
      return llm_api::anthropic_messages;
  } else if (host == "generativelanguage.googleapis.com") {
    // /v1beta/models/gemini-2.5-pro:streamGenerateContent and the like.
    const std::size_t slash = path.find('/', 1);
    const std::string_view rest = slash == std::string_view::npos ? "" : path.substr(slash);
    if ((rest.starts_with("/models/") || rest.starts_with("/tunedModels/")) && generate)
      return llm_api::gemini_generate;
  }
  return llm_api::none;
}

llm_api classify_llm_websocket(std::string_view host, std::string_view path) {
  if (host.ends_with(":443")) host.remove_suffix(4);
  path = path.substr(0, path.find_first_of("?#"));
  if (host == "api.openai.com" && path == "/v1/responses") return llm_api::openai_responses;
  if (host == "chatgpt.com" && path == "/backend-api/codex/responses")
    return llm_api::openai_responses;  // Codex signed in with ChatGPT
  return llm_api::none;
}

bool is_llm_request_message(llm_api api, std::string_view message) {
  return is_request_event(api, message);
}

struct llm_usage_meter::state {
  llm_api api;
  body_kind kind;
  std::uint64_t request_bytes = 0;
  llm_usage_tally counts;
  sse_reader events;
  std::string body;  // a JSON body while it fits max_json_body
  bool body_too_large = false;
  // A JSON body that did not fit, or did not parse; made only then (a stream never needs one).
  std::unique_ptr<usage_scanner> scanner;
  std::optional<llm_usage> result;

  state(llm_api a, body_kind k) : api(a), kind(k) {}

  void on_event(std::string_view data) { tally_stream_event(api, data, counts); }

  void feed_json(std::string_view piece) {
    if (!body_too_large) {
      if (body.size() + piece.size() <= max_json_body) {
        body.append(piece);
        return;
      }
      body_too_large = true;
      scanner = std::make_unique<usage_scanner>();
      scanner->scan(body);
      std::string().swap(body);
    }
    scanner->scan(piece);
  }

  void finish_json() {
    if (!body_too_large) {
      const bool parsed = tally_body(api, body, counts);
      if (parsed) {
        std::string().swap(body);
        return;
      }
      // Malformed, perhaps cut: its usage may still be whole.
      scanner = std::make_unique<usage_scanner>();
      scanner->scan(body);
      std::string().swap(body);
    }
    if (!scanner->last_usage().empty()) tally_usage_object(api, scanner->last_usage(), counts);
    tally_model(scanner->raw_model(), counts);
    tally_text_bytes(scanner->value_bytes(), counts);
  }
};

llm_usage_meter::llm_usage_meter(llm_api api, std::string_view content_type)
    : state_(std::make_unique<state>(api, kind_of(content_type))) {}

llm_usage_meter::~llm_usage_meter() = default;
llm_usage_meter::llm_usage_meter(llm_usage_meter&&) noexcept = default;
llm_usage_meter& llm_usage_meter::operator=(llm_usage_meter&&) noexcept = default;

void llm_usage_meter::set_request_bytes(std::uint64_t n) {
  if (state_) state_->request_bytes = n;
}

void llm_usage_meter::feed(std::string_view body_piece) {
  if (!state_ || state_->api == llm_api::none || state_->result) return;
  state& s = *state_;
  if (s.kind == body_kind::unknown) {
    while (!body_piece.empty() && is_json_space(body_piece.front())) body_piece.remove_prefix(1);
    if (body_piece.empty()) return;
    const char first = body_piece.front();
    s.kind = first == '{' || first == '[' ? body_kind::json : body_kind::event_stream;
  }
  if (s.kind == body_kind::event_stream) {
    s.events.feed(body_piece, [&s](std::string_view, std::string_view data) { s.on_event(data); });
  } else {
    s.feed_json(body_piece);
  }
}

llm_usage llm_usage_meter::finish() {
  if (!state_) return {};
  state& s = *state_;
  if (s.result) return *s.result;
  if (s.api == llm_api::none) {
    s.result.emplace();
    return *s.result;
  }
  if (s.kind == body_kind::event_stream) {
    s.events.finish([&s](std::string_view, std::string_view data) { s.on_event(data); });
  } else if (s.kind == body_kind::json) {
    s.finish_json();
  }
  s.result = s.counts.to_usage(s.request_bytes);
  return *s.result;
}

struct llm_message_meter::state {
  explicit state(llm_api a) : api(a) {}  // clang 14 (the fuzz build) has no paren aggregate init
  llm_api api;
  std::uint64_t request_bytes = 0;
  llm_usage_tally counts;  // the response going on
};

llm_message_meter::llm_message_meter(llm_api api) : state_(std::make_unique<state>(api)) {}
llm_message_meter::~llm_message_meter() = default;
llm_message_meter::llm_message_meter(llm_message_meter&&) noexcept = default;
llm_message_meter& llm_message_meter::operator=(llm_message_meter&&) noexcept = default;

void llm_message_meter::set_request_bytes(std::uint64_t n) {
  if (state_) state_->request_bytes = n;
}

std::optional<llm_usage> llm_message_meter::feed(std::string_view message) {
  if (!state_ || state_->api == llm_api::none) return std::nullopt;
  state& s = *state_;
  const auto progress = tally_message_event(s.api, message, s.counts);
  if (progress == response_progress::going_on) return std::nullopt;
  std::optional<llm_usage> usage;
  if (progress == response_progress::ended) usage = s.counts.to_usage(s.request_bytes);
  s.counts = {};
  return usage;
}

}  // namespace broker::session
