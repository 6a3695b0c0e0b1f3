// LLM usage metering (session/llm_usage.hpp) and the SSE reader under it (session/sse_reader.hpp).
// Input: one selector byte (API and Content-Type), then the response body. The meter never
// throws and counts the same whether the body comes whole, at input-derived split points or a
// byte at a time; the reader, with a small event limit too, yields the same events either way.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "session/llm_usage.hpp"
#include "session/sse_reader.hpp"

namespace {

using namespace broker;
using fuzz::check;
using session::llm_api;

constexpr llm_api apis[] = {llm_api::none, llm_api::openai_chat, llm_api::openai_responses,
                            llm_api::anthropic_messages};
// The documented kinds and the ones that are sniffed from the body.
constexpr std::string_view content_types[] = {"application/json",
                                              "text/event-stream",
                                              "",
                                              "application/octet-stream",
                                              "application/problem+json; charset=utf-8",
                                              " Text/Event-Stream ; charset=utf-8",
                                              "text/plain",
                                              "+json"};

constexpr std::size_t max_bytewise = 512;
// The audit record's limit on a model name (llm_usage_fields.hpp).
constexpr std::size_t max_model_name = 256;

session::llm_usage meter(llm_api api, std::string_view content_type,
                         const std::vector<std::string_view>& pieces, std::uint64_t request_bytes) {
  session::llm_usage_meter m(api, content_type);
  m.set_request_bytes(request_bytes);
  for (std::string_view piece : pieces) m.feed(piece);
  session::llm_usage usage = m.finish();
  m.feed("data: {\"usage\":{\"prompt_tokens\":7}}\n\n");
  const session::llm_usage again = m.finish();
  check(again.input_tokens == usage.input_tokens && again.output_tokens == usage.output_tokens &&
            again.estimated == usage.estimated && again.model == usage.model,
        "finish() changed after a later feed");
  return usage;
}

void check_usage(const session::llm_usage& u, llm_api api) {
  if (api == llm_api::none)
    check(u.total() == 0 && !u.estimated && u.model.empty(), "api none metered something");
  check(u.model.size() <= max_model_name, "model name longer than its limit");
  try {
    (void)nlohmann::json(u.model).dump();
  } catch (const nlohmann::json::type_error&) {
    fuzz::fail("model name is not valid UTF-8 (the audit log would reject it)");
  }
}

bool same_usage(const session::llm_usage& a, const session::llm_usage& b) {
  return a.input_tokens == b.input_tokens && a.output_tokens == b.output_tokens &&
         a.estimated == b.estimated && a.model == b.model;
}

using events = std::vector<std::pair<std::string, std::string>>;

events read_events(std::size_t limit, const std::vector<std::string_view>& pieces) {
  session::sse_reader reader(limit);
  events out;
  auto on_event = [&out, limit](std::string_view type, std::string_view data) {
    check(data.size() < limit, "an event's data outgrew max_event_bytes");
    check(type.find_first_of("\r\n") == std::string_view::npos, "a line break in an event type");
    check(data.find('\r') == std::string_view::npos, "a CR in an event's data");
    out.emplace_back(type, data);
  };
  for (std::string_view piece : pieces) reader.feed(piece, on_event);
  reader.finish(on_event);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::byte_reader in(fuzz::as_text(data, size));
  const std::uint8_t selector = in.byte();
  const llm_api api = apis[selector % std::size(apis)];
  const std::string_view content_type =
      content_types[selector / std::size(apis) % std::size(content_types)];
  const std::string_view body = in.rest();
  const std::uint64_t seed = fuzz::hash_of(body);
  const std::vector<std::string_view> split = fuzz::pieces_of(body, seed);
  const std::uint64_t request_bytes = seed % 100000;

  const session::llm_usage whole = meter(api, content_type, {body}, request_bytes);
  check_usage(whole, api);
  check(same_usage(whole, meter(api, content_type, split, request_bytes)),
        "split changed the metered usage");
  if (body.size() <= max_bytewise)
    check(same_usage(whole, meter(api, content_type, fuzz::bytes_of(body), request_bytes)),
          "byte-at-a-time feeding changed the metered usage");

  // The reader on its own: the default limit, and a small one that makes events overflow.
  const std::size_t small_limit = 1 + seed % 48;
  for (std::size_t limit : {session::sse_reader::default_max_event_bytes, small_limit}) {
    const events expected = read_events(limit, {body});
    check(read_events(limit, split) == expected, "split changed the SSE events");
    if (body.size() <= max_bytewise)
      check(read_events(limit, fuzz::bytes_of(body)) == expected,
            "byte-at-a-time feeding changed the SSE events");
  }
  return 0;
}
