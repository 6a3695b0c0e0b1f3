// A credential's "scope" on its bound host (docs/policy.md, "Least privilege"): the judgement
// of one request (judge_scope), GitHub's URL spaces, and the set refusing an out-of-scope dummy
// before anything is swapped.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "brokers/credential_set.hpp"
#include "brokers/github_scope.hpp"
#include "brokers/scope.hpp"
#include "config/policy.hpp"
#include "value_broker_test_support.hpp"

using broker::brokers::credential_set;
using broker::brokers::github_target;
using broker::brokers::github_target_of;
using broker::brokers::judge_scope;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::brokers::value_broker;
using broker::brokers::testing::brokers_of;
using broker::brokers::testing::value_init;
using broker::config::credential_scope;
using broker::http::header_field;

namespace {

const std::string gh_real = "ghp_REALreal9876543210realREALreal98765";
const std::string gh_dummy = "ghp_DUMMYdummy0123456789dummyDUMMY01234";

// The scope of a github credential in a policy with this "scope" text.
credential_scope scope_of(const std::string& scope, const std::string& type = "github") {
  const std::string text = R"({"credentials": {"c": {"type": ")" + type +
                           R"(", "env": ["T"], "hosts": ["*"], "scope": )" + scope + "}}}";
  return *broker::config::parse_policy(text, "p.json").credentials.at("c").scope;
}

std::string refused_by(const credential_scope& s, std::string_view host, std::string_view method,
                       std::string_view target) {
  return judge_scope(s, "github", host, method, target).key;
}

credential_set github_set(const std::string& scope) {
  std::vector<value_broker::init> list;
  list.push_back(
      value_init("github", "github", {"api.github.com", "github.com"}, gh_real, gh_dummy));
  list.back().spec.scope = scope_of(scope);
  return credential_set(brokers_of(std::move(list)));
}

}  // namespace

TEST_CASE("scope: GitHub's URL spaces name the repository", "[brokers][scope]") {
  using kind = github_target::kind;
  auto t = github_target_of("api.github.com", "DELETE", "/repos/Org/Web");
  CHECK(t.what == kind::repository);
  CHECK(t.owner == "org");
  CHECK(t.repo == "web");
  t = github_target_of("github.com", "POST", "/org/web.git/git-receive-pack");
  CHECK((t.what == kind::repository && t.repo == "web"));
  t = github_target_of("github.com", "GET", "/org/web/info/refs");
  CHECK((t.what == kind::repository && t.repo == "web"));
  t = github_target_of("uploads.github.com", "POST", "/repos/org/web/releases/1/assets");
  CHECK((t.what == kind::repository && t.owner == "org"));
  t = github_target_of("raw.githubusercontent.com", "GET", "/org/web/main/README.md");
  CHECK((t.what == kind::repository && t.repo == "web"));
  t = github_target_of("codeload.github.com", "GET", "/org/web/tar.gz/refs/heads/main");
  CHECK((t.what == kind::repository && t.repo == "web"));
  t = github_target_of("ghe.acme.dev", "GET", "/api/v3/repos/org/web/pulls");
  CHECK((t.what == kind::repository && t.repo == "web"));
  CHECK(github_target_of("ghe.acme.dev", "POST", "/api/graphql").what == kind::graphql);
  CHECK(github_target_of("api.github.com", "POST", "/graphql").what == kind::graphql);
  CHECK(github_target_of("api.github.com", "GET", "/user").what == kind::account);
  CHECK(github_target_of("api.github.com", "PATCH", "/user").what == kind::other);
  CHECK(github_target_of("api.github.com", "GET", "/orgs/other/repos").what == kind::other);
  CHECK(github_target_of("api.github.com", "GET", "/search/code").what == kind::other);
  CHECK(github_target_of("api.github.com", "GET", "/repositories/1").what == kind::other);
  CHECK(github_target_of("api.github.com", "GET", "/repos/org").what == kind::other);
  CHECK(github_target_of("github.com", "GET", "/org").what == kind::other);
}

TEST_CASE("scope: repos lets only the listed repositories through", "[brokers][scope]") {
  const auto s = scope_of(R"({"repos": ["org/web", "Team/*"]})");
  CHECK(refused_by(s, "api.github.com", "DELETE", "/repos/org/web").empty());
  CHECK(refused_by(s, "api.github.com", "GET", "/repos/ORG/Web/pulls?state=open").empty());
  CHECK(refused_by(s, "api.github.com", "POST", "/repos/team/anything/issues").empty());
  CHECK(refused_by(s, "github.com", "POST", "/org/web.git/git-receive-pack").empty());
  CHECK(refused_by(s, "api.github.com", "GET", "/user").empty());
  CHECK(refused_by(s, "api.github.com", "DELETE", "/repos/org/other") == "repos");
  CHECK(refused_by(s, "github.com", "POST", "/org/other.git/git-receive-pack") == "repos");
  CHECK(refused_by(s, "api.github.com", "GET", "/orgs/other/repos") == "repos");
  CHECK(refused_by(s, "api.github.com", "GET", "/search/code?q=x") == "repos");
  // Without "graphql": "read", GraphQL could name any repository.
  CHECK(refused_by(s, "api.github.com", "POST", "/graphql") == "repos");
  // Paths as servers read them: dot segments resolved, ";" parameters both ways, and what
  // servers disagree on refused.
  CHECK(refused_by(s, "api.github.com", "DELETE", "/repos/org/web/../other") == "repos");
  CHECK(refused_by(s, "api.github.com", "DELETE", "/repos/org/web;x/../../other") == "repos");
  CHECK(refused_by(s, "api.github.com", "DELETE", "/repos/org/web%2F..%2F..%2Fother") == "repos");
  CHECK(refused_by(s, "api.github.com", "DELETE", "/repos/org/%6fther") == "repos");
  CHECK(refused_by(s, "api.github.com", "DELETE", "http://x/repos/org/web") == "repos");
  const auto why = judge_scope(s, "github", "api.github.com", "DELETE", "/repos/org/other").why;
  CHECK(why == "repository org/other is not among org/web, team/*");
}

TEST_CASE("scope: graphql read sends a POST's body to be judged", "[brokers][scope]") {
  const auto both = scope_of(R"({"repos": ["org/web"], "graphql": "read"})");
  auto v = judge_scope(both, "github", "api.github.com", "POST", "/graphql");
  CHECK_FALSE(v.refused());
  CHECK(v.graphql_body);
  CHECK(refused_by(both, "api.github.com", "GET", "/graphql?query=%7Ba%7D") == "graphql");
  CHECK_FALSE(judge_scope(both, "github", "api.github.com", "GET", "/repos/org/web").graphql_body);
  const auto only = scope_of(R"({"graphql": "read"})");
  CHECK(refused_by(only, "api.github.com", "DELETE", "/repos/any/thing").empty());
  CHECK(judge_scope(only, "github", "api.github.com", "POST", "/graphql").graphql_body);
}

TEST_CASE("scope: allow rules name methods and paths", "[brokers][scope]") {
  const auto s = scope_of(
      R"({"allow": [{"methods": ["GET", "head"]}, {"methods": ["POST"], "paths": ["/v1/*"]}]})",
      "bearer");
  CHECK(refused_by(s, "h", "GET", "/anything").empty());
  CHECK(refused_by(s, "h", "HEAD", "/anything").empty());
  CHECK(refused_by(s, "h", "POST", "/v1/chat").empty());
  CHECK(refused_by(s, "h", "POST", "/v2/chat") == "allow");
  CHECK(refused_by(s, "h", "POST", "/v1/../v2/chat") == "allow");
  CHECK(refused_by(s, "h", "DELETE", "/v1/x") == "allow");
}

TEST_CASE("scope: the set refuses an out-of-scope dummy before swapping", "[brokers][scope]") {
  const credential_set set = github_set(R"({"repos": ["org/web"], "graphql": "read"})");
  const request_context api{"api.github.com", false, false};
  std::vector<header_field> headers{{"Authorization", "token " + gh_dummy}};
  std::string target = "/repos/org/other";
  auto plan = set.plan(api, "DELETE", target, headers, false);
  CHECK(plan.decision().action == request_action::credential_out_of_scope);
  CHECK(plan.decision().credential == "github");
  CHECK(plan.decision().scope_key == "repos");
  CHECK(plan.decision().where == "repository org/other is not among org/web");
  CHECK(headers[0].value == "token " + gh_dummy);  // nothing swapped
  CHECK_FALSE(plan.holds_real());

  target = "/repos/org/web";
  plan = set.plan(api, "DELETE", target, headers, false);
  CHECK_FALSE(plan.decision().refused());
  CHECK(headers[0].value == "token " + gh_real);

  // A request without the credential is not the scope's business.
  std::vector<header_field> none{{"Accept", "*/*"}};
  target = "/repos/org/other";
  CHECK_FALSE(set.plan(api, "DELETE", target, none, false).decision().refused());

  // GraphQL: the body is read whole and judged.
  headers = {{"Authorization", "bearer " + gh_dummy}};
  target = "/graphql";
  plan = set.plan(api, "POST", target, headers, true);
  REQUIRE_FALSE(plan.decision().refused());
  REQUIRE(plan.whole_body());
  CHECK(plan.whole_body()->reads_content);
  std::string body = R"({"query": "mutation { deleteRepository(input: {}) { x } }"})";
  auto done = plan.complete("POST", target, headers, body);
  CHECK(done.action == request_action::credential_out_of_scope);
  CHECK(done.scope_key == "graphql");
  CHECK(done.where ==
        "only GraphQL queries may use this credential: the document holds a mutation");
  headers = {{"Authorization", "bearer " + gh_dummy}};
  plan = set.plan(api, "POST", target, headers, true);
  body = R"({"query": "{ viewer { login } }"})";
  CHECK_FALSE(plan.complete("POST", target, headers, body).refused());
}

TEST_CASE("scope: a later layer narrows, never widens", "[brokers][scope]") {
  std::vector<broker::config::policy> layers;
  layers.push_back(broker::config::parse_policy(R"({"credentials": {"github": {"type": "github",
      "env": ["SCOPE_TEST_GH"], "hosts": ["api.github.com"], "scope": {"repos": ["org/*"]}}}})",
                                                "team.json"));
  layers.push_back(broker::config::parse_policy(R"({"credentials": {"github": {"type": "github",
      "env": ["SCOPE_TEST_GH"], "hosts": ["api.github.com"], "scope": {"repos": ["org/web", "x/y"]}}}})",
                                                "session.json"));
  setenv("SCOPE_TEST_GH", gh_real.c_str(), 1);
  const credential_set set = credential_set::load(layers);
  unsetenv("SCOPE_TEST_GH");
  REQUIRE(set.size() == 1);
  const auto& b = set[0];
  CHECK_FALSE(b.judge_scope("api.github.com", "GET", "/repos/org/web").refused());
  CHECK(b.judge_scope("api.github.com", "GET", "/repos/org/api").key == "repos");  // session
  CHECK(b.judge_scope("api.github.com", "GET", "/repos/x/y").key == "repos");      // team
}
