// What `broker wrap` does on its main thread before the command starts, piece by piece
// (wrap/run.cpp's start_session and launch_child): the session CA made, the TLS contexts, the
// trust bundle written, the token endpoint transport made, the audit key read. Together with
// the namespaces and the home's views they are `wrap -- true`'s overhead over `true` (issue 32
// item 4); each figure here is one of those steps alone, in a warm process.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "certs/ca.hpp"
#include "certs/leaf_cache.hpp"
#include "certs/tls_contexts.hpp"
#include "certs/trust_bundle.hpp"
#include "live/token_client.hpp"
#include "session/audit_key.hpp"

namespace {

using namespace broker;
namespace fs = std::filesystem;

fs::path scratch() {
  const fs::path dir =
      fs::temp_directory_path() / ("session-start-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

void session_ca(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(
        certs::certificate_authority::generate("broker session CA s-bench", 30));
}
BENCHMARK(session_ca)->Unit(benchmark::kMicrosecond);

void tls_contexts(benchmark::State& state) {
  const auto ca = std::make_shared<certs::certificate_authority>(
      certs::certificate_authority::generate("broker session CA s-bench", 30));
  const auto leaves = std::make_shared<certs::leaf_cache>(*ca);
  for (auto _ : state)
    benchmark::DoNotOptimize(
        std::make_shared<certs::tls_contexts>(leaves, std::vector<fs::path>{}));
}
BENCHMARK(tls_contexts)->Unit(benchmark::kMicrosecond);

void trust_bundle(benchmark::State& state) {
  const auto ca = certs::certificate_authority::generate("broker session CA s-bench", 30);
  const fs::path file = scratch() / "bundle.pem";
  for (auto _ : state) certs::write_trust_bundle(file, ca, base::durability::session);
  fs::remove_all(file.parent_path());
}
BENCHMARK(trust_bundle)->Unit(benchmark::kMicrosecond);

void token_transport(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(live::make_provider_transport({}, {}));
}
BENCHMARK(token_transport)->Unit(benchmark::kMicrosecond);

void audit_key(benchmark::State& state) {
  const fs::path file = scratch() / "audit-key";
  session::audit_key::load_or_create(file);
  for (auto _ : state) benchmark::DoNotOptimize(session::audit_key::load_or_create(file));
  fs::remove_all(file.parent_path());
}
BENCHMARK(audit_key)->Unit(benchmark::kMicrosecond);

}  // namespace
