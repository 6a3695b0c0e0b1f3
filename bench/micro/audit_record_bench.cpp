// What every request pays to be audited (docs/audit-log.md): its exchange record built as text
// (session::exchange_record), and that record stamped, hash-chained and written by the session's
// log (audit_log::write, one write(2) to a file in /tmp); beside them the JSON-document path the
// record took before (nlohmann::ordered_json, dumped), and the host normalization every
// request's policy check starts with (config::normalize_host).
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "config/host_pattern.hpp"
#include "session/audit_log.hpp"
#include "session/audit_record.hpp"

namespace {

using namespace broker;

session::audit_entry entry() {
  session::audit_entry e;
  e.event = "request";
  e.method = "GET";
  e.scheme = "https";
  e.host = "api.github.com";
  e.port = 443;
  e.target = "/repos/octo/hello/pulls?state=open&per_page=100";
  e.status = 200;
  e.bytes_out = 512;
  e.bytes_in = 20311;
  e.ms = 41.23;
  e.rule = "allow[3]";
  e.credential = "github";
  e.pid = 4242;
  e.exe = "/usr/bin/git";
  e.http2 = true;
  return e;
}

std::string no_scrub(std::string_view s) {
  return std::string(s);
}

void BM_exchange_record_text(benchmark::State& state) {
  const auto e = entry();
  for (auto _ : state) {
    auto fields = session::exchange_record(e, no_scrub);
    benchmark::DoNotOptimize(fields.text().data());
  }
}
BENCHMARK(BM_exchange_record_text);

// The same fields through a JSON document, as the record was built before.
void BM_exchange_record_document(benchmark::State& state) {
  const auto e = entry();
  for (auto _ : state) {
    nlohmann::ordered_json j;
    j["event"] = e.event;
    j["pid"] = e.pid;
    j["exe"] = e.exe;
    j["method"] = e.method;
    j["scheme"] = e.scheme;
    j["host"] = e.host;
    j["port"] = e.port;
    j["path"] = e.target;
    j["status"] = e.status;
    j["bytes_out"] = e.bytes_out;
    j["bytes_in"] = e.bytes_in;
    j["ms"] = std::round(e.ms * 10.0) / 10.0;
    j["decision"] = "allow";
    j["rule"] = e.rule;
    j["credential"] = e.credential;
    j["llm_tokens"] = nullptr;
    j["http"] = "2";
    auto text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    benchmark::DoNotOptimize(text.data());
  }
}
BENCHMARK(BM_exchange_record_document);

void BM_audit_log_write(benchmark::State& state) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("broker-audit-bench-" + std::to_string(::getpid()));
  auto log = session::audit_log::open(dir, "s-bench");
  const auto fields = session::exchange_record(entry(), no_scrub);
  for (auto _ : state) {
    if (!log->write(fields)) {
      state.SkipWithError("the log failed");
      break;
    }
  }
  log.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_audit_log_write);

void BM_normalize_host(benchmark::State& state) {
  for (auto _ : state) {
    auto host = config::normalize_host("API.GitHub.com");
    benchmark::DoNotOptimize(host);
  }
}
BENCHMARK(BM_normalize_host);

}  // namespace
