#include "session/llm_usage_fields.hpp"

#include <algorithm>
#include <exception>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/saturating.hpp"

namespace broker::session {
namespace {

using nlohmann::json;

// The audit record should not carry an arbitrarily long name a response chose for itself.
constexpr std::size_t max_model_name = 256;

// Cut at a character boundary: the audit log's JSON writer rejects broken UTF-8.
std::string model_name(const std::string& name) {
  if (name.size() <= max_model_name) return name;
  std::size_t cut = max_model_name;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  return name.substr(0, cut);
}

// The estimate's rule of thumb: a token is about 4 bytes of English text or code.
std::uint64_t tokens_for_bytes(std::uint64_t bytes) {
  return bytes / 4 + (bytes % 4 != 0 ? 1 : 0);
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::optional<std::uint64_t> count_of(const json& j, const char* key) {
  const json* v = member(j, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_unsigned()) return v->get<std::uint64_t>();
  if (v->is_number_integer() && v->get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(v->get<std::int64_t>());
  }
  return std::nullopt;
}

std::size_t string_size(const json* v) {
  return v != nullptr && v->is_string() ? v->get_ref<const std::string&>().size() : 0;
}

bool has_type(const json& j, std::string_view type) {
  const json* t = member(j, "type");
  return t != nullptr && t->is_string() && t->get_ref<const std::string&>() == type;
}

void note_model(const json& j, llm_usage_tally& t) {
  const json* m = member(j, "model");
  if (t.model.empty() && m != nullptr && m->is_string()) {
    t.model = model_name(m->get_ref<const std::string&>());
  }
}

// Anthropic reports cache writes and cache reads beside input_tokens; all three are input the
// request paid for. (OpenAI's cached tokens are already inside prompt_tokens / input_tokens.)
std::optional<std::uint64_t> anthropic_input(const json& usage) {
  const auto input = count_of(usage, "input_tokens");
  if (!input) return std::nullopt;
  return base::saturating_add(
      *input, base::saturating_add(count_of(usage, "cache_creation_input_tokens").value_or(0),
                                   count_of(usage, "cache_read_input_tokens").value_or(0)));
}

// A complete usage object, as a JSON body or a final stream event carries it.
void take_usage(llm_api api, const json& usage, llm_usage_tally& t) {
  if (!usage.is_object()) return;  // a stream's chunks carry "usage": null until the last
  std::optional<std::uint64_t> input;
  std::optional<std::uint64_t> output;
  switch (api) {
    case llm_api::openai_chat:
      input = count_of(usage, "prompt_tokens");
      output = count_of(usage, "completion_tokens");
      break;
    case llm_api::openai_responses:
      input = count_of(usage, "input_tokens");
      output = count_of(usage, "output_tokens");
      break;
    case llm_api::anthropic_messages:
      input = anthropic_input(usage);
      output = count_of(usage, "output_tokens");
      break;
    case llm_api::gemini_generate:
      input = count_of(usage, "promptTokenCount");
      if (input)
        input =
            base::saturating_add(*input, count_of(usage, "toolUsePromptTokenCount").value_or(0));
      output = count_of(usage, "candidatesTokenCount");
      // A reply of thoughts alone may leave candidatesTokenCount out.
      if (auto thoughts = count_of(usage, "thoughtsTokenCount"))
        output = base::saturating_add(output.value_or(0), *thoughts);
      break;
    case llm_api::none:
      break;
  }
  if (input) t.input = input;
  if (output) t.output = output;
}

// Chat completions: a whole answer ("message") and a stream chunk ("delta") share one shape;
// the legacy completions endpoint puts its text in "text".
void take_chat(const json& j, llm_usage_tally& t) {
  note_model(j, t);
  if (const json* usage = member(j, "usage")) take_usage(llm_api::openai_chat, *usage, t);
  const json* choices = member(j, "choices");
  if (choices == nullptr || !choices->is_array()) return;
  for (const json& choice : *choices) {
    t.text_bytes += string_size(member(choice, "text"));
    for (const char* part : {"delta", "message"}) {
      const json* m = member(choice, part);
      if (m == nullptr) continue;
      t.text_bytes += string_size(member(*m, "content")) + string_size(member(*m, "refusal")) +
                      string_size(member(*m, "reasoning_content"));
      const json* calls = member(*m, "tool_calls");
      if (calls == nullptr || !calls->is_array()) continue;
      for (const json& call : *calls) {
        if (const json* function = member(call, "function")) {
          t.text_bytes += string_size(member(*function, "arguments"));
        }
      }
    }
  }
}

// A Responses API response object: the whole JSON body, or the one a stream's
// response.created / completed / incomplete / failed event carries. Its text is counted only
// for a JSON body; a stream has already counted it delta by delta.
void take_response(const json& r, bool count_text, llm_usage_tally& t) {
  note_model(r, t);
  if (const json* usage = member(r, "usage")) take_usage(llm_api::openai_responses, *usage, t);
  const json* output = member(r, "output");
  if (!count_text || output == nullptr || !output->is_array()) return;
  for (const json& item : *output) {
    t.text_bytes += string_size(member(item, "arguments"));  // function_call
    for (const char* list : {"content", "summary"}) {        // message, reasoning
      const json* parts = member(item, list);
      if (parts == nullptr || !parts->is_array()) continue;
      for (const json& part : *parts) {
        t.text_bytes += string_size(member(part, "text")) + string_size(member(part, "refusal"));
      }
    }
  }
}

void take_responses_event(const json& j, llm_usage_tally& t) {
  // Every streamed piece of output — output_text, refusal, function_call_arguments,
  // reasoning_summary_text — is a "<...>.delta" event with a string "delta".
  const json* type = member(j, "type");
  if (type != nullptr && type->is_string() &&
      type->get_ref<const std::string&>().ends_with(".delta")) {
    t.text_bytes += string_size(member(j, "delta"));
  }
  if (const json* r = member(j, "response")) take_response(*r, false, t);
}

void count_anthropic_block(const json& block, llm_usage_tally& t) {
  t.text_bytes += string_size(member(block, "text")) + string_size(member(block, "thinking")) +
                  string_size(member(block, "partial_json"));
  const json* input = member(block, "input");  // a tool_use block's arguments, in a JSON body
  if (input != nullptr && input->is_object()) t.text_bytes += input->dump().size();
}

void take_anthropic_message(const json& j, llm_usage_tally& t) {
  note_model(j, t);
  if (const json* usage = member(j, "usage")) take_usage(llm_api::anthropic_messages, *usage, t);
  const json* content = member(j, "content");
  if (content == nullptr || !content->is_array()) return;
  for (const json& block : *content) count_anthropic_block(block, t);
}

// message_start carries the input count and a placeholder output count; message_delta carries
// the output count so far (cumulative: the last one is the total), and in newer API versions
// the input counts again.
void take_anthropic_event(const json& j, llm_usage_tally& t) {
  if (has_type(j, "message_start")) {
    const json* message = member(j, "message");
    if (message == nullptr) return;
    note_model(*message, t);
    const json* usage = member(*message, "usage");
    if (usage == nullptr) return;
    if (auto input = anthropic_input(*usage)) t.input = input;
    t.provisional_output = count_of(*usage, "output_tokens").value_or(0);
  } else if (has_type(j, "content_block_delta")) {
    if (const json* delta = member(j, "delta")) count_anthropic_block(*delta, t);
  } else if (has_type(j, "message_delta")) {
    const json* usage = member(j, "usage");
    if (usage == nullptr) return;
    if (auto input = anthropic_input(*usage)) t.input = input;
    if (auto output = count_of(*usage, "output_tokens")) t.output = output;
  }
}

// One GenerateContentResponse: a whole body, or one chunk of a stream (each chunk carries its
// own new text, and the usage so far).
void take_gemini_chunk(const json& j, llm_usage_tally& t) {
  // Code Assist wraps each GenerateContentResponse: {"response": {...}, "traceId": ...}.
  if (const json* inner = member(j, "response");
      inner != nullptr && inner->is_object() && member(j, "candidates") == nullptr)
    return take_gemini_chunk(*inner, t);
  const json* version = member(j, "modelVersion");
  if (t.model.empty() && version != nullptr && version->is_string())
    t.model = model_name(version->get_ref<const std::string&>());
  if (const json* usage = member(j, "usageMetadata"))
    take_usage(llm_api::gemini_generate, *usage, t);
  const json* candidates = member(j, "candidates");
  if (candidates == nullptr || !candidates->is_array()) return;
  for (const json& candidate : *candidates) {
    const json* content = member(candidate, "content");
    const json* parts = content == nullptr ? nullptr : member(*content, "parts");
    if (parts == nullptr || !parts->is_array()) continue;
    for (const json& part : *parts) {
      t.text_bytes += string_size(member(part, "text"));
      const json* call = member(part, "functionCall");
      if (call != nullptr && call->is_object()) t.text_bytes += call->dump().size();
    }
  }
}

void take_gemini(const json& j, llm_usage_tally& t) {
  if (!j.is_array()) return take_gemini_chunk(j, t);
  for (const json& chunk : j) take_gemini_chunk(chunk, t);  // streamGenerateContent without SSE
}

void take_document(llm_api api, const json& j, llm_usage_tally& t) {
  switch (api) {
    case llm_api::openai_chat:
      take_chat(j, t);
      break;
    case llm_api::openai_responses:
      take_response(j, true, t);
      break;
    case llm_api::anthropic_messages:
      take_anthropic_message(j, t);
      break;
    case llm_api::gemini_generate:
      take_gemini(j, t);
      break;
    case llm_api::none:
      break;
  }
}

void take_event(llm_api api, const json& j, llm_usage_tally& t) {
  switch (api) {
    case llm_api::openai_chat:
      take_chat(j, t);
      break;
    case llm_api::openai_responses:
      take_responses_event(j, t);
      break;
    case llm_api::anthropic_messages:
      take_anthropic_event(j, t);
      break;
    case llm_api::gemini_generate:
      take_gemini_chunk(j, t);
      break;
    case llm_api::none:
      break;
  }
}

}  // namespace

llm_usage llm_usage_tally::to_usage(std::uint64_t request_bytes) const {
  llm_usage u;
  u.model = model;
  u.input_tokens = input ? *input : tokens_for_bytes(request_bytes);
  u.output_tokens = output ? *output : std::max(provisional_output, tokens_for_bytes(text_bytes));
  u.estimated = !input || !output;
  return u;
}

// nlohmann's parse with allow_exceptions=false reports malformed text as a discarded value;
// the catches are for what remains (a type error this code failed to guard against).

void tally_stream_event(llm_api api, std::string_view data, llm_usage_tally& t) {
  if (data == "[DONE]") return;  // OpenAI's end-of-stream sentinel, not JSON
  try {
    const json j = json::parse(data, nullptr, false);
    if (j.is_object()) take_event(api, j, t);
  } catch (const std::exception&) {
  }
}

response_progress tally_message_event(llm_api api, std::string_view data, llm_usage_tally& t) {
  try {
    const json j = json::parse(data, nullptr, false);
    if (!j.is_object()) return response_progress::going_on;
    take_event(api, j, t);
    if (api != llm_api::openai_responses) return response_progress::going_on;
    if (has_type(j, "response.completed") || has_type(j, "response.incomplete") ||
        has_type(j, "response.failed"))
      return response_progress::ended;
    if (has_type(j, "error")) return response_progress::failed;
  } catch (const std::exception&) {
  }
  return response_progress::going_on;
}

namespace {

// A request carries the whole conversation; only its top level's "type" keys are looked at,
// without building the document.
struct top_level_types : nlohmann::json_sax<json> {
  bool object = false;   // the text is one JSON object
  bool creates = false;  // one of its top-level "type"s is response.create
  int depth = 0;
  bool at_type = false;  // the next value is a top-level "type"'s

  bool scalar() {
    at_type = false;
    return true;
  }
  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool string(string_t& s) override {
    if (at_type && s == "response.create") creates = true;
    return scalar();
  }
  bool start_object(std::size_t) override {
    if (depth == 0) object = true;
    at_type = false;
    ++depth;
    return true;
  }
  bool key(string_t& k) override {
    at_type = depth == 1 && k == "type";
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    at_type = false;
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

}  // namespace

bool is_request_event(llm_api api, std::string_view data) {
  if (api != llm_api::openai_responses) return false;
  top_level_types types;
  try {
    const bool parsed = json::sax_parse(data, &types);
    // Anything the API might still read as a request counts as one: a text that does not
    // parse here, or a type repeated with response.create among its values (parsers differ
    // on which of two keys wins).
    if (!parsed || !types.object) return true;
    return types.creates;
  } catch (const std::exception&) {
    return true;
  }
}

bool tally_body(llm_api api, std::string_view body, llm_usage_tally& t) {
  try {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return false;
    take_document(api, j, t);
  } catch (const std::exception&) {
  }
  return true;
}

void tally_usage_object(llm_api api, std::string_view usage, llm_usage_tally& t) {
  try {
    take_usage(api, json::parse(usage, nullptr, false), t);
  } catch (const std::exception&) {
  }
}

void tally_model(std::string_view raw, llm_usage_tally& t) {
  if (!t.model.empty() || raw.empty()) return;
  try {
    const json name = json::parse("\"" + std::string(raw) + "\"", nullptr, false);
    if (name.is_string()) t.model = model_name(name.get_ref<const std::string&>());
  } catch (const std::exception&) {
  }
}

void tally_text_bytes(std::uint64_t bytes, llm_usage_tally& t) {
  t.text_bytes = base::saturating_add(t.text_bytes, bytes);
}

}  // namespace broker::session
