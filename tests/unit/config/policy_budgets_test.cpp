// "budgets": cost_usd, prices and per_host, with every mistake named by file, line and key.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "config/policy.hpp"
#include "tests/unit/config/policy_test_support.hpp"

using broker::config::exhaust_action;
using broker::config::parse_policy;
using broker::config::test::error_of;

TEST_CASE("cost_usd, prices and per_host parse", "[config][policy][budgets]") {
  auto p = parse_policy(R"({
  "budgets": {
    "requests": 100, "cost_usd": 25, "on_exhaust": "kill",
    "prices": {
      "gpt-4o-mini": { "input_per_mtok": 0.15, "output_per_mtok": 0.6 },
      "Claude-3-5-Sonnet*": { "input_per_mtok": 3, "output_per_mtok": 15 },
      "*": { "input_per_mtok": 0, "output_per_mtok": 0 }
    },
    "per_host": {
      "API.OpenAI.com.": { "requests": 10, "llm_tokens": 500000, "bytes_in": "50MB",
                           "bytes_out": 1000, "rate": "5/s", "cost_usd": 5.5 },
      "*.example.com": {}
    }
  }
})",
                        "p.json");
  const auto& b = p.budgets;
  CHECK(b.requests == 100u);
  CHECK(b.cost_usd == 25.0);
  CHECK(b.on_exhaust == exhaust_action::kill);
  REQUIRE(b.prices.size() == 3);
  CHECK(b.prices.at("gpt-4o-mini").input_per_mtok == 0.15);
  CHECK(b.prices.at("gpt-4o-mini").output_per_mtok == 0.6);
  CHECK(b.prices.at("claude-3-5-sonnet*").output_per_mtok == 15);  // lower-cased
  CHECK(b.prices.count("*") == 1);

  REQUIRE(b.per_host.size() == 2);
  const auto* openai = &b.per_host[0];
  const auto* example = &b.per_host[1];
  if (openai->host.text() != "api.openai.com") std::swap(openai, example);
  CHECK(openai->host.text() == "api.openai.com");  // normalized like allow rules
  CHECK(openai->line == 10);
  CHECK(openai->requests == 10u);
  CHECK(openai->llm_tokens == 500'000u);
  CHECK(openai->bytes_in == 50'000'000u);
  CHECK(openai->bytes_out == 1000u);
  CHECK(openai->cost_usd == 5.5);
  REQUIRE(openai->request_rate);
  CHECK(openai->request_rate->per_second == Approx(5));
  CHECK(openai->request_rate->burst == 5);
  CHECK(example->host.text() == "*.example.com");
  CHECK_FALSE(example->requests);
  CHECK_FALSE(example->request_rate);
}

TEST_CASE("budgets without the new keys keep their defaults", "[config][policy][budgets]") {
  auto b = parse_policy(R"({"budgets": {"requests": 1}})", "p").budgets;
  CHECK_FALSE(b.cost_usd);
  CHECK(b.prices.empty());
  CHECK(b.per_host.empty());
  CHECK(parse_policy(R"({"budgets": {"cost_usd": 0.01}})", "p").budgets.cost_usd == 0.01);
}

TEST_CASE("cost_usd must be a positive number", "[config][policy][budgets]") {
  auto zero = error_of("{\"budgets\": {\n  \"cost_usd\": 0}}");
  CHECK(zero.what == "policy.json:2: budgets.cost_usd: expected a positive number of USD");
  CHECK(error_of(R"({"budgets": {"cost_usd": -1}})").key == "budgets.cost_usd");
  CHECK(error_of(R"({"budgets": {"cost_usd": "$5"}})").key == "budgets.cost_usd");
  CHECK(error_of(R"({"budgets": {"cost_usd": true}})").key == "budgets.cost_usd");
}

TEST_CASE("price errors name the model and the line", "[config][policy][budgets]") {
  auto missing = error_of(R"({
  "budgets": { "prices": {
    "gpt-4o": { "input_per_mtok": 2.5 }
  } }
})");
  CHECK(missing.what ==
        "policy.json:3: budgets.prices.gpt-4o: missing \"output_per_mtok\" (USD per million "
        "tokens)");

  auto negative = error_of(R"({
  "budgets": { "prices": {
    "gpt-4o": { "input_per_mtok": 2.5,
                "output_per_mtok": -10 }
  } }
})");
  CHECK(negative.what ==
        "policy.json:4: budgets.prices.gpt-4o.output_per_mtok: expected a non-negative number "
        "(USD per million tokens)");

  auto unknown = error_of(R"({
  "budgets": { "prices": {
    "gpt-4o": { "input_per_mtok": 2.5, "output_per_mtok": 10,
                "cached_per_mtok": 1 }
  } }
})");
  CHECK(unknown.line == 4);
  CHECK(unknown.key == "budgets.prices.gpt-4o.cached_per_mtok");
  CHECK(unknown.message == "unknown key (expected one of: input_per_mtok, output_per_mtok)");

  auto star = error_of("{\"budgets\": {\"prices\": {\n\"gpt-*-mini\": {}}}}");
  CHECK(star.what ==
        "policy.json:2: budgets.prices.gpt-*-mini: invalid model pattern \"gpt-*-mini\" (a model "
        "name, or a prefix ending in \"*\")");
  CHECK(error_of(R"({"budgets": {"prices": {"": {}}}})").message.starts_with("invalid model"));
  CHECK(error_of(R"({"budgets": {"prices": {"gpt 4": {}}}})").message.starts_with("invalid model"));

  auto twice = error_of(R"({"budgets": {"prices": {
    "GPT-4o": { "input_per_mtok": 1, "output_per_mtok": 1 },
    "gpt-4o": { "input_per_mtok": 2, "output_per_mtok": 2 }
  }}})");
  CHECK(twice.line == 3);
  CHECK(twice.message == "model pattern \"gpt-4o\" is listed twice");

  CHECK(error_of(R"({"budgets": {"prices": []}})").what ==
        "policy.json:1: budgets.prices: expected an object of model prices, got an array");
  CHECK(error_of(R"({"budgets": {"prices": {"m": 1}}})").key == "budgets.prices.m");
  CHECK(error_of(R"({"budgets": {"prices": {"m": {"input_per_mtok": "1", "output_per_mtok": 1}}}})")
            .key == "budgets.prices.m.input_per_mtok");
}

TEST_CASE("per_host errors name the pattern and the line", "[config][policy][budgets]") {
  auto bad_host = error_of(R"({
  "budgets": { "per_host": {
    "api.*.com": { "requests": 1 }
  } }
})");
  CHECK(bad_host.what ==
        "policy.json:3: budgets.per_host.api.*.com: invalid host pattern \"api.*.com\" (a host "
        "name, \"*.\" + a host name, or \"*\")");

  auto typo = error_of(R"({
  "budgets": { "per_host": {
    "api.openai.com": { "requests": 1,
                        "llm_token": 5 }
  } }
})");
  CHECK(typo.line == 4);
  CHECK(typo.key == "budgets.per_host.api.openai.com.llm_token");
  CHECK(typo.message ==
        "unknown key (expected one of: requests, bytes_out, bytes_in, llm_tokens, cost_usd, rate)");

  auto duration = error_of(R"({
  "budgets": { "per_host": {
    "api.openai.com": {
      "duration": "1h" }
  } }
})");
  CHECK(duration.what ==
        "policy.json:4: budgets.per_host.api.openai.com.duration: \"duration\" "
        "applies to the whole session, not per host");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": {"on_exhaust": "kill"}}}})").key ==
        "budgets.per_host.a.example.on_exhaust");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": {"prices": {}}}}})").key ==
        "budgets.per_host.a.example.prices");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": {"per_host": {}}}}})").key ==
        "budgets.per_host.a.example.per_host");

  auto value = error_of(R"({
  "budgets": { "per_host": {
    "api.openai.com": {
      "bytes_in": "50 parsecs", "rate": "fast", "cost_usd": 0 }
  } }
})");
  CHECK(value.line == 4);
  CHECK(value.key == "budgets.per_host.api.openai.com.bytes_in");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": {"rate": "fast"}}}})").key ==
        "budgets.per_host.a.example.rate");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": {"cost_usd": 0}}}})").key ==
        "budgets.per_host.a.example.cost_usd");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": {"requests": -1}}}})").key ==
        "budgets.per_host.a.example.requests");

  auto twice = error_of(R"({"budgets": {"per_host": {
    "API.example.com": { "requests": 1 },
    "api.example.com.": { "requests": 2 }
  }}})");
  CHECK(twice.line == 3);
  CHECK(twice.message == "host pattern \"api.example.com\" is listed twice");

  CHECK(error_of(R"({"budgets": {"per_host": ["a.example"]}})").what ==
        "policy.json:1: budgets.per_host: expected an object of host patterns, got an array");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": 5}}})").what ==
        "policy.json:1: budgets.per_host.a.example: expected an object of budgets, got a number");
  CHECK(error_of(R"({"budgets": {"per_host": {"10.0.0.1": {}}}})").key ==
        "budgets.per_host.10.0.0.1");
}

TEST_CASE("the budgets' unknown-key message lists the new keys", "[config][policy][budgets]") {
  auto e = error_of("{\"budgets\": {\n\"cost\": 5}}");
  CHECK(e.what ==
        "policy.json:2: budgets.cost: unknown key (expected one of: requests, bytes_out, "
        "bytes_in, duration, llm_tokens, cost_usd, rate, prices, per_host, on_exhaust, "
        "on_state_unavailable)");
}

TEST_CASE("on_state_unavailable is deny or allow, session-wide", "[config][policy][budgets]") {
  CHECK_FALSE(parse_policy(R"({"budgets": {"requests": 1}})", "p").budgets.allow_without_state);
  CHECK(*parse_policy(R"({"budgets": {"on_state_unavailable": "allow"}})", "p")
             .budgets.allow_without_state);
  CHECK_FALSE(*parse_policy(R"({"budgets": {"on_state_unavailable": "deny"}})", "p")
                   .budgets.allow_without_state);
  CHECK(error_of("{\"budgets\": {\n\"on_state_unavailable\": \"open\"}}").what ==
        "policy.json:2: budgets.on_state_unavailable: expected \"deny\" or \"allow\"");
  CHECK(error_of(R"({"budgets": {"per_host": {"a.example": {"on_state_unavailable": "allow"}}}})")
            .message == "\"on_state_unavailable\" applies to the whole session, not per host");
}

TEST_CASE("to_json shows cost, prices and per_host", "[config][policy][budgets]") {
  auto p = parse_policy(R"({"budgets": {
    "cost_usd": 2.5,
    "prices": { "GPT-4o*": { "input_per_mtok": 2.5, "output_per_mtok": 10 } },
    "per_host": { "API.openai.com": { "requests": 3, "bytes_in": "1KiB", "rate": "5/10s" } }
  }})",
                        "p.json");
  auto j = broker::config::to_json(p)["budgets"];
  CHECK(j["cost_usd"] == 2.5);
  CHECK(j["prices"]["gpt-4o*"]["input_per_mtok"] == 2.5);
  CHECK(j["prices"]["gpt-4o*"]["output_per_mtok"] == 10);
  const auto& host = j["per_host"]["api.openai.com"];
  CHECK(host["requests"] == 3);
  CHECK(host["bytes_in"] == 1024);
  CHECK(host["rate"]["per_second"] == Approx(0.5));
  CHECK(host["rate"]["burst"] == 5);
  CHECK_FALSE(host.contains("cost_usd"));
  CHECK(j["on_exhaust"] == "deny");

  auto plain = broker::config::to_json(parse_policy(R"({"budgets": {"requests": 1}})", "p"));
  CHECK_FALSE(plain["budgets"].contains("prices"));
  CHECK_FALSE(plain["budgets"].contains("per_host"));
  CHECK_FALSE(plain["budgets"].contains("cost_usd"));
}
