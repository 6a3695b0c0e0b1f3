// http::parser (llhttp) on what every intercepted exchange parses: the head of an LLM API POST
// (13 fields), the head of its response (18 fields), and a chunked response body decoded for the
// scrubber (relay_body_bytes: chunk framing removed, fed as 16 KiB TLS records arrive), and the
// response head serialized for the client. A new parser per message, as the proxy makes one.
#include <benchmark/benchmark.h>

#include <string>

#include "bench/micro/fake_session.hpp"
#include "http/message.hpp"
#include "http/parser.hpp"

namespace {

using namespace broker;

constexpr std::size_t tls_record = 16 * 1024;  // what one read of an upstream usually brings

void BM_parse_request_head(benchmark::State& state) {
  const std::string wire = bench::llm_request_head(
      "api.openai.com", "sk-proj-Bench0Dummy0Key0123456789abcdefghijklmnopqrstuvwxyzAB", 2048);
  for (auto _ : state) {
    http::parser p(http::parser::kind::request);
    const auto r = p.feed(wire);
    if (r.status != http::parse_status::head_complete) state.SkipWithError("not a head");
    benchmark::DoNotOptimize(p.head().headers.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
  state.SetItemsProcessed(state.iterations());
}

void BM_parse_response_head(benchmark::State& state) {
  const std::string wire = bench::llm_response_head(false, 1024);
  for (auto _ : state) {
    http::parser p(http::parser::kind::response, "POST");
    const auto r = p.feed(wire);
    if (r.status != http::parse_status::head_complete) state.SkipWithError("not a head");
    benchmark::DoNotOptimize(p.head().headers.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
  state.SetItemsProcessed(state.iterations());
}

// The response head as it goes to the client (send_head): hop-by-hop fields dropped, the names
// Connection lists among them, once per field.
void BM_serialize_response_head(benchmark::State& state) {
  http::parser p(http::parser::kind::response, "POST");
  if (p.feed(bench::llm_response_head(false, 1024)).status != http::parse_status::head_complete)
    state.SkipWithError("not a head");
  http::message_head head = p.head();
  head.headers.push_back({"Connection", "keep-alive, x-upstream-trace"});
  head.headers.push_back({"X-Upstream-Trace", "a1b2c3"});
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string wire = http::serialize_response_head(head);
    bytes = wire.size();
    benchmark::DoNotOptimize(wire.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["fields"] = static_cast<double>(head.headers.size());
}

// A 64 KiB streamed completion in chunks of range(0) bytes (an SSE event each is ~250 bytes;
// servers that buffer send 16 KiB ones): head and body parsed, the body decoded piece by piece.
void BM_decode_chunked_body(benchmark::State& state) {
  const std::size_t chunk = static_cast<std::size_t>(state.range(0));
  const std::string text = bench::llm_stream_text(64 * 1024);
  std::string body_wire;
  for (std::size_t at = 0; at < text.size(); at += chunk)
    http::frame_body(body_wire, std::string_view(text).substr(at, chunk), true,
                     at + chunk >= text.size());
  const std::string wire = bench::llm_response_head(true) + body_wire;

  std::string decoded;
  std::size_t decoded_total = 0;
  for (auto _ : state) {
    http::parser p(http::parser::kind::response, "POST");
    std::string_view rest = wire;
    auto r = p.feed(rest.substr(0, tls_record));
    rest.remove_prefix(r.consumed);
    decoded_total = 0;
    while (r.status != http::parse_status::message_complete) {
      if (r.status == http::parse_status::error || rest.empty()) {
        state.SkipWithError("the body did not parse");
        break;
      }
      r = p.feed(rest.substr(0, tls_record), &decoded);
      rest.remove_prefix(r.consumed);
      decoded_total += decoded.size();
      benchmark::DoNotOptimize(decoded.data());
      decoded.clear();  // written to the client, as write_scrubbed does
    }
  }
  if (decoded_total != text.size()) state.SkipWithError("the decoded body differs");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
  state.SetItemsProcessed(state.iterations());
  state.counters["chunks"] = static_cast<double>((text.size() + chunk - 1) / chunk);
}

BENCHMARK(BM_parse_request_head);
BENCHMARK(BM_parse_response_head);
BENCHMARK(BM_serialize_response_head);
BENCHMARK(BM_decode_chunked_body)->Arg(256)->Arg(16 * 1024);

}  // namespace
