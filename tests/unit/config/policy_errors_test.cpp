// Policy errors: every mistake names file, line and key (docs/policy.md).
#include <catch2/catch.hpp>

#include <string>

#include "config/policy.hpp"
#include "tests/unit/config/policy_test_support.hpp"

using broker::config::exhaust_action;
using broker::config::parse_policy;
using broker::config::policy_error;
using broker::config::test::error_of;

TEST_CASE("wrong type for ports names file, line and key", "[config][policy]") {
  auto e = error_of(R"({
  "allow": [
    { "host": "a.example" },
    { "host": "b.example" },
    { "host": "c.example" },
    { "host": "d.example",
      "ports": "443" }
  ]
})");
  REQUIRE(e.thrown);
  CHECK(e.what == "policy.json:7: allow[3].ports: expected array of integers");
  CHECK(e.line == 7);
  CHECK(e.key == "allow[3].ports");
  CHECK(e.message == "expected array of integers");

  auto element = error_of("{\"allow\": [{\"host\": \"a.example\", \"ports\": [443, \"80\"]}]}");
  CHECK(element.what == "policy.json:1: allow[0].ports: expected array of integers");
  auto range = error_of("{\"allow\": [{\"host\": \"a.example\",\n \"ports\": [443,\n 70000]}]}");
  CHECK(range.what == "policy.json:3: allow[0].ports[1]: port out of range 1..65535");
  CHECK(error_of(R"({"allow": [{"host": "a.example", "ports": [0]}]})").key == "allow[0].ports[0]");
  CHECK(error_of(R"({"allow": [{"host": "a.example", "ports": []}]})").key == "allow[0].ports");
  CHECK(error_of(R"({"allow": [{"host": "a.example", "ports": [443.0]}]})").thrown);
}

TEST_CASE("unknown keys are errors at their own line", "[config][policy]") {
  auto top = error_of("{\n  \"version\": 1,\n  \"alow\": []\n}", "my/policy.json");
  REQUIRE(top.thrown);
  CHECK(top.line == 3);
  CHECK(top.key == "alow");
  CHECK(top.what.rfind("my/policy.json:3: alow: unknown key", 0) == 0);

  auto nested = error_of(R"({
  "allow": [
    { "host": "a.example",
      "port": [443] }
  ]
})");
  CHECK(nested.line == 4);
  CHECK(nested.key == "allow[0].port");

  auto cred = error_of(R"({
  "credentials": {
    "gh": { "type": "github", "env": ["GH_TOKEN"], "hosts": ["github.com"],
            "hots": ["x.com"] }
  }
})");
  CHECK(cred.line == 4);
  CHECK(cred.key == "credentials.gh.hots");

  auto budget = error_of("{\"budgets\": {\n\"request\": 5}}");
  CHECK(budget.line == 2);
  CHECK(budget.key == "budgets.request");
}

TEST_CASE("a rule needs exactly one of host or cidr", "[config][policy]") {
  auto none = error_of(R"({
  "allow": [
    { "host": "a.example" },
    { "ports": [443] }
  ]
})");
  REQUIRE(none.thrown);
  CHECK(none.line == 4);
  CHECK(none.key == "allow[1]");
  CHECK(none.message == "a rule needs exactly one of \"host\" or \"cidr\"");

  auto both = error_of(R"({"deny": [{"host": "a.example", "cidr": "10.0.0.0/8"}]})");
  CHECK(both.key == "deny[0]");
  CHECK(both.thrown);
}

TEST_CASE("bad host patterns and CIDR blocks", "[config][policy]") {
  auto cidr = error_of(R"({
  "allow": [
    { "cidr": "10.0.0.1/8" }
  ]
})");
  REQUIRE(cidr.thrown);
  CHECK(cidr.line == 3);
  CHECK(cidr.key == "allow[0].cidr");
  CHECK(cidr.message.find("invalid CIDR block \"10.0.0.1/8\"") == 0);

  auto ip_host = error_of(R"({"allow": [{"host": "10.1.2.3"}]})");
  CHECK(ip_host.key == "allow[0].host");
  CHECK(ip_host.message.find("IP literals match only \"cidr\" rules") != std::string::npos);

  CHECK(error_of(R"({"allow": [{"host": "a.*.example"}]})").key == "allow[0].host");
  CHECK(error_of(R"({"allow": [{"host": 5}]})").message == "expected string, got a number");
}

TEST_CASE("tunnel rules", "[config][policy]") {
  auto with_paths = error_of(R"({
  "allow": [
    { "host": "pinned.example.com",
      "paths": ["/x"],
      "tunnel": true }
  ]
})");
  REQUIRE(with_paths.thrown);
  CHECK(with_paths.line == 5);
  CHECK(with_paths.key == "allow[0].tunnel");

  auto with_methods =
      error_of(R"({"allow": [{"host": "a.example", "methods": ["GET"], "tunnel": true}]})");
  CHECK(with_methods.key == "allow[0].tunnel");

  auto in_deny = error_of(R"({"deny": [{"host": "a.example", "tunnel": true}]})");
  CHECK(in_deny.key == "deny[0].tunnel");

  auto not_bool = error_of(R"({"allow": [{"host": "a.example", "tunnel": "yes"}]})");
  CHECK(not_bool.message == "expected true or false, got a string");

  // tunnel: false with methods is an ordinary rule.
  auto ok = parse_policy(
      R"({"allow": [{"host": "a.example", "methods": ["GET"], "tunnel": false}]})", "p");
  CHECK_FALSE(ok.allow[0].tunnel);
}

TEST_CASE("a credential bound to a tunnelled host is a policy error", "[config][policy]") {
  auto exact = error_of(R"({
  "allow": [
    { "host": "api.github.com" },
    { "host": "pinned.example.com", "tunnel": true }
  ],
  "credentials": {
    "pin": { "type": "bearer", "env": ["PIN_TOKEN"],
             "hosts": ["api.github.com",
                       "pinned.example.com"] }
  }
})");
  REQUIRE(exact.thrown);
  CHECK(exact.line == 9);
  CHECK(exact.key == "credentials.pin.hosts[1]");
  CHECK(exact.message.find("allow[1] (line 4)") != std::string::npos);

  // Wildcard credential over an exact tunnel host, exact over wildcard, wildcard vs wildcard.
  const char* conflicts[][2] = {{"*.example.com", "pinned.example.com"},
                                {"a.b.example.com", "*.example.com"},
                                {"*.example.com", "*.b.example.com"},
                                {"*.b.example.com", "*.example.com"},
                                {"*", "pinned.example.com"}};
  for (auto& pair : conflicts) {
    std::string text =
        std::string(R"({"allow": [{"host": ")") + pair[1] +
        R"(", "tunnel": true}], "credentials": {"c": {"type": "bearer", "env": ["T"], "hosts": [")" +
        pair[0] + R"("]}}})";
    INFO(pair[0] << " vs " << pair[1]);
    CHECK(error_of(text).key == "credentials.c.hosts[0]");
  }
  // No overlap: the apex is not under its own wildcard; siblings do not overlap.
  const char* fine[][2] = {{"example.com", "*.example.com"},
                           {"*.other.com", "*.example.com"},
                           {"api.example.com", "pinned.example.com"}};
  for (auto& pair : fine) {
    std::string text =
        std::string(R"({"allow": [{"host": ")") + pair[1] +
        R"(", "tunnel": true}], "credentials": {"c": {"type": "bearer", "env": ["T"], "hosts": [")" +
        pair[0] + R"("]}}})";
    INFO(pair[0] << " vs " << pair[1]);
    CHECK_FALSE(error_of(text).thrown);
  }
}

TEST_CASE("credential validation", "[config][policy]") {
  auto no_source = error_of(R"({"credentials": {
  "x": { "type": "bearer", "hosts": ["a.example"] }}})");
  CHECK(no_source.line == 2);
  CHECK(no_source.key == "credentials.x");
  CHECK(no_source.message.find("needs \"source\" or \"env\"") == 0);

  auto bad_type = error_of(
      R"({"credentials": {"x": {"type": "gitlab", "env": ["T"], "hosts": ["a.example"]}}})");
  CHECK(bad_type.key == "credentials.x.type");
  CHECK(bad_type.message.find("github, bearer, header, basic, aws-sigv4, gcp, azure") !=
        std::string::npos);

  CHECK(error_of(R"({"credentials": {"x": {"env": ["T"], "hosts": ["a.example"]}}})")
            .message.find("missing \"type\"") == 0);
  CHECK(error_of(R"({"credentials": {"x": {"type": "bearer", "env": ["T"]}}})")
            .message.find("missing \"hosts\"") == 0);
  CHECK(error_of(R"({"credentials": {"x": {"type": "bearer", "env": ["T"], "hosts": []}}})").key ==
        "credentials.x.hosts");
  CHECK(
      error_of(
          R"({"credentials": {"x": {"type": "bearer", "env": ["T"], "hosts": ["a.example", "1.2.3.4"]}}})")
          .key == "credentials.x.hosts[1]");
  CHECK(error_of(
            R"({"credentials": {"x": {"type": "header", "env": ["T"], "hosts": ["a.example"]}}})")
            .message.find("needs \"header\"") != std::string::npos);
  CHECK(
      error_of(
          R"({"credentials": {"x": {"type": "bearer", "header": "x-key", "env": ["T"], "hosts": ["a.example"]}}})")
          .key == "credentials.x.header");
  CHECK(
      error_of(
          R"({"credentials": {"x": {"type": "bearer", "env": ["NOT-A-NAME"], "hosts": ["a.example"]}}})")
          .key == "credentials.x.env[0]");
  CHECK(
      error_of(
          R"({"credentials": {"x": {"type": "bearer", "source": "vault:x", "hosts": ["a.example"]}}})")
          .key == "credentials.x.source");
  CHECK(
      error_of(
          R"({"credentials": {"x": {"type": "bearer", "source": "cmd:", "hosts": ["a.example"]}}})")
          .key == "credentials.x.source");
  CHECK(
      error_of(
          R"({"credentials": {"x": {"type": "bearer", "env": ["T"], "hosts": ["a.example"], "allow_plaintext": 1}}})")
          .key == "credentials.x.allow_plaintext");
  CHECK(error_of(R"({"credentials": []})").key == "credentials");

  auto cmd = parse_policy(
      R"({"credentials": {"x": {"type": "bearer", "source": "cmd:gh auth token", "hosts": ["a.example"]}}})",
      "p");
  CHECK(cmd.credentials.at("x").source == "cmd:gh auth token");
  CHECK(cmd.credentials.at("x").env.empty());
}

TEST_CASE("methods and paths validation", "[config][policy]") {
  CHECK(error_of(R"({"allow": [{"host": "a.example", "methods": ["GET", "BAD METHOD"]}]})").key ==
        "allow[0].methods[1]");
  CHECK(error_of(R"({"allow": [{"host": "a.example", "methods": "GET"}]})").message ==
        "expected array of strings");
  CHECK(error_of(R"({"allow": [{"host": "a.example", "methods": []}]})").key == "allow[0].methods");
  auto path = error_of(R"({"allow": [{"host": "a.example", "paths": ["/ok", "v1/*"]}]})");
  CHECK(path.key == "allow[0].paths[1]");
  CHECK(path.message == "path pattern must start with \"/\"");
  CHECK(error_of(R"({"allow": [{"host": "a.example", "paths": ["/v1/../x"]}]})").key ==
        "allow[0].paths[0]");
}

TEST_CASE("budgets, env and files validation", "[config][policy]") {
  CHECK(error_of(R"({"budgets": {"requests": -1}})").key == "budgets.requests");
  CHECK(error_of(R"({"budgets": {"requests": 1.5}})").key == "budgets.requests");
  CHECK(error_of(R"({"budgets": {"llm_tokens": "many"}})").key == "budgets.llm_tokens");
  CHECK(error_of(R"({"budgets": {"bytes_out": "100 parsecs"}})").key == "budgets.bytes_out");
  CHECK(error_of(R"({"budgets": {"bytes_in": -5}})").key == "budgets.bytes_in");
  CHECK(error_of(R"({"budgets": {"duration": 60}})").key == "budgets.duration");
  CHECK(error_of(R"({"budgets": {"rate": "fast"}})").key == "budgets.rate");
  CHECK(error_of(R"({"budgets": {"on_exhaust": "explode"}})").message ==
        "expected \"deny\" or \"kill\"");
  CHECK(error_of(R"({"env": {"pass": "X"}})").key == "env.pass");
  CHECK(error_of(R"({"env": {"keep": []}})").key == "env.keep");
  CHECK(error_of(R"({"files": {"mask": [""]}})").key == "files.mask[0]");
  const auto relative = error_of(R"({"files": {"readonly": ["/etc/hosts", "notes.txt"]}})");
  CHECK(relative.key == "files.readonly[1]");
  CHECK(relative.message == "expected an absolute path or one under ~/");
  CHECK(error_of(R"({"files": {"pass": ["~user/x"]}})").key == "files.pass[0]");
  CHECK_FALSE(error_of(R"({"files": {"readonly": ["~/.npmrc", "/srv/x", "~"]}})").thrown);
  auto defaults = parse_policy(R"({"budgets": {}})", "p");
  CHECK(defaults.budgets.on_exhaust == exhaust_action::deny);
  CHECK_FALSE(defaults.budgets.requests);
}

TEST_CASE("version must be 1 when present", "[config][policy]") {
  CHECK_FALSE(error_of(R"({"version": 1})").thrown);
  auto two = error_of("{\n\"version\": 2}");
  CHECK(two.line == 2);
  CHECK(two.key == "version");
  CHECK(error_of(R"({"version": "1"})").key == "version");
}

TEST_CASE("syntax errors name the line", "[config][policy]") {
  auto missing_comma = error_of(R"({
  "allow": [
    { "host": "a.example" }
    { "host": "b.example" }
  ]
})");
  REQUIRE(missing_comma.thrown);
  CHECK(missing_comma.line == 4);
  CHECK(missing_comma.key == "allow[1]");
  CHECK(missing_comma.what.rfind("policy.json:4: allow[1]: syntax error", 0) == 0);

  auto trailing = error_of("{\n  \"deny\": [],\n}\n");
  CHECK(trailing.line == 3);

  // Trailing blank lines do not move an end-of-input error past the last token.
  auto unterminated = error_of("{\n  \"allow\": [\n\n  \n");
  CHECK(unterminated.line == 2);

  auto literal = error_of("{\n\n  \"version\": tru\n}");
  CHECK(literal.line == 3);
  CHECK(literal.key == "version");

  auto empty = error_of("");
  CHECK(empty.line == 1);
  CHECK(empty.key == "(document)");

  auto dup = error_of("{\n  \"allow\": [],\n  \"allow\": []\n}");
  CHECK(dup.line == 3);
  CHECK(dup.key == "allow");
  CHECK(dup.message == "duplicate key");

  auto not_object = error_of("[1, 2]");
  CHECK(not_object.key == "(document)");
  CHECK(not_object.line == 1);
}

TEST_CASE("line numbers survive comments and blank lines", "[config][policy]") {
  auto e = error_of(R"(// header comment
/* a block comment
   spanning lines */
{
  // "allow": [{"host": "commented.out"}],
  "allow": [ { "host": "a.example",
               "ports": [443,  // https
                         80    /* http */
                        ] },
             { "cidr": "bad" } ]
})");
  REQUIRE(e.thrown);
  CHECK(e.line == 10);
  CHECK(e.key == "allow[1].cidr");
}

TEST_CASE("a policy text cannot make the loader's memory blow up", "[config][policy]") {
  // Every value's path is kept for its errors: deep nesting and long keys are bounded, each
  // with an error naming file, line and key, instead of gigabytes.
  auto deep =
      error_of("{\"allow\": " + std::string(40 * 1024, '[') + std::string(40 * 1024, ']') + "}");
  REQUIRE(deep.thrown);
  CHECK(deep.message == "nested deeper than 32 levels");
  CHECK(deep.line == 1);

  auto long_key = error_of("{\"credentials\": {\"" + std::string(300, 'k') + "\": {}}}");
  REQUIRE(long_key.thrown);
  CHECK(long_key.message == "a key longer than 256 bytes");
  CHECK(long_key.key == "credentials");

  // Thirty keys of 256 bytes nested, then 8,000 numbers: each number's path is ~7.7 KiB.
  std::string text = "{";
  for (int i = 0; i < 30; ++i)
    text += "\"" + std::string(256, static_cast<char>('a' + i % 26)) + "\": {";
  text += "\"x\": [1";
  for (int i = 1; i < 8000; ++i) text += ",1";
  text += "]" + std::string(31, '}');
  auto wide = error_of(text);
  REQUIRE(wide.thrown);
  CHECK(wide.message == "too many values under long keys for a policy file");
}

TEST_CASE("an empty key is named in errors, at any level", "[config][policy]") {
  // "" is a legal JSON key: the error must still say which key it is about.
  auto top = error_of("{\n  \"version\": 1,\n  \"\": 1\n}", "my/policy.json");
  REQUIRE(top.thrown);
  CHECK(top.line == 3);
  CHECK(top.key == "<empty key>");
  CHECK(top.what.rfind("my/policy.json:3: <empty key>: unknown key (expected one of:", 0) == 0);

  auto dup = error_of("{\n  \"\": 1,\n  \"\": 2\n}");
  CHECK(dup.what == "policy.json:3: <empty key>: duplicate key");

  auto in_rule = error_of("{\"allow\": [{\"host\": \"a.example\",\n  \"\": 1}]}");
  CHECK(in_rule.line == 2);
  CHECK(in_rule.key == "allow[0].<empty key>");

  auto credential = error_of(
      "{\"credentials\": {\n  \"\": {\"type\": \"bearer\", \"env\": [\"T\"], \"hosts\": "
      "[\"a.example\"]}}}");
  CHECK(credential.what ==
        "policy.json:2: credentials.<empty key>: credential names use letters, digits, '-', '_' "
        "and '.'");

  auto host = error_of("{\"budgets\": {\"per_host\": {\n  \"\": {}}}}");
  CHECK(host.line == 2);
  CHECK(host.what.rfind("policy.json:2: budgets.per_host.<empty key>: invalid host pattern \"\"",
                        0) == 0);

  // Syntax errors name the innermost key too, an empty one included.
  CHECK(error_of("{\"\": tru}").key == "<empty key>");
  CHECK(error_of("{\"credentials\": {\"\": {\"type\": tru}}}").key ==
        "credentials.<empty key>.type");
}

TEST_CASE("login file credentials are validated", "[config][policy]") {
  auto fields_alone = error_of(
      R"({"credentials": {"x": {"type": "bearer", "env": ["T"], "hosts": ["a.example"],
  "fields": ["token"]}}})");
  CHECK(fields_alone.key == "credentials.x.fields");
  CHECK(fields_alone.line == 2);
  CHECK(error_of(R"({"credentials": {"x": {"type": "aws-sigv4", "hosts": ["a.example"],
    "file": "~/.aws/x.json", "fields": ["a"]}}})")
            .message.find("only to types github, bearer and header") != std::string::npos);
  CHECK(error_of(R"({"credentials": {"x": {"type": "bearer", "hosts": ["a.example"],
    "file": "relative/auth.json", "fields": ["a"]}}})")
            .key == "credentials.x.file");
  CHECK(error_of(R"({"credentials": {"x": {"type": "bearer", "hosts": ["a.example"],
    "file": "~/a.json"}}})")
            .message.find("needs \"fields\"") != std::string::npos);
  CHECK(error_of(R"({"credentials": {"x": {"type": "bearer", "hosts": ["a.example"],
    "file": "~/a.json", "fields": ["tokens..access"]}}})")
            .key == "credentials.x.fields[0]");
  CHECK(error_of(R"({"credentials": {"x": {"type": "bearer", "hosts": ["a.example"],
    "file": "~/a.json", "fields": ["a"], "refresh": {"url": "http://a.example/token",
    "token": "r", "response": {}}}}})")
            .key == "credentials.x.refresh.url");
  auto ok = broker::config::parse_policy(R"({"credentials": {"x": {"type": "bearer",
    "hosts": ["a.example"], "file": "~/a.json", "fields": ["tokens.access_token"],
    "refresh": {"url": "https://a.example/oauth/token", "token": "tokens.refresh_token",
                "response": {"access_token": "tokens.access_token"}}}}})",
                                         "p.json");
  const auto& spec = ok.credentials.at("x");
  REQUIRE(spec.login_file);
  CHECK(spec.login_file->fields == std::vector<std::string>{"tokens.access_token"});
  REQUIRE(spec.login_file->refresh);
  CHECK(spec.login_file->refresh->response.at(0).second == "tokens.access_token");
}
