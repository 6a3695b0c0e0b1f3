// Session budgets: merging layers, each budget's boundary, the token bucket, prices, reports.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/policy.hpp"
#include "session/budget.hpp"

using broker::config::exhaust_action;
using broker::config::parse_policy;
using broker::config::policy;
using broker::session::budget_limits;
using broker::session::session_budget;
using broker::session::tightest;
using namespace std::chrono_literals;

namespace {

const session_budget::clock::time_point t0{std::chrono::hours(1000)};

budget_limits limits_of(const char* budgets_json) {
  std::vector<policy> layers;
  layers.push_back(parse_policy(std::string("{\"budgets\": ") + budgets_json + "}", "p.json"));
  return tightest(layers);
}

session_budget budget_of(const char* budgets_json) {
  return session_budget(limits_of(budgets_json), t0);
}

// Admits up to `n` requests at t0; returns how many passed.
int admit_n(session_budget& b, int n, std::string_view host = "a.example") {
  int passed = 0;
  for (int i = 0; i < n; ++i)
    if (!b.admit(host, t0)) ++passed;
  return passed;
}

}  // namespace

TEST_CASE("on_state_unavailable: allow holds only while no layer says deny", "[session][budget]") {
  const auto layer = [](const char* text) { return parse_policy(text, "p.json"); };
  const auto allow = layer(R"({"budgets": {"on_state_unavailable": "allow"}})");
  const auto deny = layer(R"({"budgets": {"on_state_unavailable": "deny"}})");
  const auto silent = layer(R"({"budgets": {"requests": 5}})");
  CHECK_FALSE(tightest({silent}).allow_without_state.value_or(false));
  CHECK(tightest({allow, silent}).allow_without_state.value_or(false));
  CHECK_FALSE(tightest({allow, deny}).allow_without_state.value_or(false));
  CHECK_FALSE(tightest({deny, allow}).allow_without_state.value_or(false));
}

TEST_CASE("tightest takes the smallest limit of every layer", "[session][budget]") {
  std::vector<policy> layers;
  layers.push_back(parse_policy(R"({"budgets": {
    "requests": 100, "bytes_out": "1MB", "duration": "2h", "rate": "20/s", "cost_usd": 5,
    "prices": { "gpt-4o": { "input_per_mtok": 1, "output_per_mtok": 2 } },
    "per_host": { "api.openai.com": { "requests": 10, "rate": "100/m" } } }})",
                                "a.json"));
  layers.push_back(parse_policy(R"({"allow": [{"host": "x.example"}]})", "b.json"));
  layers.push_back(parse_policy(R"({"budgets": {
    "requests": 500, "bytes_out": "500KB", "bytes_in": "1GB", "duration": "3h", "rate": "100/m",
    "llm_tokens": 7, "cost_usd": 10, "on_exhaust": "kill",
    "prices": { "gpt-4o": { "input_per_mtok": 9, "output_per_mtok": 9 },
                "o1*": { "input_per_mtok": 15, "output_per_mtok": 60 } },
    "per_host": { "API.openai.com": { "requests": 20, "llm_tokens": 3, "rate": "20/s" },
                  "*.example.com": { "bytes_in": 5 } } }})",
                                "c.json"));
  auto l = tightest(layers);
  CHECK(l.requests == 100u);
  CHECK(l.bytes_out == 500'000u);
  CHECK(l.bytes_in == 1'000'000'000u);
  CHECK(l.duration == 2h);
  CHECK(l.llm_tokens == 7u);
  CHECK(l.cost_usd == 5.0);
  CHECK(l.on_exhaust == exhaust_action::kill);  // any layer's kill
  // Slowest refill and smallest burst: admits only what both "20/s" and "100/m" would.
  REQUIRE(l.request_rate);
  CHECK(l.request_rate->burst == 20);
  CHECK(l.request_rate->per_second == Approx(100.0 / 60));
  // First layer to price a model wins.
  CHECK(l.prices.at("gpt-4o").input_per_mtok == 1);
  CHECK(l.prices.at("o1*").output_per_mtok == 60);
  // per_host merged per normalized pattern, tightest per key.
  REQUIRE(l.per_host.size() == 2);
  const auto& openai = l.per_host[0];
  CHECK(openai.host.text() == "api.openai.com");
  CHECK(openai.requests == 10u);
  CHECK(openai.llm_tokens == 3u);
  CHECK(openai.request_rate->burst == 20);
  CHECK(openai.request_rate->per_second == Approx(100.0 / 60));
  CHECK(l.per_host[1].host.text() == "*.example.com");
  CHECK(l.per_host[1].bytes_in == 5u);

  auto none = tightest({});
  CHECK_FALSE(none.requests);
  CHECK(none.on_exhaust == exhaust_action::deny);
}

TEST_CASE("requests: N pass, the next is refused and not charged", "[session][budget]") {
  auto b = budget_of(R"({"requests": 3})");
  CHECK(admit_n(b, 3) == 3);
  auto e = b.admit("a.example", t0);
  REQUIRE(e);
  CHECK(e->budget == "requests");
  CHECK(e->limit == "3");
  CHECK(e->used == "3");
  CHECK_FALSE(e->kill);
  CHECK(b.admit("a.example", t0 + 1h)->budget == "requests");
  CHECK(b.report(t0)["usage"]["requests"] == 3);
  // Admitted traffic does not make a request budget "spent": nothing to cut.
  CHECK_FALSE(b.spent(t0));

  auto zero = budget_of(R"({"requests": 0})");
  CHECK(zero.admit("a.example", t0)->budget == "requests");
}

TEST_CASE("byte budgets refuse once used reaches the limit", "[session][budget]") {
  auto b = budget_of(R"({"bytes_out": 1000, "bytes_in": "1KB"})");
  CHECK_FALSE(b.admit("a.example", t0));
  b.add_bytes("a.example", 999, 0);
  CHECK_FALSE(b.spent(t0));
  CHECK_FALSE(b.admit("a.example", t0));
  b.add_bytes("a.example", 1, 0);
  auto e = b.admit("a.example", t0);
  REQUIRE(e);
  CHECK(e->budget == "bytes_out");
  CHECK(e->limit == "1 KB");
  CHECK(e->used == "1 KB");
  REQUIRE(b.spent(t0));
  CHECK(b.spent(t0)->budget == "bytes_out");

  auto in = budget_of(R"({"bytes_in": "100MB"})");
  in.add_bytes("a.example", 0, 150'000'000);  // a transfer in progress may overrun
  auto spent = in.spent(t0);
  REQUIRE(spent);
  CHECK(spent->budget == "bytes_in");
  CHECK(spent->limit == "100 MB");
  CHECK(spent->used == "150 MB");
  CHECK(in.admit("a.example", t0)->budget == "bytes_in");
  CHECK(in.report(t0)["usage"]["requests"] == 0);
}

TEST_CASE("llm_tokens and cost_usd refuse once used reaches the limit", "[session][budget]") {
  auto tokens = budget_of(R"({"llm_tokens": 1000})");
  tokens.add_llm_usage("api.openai.com", "gpt-4o", 600, 399);
  CHECK_FALSE(tokens.admit("api.openai.com", t0));
  tokens.add_llm_usage("api.openai.com", "gpt-4o", 1, 0);
  auto e = tokens.admit("a.example", t0);  // a session budget: every host is refused
  REQUIRE(e);
  CHECK(e->budget == "llm_tokens");
  CHECK(e->limit == "1000");
  CHECK(e->used == "1000");
  CHECK(tokens.spent(t0)->budget == "llm_tokens");

  auto cost = budget_of(R"({"cost_usd": 1,
    "prices": { "gpt-4o": { "input_per_mtok": 2.5, "output_per_mtok": 10 } }})");
  CHECK(cost.add_llm_usage("api.openai.com", "gpt-4o", 200'000, 0) == Approx(0.50));
  CHECK_FALSE(cost.admit("api.openai.com", t0));
  cost.add_llm_usage("api.openai.com", "gpt-4o", 0, 50'000);  // + $0.50
  auto c = cost.admit("api.openai.com", t0);
  REQUIRE(c);
  CHECK(c->budget == "cost_usd");
  CHECK(c->limit == "$1.00");
  CHECK(c->used == "$1.00");
  CHECK(cost.spent(t0)->budget == "cost_usd");
}

TEST_CASE("prices: exact names, longest prefix, unpriced models", "[session][budget]") {
  auto b = budget_of(R"({"prices": {
    "gpt-4o": { "input_per_mtok": 2.5, "output_per_mtok": 10 },
    "gpt-4o*": { "input_per_mtok": 100, "output_per_mtok": 100 },
    "gpt-4o-mini*": { "input_per_mtok": 0.15, "output_per_mtok": 0.6 },
    "claude*": { "input_per_mtok": 3, "output_per_mtok": 15 } }})");
  auto cost = [&] { return b.report(t0)["usage"]["cost_usd"].get<double>(); };
  b.add_llm_usage("api.openai.com", "gpt-4o", 1'000'000, 1'000'000);  // exact beats "gpt-4o*"
  CHECK(cost() == Approx(12.5));
  b.add_llm_usage("api.openai.com", "GPT-4o-mini-2024-07-18", 1'000'000, 1'000'000);
  CHECK(cost() == Approx(12.5 + 0.75));  // the longest prefix, case-insensitive
  b.add_llm_usage("api.openai.com", "gpt-4o-2024-08-06", 10'000, 0);
  CHECK(cost() == Approx(13.25 + 1));
  b.add_llm_usage("api.anthropic.com", "claude-3-5-sonnet-20241022", 0, 2'000'000);
  CHECK(cost() == Approx(14.25 + 30));
  b.add_llm_usage("api.example.com", "llama-3", 70, 30);
  b.add_llm_usage("api.example.com", "", 5, 0);
  b.add_llm_usage("api.example.com", "llama-3", 1, 0);
  CHECK(cost() == Approx(44.25));  // unpriced models cost nothing...
  auto usage = b.report(t0)["usage"];
  CHECK(usage["llm_tokens"] == 6'010'000 + 106);
  CHECK(usage["unpriced_tokens"] == 106);  // ...and are reported
  CHECK(usage["unpriced_models"] == nlohmann::json::parse(R"j(["llama-3", "(none)"])j"));

  auto fallback = budget_of(R"({"prices": {"*": {"input_per_mtok": 1, "output_per_mtok": 1}}})");
  fallback.add_llm_usage("h.example", "", 500'000, 500'000);
  CHECK(fallback.report(t0)["usage"]["cost_usd"] == Approx(1));
  CHECK(fallback.report(t0)["usage"]["unpriced_tokens"] == 0);
}

TEST_CASE("duration refuses at its end and always kills", "[session][budget]") {
  auto b = budget_of(R"({"duration": "2h", "on_exhaust": "deny"})");
  CHECK_FALSE(b.admit("a.example", t0 + 2h - 1ms));
  CHECK_FALSE(b.spent(t0 + 2h - 1ms));
  auto e = b.admit("a.example", t0 + 2h);
  REQUIRE(e);
  CHECK(e->budget == "duration");
  CHECK(e->limit == "2h");
  CHECK(e->used == "2h");
  CHECK(e->kill);
  auto later = b.spent(t0 + 2h + 3s + 400ms);
  REQUIRE(later);
  CHECK(later->used == "2h3s");
  CHECK(later->kill);
}

TEST_CASE("on_exhaust kill marks every spent budget but rate", "[session][budget]") {
  auto b = budget_of(R"({"requests": 1, "on_exhaust": "kill"})");
  CHECK_FALSE(b.admit("a.example", t0));
  CHECK(b.admit("a.example", t0)->kill);

  auto bytes = budget_of(R"({"bytes_in": 10, "on_exhaust": "kill"})");
  bytes.add_bytes("a.example", 0, 10);
  CHECK(bytes.spent(t0)->kill);

  auto rate = budget_of(R"({"rate": "1/s", "on_exhaust": "kill"})");
  CHECK_FALSE(rate.admit("a.example", t0));
  auto e = rate.admit("a.example", t0);
  REQUIRE(e);
  CHECK(e->budget == "rate");
  CHECK_FALSE(e->kill);
}

TEST_CASE("token bucket: burst, refill, partial periods", "[session][budget]") {
  auto b = budget_of(R"({"rate": "20/s"})");
  CHECK(admit_n(b, 20) == 20);  // a full bucket at the start
  auto e = b.admit("a.example", t0);
  REQUIRE(e);
  CHECK(e->budget == "rate");
  CHECK(e->limit == "20/s");
  CHECK(e->used == "20");
  CHECK(e->retry_after == 50ms);
  CHECK_FALSE(e->kill);
  // Half a token is not enough; two halves are.
  CHECK(b.admit("a.example", t0 + 25ms));
  CHECK(b.admit("a.example", t0 + 25ms)->retry_after == 25ms);
  CHECK_FALSE(b.admit("a.example", t0 + 50ms));
  CHECK(b.admit("a.example", t0 + 50ms));
  // 1 s refills 20; a long pause refills no more than the burst.
  for (int i = 0; i < 20; ++i) CHECK_FALSE(b.admit("a.example", t0 + 1050ms));
  CHECK(b.admit("a.example", t0 + 1050ms));
  for (int i = 0; i < 20; ++i) CHECK_FALSE(b.admit("a.example", t0 + 1h));
  CHECK(b.admit("a.example", t0 + 1h));
  // Refused requests take no token.
  CHECK(b.report(t0 + 1h)["usage"]["requests"] == 20 + 1 + 20 + 20);

  auto slow = budget_of(R"({"rate": "5/10s"})");  // burst 5, one more every 2 s
  for (int i = 0; i < 5; ++i) CHECK_FALSE(slow.admit("a.example", t0));
  CHECK(slow.admit("a.example", t0 + 1999ms));
  CHECK_FALSE(slow.admit("a.example", t0 + 2000ms));
  CHECK(slow.admit("a.example", t0 + 2000ms)->retry_after == 2s);
  CHECK_FALSE(slow.admit("a.example", t0 + 5s));  // 1.5 tokens accumulated: one passes
  CHECK(slow.admit("a.example", t0 + 5s)->retry_after == 1s);
  CHECK_FALSE(slow.admit("a.example", t0 + 6s));
}

TEST_CASE("a refusal by one budget charges none of the others", "[session][budget]") {
  auto b = budget_of(R"({"requests": 100, "rate": "2/s",
    "per_host": { "api.openai.com": { "requests": 1 } }})");
  CHECK_FALSE(b.admit("api.openai.com", t0));
  CHECK(b.admit("api.openai.com", t0)->budget == "per_host[api.openai.com].requests");
  // Neither the session's requests nor its rate token were taken by the refusal.
  CHECK(b.report(t0)["usage"]["requests"] == 1);
  CHECK_FALSE(b.admit("a.example", t0));
  CHECK(b.admit("a.example", t0)->budget == "rate");
}

TEST_CASE("per_host budgets apply to matching hosts only, next to the session's",
          "[session][budget]") {
  auto b = budget_of(R"({"requests": 5, "per_host": {
    "api.openai.com": { "requests": 2, "llm_tokens": 100 },
    "*.example.com": { "bytes_in": 1000, "rate": "1/s" } }})");
  CHECK(admit_n(b, 2, "api.openai.com") == 2);
  auto e = b.admit("API.OpenAI.com.", t0);  // normalized like policy hosts
  REQUIRE(e);
  CHECK(e->budget == "per_host[api.openai.com].requests");
  CHECK(e->limit == "2");
  CHECK(e->used == "2");
  CHECK_FALSE(b.admit("other.openai.com", t0));  // another host: only the session counts
  // A wildcard pattern is one budget for all its subdomains, and never the apex.
  CHECK_FALSE(b.admit("a.example.com", t0));
  CHECK(b.admit("b.example.com", t0)->budget == "per_host[*.example.com].rate");
  CHECK_FALSE(b.admit("example.com", t0));
  // The session's limit still applies to hosts with their own budget: 5 passed in all.
  auto session = b.admit("x.example.com", t0 + 10s);
  REQUIRE(session);
  CHECK(session->budget == "requests");

  auto bytes = budget_of(R"({"per_host": { "*.example.com": { "bytes_in": 1000 } }})");
  bytes.add_bytes("a.example.com", 0, 600);
  bytes.add_bytes("other.example", 0, 5000);
  bytes.add_bytes("10.0.0.1", 0, 5000);  // an IP literal matches no host pattern
  CHECK_FALSE(bytes.spent(t0));
  CHECK_FALSE(bytes.spent("b.example.com", t0));
  bytes.add_bytes("b.example.com", 0, 400);
  CHECK_FALSE(bytes.spent(t0));  // the session's own budgets are not spent
  auto spent = bytes.spent("a.example.com", t0);
  REQUIRE(spent);
  CHECK(spent->budget == "per_host[*.example.com].bytes_in");
  CHECK(spent->limit == "1 KB");
  CHECK_FALSE(bytes.spent("other.example", t0));
  CHECK(bytes.admit("c.example.com", t0)->budget == "per_host[*.example.com].bytes_in");
  CHECK_FALSE(bytes.admit("other.example", t0));

  auto tokens = budget_of(R"({"per_host": { "api.openai.com": { "llm_tokens": 10 } }})");
  tokens.add_llm_usage("api.anthropic.com", "claude", 100, 100);
  CHECK_FALSE(tokens.admit("api.openai.com", t0));
  tokens.add_llm_usage("api.openai.com", "gpt-4o", 5, 5);
  CHECK(tokens.admit("api.openai.com", t0)->budget == "per_host[api.openai.com].llm_tokens");
  CHECK_FALSE(tokens.admit("api.anthropic.com", t0));
}

TEST_CASE("report lists every budget with limit and used", "[session][budget]") {
  auto b = budget_of(R"({"requests": 10, "bytes_out": "100MB", "duration": "2h",
    "cost_usd": 25, "rate": "5/10s", "on_exhaust": "kill",
    "prices": { "gpt-4o": { "input_per_mtok": 2.5, "output_per_mtok": 10 } },
    "per_host": { "api.openai.com": { "llm_tokens": 1000 } }})");
  CHECK_FALSE(b.admit("api.openai.com", t0));
  b.add_bytes("api.openai.com", 1'500'000, 42);
  b.add_llm_usage("api.openai.com", "gpt-4o", 400, 600);
  auto r = b.report(t0 + 1h + 30min + 500ms);
  CHECK(r["on_exhaust"] == "kill");
  CHECK(r["elapsed"] == "1h30m");
  CHECK(r["elapsed_ms"] == 5'400'500);
  const auto& budgets = r["budgets"];
  CHECK(budgets["duration"] ==
        nlohmann::ordered_json::parse(R"({"limit": "2h", "used": "1h30m", "exhausted": false})"));
  CHECK(budgets["requests"]["limit"] == "10");
  CHECK(budgets["requests"]["used"] == "1");
  CHECK(budgets["bytes_out"]["limit"] == "100 MB");
  CHECK(budgets["bytes_out"]["used"] == "1.5 MB");
  CHECK(budgets["cost_usd"]["limit"] == "$25.00");
  CHECK(budgets["cost_usd"]["used"] == "$0.007");
  CHECK(budgets["rate"]["limit"] == "5/10s");
  CHECK(budgets["rate"]["used"] == "0");  // refilled long ago
  CHECK(budgets["per_host[api.openai.com].llm_tokens"]["used"] == "1000");
  CHECK(budgets["per_host[api.openai.com].llm_tokens"]["exhausted"] == true);
  CHECK_FALSE(budgets.contains("bytes_in"));  // only the budgets that are set
  CHECK(r["usage"]["bytes_out"] == 1'500'000);
  CHECK(r["usage"]["bytes_in"] == 42);
  CHECK(r["usage"]["llm_tokens"] == 1000);
  CHECK(r["per_host"]["api.openai.com"]["requests"] == 1);
  CHECK(r["per_host"]["api.openai.com"]["llm_tokens"] == 1000);
  CHECK(b.report(t0 + 2h)["budgets"]["duration"]["exhausted"] == true);

  auto empty = session_budget(budget_limits{}, t0).report(t0);
  CHECK(empty["budgets"].empty());
  CHECK(empty["on_exhaust"] == "deny");
  CHECK(empty["usage"]["requests"] == 0);
}

TEST_CASE("concurrent admits never exceed the request limit", "[session][budget]") {
  auto b = budget_of(R"({"requests": 500, "per_host": {"*.example": {"requests": 300}}})");
  std::atomic<int> passed{0}, passed_host{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        bool host = (i + t) % 2 == 0;
        if (b.admit(host ? "a.example" : "b.other", t0)) continue;
        ++passed;
        if (host) ++passed_host;
        b.add_bytes("a.example", 1, 1);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(passed == 500);
  CHECK(passed_host <= 300);
  auto r = b.report(t0);
  CHECK(r["usage"]["requests"] == 500);
  CHECK(r["per_host"]["*.example"]["requests"] == passed_host.load());
  CHECK(r["usage"]["bytes_in"] == 500);
}

TEST_CASE("the agents' models have list prices unless the policy prices them",
          "[session][budget]") {
  auto b =
      budget_of(R"({"prices": {"claude-sonnet-4*": {"input_per_mtok": 1, "output_per_mtok": 1}}})");
  b.add_llm_usage("api.openai.com", "gpt-5-codex", 1'000'000, 100'000);              // 1.25 + 1.00
  b.add_llm_usage("api.anthropic.com", "claude-sonnet-4-5-20250929", 1'000'000, 0);  // policy: 1
  b.add_llm_usage("generativelanguage.googleapis.com", "gemini-2.5-flash", 0, 1'000'000);  // 2.5
  b.add_llm_usage("api.example", "llama-3", 1000, 1000);
  const auto usage = b.report(t0)["usage"];
  CHECK(usage["cost_usd"].get<double>() == Approx(1.25 + 1.0 + 1.0 + 2.5));
  CHECK(usage["unpriced_models"] == nlohmann::json::parse(R"(["llama-3"])"));
}
