// The credential step of every intercepted request, as http_exchange::forward runs it on a parsed
// head: credential_set::plan (the head searched for real values and out-of-place dummies, in
// every encoding, then bound dummies swapped for real values), request_plan::complete, and the
// wipe of the head once it held real values. Each iteration works on a fresh copy of the parsed
// head, as each request brings its own; the copy is part of the time.
#include <benchmark/benchmark.h>

#include <string>

#include "base/secret.hpp"
#include "bench/micro/fake_session.hpp"
#include "brokers/credential_set.hpp"
#include "http/parser.hpp"

namespace {

using namespace broker;

http::message_head parsed(const std::string& wire) {
  http::parser p(http::parser::kind::request);
  if (p.feed(wire).status != http::parse_status::head_complete)
    throw std::runtime_error("bench: the request head did not parse");
  return p.head();
}

// One request through the set; `swaps` how many dummies each must become real.
void run_plan(benchmark::State& state, const brokers::credential_set& set,
              const brokers::request_context& where, const http::message_head& head, int swaps) {
  std::string no_body;
  int swapped = -1;
  for (auto _ : state) {
    std::string target = head.target;
    std::vector<http::header_field> headers = head.headers;
    auto plan = set.plan(where, head.method, target, headers, head.has_body);
    if (plan.decision().refused()) {
      state.SkipWithError("the request was refused");
      break;
    }
    const auto completed = plan.complete(head.method, target, headers, no_body);
    benchmark::DoNotOptimize(completed.action);
    benchmark::DoNotOptimize(headers.data());
    swapped = plan.decision().swapped;
    if (plan.holds_real()) {
      for (auto& h : headers) base::wipe(h.value);
      base::wipe(target);
    }
  }
  if (swapped != swaps) state.SkipWithError("the dummies were not swapped as expected");
  state.SetItemsProcessed(state.iterations());
  state.counters["credentials"] = static_cast<double>(set.size());
}

// An OpenAI API call with the session's dummy key, against the default policy's 9 credentials.
void BM_swap_bearer_default_policy(benchmark::State& state) {
  const auto& set = bench::default_credentials();
  const auto head = parsed(
      bench::llm_request_head("api.openai.com", bench::dummy_in(set, "OPENAI_API_KEY"), 2048));
  run_plan(state, set, {"api.openai.com", false, false}, head, 1);
}

// The same call with range(0) bearer credentials registered, the dummy being the last one's.
void BM_swap_bearer(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  const auto& set = bench::bearer_credentials(count);
  const std::string variable = "BROKER_BENCH_TOKEN_" + std::to_string(count - 1);
  const std::string host = "api" + std::to_string(count - 1) + ".bench.example";
  const auto head = parsed(bench::llm_request_head(host, bench::dummy_in(set, variable), 2048));
  run_plan(state, set, {host, false, false}, head, 1);
}

// A request carrying no credential (pip fetching an index page): only the search, nothing to
// swap: the cost every package download pays.
void BM_swap_none_default_policy(benchmark::State& state) {
  const auto& set = bench::default_credentials();
  const auto head = parsed(
      "GET /simple/requests/ HTTP/1.1\r\n"
      "Host: pypi.org\r\n"
      "User-Agent: pip/23.0.1 {\"ci\":null,\"cpu\":\"x86_64\",\"implementation\":{\"name\":"
      "\"CPython\",\"version\":\"3.11.2\"},\"installer\":{\"name\":\"pip\",\"version\":\"23.0.1\"},"
      "\"openssl_version\":\"OpenSSL 3.0.15 3 Sep 2024\",\"python\":\"3.11.2\"}\r\n"
      "Accept-Encoding: gzip, deflate\r\n"
      "Accept: application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; "
      "q=0.1, text/html; q=0.01\r\n"
      "Connection: keep-alive\r\n"
      "Cache-Control: max-age=0\r\n"
      "If-None-Match: \"8nqbrr2Hq8VnTq0WXbmKYg\"\r\n\r\n");
  run_plan(state, set, {"pypi.org", false, false}, head, 0);
}

BENCHMARK(BM_swap_bearer_default_policy);
BENCHMARK(BM_swap_bearer)->ArgName("credentials")->Arg(5)->Arg(50);
BENCHMARK(BM_swap_none_default_policy);

}  // namespace
