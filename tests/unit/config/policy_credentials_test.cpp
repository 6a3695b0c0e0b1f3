// The cloud families' credential keys: aws-sigv4 "regions"/"services" and "env" arity, gcp
// "scopes", and the defaults gcp and azure get without "env" or "source".
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "config/policy.hpp"
#include "tests/unit/config/policy_test_support.hpp"

using broker::config::parse_policy;
using broker::config::test::error_of;
using strings = std::vector<std::string>;

TEST_CASE("aws-sigv4 regions and services are parsed", "[config][policy][credentials]") {
  auto p = parse_policy(R"({"credentials": {
  "aws": { "type": "aws-sigv4", "hosts": ["*.amazonaws.com"],
           "regions": ["us-east-1", "eu-west-1"], "services": ["s3", "sts"] },
  "plain": { "type": "aws-sigv4", "hosts": ["*.amazonaws.com"] }}})",
                        "p.json");
  const auto& aws = p.credentials.at("aws");
  CHECK(aws.regions == strings{"us-east-1", "eu-west-1"});
  CHECK(aws.services == strings{"s3", "sts"});
  CHECK(aws.scopes.empty());
  const auto& plain = p.credentials.at("plain");
  CHECK(plain.regions.empty());  // absent = any
  CHECK(plain.services.empty());
  // `policy check` shows them.
  auto j = broker::config::to_json(p);
  CHECK(j["credentials"]["aws"]["regions"] ==
        nlohmann::ordered_json::parse(R"(["us-east-1", "eu-west-1"])"));
  CHECK(j["credentials"]["aws"]["services"] == nlohmann::ordered_json::parse(R"(["s3", "sts"])"));
  CHECK_FALSE(j["credentials"]["plain"].contains("regions"));
}

TEST_CASE("regions and services apply only to aws-sigv4", "[config][policy][credentials]") {
  auto regions = error_of(R"({"credentials": {
  "gh": { "type": "github", "env": ["GH_TOKEN"], "hosts": ["github.com"],
          "regions": ["us-east-1"] }}})");
  REQUIRE(regions.thrown);
  CHECK(regions.line == 3);
  CHECK(regions.key == "credentials.gh.regions");
  CHECK(regions.message == "\"regions\" applies only to type \"aws-sigv4\"");
  CHECK(regions.what ==
        "policy.json:3: credentials.gh.regions: \"regions\" applies only to type \"aws-sigv4\"");

  auto services = error_of(R"({"credentials": {
  "g": { "type": "gcp", "hosts": ["*.googleapis.com"],

         "services": ["storage"] }}})");
  REQUIRE(services.thrown);
  CHECK(services.line == 4);
  CHECK(services.key == "credentials.g.services");
  CHECK(services.message == "\"services\" applies only to type \"aws-sigv4\"");

  for (std::string type : {"bearer", "basic", "azure"}) {
    INFO(type);
    auto e = error_of(R"({"credentials": {"x": {"type": ")" + type +
                      R"(", "env": ["T"], "hosts": ["a.example"], "services": ["s3"]}}})");
    CHECK(e.key == "credentials.x.services");
    CHECK(e.line == 1);
  }
}

TEST_CASE("scopes apply only to gcp", "[config][policy][credentials]") {
  auto p = parse_policy(R"({"credentials": {
  "g": { "type": "gcp", "hosts": ["*.googleapis.com"],
         "scopes": ["https://www.googleapis.com/auth/devstorage.read_only"] }}})",
                        "p.json");
  CHECK(p.credentials.at("g").scopes ==
        strings{"https://www.googleapis.com/auth/devstorage.read_only"});

  for (std::string type : {"aws-sigv4", "azure", "bearer"}) {
    INFO(type);
    auto e = error_of(R"({"credentials": {
  "x": { "type": ")" + type +
                      R"(", "env": ["A", "B"], "hosts": ["a.example"],
         "scopes": ["https://www.googleapis.com/auth/cloud-platform"] }}})");
    REQUIRE(e.thrown);
    CHECK(e.line == 3);
    CHECK(e.key == "credentials.x.scopes");
    CHECK(e.message == "\"scopes\" applies only to type \"gcp\"");
  }
}

TEST_CASE("regions, services and scopes may not be empty or hold empty names",
          "[config][policy][credentials]") {
  for (const char* key : {"regions", "services"}) {
    INFO(key);
    auto empty = error_of(std::string(R"({"credentials": {"aws": {"type": "aws-sigv4",
  "hosts": ["*.amazonaws.com"], ")") +
                          key + R"(": [] }}})");
    REQUIRE(empty.thrown);
    CHECK(empty.key == std::string("credentials.aws.") + key);
    CHECK(empty.line == 2);

    auto blank = error_of(std::string(R"({"credentials": {"aws": {"type": "aws-sigv4",
  "hosts": ["*.amazonaws.com"], ")") +
                          key + R"(": ["s3", ""] }}})");
    CHECK(blank.key == std::string("credentials.aws.") + key + "[1]");
    CHECK(blank.message == "empty name");

    auto not_strings = error_of(std::string(R"({"credentials": {"aws": {"type": "aws-sigv4",
  "hosts": ["*.amazonaws.com"], ")") +
                                key + R"(": "us-east-1" }}})");
    CHECK(not_strings.key == std::string("credentials.aws.") + key);
  }
  auto scopes = error_of(R"({"credentials": {"g": {"type": "gcp", "hosts": ["*.googleapis.com"],
  "scopes": []}}})");
  REQUIRE(scopes.thrown);
  CHECK(scopes.key == "credentials.g.scopes");
}

TEST_CASE("aws-sigv4 env names two or three variables", "[config][policy][credentials]") {
  auto text = [](const std::string& env) {
    return R"({"credentials": {
  "aws": { "type": "aws-sigv4", "hosts": ["*.amazonaws.com"],
           "env": )" +
           env + R"( }}})";
  };
  for (const char* env : {R"(["K"])", R"(["K", "S", "T", "X"])"}) {
    INFO(env);
    auto e = error_of(text(env));
    REQUIRE(e.thrown);
    CHECK(e.key == "credentials.aws");
    CHECK(e.line == 2);
    CHECK(e.message.find("2 or 3 names") != std::string::npos);
  }
  auto two = parse_policy(text(R"(["K", "S"])"), "p");
  CHECK(two.credentials.at("aws").env == strings{"K", "S"});
  CHECK(two.credentials.at("aws").source == "env:K");
  auto three = parse_policy(text(R"(["K", "S", "T"])"), "p");
  CHECK(three.credentials.at("aws").env == strings{"K", "S", "T"});

  auto defaults = parse_policy(
      R"({"credentials": {"aws": {"type": "aws-sigv4", "hosts": ["*.amazonaws.com"]}}})", "p");
  CHECK(defaults.credentials.at("aws").env ==
        strings{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"});
  CHECK(defaults.credentials.at("aws").source == "env:AWS_ACCESS_KEY_ID");
}

TEST_CASE("gcp and azure defaults", "[config][policy][credentials]") {
  auto p = parse_policy(R"({"credentials": {
  "az": { "type": "azure", "hosts": ["management.azure.com"] },
  "az-env": { "type": "azure", "env": ["ARM_ACCESS_TOKEN"], "hosts": ["management.azure.com"] },
  "az-file": { "type": "azure", "source": "file:/run/az-token", "hosts": ["management.azure.com"] },
  "g": { "type": "gcp", "hosts": ["*.googleapis.com"] },
  "g-file": { "type": "gcp", "source": "file:/keys/sa.json", "hosts": ["*.googleapis.com"] }}})",
                        "p.json");
  const auto& az = p.credentials.at("az");
  CHECK(az.source == "cmd:az account get-access-token --output json");
  CHECK(az.env == strings{"AZURE_ACCESS_TOKEN"});
  // The variable names what the child sees; the real token still comes from the Azure CLI.
  CHECK(p.credentials.at("az-env").source == "cmd:az account get-access-token --output json");
  CHECK(p.credentials.at("az-env").env == strings{"ARM_ACCESS_TOKEN"});
  CHECK(p.credentials.at("az-file").source == "file:/run/az-token");
  CHECK(p.credentials.at("az-file").env == strings{"AZURE_ACCESS_TOKEN"});

  const auto& g = p.credentials.at("g");
  CHECK(g.env == strings{"GOOGLE_APPLICATION_CREDENTIALS"});
  CHECK(g.source == "env:GOOGLE_APPLICATION_CREDENTIALS");
  CHECK(g.scopes.empty());
  CHECK(p.credentials.at("g-file").source == "file:/keys/sa.json");
  CHECK(p.credentials.at("g-file").env == strings{"GOOGLE_APPLICATION_CREDENTIALS"});
}

TEST_CASE("also_bearer applies only to the header family", "[config][policy][credentials]") {
  auto p = broker::config::parse_policy(R"({"allow": [{"host": "api.anthropic.com"}],
    "credentials": {"a": {"type": "header", "header": "x-api-key", "also_bearer": true,
                          "env": ["ANTHROPIC_API_KEY"], "hosts": ["api.anthropic.com"]}}})",
                                        "policy.json");
  CHECK(p.credentials.at("a").also_bearer);
  auto e = error_of(R"({"credentials": {
  "o": { "type": "bearer", "env": ["OPENAI_API_KEY"], "hosts": ["api.openai.com"],
         "also_bearer": true }}})");
  REQUIRE(e.thrown);
  CHECK(e.line == 3);
  CHECK(e.key == "credentials.o.also_bearer");
  CHECK(e.message == "\"also_bearer\" applies only to type \"header\"");
}

TEST_CASE("github-app credentials name the App, the installation and the key",
          "[config][policy][credentials]") {
  auto p = parse_policy(R"({"credentials": {
  "app": { "type": "github-app", "app_id": 1234, "installation_id": 5678,
           "private_key": "file:~/keys/app.pem", "repositories": ["web", "api"],
           "permissions": {"contents": "write", "metadata": "read"},
           "hosts": ["api.github.com", "github.com"], "scope": {"repos": ["org/web"]} }}})",
                        "p.json");
  const auto& c = p.credentials.at("app");
  REQUIRE(c.github_app);
  CHECK(c.github_app->app_id == "1234");
  CHECK(c.github_app->installation_id == "5678");
  CHECK(c.github_app->api_url == "https://api.github.com");
  CHECK(c.github_app->repositories == strings{"web", "api"});
  CHECK(c.github_app->permissions.size() == 2);
  CHECK(c.source == "file:~/keys/app.pem");  // the key is its source: masked from the child
  CHECK(c.env == strings{"GITHUB_TOKEN", "GH_TOKEN"});
  auto j = broker::config::to_json(p);
  CHECK(j["credentials"]["app"]["private_key"] == "file:~/keys/app.pem");
  CHECK_FALSE(j["credentials"]["app"].contains("source"));

  auto missing = error_of(R"({"credentials": {
  "app": { "type": "github-app", "app_id": 1, "private_key": "env:K", "hosts": ["h"] }}})");
  CHECK_THAT(missing.what, Catch::Contains("needs \"installation_id\""));
  auto source = error_of(R"({"credentials": {
  "app": { "type": "github-app", "app_id": 1, "installation_id": 2, "private_key": "env:K",
           "source": "env:X", "hosts": ["h"] }}})");
  CHECK_THAT(source.what, Catch::Contains("its \"private_key\""));
  auto level = error_of(R"({"credentials": {
  "app": { "type": "github-app", "app_id": 1, "installation_id": 2, "private_key": "env:K",
           "permissions": {"contents": "all"}, "hosts": ["h"] }}})");
  CHECK_THAT(level.what, Catch::Contains("permissions.contents: expected \"read\""));
  auto owner = error_of(R"({"credentials": {
  "app": { "type": "github-app", "app_id": 1, "installation_id": 2, "private_key": "env:K",
           "repositories": ["org/web"], "hosts": ["h"] }}})");
  CHECK_THAT(owner.what, Catch::Contains("without the owner"));
  auto other = error_of(R"({"credentials": {
  "gh": { "type": "github", "env": ["T"], "app_id": 1, "hosts": ["h"] }}})");
  CHECK_THAT(
      other.what,
      Catch::Contains("credentials.gh.app_id: \"app_id\" applies only to type \"github-app\""));
}

TEST_CASE("assume_role and access_boundary are read for their families",
          "[config][policy][credentials]") {
  auto p = parse_policy(R"({"credentials": {
  "aws": { "type": "aws-sigv4", "hosts": ["*.amazonaws.com"],
           "assume_role": { "arn": "arn:aws:iam::123456789012:role/agent",
                            "policy": {"Version": "2012-10-17", "Statement": []},
                            "duration": "2h" } },
  "gcp": { "type": "gcp", "hosts": ["*.googleapis.com"], "source": "file:/k.json",
           "access_boundary": [{ "availableResource": "//storage.googleapis.com/projects/_/buckets/b",
                                 "availablePermissions": ["inRole:roles/storage.objectViewer"] }] }}})",
                        "p.json");
  const auto& role = *p.credentials.at("aws").assume_role;
  CHECK(role.arn == "arn:aws:iam::123456789012:role/agent");
  CHECK(role.policy == R"({"Statement":[],"Version":"2012-10-17"})");
  CHECK(role.duration == std::chrono::hours(2));
  CHECK(
      p.credentials.at("gcp").access_boundary ==
      R"({"accessBoundary":{"accessBoundaryRules":[{"availablePermissions":["inRole:roles/storage.objectViewer"],"availableResource":"//storage.googleapis.com/projects/_/buckets/b"}]}})");

  auto arn = error_of(R"({"credentials": {"aws": { "type": "aws-sigv4", "hosts": ["h"],
           "assume_role": { "arn": "agent" } }}})");
  CHECK_THAT(arn.what, Catch::Contains("credentials.aws.assume_role.arn: expected a role ARN"));
  auto duration = error_of(R"({"credentials": {"aws": { "type": "aws-sigv4", "hosts": ["h"],
           "assume_role": { "arn": "arn:aws:iam::1:role/r", "duration": "5m" } }}})");
  CHECK_THAT(duration.what, Catch::Contains("from \"15m\" to \"12h\""));
  auto family = error_of(R"({"credentials": {"gh": { "type": "github", "env": ["T"], "hosts": ["h"],
           "assume_role": { "arn": "arn:aws:iam::1:role/r" } }}})");
  CHECK_THAT(family.what, Catch::Contains("applies only to type \"aws-sigv4\""));
  auto rule =
      error_of(R"({"credentials": {"gcp": { "type": "gcp", "hosts": ["h"], "source": "file:/k",
           "access_boundary": [{ "availableResource": "b", "availablePermissions": ["x"] }] }}})");
  CHECK_THAT(rule.what, Catch::Contains("access_boundary[0].availableResource: expected a full"));
}
