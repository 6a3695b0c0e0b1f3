// The request body check of every intercepted request with a body (relay_while_pumping): the
// patterns made for the destination (credential_set::request_body_scan: every real value and the
// dummies not bound there, plain, base64 at every alignment and percent-encoded), a scrubber
// indexed over them, and the body searched as it arrives in 16 KiB reads. The default policy's
// credentials, a Chat Completions body to api.openai.com (nothing in it to refuse).
#include <benchmark/benchmark.h>

#include <string>

#include "bench/micro/fake_session.hpp"
#include "brokers/credential_set.hpp"
#include "brokers/scrubber.hpp"

namespace {

using namespace broker;

constexpr std::size_t client_read = 16 * 1024;
const brokers::request_context openai{"api.openai.com", false, false};

// What each request pays before its first body byte: the patterns and their index.
void BM_request_body_scan_setup(benchmark::State& state) {
  const auto& set = bench::default_credentials();
  std::size_t patterns = 0;
  for (auto _ : state) {
    const brokers::body_scan checks = set.request_body_scan(openai);
    brokers::stream_scrubber scan(checks.patterns());
    benchmark::DoNotOptimize(scan.active());
    patterns = checks.patterns().size();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["patterns"] = static_cast<double>(patterns);
}

void BM_request_body_scan(benchmark::State& state) {
  const auto& set = bench::default_credentials();
  const std::string body = bench::llm_request_body(static_cast<std::size_t>(state.range(0)));
  std::string released;
  bool refused = false;
  for (auto _ : state) {
    const brokers::body_scan checks = set.request_body_scan(openai);
    brokers::stream_scrubber scan(checks.patterns());
    for (std::size_t at = 0; at < body.size(); at += client_read) {
      if (scan.feed(std::string_view(body).substr(at, client_read), released)) refused = true;
      benchmark::DoNotOptimize(released.data());
      released.clear();  // written upstream
    }
    if (scan.finish(released)) refused = true;
    released.clear();
  }
  if (refused) state.SkipWithError("the body was refused");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}

BENCHMARK(BM_request_body_scan_setup);
BENCHMARK(BM_request_body_scan)->ArgName("bytes")->Arg(2 * 1024)->Arg(64 * 1024)->Arg(1024 * 1024);

}  // namespace
