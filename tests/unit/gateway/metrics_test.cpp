#include "gateway/metrics.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

using namespace broker::gateway;
using broker::session::audit_entry;

namespace {

audit_entry request(std::uint64_t out, std::uint64_t in) {
  audit_entry e;
  e.event = "request";
  e.bytes_out = out;
  e.bytes_in = in;
  return e;
}

audit_entry refused(std::string code) {
  audit_entry e;
  e.event = "refused";
  e.allowed = false;
  e.error = std::move(code);
  return e;
}

std::size_t count_of(const std::string& text, std::string_view needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.starts_with(line + "\n") || text.find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("render writes every family, its labels and values, families in name order",
          "[metrics]") {
  metrics m;
  auto e = request(10, 20);
  e.credential = "github";
  e.llm_tokens = 7;
  m.exchange("s-1", e);
  m.exchange("s-1", refused("policy_denied"));
  m.llm_cost("s-1", "github", "gpt-x", 0.25);
  CHECK(m.render() ==
        "# HELP broker_bytes_total Bytes relayed upstream (out) and back to the client (in).\n"
        "# TYPE broker_bytes_total counter\n"
        "broker_bytes_total{session=\"s-1\",direction=\"out\"} 10\n"
        "broker_bytes_total{session=\"s-1\",direction=\"in\"} 20\n"
        "# HELP broker_llm_cost_usd_total LLM API cost in US dollars, by credential.\n"
        "# TYPE broker_llm_cost_usd_total counter\n"
        "broker_llm_cost_usd_total{session=\"s-1\",credential=\"github\"} 0.25\n"
        "# HELP broker_llm_tokens_total LLM API tokens (input + output), by credential.\n"
        "# TYPE broker_llm_tokens_total counter\n"
        "broker_llm_tokens_total{session=\"s-1\",credential=\"github\"} 7\n"
        "# HELP broker_refusals_total Requests and connections refused, by error code.\n"
        "# TYPE broker_refusals_total counter\n"
        "broker_refusals_total{session=\"s-1\",code=\"policy_denied\"} 1\n"
        "# HELP broker_requests_total Requests, tunnels and refusals audited, by audit event.\n"
        "# TYPE broker_requests_total counter\n"
        "broker_requests_total{session=\"s-1\",event=\"refused\"} 1\n"
        "broker_requests_total{session=\"s-1\",event=\"request\"} 1\n");
}

TEST_CASE("an empty registry still names its families", "[metrics]") {
  const auto text = metrics().render();
  CHECK(count_of(text, "# TYPE ") == 5);
  CHECK(count_of(text, "\nbroker_") == 0);
}

TEST_CASE("label values are escaped and made valid UTF-8", "[metrics]") {
  metrics m;
  m.exchange("a\"b\\c\nd", request(1, 2));
  m.exchange("caf\xC3\xA9 \xFF\xC3", request(0, 0));  // é, then a stray byte and a cut sequence
  m.exchange("\xED\xA0\x80", request(0, 0));          // a UTF-16 surrogate, not UTF-8
  const auto text = m.render();
  CHECK(has_line(text, R"(broker_bytes_total{session="a\"b\\c\nd",direction="out"} 1)"));
  CHECK(has_line(text,
                 "broker_bytes_total{session=\"caf\xC3\xA9 \xEF\xBF\xBD\xEF\xBF\xBD\","
                 "direction=\"in\"} 0"));
  CHECK(has_line(text,
                 "broker_bytes_total{session=\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\","
                 "direction=\"in\"} 0"));
  // No raw newline inside a sample: every line is a comment or a sample.
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    const auto line = text.substr(start, end - start);
    CHECK((line.starts_with("# ") || line.starts_with("broker_")));
    start = end + 1;
  }
}

TEST_CASE("HELP and TYPE appear once per family however many series or writers", "[metrics]") {
  metrics m;
  for (const char* s : {"s-1", "s-2", "s-3"}) {
    m.exchange(s, request(1, 1));
    m.exchange(s, refused("budget_exhausted"));
  }
  m.add_collector([](exposition& out) {
    out.family("broker_leaf_mints_total", "Leaf certificates minted.", exposition::kind::counter);
    out.sample("broker_leaf_mints_total", {}, std::uint64_t{3});
  });
  m.add_collector([](exposition& out) {
    out.family("broker_leaf_mints_total", "Leaf certificates minted.", exposition::kind::counter);
    out.sample("broker_leaf_mints_total", {{"cache", "second"}}, std::uint64_t{4});
  });
  const auto text = m.render();
  for (const char* family : {"broker_requests_total", "broker_refusals_total", "broker_bytes_total",
                             "broker_leaf_mints_total"}) {
    CHECK(count_of(text, std::string("# HELP ") + family + " ") == 1);
    CHECK(count_of(text, std::string("# TYPE ") + family + " ") == 1);
  }
  CHECK(count_of(text, "broker_requests_total{") == 6);
  // The two writers' samples are together, under the one header.
  CHECK(text.find("# TYPE broker_leaf_mints_total counter\n"
                  "broker_leaf_mints_total 3\n"
                  "broker_leaf_mints_total{cache=\"second\"} 4\n") != std::string::npos);
}

TEST_CASE("forget_session drops every series of that session and no other", "[metrics]") {
  metrics m;
  auto e = request(5, 6);
  e.credential = "openai";
  e.llm_tokens = 100;
  m.exchange("s-gone", e);
  m.exchange("s-gone", refused("policy_denied"));
  m.llm_cost("s-gone", "openai", "m", 1.5);
  m.exchange("s-kept", request(1, 1));
  m.forget_session("s-gone");
  m.forget_session("s-never-seen");
  const auto text = m.render();
  CHECK(text.find("s-gone") == std::string::npos);
  CHECK(has_line(text, R"(broker_requests_total{session="s-kept",event="request"} 1)"));
  m.exchange("s-gone", request(2, 0));
  CHECK(has_line(m.render(), R"(broker_bytes_total{session="s-gone",direction="out"} 2)"));
}

TEST_CASE("concurrent exchange() from several threads sums right", "[metrics]") {
  metrics m;
  constexpr int threads = 8, per_thread = 20000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&m, t] {
      const std::string session = "s-" + std::to_string(t % 4);
      auto e = request(3, 5);
      e.credential = "c";
      e.llm_tokens = 2;
      for (int i = 0; i < per_thread; ++i) {
        m.exchange(session, e);
        m.llm_cost(session, "c", "m", 0.5);
        if (i % 1000 == 0) (void)m.render();  // scrapes meanwhile
      }
    });
  }
  for (auto& t : pool) t.join();
  const auto text = m.render();
  constexpr int per_session = 2 * per_thread;  // two threads per session
  for (int s = 0; s < 4; ++s) {
    const std::string id = "s-" + std::to_string(s);
    CAPTURE(id);
    CHECK(has_line(text, "broker_requests_total{session=\"" + id + "\",event=\"request\"} " +
                             std::to_string(per_session)));
    CHECK(has_line(text, "broker_bytes_total{session=\"" + id + "\",direction=\"out\"} " +
                             std::to_string(3 * per_session)));
    CHECK(has_line(text, "broker_bytes_total{session=\"" + id + "\",direction=\"in\"} " +
                             std::to_string(5 * per_session)));
    CHECK(has_line(text, "broker_llm_tokens_total{session=\"" + id + "\",credential=\"c\"} " +
                             std::to_string(2 * per_session)));
    CHECK(has_line(text, "broker_llm_cost_usd_total{session=\"" + id + "\",credential=\"c\"} " +
                             std::to_string(per_session / 2)));
  }
}

TEST_CASE("a refusal is counted by its code, and an error on an allowed exchange too",
          "[metrics]") {
  metrics m;
  audit_entry no_code;
  no_code.event = "refused";
  no_code.allowed = false;
  m.exchange("s", no_code);
  audit_entry blocked;
  blocked.event = "exfiltration_blocked";
  blocked.error = "real_secret_blocked";
  m.exchange("s", blocked);
  m.exchange("s", request(0, 0));
  const auto text = m.render();
  CHECK(has_line(text, R"(broker_refusals_total{session="s",code="unknown"} 1)"));
  CHECK(has_line(text, R"(broker_refusals_total{session="s",code="real_secret_blocked"} 1)"));
  CHECK(count_of(text, "broker_refusals_total{") == 2);
  CHECK(has_line(text, R"(broker_requests_total{session="s",event="exfiltration_blocked"} 1)"));
  // No tokens were counted, so there is no token series.
  CHECK(count_of(text, "broker_llm_tokens_total{") == 0);
}

TEST_CASE("LLM cost: amounts add up per credential, odd amounts are ignored, no model label",
          "[metrics]") {
  metrics m;
  m.llm_cost("s", "anthropic", "claude-x", 0.125);
  m.llm_cost("s", "anthropic", "claude-y", 0.5);
  m.llm_cost("s", "anthropic", "claude-y", -1);
  m.llm_cost("s", "anthropic", "claude-y", std::nan(""));
  m.llm_cost("s", "anthropic", "claude-y", std::numeric_limits<double>::infinity());
  const auto text = m.render();
  CHECK(has_line(text, R"(broker_llm_cost_usd_total{session="s",credential="anthropic"} 0.625)"));
  CHECK(text.find("claude") == std::string::npos);
}

TEST_CASE("a session keeps a bounded number of label values per family", "[metrics]") {
  metrics m;
  for (std::size_t i = 0; i < metrics::max_values_per_family + 6; ++i) {
    auto e = request(0, 0);
    e.credential = "cred-" + std::to_string(i);
    e.llm_tokens = 1;
    m.exchange("s", e);
  }
  const auto text = m.render();
  CHECK(count_of(text, "broker_llm_tokens_total{") == metrics::max_values_per_family + 1);
  CHECK(has_line(text, R"x(broker_llm_tokens_total{session="s",credential="(other)"} 6)x"));
}

TEST_CASE("gauges and collectors are read at every scrape", "[metrics]") {
  metrics m;
  double open = 3;
  m.add_gauge("broker_open_connections", "Client connections open.", [&open] { return open; });
  CHECK(has_line(m.render(), "broker_open_connections 3"));
  open = 1.5;
  const auto text = m.render();
  CHECK(has_line(text, "# TYPE broker_open_connections gauge"));
  CHECK(has_line(text, "broker_open_connections 1.5"));
  // Ordered by name among the broker's own families.
  CHECK(text.find("# HELP broker_llm_tokens_total") < text.find("# HELP broker_open_connections"));
  CHECK(text.find("# HELP broker_open_connections") < text.find("# HELP broker_refusals_total"));
}

TEST_CASE("a collector's exception reaches the scraper", "[metrics]") {
  metrics m;
  m.add_collector([](exposition&) { throw std::runtime_error("redis stats unavailable"); });
  CHECK_THROWS_WITH(m.render(), "redis stats unavailable");
}

TEST_CASE("the histogram helper writes cumulative buckets, +Inf, _sum and _count", "[metrics]") {
  exposition out;
  out.family("broker_redis_latency_seconds", "Redis round trip time.", exposition::kind::histogram);
  const double bounds[] = {0.0005, 0.001, 0.0025, 1};
  const std::uint64_t cumulative[] = {1, 3, 3, 5};
  const exposition::label replica[] = {{"replica", "a"}};
  out.histogram("broker_redis_latency_seconds", replica, bounds, cumulative, 1.25, 6);
  CHECK(out.text() ==
        "# HELP broker_redis_latency_seconds Redis round trip time.\n"
        "# TYPE broker_redis_latency_seconds histogram\n"
        "broker_redis_latency_seconds_bucket{replica=\"a\",le=\"0.0005\"} 1\n"
        "broker_redis_latency_seconds_bucket{replica=\"a\",le=\"0.001\"} 3\n"
        "broker_redis_latency_seconds_bucket{replica=\"a\",le=\"0.0025\"} 3\n"
        "broker_redis_latency_seconds_bucket{replica=\"a\",le=\"1\"} 5\n"
        "broker_redis_latency_seconds_bucket{replica=\"a\",le=\"+Inf\"} 6\n"
        "broker_redis_latency_seconds_sum{replica=\"a\"} 1.25\n"
        "broker_redis_latency_seconds_count{replica=\"a\"} 6\n");
}

TEST_CASE("the histogram helper takes buckets that end in +Inf as they are", "[metrics]") {
  exposition out;
  out.family("x_seconds", "x", exposition::kind::histogram);
  const double bounds[] = {0.5, std::numeric_limits<double>::infinity()};
  const std::uint64_t cumulative[] = {2, 4};
  out.histogram("x_seconds", {}, bounds, cumulative, 3, 4);
  CHECK(out.text() ==
        "# HELP x_seconds x\n"
        "# TYPE x_seconds histogram\n"
        "x_seconds_bucket{le=\"0.5\"} 2\n"
        "x_seconds_bucket{le=\"+Inf\"} 4\n"
        "x_seconds_sum 3\n"
        "x_seconds_count 4\n");
  const std::uint64_t short_counts[] = {2};
  CHECK_THROWS_AS(out.histogram("x_seconds", {}, bounds, short_counts, 3, 4),
                  std::invalid_argument);
}

TEST_CASE("metric and label names are checked, counters end in _total", "[metrics]") {
  exposition out;
  using kind = exposition::kind;
  CHECK_THROWS_AS(out.family("9lives", "h", kind::gauge), std::invalid_argument);
  CHECK_THROWS_AS(out.family("has-dash", "h", kind::gauge), std::invalid_argument);
  CHECK_THROWS_AS(out.family("", "h", kind::gauge), std::invalid_argument);
  CHECK_THROWS_AS(out.family("requests", "h", kind::counter), std::invalid_argument);
  out.family("ns:ok_total", "h", kind::counter);
  CHECK_THROWS_AS(out.family("ns:ok_total", "h", kind::gauge), std::invalid_argument);
  CHECK_THROWS_AS(out.sample("undeclared", {}, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(out.sample("ns:ok_total", {{"bad-label", "v"}}, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(out.sample("ns:ok_total", {{"__reserved", "v"}}, 1.0), std::invalid_argument);
  out.sample("ns:ok_total", {{"_fine9", "v"}}, 1.0);
  metrics m;
  CHECK_THROWS_AS(m.add_gauge("bad name", "h", [] { return 0.0; }), std::invalid_argument);
}

TEST_CASE("sample values: integers exact, doubles shortest, infinities and NaN by name",
          "[metrics]") {
  exposition out;
  out.family("g", "help with \\ and\nnewline", exposition::kind::gauge);
  out.sample("g", {{"v", "max"}}, std::numeric_limits<std::uint64_t>::max());
  out.sample("g", {{"v", "third"}}, 1.0 / 3);
  out.sample("g", {{"v", "inf"}}, std::numeric_limits<double>::infinity());
  out.sample("g", {{"v", "-inf"}}, -std::numeric_limits<double>::infinity());
  out.sample("g", {{"v", "nan"}}, std::nan(""));
  CHECK(out.text() ==
        "# HELP g help with \\\\ and\\nnewline\n"
        "# TYPE g gauge\n"
        "g{v=\"max\"} 18446744073709551615\n"
        "g{v=\"third\"} 0.3333333333333333\n"
        "g{v=\"inf\"} +Inf\n"
        "g{v=\"-inf\"} -Inf\n"
        "g{v=\"nan\"} NaN\n");
}
