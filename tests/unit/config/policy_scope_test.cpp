// A credential's "scope" as the policy reads it: each key for the families that read it, and
// errors that name the file, line and key.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "config/policy.hpp"
#include "tests/unit/config/policy_test_support.hpp"

using broker::config::parse_policy;
using broker::config::test::error_of;

namespace {

std::string with_scope(const std::string& type, const std::string& scope) {
  return R"({"credentials": {
  "c": { "type": ")" +
         type + R"(", "env": ["A", "B"], "hosts": ["api.example.com"],
         "scope": )" +
         scope + "}}}";
}

}  // namespace

TEST_CASE("scope keys are parsed and shown by policy check", "[config][policy][scope]") {
  auto p = parse_policy(with_scope("github", R"({"repos": ["Org/Web", "org/*"], "graphql": "read",
      "allow": [{"methods": ["get"], "paths": ["/repos/*"]}]})"),
                        "p.json");
  const auto& s = *p.credentials.at("c").scope;
  REQUIRE(s.repos);
  CHECK(s.repos->at(0).text() == "org/web");
  CHECK(s.repos->at(1).repo == "*");
  CHECK(s.graphql_read);
  REQUIRE(s.allow);
  CHECK(s.allow->at(0).methods == std::vector<std::string>{"GET"});
  CHECK(s.line == 3);
  auto j = broker::config::to_json(p);
  CHECK(j["credentials"]["c"]["scope"] ==
        nlohmann::ordered_json::parse(R"({"allow": [{"methods": ["GET"], "paths": ["/repos/*"]}],
          "repos": ["org/web", "org/*"], "graphql": "read"})"));

  auto aws = parse_policy(with_scope("aws-sigv4", R"({"s3": [{"bucket": "bkt", "prefix": "p/"}],
      "actions": ["s3:GetObject", "s3:List*"]})"),
                          "p.json");
  const auto& a = *aws.credentials.at("c").scope;
  CHECK(a.s3->at(0).bucket == "bkt");
  CHECK(a.s3->at(0).prefix == "p/");
  CHECK(*a.actions == std::vector<std::string>{"s3:getobject", "s3:list*"});
  CHECK_FALSE(parse_policy(with_scope("bearer", R"({"allow": [{"paths": ["/v1/*"]}]})"), "p.json")
                  .credentials.at("c")
                  .scope->repos);
}

TEST_CASE("scope errors name the line and key", "[config][policy][scope]") {
  struct bad {
    const char* type;
    const char* scope;
    const char* error;
  };
  for (const bad& b : {
           bad{"bearer", R"({"repos": ["org/web"]})",
               "credentials.c.scope.repos: scope \"repos\" applies only to type github"},
           bad{"github", R"({"s3": [{"bucket": "b"}]})",
               "credentials.c.scope.s3: scope \"s3\" applies only to type aws-sigv4"},
           bad{"github", R"({"actions": ["s3:GetObject"]})",
               "credentials.c.scope.actions: scope \"actions\" applies only to type aws-sigv4"},
           bad{"github", R"({"repos": ["org"]})", "credentials.c.scope.repos[0]: expected"},
           bad{"github", R"({"repos": ["org/we b"]})", "credentials.c.scope.repos[0]: expected"},
           bad{"github", R"({"repos": ["*/web"]})", "credentials.c.scope.repos[0]: expected"},
           bad{"github", R"({"graphql": "write"})",
               "credentials.c.scope.graphql: expected \"read\""},
           bad{"github", R"({})", "credentials.c.scope: an empty scope narrows nothing"},
           bad{"github", R"({"colour": 1})", "credentials.c.scope.colour: unknown key"},
           bad{"bearer", R"({"allow": []})", "credentials.c.scope.allow: an empty \"allow\""},
           bad{"bearer", R"({"allow": [{}]})", "credentials.c.scope.allow[0]: needs \"methods\""},
           bad{"bearer", R"({"allow": [{"paths": ["v1"]}]})",
               "credentials.c.scope.allow[0].paths[0]: path pattern must start"},
           bad{"aws-sigv4", R"({"actions": ["GetObject"]})",
               "credentials.c.scope.actions[0]: expected \"service:Action\""},
           bad{"aws-sigv4", R"({"actions": ["s3:*Object"]})",
               "credentials.c.scope.actions[0]: expected \"service:Action\""},
           bad{"aws-sigv4", R"({"s3": [{"prefix": "p"}]})", "credentials.c.scope.s3[0]: missing"},
       }) {
    INFO(b.scope);
    auto e = error_of(with_scope(b.type, b.scope));
    REQUIRE(e.thrown);
    CHECK_THAT(e.what, Catch::Contains(b.error));
    CHECK_THAT(e.what, Catch::StartsWith("policy.json:"));
  }
}
