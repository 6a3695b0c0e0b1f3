// Metering bodies that are odd rather than typical: line endings, comments, sniffed types,
// malformed, truncated and oversized bodies, long names.
#include "session/llm_usage.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "tests/unit/session/llm_usage_fixtures.hpp"

using broker::session::classify_llm_request;
using namespace llm_usage_testing;
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
