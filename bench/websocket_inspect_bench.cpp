// Per-message cost of WebSocket inspection (docs/security-model.md): a client message read from its
// masked frame, searched for every real value and unbound dummy of the default policy's credentials
// (plain, base64 at every alignment, percent-encoded) and framed again masked; a server message
// read, scrubbed of real values and framed again. No sockets, no TLS: what the broker adds per
// message on top of relaying bytes.
//
//   cmake -S . -B build-bench -G Ninja -DBROKER_BENCH=ON -DBROKER_TESTS=OFF
//   cmake --build build-bench -j2 --target websocket_inspect_bench
//   build-bench/bench/websocket_inspect_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <string>

#include "bench/micro/fake_session.hpp"
#include "brokers/credential_set.hpp"
#include "config/policy.hpp"
#include "http/websocket.hpp"
#include "proxy/websocket_inspector.hpp"

namespace {

using namespace broker;
namespace ws = http::websocket;

// The default policy's credentials with fake values of the real shapes (bench/micro).
struct loaded {
  const brokers::credential_set& set;
  brokers::body_scan scan;
  std::vector<brokers::scrub_pattern> inbound;
};

const loaded& credentials() {
  static const loaded l = [] {
    const auto& set = bench::default_credentials();
    return loaded{set,
                  set.request_body_scan(brokers::request_context{"api.openai.com", false, false}),
                  set.response_patterns()};
  }();
  return l;
}

// JSON-looking text of `size` bytes in the base64 alphabet (the hardest text for the base64
// patterns to rule out), never containing a credential.
std::string message_text(std::size_t size) {
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ ";
  std::mt19937 rng(42);
  std::string out = R"({"type":"response.create","input":")";
  while (out.size() + 2 < size) out += alphabet[rng() % (sizeof alphabet - 1)];
  out += "\"}";
  return out;
}

proxy::websocket_inspector make_inspector(const loaded& l, session::llm_api llm) {
  proxy::websocket_hooks hooks;
  hooks.mask_key = [n = 0u]() mutable { return 0x9e3779b9u * ++n; };
  hooks.admit_llm_request = [] { return std::optional<live::refusal>(); };
  hooks.llm_usage = [](const session::llm_usage&) { return true; };
  return proxy::websocket_inspector(
      proxy::websocket_checks{&l.scan, "api.openai.com", false, l.inbound, llm,
                              proxy::limits::max_websocket_message},
      std::move(hooks));
}

void client_message(benchmark::State& state, session::llm_api llm) {
  const auto& l = credentials();
  auto inspect = make_inspector(l, llm);
  const std::string frame =
      ws::encode_frame(ws::opcode::text, message_text(state.range(0)), 0x12345678u);
  std::string out;
  for (auto _ : state) {
    out.clear();
    inspect.from_client(frame, out);
    benchmark::DoNotOptimize(out.data());
  }
  if (inspect.ending()) state.SkipWithError("the message was refused");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame.size()));
  state.counters["patterns"] = static_cast<double>(l.scan.patterns().size());
}

void server_message(benchmark::State& state) {
  const auto& l = credentials();
  auto inspect = make_inspector(l, session::llm_api::none);
  const std::string frame = ws::encode_frame(ws::opcode::text, message_text(state.range(0)));
  std::string out;
  for (auto _ : state) {
    out.clear();
    inspect.from_server(frame, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame.size()));
  state.counters["patterns"] = static_cast<double>(l.inbound.size());
}

void BM_client_message(benchmark::State& state) {
  client_message(state, session::llm_api::none);
}
// On a Responses API connection each text message is also looked at for response.create.
void BM_client_message_responses_api(benchmark::State& state) {
  client_message(state, session::llm_api::openai_responses);
}
void BM_server_message(benchmark::State& state) {
  server_message(state);
}

BENCHMARK(BM_client_message)->Arg(200)->Arg(80 * 1024);
BENCHMARK(BM_client_message_responses_api)->Arg(200)->Arg(80 * 1024);
BENCHMARK(BM_server_message)->Arg(200)->Arg(80 * 1024);

}  // namespace

BENCHMARK_MAIN();
