// The response scrubber (brokers::stream_scrubber) as relay_body runs it on every response body
// of an intercepted exchange: a scrubber made for the response over the plan's patterns (every
// real value → its dummy), fed the body as 16 KiB TLS records arrive, finished at its end.
// Args: registered credentials, body bytes, real values in the body (0 is the common case). And
// a response head's fields, scrubbed one by one as the relay does.
#include <benchmark/benchmark.h>

#include <string>

#include "bench/micro/fake_session.hpp"
#include "brokers/scrub_index.hpp"
#include "brokers/scrubber.hpp"
#include "http/parser.hpp"

namespace {

using namespace broker;

constexpr std::size_t tls_record = 16 * 1024;

// A streamed completion of `size` bytes with `secrets` real values of the set written over it at
// evenly spread places (each a different credential's).
std::string body_with_secrets(std::size_t credentials, std::size_t size, std::size_t secrets) {
  std::string body = bench::llm_stream_text(size);
  for (std::size_t k = 0; k < secrets; ++k) {
    const std::string_view real = bench::bearer_real_value(credentials, k * credentials / secrets);
    body.replace((k + 1) * size / (secrets + 1), real.size(), real);
  }
  body.resize(size);
  return body;
}

void BM_scrub_response_body(benchmark::State& state) {
  const auto credentials = static_cast<std::size_t>(state.range(0));
  const auto size = static_cast<std::size_t>(state.range(1));
  const auto secrets = static_cast<std::size_t>(state.range(2));
  const std::vector<brokers::scrub_pattern> patterns =
      bench::bearer_credentials(credentials).response_patterns();
  const std::string body = body_with_secrets(credentials, size, secrets);

  std::string released;
  std::size_t matches = 0, out_bytes = 0;
  for (auto _ : state) {
    brokers::stream_scrubber scrub(patterns);
    out_bytes = 0;
    for (std::size_t at = 0; at < body.size(); at += tls_record) {
      scrub.feed(std::string_view(body).substr(at, tls_record), released);
      out_bytes += released.size();
      benchmark::DoNotOptimize(released.data());
      released.clear();  // written to the client
    }
    scrub.finish(released);
    out_bytes += released.size();
    released.clear();
    matches = scrub.matches();
  }
  if (matches != secrets || out_bytes != body.size()) state.SkipWithError("scrubbed wrongly");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.counters["patterns"] = static_cast<double>(patterns.size());
}

// A response head's names and values, scrubbed as scrub_head does: one index for the head, each
// field searched by itself (none holds a real value, the common case).
void BM_scrub_response_head(benchmark::State& state) {
  const auto credentials = static_cast<std::size_t>(state.range(0));
  const std::vector<brokers::scrub_pattern> patterns =
      bench::bearer_credentials(credentials).response_patterns();
  http::parser p(http::parser::kind::response, "POST");
  if (p.feed(bench::llm_response_head(false, 1024)).status != http::parse_status::head_complete)
    state.SkipWithError("not a head");
  const http::message_head head = p.head();
  std::size_t found = 0;
  for (auto _ : state) {
    http::message_head copy = head;  // scrubbed in place, as the relay does its own
    const brokers::scrub_index index(patterns, brokers::scrub_index::search::direct);
    found = brokers::scrub_value(copy.reason, index);
    for (auto& h : copy.headers)
      found += brokers::scrub_value(h.name, index) + brokers::scrub_value(h.value, index);
    benchmark::DoNotOptimize(copy.headers.data());
  }
  if (found != 0) state.SkipWithError("scrubbed a head that holds no real value");
  state.counters["fields"] = static_cast<double>(head.headers.size());
  state.counters["patterns"] = static_cast<double>(patterns.size());
}

BENCHMARK(BM_scrub_response_head)->ArgName("credentials")->Arg(5)->Arg(50);

BENCHMARK(BM_scrub_response_body)
    ->ArgNames({"credentials", "bytes", "secrets"})
    ->ArgsProduct({{5, 50}, {16 * 1024, 1024 * 1024}, {0, 3}});

}  // namespace
