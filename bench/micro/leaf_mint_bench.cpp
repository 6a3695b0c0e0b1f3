// The leaf certificate an intercepted connection is presented with (certs::leaf_cache::get): on a
// host the session has not met yet one is minted (an ECDSA P-256 signature by the session CA over
// a new certificate; the leaf key is shared), afterwards it comes from the LRU cache.
#include <benchmark/benchmark.h>

#include <atomic>
#include <string>

#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"

namespace {

using namespace broker;

const certs::certificate_authority& session_ca() {
  static const auto ca = certs::certificate_authority::generate("broker bench session CA");
  return ca;
}

// A host name never asked for before in this process, so every get() misses (past 1024 hosts
// the cache also evicts, as a long session does).
void BM_leaf_mint_cache_miss(benchmark::State& state) {
  static std::atomic<std::uint64_t> next{0};
  certs::leaf_cache cache(session_ca());
  for (auto _ : state) {
    const std::string host = "h" + std::to_string(next++) + ".objects.bench.example";
    auto leaf = cache.get(host);
    benchmark::DoNotOptimize(leaf.get());
  }
  if (cache.minted() != static_cast<std::size_t>(state.iterations()))
    state.SkipWithError("a get() hit");
  state.SetItemsProcessed(state.iterations());
}

void BM_leaf_cache_hit(benchmark::State& state) {
  certs::leaf_cache cache(session_ca());
  for (int i = 0; i < 100; ++i) cache.get("h" + std::to_string(i) + ".bench.example");
  cache.get("api.openai.com");
  for (auto _ : state) {
    auto leaf = cache.get("api.openai.com");
    benchmark::DoNotOptimize(leaf.get());
  }
  if (cache.minted() != 101) state.SkipWithError("a get() missed");
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_leaf_mint_cache_miss);
BENCHMARK(BM_leaf_cache_hit);

}  // namespace
