#include <algorithm>
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "config/policy.hpp"
#include "config/policy_set.hpp"
#include "tests/unit/config/policy_test_support.hpp"

using broker::config::exhaust_action;
using broker::config::parse_policy;
using broker::config::policy_error;

using broker::config::test::error_of;

TEST_CASE("a full policy parses with comments", "[config][policy]") {
  const std::string text = R"({
  // line comment
  "version": 1,
  "allow": [
    { "host": "API.GitHub.com." },                          /* block */
    { "host": "*.githubusercontent.com", "ports": [443] },
    { "host": "api.openai.com", "methods": ["post", "GET"], "paths": ["/v1/*"] },
    { "cidr": "10.20.0.0/16", "ports": [8080] },
    { "host": "pinned.example.com", "tunnel": true }
  ],
  "deny": [ { "host": "gist.github.com" } ],
  "credentials": {
    "github": { "type": "github", "env": ["GITHUB_TOKEN", "GH_TOKEN"],
                "hosts": ["github.com", "api.github.com", "*.githubusercontent.com"] },
    "anthropic": { "type": "header", "header": "X-Api-Key", "prefix": "", "env": ["ANTHROPIC_API_KEY"],
                   "hosts": ["api.anthropic.com"] },
    "aws": { "type": "aws-sigv4", "hosts": ["*.amazonaws.com"] },
    "internal": { "type": "bearer", "source": "file:~/.config/acme/token", "env": ["ACME_TOKEN"],
                  "hosts": ["api.acme.dev"], "query": ["access_token"], "allow_plaintext": true }
  },
  "budgets": { "requests": 5000, "bytes_out": "100MB", "bytes_in": 1000, "duration": "2h",
               "llm_tokens": 2000000, "rate": "20/s", "on_exhaust": "kill" },
  "env": { "pass": ["SOME_PUBLIC_TOKEN_NAME"], "strip": ["EXTRA_SECRET"] },
  "files": { "mask": ["~/.netrc"], "pass": ["~/.npmrc"] }
}
)";
  auto p = parse_policy(text, "team.json");
  CHECK(p.source == "team.json");
  CHECK(p.sha256.size() == 64);
  REQUIRE(p.allow.size() == 5);
  CHECK(p.allow[0].name == "allow[0]");
  CHECK(p.allow[0].line == 5);
  CHECK(p.allow[0].host->text() == "api.github.com");
  CHECK(p.allow[0].ports == std::vector<std::uint16_t>{80, 443});
  CHECK(p.allow[1].ports == std::vector<std::uint16_t>{443});
  CHECK(p.allow[2].methods == std::vector<std::string>{"POST", "GET"});
  REQUIRE(p.allow[2].paths.size() == 1);
  CHECK(p.allow[2].paths[0].text() == "/v1/*");
  CHECK(p.allow[2].has_l7_conditions());
  CHECK(p.allow[3].net->to_string() == "10.20.0.0/16");
  CHECK_FALSE(p.allow[3].host);
  CHECK(p.allow[4].tunnel);
  REQUIRE(p.deny.size() == 1);
  CHECK(p.deny[0].name == "deny[0]");

  REQUIRE(p.credentials.size() == 4);
  const auto& gh = p.credentials.at("github");
  CHECK(gh.type == "github");
  CHECK(gh.source == "env:GITHUB_TOKEN");
  CHECK(gh.hosts.size() == 3);
  CHECK(gh.line == 13);
  const auto& an = p.credentials.at("anthropic");
  CHECK(an.header == "x-api-key");
  const auto& aws = p.credentials.at("aws");
  CHECK(aws.env == std::vector<std::string>{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                            "AWS_SESSION_TOKEN"});
  CHECK(aws.source == "env:AWS_ACCESS_KEY_ID");
  const auto& internal = p.credentials.at("internal");
  CHECK(internal.source == "file:~/.config/acme/token");
  CHECK(internal.query == std::vector<std::string>{"access_token"});
  CHECK(internal.allow_plaintext);

  CHECK(p.budgets.requests == 5000u);
  CHECK(p.budgets.bytes_out == 100'000'000u);
  CHECK(p.budgets.bytes_in == 1000u);
  CHECK(p.budgets.duration == std::chrono::hours(2));
  CHECK(p.budgets.llm_tokens == 2'000'000u);
  REQUIRE(p.budgets.request_rate);
  CHECK(p.budgets.request_rate->per_second == Approx(20));
  CHECK(p.budgets.on_exhaust == exhaust_action::kill);
  CHECK(p.env.pass == std::vector<std::string>{"SOME_PUBLIC_TOKEN_NAME"});
  CHECK(p.env.strip == std::vector<std::string>{"EXTRA_SECRET"});
  CHECK(p.files.mask == std::vector<std::string>{"~/.netrc"});
  CHECK(p.files.pass == std::vector<std::string>{"~/.npmrc"});
}

TEST_CASE("sha256 covers the file bytes", "[config][policy]") {
  auto empty = parse_policy("{}", "a.json");
  // SHA-256("{}")
  CHECK(empty.sha256 == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
  auto spaced = parse_policy("{ }", "a.json");
  CHECK(spaced.sha256 != empty.sha256);
  CHECK_FALSE(empty.has_egress_rules());
}
TEST_CASE("the embedded default policy parses", "[config][policy]") {
  auto p = parse_policy(broker::config::default_policy_text(), "<default>");
  CHECK(p.source == "<default>");
  CHECK(p.credentials.size() == 13);
  CHECK(p.credentials.at("github").hosts.size() == 3);
  CHECK(p.credentials.at("anthropic").header == "x-api-key");
  CHECK(p.credentials.at("aws").type == "aws-sigv4");
  CHECK(p.credentials.at("openai").source == "env:OPENAI_API_KEY");
  // The agents' own variables (docs/agents.md): each its own credential, read from its own name.
  CHECK(p.credentials.at("codex").source == "env:CODEX_API_KEY");
  CHECK(p.credentials.at("anthropic_auth_token").type == "bearer");
  CHECK(p.credentials.at("claude_oauth_token").source == "env:CLAUDE_CODE_OAUTH_TOKEN");
  CHECK(p.credentials.at("gemini").header == "x-goog-api-key");
  CHECK(p.credentials.at("gemini").query == std::vector<std::string>{"key"});
  CHECK(p.credentials.at("google_api_key").source == "env:GOOGLE_API_KEY");
  // Their login files, each refreshed at its own token endpoint (docs/agents.md).
  for (const char* login : {"codex_login", "claude_login", "gemini_login"}) {  // gh's: no refresh
    const auto& spec = p.credentials.at(login);
    REQUIRE(spec.login_file);
    REQUIRE(spec.login_file->refresh);
    const std::string url = spec.login_file->refresh->url;
    const std::string host = url.substr(8, url.find('/', 8) - 8);
    CHECK(std::any_of(spec.hosts.begin(), spec.hosts.end(),
                      [&](const auto& h) { return h.matches(host); }));
  }
  CHECK(p.credentials.at("claude_login").login_file->path == "~/.claude/.credentials.json");
  CHECK(p.credentials.at("gh_login").login_file->fields == std::vector<std::string>{"oauth_token"});
  // Telemetry on the agents' API hosts (docs/agents.md) and their telemetry hosts: denied by rule,
  // so that wrap --ask never asks about them.
  CHECK(p.deny.size() == 8);
  broker::config::policy_set set({p});
  for (const char* host : {"ab.chatgpt.com", "statsig.anthropic.com", "api.statsig.com",
                           "o1.ingest.sentry.io", "play.googleapis.com", "downloads.claude.ai"}) {
    auto v = set.check_connect({host, std::nullopt, 443});
    CHECK_FALSE(v.allowed);
    CHECK(v.rule.starts_with("deny["));
  }
  bool has_pypi = false, any_tunnel = false;
  for (const auto& r : p.allow) {
    has_pypi = has_pypi || (r.host && r.host->text() == "pypi.org");
    any_tunnel = any_tunnel || r.tunnel;
    CHECK(r.ports == std::vector<std::uint16_t>{443});
  }
  CHECK(has_pypi);
  CHECK_FALSE(any_tunnel);
  CHECK(p.allow.size() == 29);
  // Claude Code's first interactive run stops unless its reachability check answers.
  CHECK(std::any_of(p.allow.begin(), p.allow.end(), [](const auto& r) {
    return r.host && r.host->text() == "platform.claude.com" &&
           r.methods == std::vector<std::string>{"GET"} && r.paths.size() == 1;
  }));
}

TEST_CASE("to_json shows the normalized layer", "[config][policy]") {
  auto p = parse_policy(R"({
  "allow": [ { "host": "API.Example.COM." }, { "cidr": "10.0.0.0/8", "ports": [8080], "tunnel": true },
             { "host": "x.example", "methods": ["get"], "paths": ["/%76%31/*"] } ],
  "deny": [ { "host": "*.Bücher.example" } ],
  "credentials": { "c": { "type": "header", "header": "Api-Key", "env": ["C_KEY"], "hosts": ["api.example.com"] } },
  "budgets": { "bytes_out": "1KiB", "duration": "1h30m", "rate": "5/10s" }
})",
                        "x.json");
  auto j = broker::config::to_json(p);
  CHECK(j["source"] == "x.json");
  CHECK(j["sha256"] == p.sha256);
  CHECK(j["allow"][0]["host"] == "api.example.com");
  CHECK(j["allow"][0]["ports"] == nlohmann::ordered_json::parse("[80, 443]"));
  CHECK(j["allow"][0]["tunnel"] == false);
  CHECK(j["allow"][1]["cidr"] == "10.0.0.0/8");
  CHECK(j["allow"][1]["tunnel"] == true);
  CHECK(j["allow"][2]["methods"][0] == "GET");
  CHECK(j["allow"][2]["paths"][0] == "/v1/*");
  CHECK(j["deny"][0]["host"] == "*.xn--bcher-kva.example");
  CHECK_FALSE(j["deny"][0].contains("tunnel"));
  CHECK(j["credentials"]["c"]["header"] == "api-key");
  CHECK(j["credentials"]["c"]["source"] == "env:C_KEY");
  CHECK(j["budgets"]["bytes_out"] == 1024);
  CHECK(j["budgets"]["duration"] == "1h30m");
  CHECK(j["budgets"]["duration_ms"] == 5400000);
  CHECK(j["budgets"]["rate"]["per_second"] == Approx(0.5));
  CHECK(j["budgets"]["on_exhaust"] == "deny");
  CHECK_FALSE(j["budgets"].contains("requests"));
  CHECK(j["env"]["pass"].is_array());
  CHECK(j["files"]["mask"].is_array());
  // Keys come out in a stable, readable order.
  CHECK(j.begin().key() == "source");
}

TEST_CASE("load_policy_file reads a file and reports unreadable ones", "[config][policy]") {
  std::string path = "/tmp/broker_policy_test_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << "{\n  \"allow\": [ { \"host\": \"a.example\" } ],\n  \"bogus\": 1\n}\n";
  }
  try {
    broker::config::load_policy_file(path);
    FAIL("expected a policy_error");
  } catch (const policy_error& e) {
    CHECK(std::string(e.what()) == path +
                                       ":3: bogus: unknown key (expected one of: version, "
                                       "enforcement, on_deny, approvals, allow, deny, "
                                       "credentials, budgets, env, files, ssh)");
  }
  {
    std::ofstream out(path);
    out << "{ \"allow\": [ { \"host\": \"a.example\" } ] }";
  }
  auto p = broker::config::load_policy_file(path);
  CHECK(p.source == path);
  CHECK(p.allow.size() == 1);
  std::remove(path.c_str());

  try {
    broker::config::load_policy_file("/nonexistent/dir/policy.json");
    FAIL("expected a policy_error");
  } catch (const policy_error& e) {
    CHECK(e.line() == 0);
    CHECK(std::string(e.what()).find("/nonexistent/dir/policy.json: cannot open") == 0);
  }
}

TEST_CASE("a layer is enforcing unless it says audit, and a typo is an error at its line",
          "[config][policy]") {
  CHECK(parse_policy(R"({"allow": []})", "p.json").enforcement ==
        broker::config::enforcement::enforce);
  CHECK(parse_policy(R"({"enforcement": "audit"})", "p.json").enforcement ==
        broker::config::enforcement::audit);
  try {
    parse_policy("{\n  \"enforcement\": \"audt\"\n}", "p.json");
    FAIL("expected a policy_error");
  } catch (const policy_error& e) {
    CHECK(e.line() == 2);
    CHECK(std::string(e.what()).find("enforcement") != std::string::npos);
    CHECK(std::string(e.what()).find("audt") != std::string::npos);
  }
}

TEST_CASE("on_deny and approvals.never parse, and a bad value names its key",
          "[config][policy][ask]") {
  auto p = broker::config::parse_policy(
      R"({"on_deny": "ask", "approvals": {"never": ["*.Corp.Test"]}, "allow": [{"host": "a.test"}]})",
      "p.json");
  CHECK(p.asks());
  REQUIRE(p.never_approve.size() == 1);
  CHECK(p.never_approve[0].text() == "*.corp.test");
  CHECK(broker::config::to_json(p)["on_deny"] == "ask");
  CHECK(broker::config::to_json(p)["approvals"]["never"][0] == "*.corp.test");
  CHECK(broker::config::parse_policy("{}", "p.json").on_deny == broker::config::on_deny::unset);
  auto fails = [](const char* text) { return broker::config::test::error_of(text, "p.json").what; };
  CHECK(fails("{\n\"on_deny\": \"maybe\"}") ==
        "p.json:2: on_deny: expected \"deny\" or \"ask\", not \"maybe\"");
  CHECK(fails("{\"approvals\": {\"never\": [\"a b\"]}}").find("approvals.never[0]: invalid host") !=
        std::string::npos);
  CHECK(fails("{\"approvals\": {\"always\": []}}").find("approvals") != std::string::npos);
}
