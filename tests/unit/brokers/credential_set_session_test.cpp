// credential_set::for_session (a team gateway's sessions, docs/gateway.md): one set of loaded real
// values, dummies per session derived from its seed, the same in every replica.
#include "brokers/credential_set.hpp"

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "brokers/aws_broker.hpp"
#include "brokers/dummy.hpp"
#include "brokers/scrubber.hpp"
#include "brokers/token_broker.hpp"
#include "config/host_pattern.hpp"
#include "tests/unit/brokers/aws_signing_test_support.hpp"

namespace base = broker::base;

namespace sigv4 = broker::brokers::sigv4;
using broker::base::secret;
using broker::brokers::access_token;
using broker::brokers::aws_broker;
using broker::brokers::aws_real_credentials;
using broker::brokers::credential_set;
using broker::brokers::make_dummy;
using broker::brokers::request_action;
using broker::brokers::request_broker;
using broker::brokers::request_context;
using broker::brokers::rotating;
using broker::brokers::scrub_pattern;
using broker::brokers::scrub_value;
using broker::brokers::token_broker;
using broker::config::parse_policy;
using broker::http::header_field;
using namespace broker::brokers::aws_signing_test;
using std::chrono::system_clock;

namespace {

// Fake real values, as the gateway's environment holds them.
const std::string gh_real = "ghp_REALreal9876543210realREALreal98765";
const std::string ai_real = "sk-proj-REALreal9876543210realREALreal9";
// A JWT (header {"alg":"HS256","typ":"JWT"}, claims {"sub":"1234567890","exp":1893456000}).
const std::string jwt_real =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiZXhwIjoxODkzNDU2MDAwfQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";

const std::string seed_a = "session A: 32 random bytes here.";
const std::string seed_b = "session B: 32 other bytes here..";

const std::string policy_text = R"({ "version": 1, "credentials": {
    "github": { "type": "github", "env": ["BROKER_TEST_S_GH"],
                "hosts": ["api.github.com", "github.com"], "query": ["access_token"] },
    "openai": { "type": "bearer", "env": ["BROKER_TEST_S_AI"], "hosts": ["api.openai.com"] },
    "jwt":    { "type": "bearer", "env": ["BROKER_TEST_S_JWT"], "hosts": ["api.example.com"] },
    "aws":    { "type": "aws-sigv4", "hosts": ["*.amazonaws.com"],
                "env": ["BROKER_TEST_S_AKID", "BROKER_TEST_S_SECRET", "BROKER_TEST_S_TOKEN"] } } })";

// One replica of the gateway: the policy loaded from the environment (env: sources are read
// once and unset, so each replica's values are put there again, as another process has them).
credential_set load_replica() {
  ::setenv("BROKER_TEST_S_GH", gh_real.c_str(), 1);
  ::setenv("BROKER_TEST_S_AI", ai_real.c_str(), 1);
  ::setenv("BROKER_TEST_S_JWT", jwt_real.c_str(), 1);
  ::setenv("BROKER_TEST_S_AKID", real_key_id.c_str(), 1);
  ::setenv("BROKER_TEST_S_SECRET", real_secret.c_str(), 1);
  ::setenv("BROKER_TEST_S_TOKEN", real_token.c_str(), 1);
  credential_set set = credential_set::load({parse_policy(policy_text, "team.json")});
  REQUIRE(set.size() == 4);
  for (const char* name : {"BROKER_TEST_S_GH", "BROKER_TEST_S_AI", "BROKER_TEST_S_JWT",
                           "BROKER_TEST_S_AKID", "BROKER_TEST_S_SECRET", "BROKER_TEST_S_TOKEN"})
    ::unsetenv(name);
  return set;
}

std::string variable(const credential_set& set, std::string_view name) {
  for (const auto& [n, value] : set.dummy_environment())
    if (n == name) return value;
  FAIL("no variable " << name);
  return {};
}

constexpr std::string_view base62 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

// The public shape of a real value (brokers/dummy_shape.hpp): its length, its prefix, and after
// it characters of the real value's alphabet.
bool has_public_shape(std::string_view dummy, std::string_view real, std::string_view prefix,
                      std::string_view alphabet) {
  return dummy.size() == real.size() && dummy.starts_with(prefix) &&
         dummy.find_first_not_of(alphabet, prefix.size()) == std::string_view::npos;
}

struct request {
  std::string target = "/user";
  std::vector<header_field> headers{{"Host", "api.github.com"}, {"Accept", "*/*"}};
};

request_context to(std::string_view host) {
  return request_context{host, false, false};
}

request bearer(const std::string& token) {
  request r;
  r.headers.push_back({"Authorization", "Bearer " + token});
  return r;
}

const scrub_pattern* pattern_for(const std::vector<scrub_pattern>& patterns,
                                 std::string_view real) {
  for (const auto& p : patterns)
    if (p.find == real) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("for_session: one seed gives byte-identical dummies in two replicas",
          "[brokers][credential_set][dummies]") {
  const credential_set replica_1 = load_replica();
  const credential_set replica_2 = load_replica();
  const credential_set a1 = replica_1.for_session(seed_a);
  const credential_set a2 = replica_2.for_session(seed_a);
  const credential_set a1_again = replica_1.for_session(seed_a);

  const auto env_1 = a1.dummy_environment();
  REQUIRE(env_1.size() == 6);  // github, openai, jwt, and aws's key id, secret and token
  CHECK(env_1 == a2.dummy_environment());
  CHECK(env_1 == a1_again.dummy_environment());
  CHECK(a1.names() == replica_1.names());

  // The replicas' own dummies (CSPRNG) differ from each other and from the session's.
  const auto own_1 = replica_1.dummy_environment(), own_2 = replica_2.dummy_environment();
  for (std::size_t i = 0; i < env_1.size(); ++i) {
    INFO(env_1[i].first);
    CHECK(own_1[i].first == env_1[i].first);
    CHECK(own_1[i].second != own_2[i].second);
    CHECK(own_1[i].second != env_1[i].second);
  }

  // Each replica's session set swaps the one dummy the client holds.
  for (const credential_set* set : {&a1, &a2}) {
    request r = bearer(variable(a1, "BROKER_TEST_S_GH"));
    CHECK(set->apply(to("api.github.com"), r.target, r.headers).swapped == 1);
    CHECK(r.headers[2].value == "Bearer " + gh_real);
  }
}

TEST_CASE("for_session: different seeds give different dummies, each of the real's shape",
          "[brokers][credential_set][dummies]") {
  const credential_set gateway = load_replica();
  const credential_set a = gateway.for_session(seed_a);
  const credential_set b = gateway.for_session(seed_b);

  const std::string b64 = std::string(base62) + "+/=";  // padding stays at the end
  const struct {
    const char* name;
    const std::string& real;
    std::string_view prefix;
    std::string alphabet;
  } reals[] = {{"BROKER_TEST_S_GH", gh_real, "ghp_", std::string(base62)},
               {"BROKER_TEST_S_AI", ai_real, "sk-proj-", std::string(base62)},
               {"BROKER_TEST_S_JWT", jwt_real, "eyJ", std::string(base62) + "-_."},
               {"BROKER_TEST_S_AKID", real_key_id, "AKIA", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"},
               {"BROKER_TEST_S_SECRET", real_secret, "", b64},
               {"BROKER_TEST_S_TOKEN", real_token, "", b64}};
  for (const auto& r : reals) {
    INFO(r.name);
    const std::string da = variable(a, r.name), db = variable(b, r.name);
    CHECK(da != db);
    CHECK(da != r.real);
    CHECK(has_public_shape(da, r.real, r.prefix, r.alphabet));
    CHECK(has_public_shape(db, r.real, r.prefix, r.alphabet));
  }
  CHECK(variable(a, "BROKER_TEST_S_TOKEN").ends_with("=="));
  // A JWT keeps its header and claims; only the signature is the session's.
  const std::string jwt_a = variable(a, "BROKER_TEST_S_JWT");
  const std::size_t signature_at = jwt_real.rfind('.') + 1;
  CHECK(jwt_a.substr(0, signature_at) == jwt_real.substr(0, signature_at));
  CHECK(jwt_a.substr(signature_at) != jwt_real.substr(signature_at));
}

TEST_CASE("for_session: a session's dummy is swapped in its own set only",
          "[brokers][credential_set][dummies]") {
  const credential_set gateway = load_replica();
  const credential_set a = gateway.for_session(seed_a);
  const credential_set b = gateway.for_session(seed_b);
  const std::string gh_a = variable(a, "BROKER_TEST_S_GH");
  const std::string gh_b = variable(b, "BROKER_TEST_S_GH");
  const std::string gh_gateway = variable(gateway, "BROKER_TEST_S_GH");

  SECTION("A's dummy to a bound host in A's set becomes real, in headers and the query") {
    request r = bearer(gh_a);
    r.target = "/repos/o/r?access_token=" + gh_a;
    auto d = a.apply(to("api.github.com"), r.target, r.headers);
    CHECK(d.action == request_action::pass);
    CHECK(d.credential == "github");
    CHECK(d.swapped == 2);
    CHECK(r.headers[2].value == "Bearer " + gh_real);
    CHECK(r.target == "/repos/o/r?access_token=" + gh_real);
  }
  SECTION("B's dummy in A's set is someone else's token: passed untouched") {
    request r = bearer(gh_b);
    auto d = a.apply(to("api.github.com"), r.target, r.headers);
    CHECK(d.swapped == 0);
    CHECK(r.headers[2].value == "Bearer " + gh_b);
  }
  SECTION("A's dummy in B's set is not swapped either") {
    request r = bearer(gh_a);
    auto d = b.apply(to("api.github.com"), r.target, r.headers);
    CHECK(d.swapped == 0);
    CHECK(r.headers[2].value == "Bearer " + gh_a);
  }
  SECTION("the gateway's own dummy is no session's") {
    for (const credential_set* set : {&a, &b}) {
      request r = bearer(gh_gateway);
      CHECK(set->apply(to("api.github.com"), r.target, r.headers).swapped == 0);
      CHECK(r.headers[2].value == "Bearer " + gh_gateway);
    }
  }
  SECTION("A's dummy to a host it is not bound to is refused in A's set") {
    request r = bearer(gh_a);
    auto d = a.apply(to("api.openai.com"), r.target, r.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "github");
    CHECK(r.headers[2].value == "Bearer " + gh_a);
  }
  SECTION("real values are refused in a session's set, in heads and bodies") {
    request r = bearer(gh_real);
    auto d = a.apply(to("api.github.com"), r.target, r.headers);
    CHECK(d.action == request_action::real_secret_blocked);
    CHECK(d.credential == "github");
    const auto scan = a.request_body_scan(to("api.github.com"));
    CHECK(std::any_of(scan.patterns().begin(), scan.patterns().end(),
                      [](const scrub_pattern& p) { return p.find == ai_real; }));
  }
}

TEST_CASE("for_session: responses show the session's own dummy for a real value",
          "[brokers][credential_set][dummies]") {
  const credential_set gateway = load_replica();
  const credential_set a = gateway.for_session(seed_a);
  const credential_set b = gateway.for_session(seed_b);
  for (const credential_set* set : {&a, &b}) {
    const auto patterns = set->response_patterns();
    std::string body = R"({"token":")" + gh_real + R"(","key":")" + real_secret + R"("})";
    CHECK(scrub_value(body, patterns) == 2);
    CHECK(body == R"({"token":")" + variable(*set, "BROKER_TEST_S_GH") + R"(","key":")" +
                      variable(*set, "BROKER_TEST_S_SECRET") + R"("})");
  }
}

TEST_CASE("for_session: an aws request signed with the session's dummies is re-signed",
          "[brokers][credential_set][dummies]") {
  const credential_set gateway = load_replica();
  const credential_set a = gateway.for_session(seed_a);
  const credential_set b = gateway.for_session(seed_b);
  const std::string key_id = variable(a, "BROKER_TEST_S_AKID");
  const std::string secret_key = variable(a, "BROKER_TEST_S_SECRET");
  const std::string token = variable(a, "BROKER_TEST_S_TOKEN");
  CHECK(key_id != variable(b, "BROKER_TEST_S_AKID"));
  CHECK(secret_key != variable(b, "BROKER_TEST_S_SECRET"));
  CHECK(token != variable(b, "BROKER_TEST_S_TOKEN"));

  // An SDK in session A signs with what it holds.
  auto signed_get = [&] {
    aws_request r{"GET",
                  "/reports/q1.csv",
                  {{"Host", "example-bucket.s3.amazonaws.com"},
                   {"X-Amz-Content-Sha256", std::string(sigv4::empty_sha256)},
                   {"X-Amz-Date", request_date},
                   {"X-Amz-Security-Token", token}},
                  {}};
    sdk_sign(r, key_id, secret_key, s3_scope,
             {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"},
             sigv4::empty_sha256);
    return r;
  };

  SECTION("A's set verifies it with A's dummy secret and signs it with the real credentials") {
    aws_request r = signed_get();
    auto plan = a.plan(to("example-bucket.s3.amazonaws.com"), r.method, r.target, r.headers, false);
    REQUIRE(plan.decision().action == request_action::pass);
    CHECK(plan.credential() == "aws");
    REQUIRE_FALSE(plan.complete(r.method, r.target, r.headers, r.body).refused());
    CHECK(header(r, "x-amz-security-token")->value == real_token);
    CHECK(header(r, "authorization")->value ==
          expected_authorization(
              r, s3_scope, {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"},
              sigv4::empty_sha256));
  }
  SECTION("B's set does not take A's signature for its own") {
    aws_request r = signed_get();
    const aws_request before = r;
    auto plan = b.plan(to("example-bucket.s3.amazonaws.com"), r.method, r.target, r.headers, false);
    CHECK(plan.credential() != "aws");
    CHECK(same(r, before));
  }
}

TEST_CASE("for_session: sessions are made while other sessions' requests run",
          "[brokers][credential_set][dummies]") {
  const credential_set gateway = load_replica();
  const credential_set a = gateway.for_session(seed_a);
  const std::string gh_a = variable(a, "BROKER_TEST_S_GH");
  std::atomic<bool> done{false};
  std::atomic<int> swapped{0};
  std::vector<std::jthread> requests;
  for (int t = 0; t < 2; ++t)
    requests.emplace_back([&] {
      while (!done) {
        request r = bearer(gh_a);
        swapped += a.apply(to("api.github.com"), r.target, r.headers).swapped;
        (void)gateway.response_patterns();
      }
    });
  std::vector<std::string> made;
  for (int i = 0; i < 50; ++i) {
    std::string seed = "session " + std::to_string(i) + ": 32 random bytes....";
    made.push_back(variable(gateway.for_session(seed), "BROKER_TEST_S_GH"));
    CHECK(made.back() == variable(gateway.for_session(seed), "BROKER_TEST_S_GH"));
  }
  done = true;
  requests.clear();
  CHECK(swapped > 0);
  std::sort(made.begin(), made.end());
  CHECK(std::adjacent_find(made.begin(), made.end()) == made.end());  // 50 distinct dummies
}

TEST_CASE("for_session: a short seed is refused", "[brokers][credential_set][dummies]") {
  const credential_set gateway = load_replica();
  CHECK_THROWS_AS(gateway.for_session(""), std::invalid_argument);
  CHECK_THROWS_AS(gateway.for_session("fifteen bytes.."), std::invalid_argument);
  CHECK_NOTHROW(gateway.for_session("sixteen bytes..."));
}

// ---- families that rotate: one refresher for every session ----------------------------------

namespace {

broker::config::credential_spec token_spec(std::string type) {
  broker::config::credential_spec spec;
  spec.name = type == "gcp" ? "gcloud" : "az";
  spec.type = std::move(type);
  spec.hosts.push_back(*broker::config::host_pattern::parse("*.googleapis.com"));
  spec.hosts.push_back(*broker::config::host_pattern::parse("management.azure.com"));
  spec.env = {spec.type == "gcp" ? "GOOGLE_APPLICATION_CREDENTIALS" : "AZURE_ACCESS_TOKEN"};
  spec.source = "cmd:unused";
  return spec;
}

// A replica's token credential whose fetcher hands out `token` and counts its calls.
credential_set token_replica(const std::string& type, const std::string& token,
                             std::atomic<int>& calls) {
  std::vector<std::unique_ptr<request_broker>> brokers;
  brokers.push_back(std::make_unique<token_broker>(
      token_spec(type), request_broker::layer_bindings{}, [token, &calls] {
        ++calls;
        return access_token{base::secret(std::string(token)),
                            system_clock::now() + std::chrono::hours(1)};
      }));
  return credential_set(std::move(brokers));
}

const token_broker& token_of(const credential_set& set) {
  return dynamic_cast<const token_broker&>(set[0]);
}

const std::string gcp_token_1 = "ya29.a0AfB_firstREPLICAtoken0123456789abcdefghijklmnopqrstu";
const std::string gcp_token_2 = "ya29.a0AfB_secondReplicaFetchedAnotherToken_of-another-length9876";

}  // namespace

TEST_CASE("for_session: token credentials share one refresher and agree across replicas",
          "[brokers][credential_set][dummies][token_broker]") {
  for (const std::string type : {"gcp", "azure"}) {
    INFO(type);
    std::atomic<int> calls_1{0}, calls_2{0};
    // Each replica fetched its own token: another value, another length.
    const credential_set replica_1 = token_replica(type, gcp_token_1, calls_1);
    const credential_set replica_2 = token_replica(type, gcp_token_2, calls_2);
    std::vector<credential_set> sessions;
    for (int i = 0; i < 5; ++i) sessions.push_back(replica_1.for_session(seed_a));
    const credential_set b = replica_1.for_session(seed_b);
    const credential_set a2 = replica_2.for_session(seed_a);
    CHECK(calls_1 == 1);  // N sessions, still the one token fetched
    CHECK(calls_2 == 1);

    const token_broker& a = token_of(sessions[0]);
    CHECK(a.current() == token_of(replica_1).current());  // the same issue, not a copy
    CHECK(a.dummy() == token_of(a2).dummy());
    CHECK(a.dummy() == token_of(sessions[4]).dummy());
    CHECK(a.dummy() != token_of(b).dummy());
    CHECK(a.dummy() != token_of(replica_1).dummy());
    CHECK(sessions[0].dummy_environment() == a2.dummy_environment());
    CHECK(sessions[0].dummy_files().size() == a2.dummy_files().size());
    if (type == "gcp") {
      CHECK(a.dummy().starts_with("ya29."));
      CHECK(a.gcp_client().refresh_token == token_of(a2).gcp_client().refresh_token);
      CHECK(a.gcp_client().client_secret == token_of(a2).gcp_client().client_secret);
      CHECK(a.gcp_client().refresh_token != token_of(b).gcp_client().refresh_token);
      CHECK(sessions[0].dummy_files().front().content == a2.dummy_files().front().content);
    } else {
      // A JWT that decodes, saying it never runs out; its signature is the session's.
      CHECK(
          a.dummy().starts_with("eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9."));
      CHECK(std::count(a.dummy().begin(), a.dummy().end(), '.') == 2);
    }

    // The session's dummy becomes the replica's current token; the others' dummies do not.
    request r = bearer(a.dummy());
    CHECK(sessions[0].apply(to("storage.googleapis.com"), r.target, r.headers).swapped == 1);
    CHECK(r.headers[2].value == "Bearer " + gcp_token_1);
    request r2 = bearer(a.dummy());
    CHECK(a2.apply(to("storage.googleapis.com"), r2.target, r2.headers).swapped == 1);
    CHECK(r2.headers[2].value == "Bearer " + gcp_token_2);
    request other = bearer(token_of(b).dummy());
    CHECK(sessions[0].apply(to("storage.googleapis.com"), other.target, other.headers).swapped ==
          0);

    // A response echoing the real token shows this session's dummy, at the token's length.
    const auto patterns = sessions[0].response_patterns();
    const scrub_pattern* p = pattern_for(patterns, gcp_token_1);
    REQUIRE(p);
    CHECK(p->replacement.size() == gcp_token_1.size());
    CHECK(a.dummy().starts_with(p->replacement));
  }
}

TEST_CASE("for_session: a session's set outlives the gateway's and keeps the shared token",
          "[brokers][credential_set][dummies][token_broker]") {
  std::atomic<int> calls{0};
  std::optional<credential_set> gateway = token_replica("gcp", gcp_token_1, calls);
  const credential_set a = gateway->for_session(seed_a);
  gateway.reset();
  request r = bearer(token_of(a).dummy());
  CHECK(a.apply(to("storage.googleapis.com"), r.target, r.headers).swapped == 1);
  CHECK(r.headers[2].value == "Bearer " + gcp_token_1);
}

namespace {

const std::string next_key_id = "ASIANEXTNEXTNEXT7777";
const std::string next_secret = "nExTsEcReTnExTsEcReTnExTsEcReT/+12345678";
const std::string next_token = "IQoJb3JpZ2luX2VjENEXTnextNEXTtoken+/token";

aws_real_credentials issue(const std::string& key_id, const std::string& token) {
  aws_real_credentials c;
  c.key_id = base::secret(std::string(key_id));
  c.secret_key = base::secret(std::string(next_secret));
  c.token = base::secret(std::string(token));
  c.expires = system_clock::now() + std::chrono::hours(1);
  return c;
}

// A replica's temporary AWS credentials: its own first issue (key id and token), fetched again
// by one refresher.
credential_set temporary_aws_replica(const std::string& key_id, const std::string& token,
                                     std::atomic<int>& calls) {
  aws_broker::init init = aws_init({});
  init.real.access_key_id = base::secret(std::string(key_id));
  init.real.secret_access_key = base::secret(std::string(next_secret));
  init.real.session_token = base::secret(std::string(token));
  init.dummy_key_id = make_dummy(base::secret(std::string(key_id)));
  init.dummy_secret = dummy_secret;
  init.dummy_token = make_dummy(base::secret(std::string(token)));
  init.rotation = std::make_shared<const rotating<aws_real_credentials>>(
      "test", issue(key_id, token), system_clock::now(), [key_id, token, &calls] {
        ++calls;
        return issue(key_id, token);
      });
  std::vector<std::unique_ptr<request_broker>> brokers;
  brokers.push_back(std::make_unique<aws_broker>(std::move(init)));
  return credential_set(std::move(brokers));
}

}  // namespace

TEST_CASE("for_session: temporary aws credentials get dummies both replicas agree on",
          "[brokers][credential_set][dummies][aws_signing]") {
  std::atomic<int> calls{0};
  const credential_set replica_1 = temporary_aws_replica(next_key_id, next_token, calls);
  const credential_set replica_2 =
      temporary_aws_replica("ASIAOTHERREPLICA0042", next_token + "LONGER/==", calls);
  const credential_set a1 = replica_1.for_session(seed_a);
  const credential_set a2 = replica_2.for_session(seed_a);
  const credential_set b1 = replica_1.for_session(seed_b);
  CHECK(calls == 0);  // nothing fetched again for a session

  const auto env = a1.dummy_environment();
  REQUIRE(env.size() == 3);
  CHECK(env == a2.dummy_environment());
  CHECK(env != b1.dummy_environment());
  CHECK(env[0].second.starts_with("ASIA"));
  CHECK(env[0].second.size() == 20);
  CHECK(env[1].second.size() == 40);

  // Responses show this session's dummies for the replica's real values, at their lengths.
  const auto patterns = a1.response_patterns();
  const scrub_pattern* token = pattern_for(patterns, next_token);
  REQUIRE(token);
  CHECK(token->replacement.size() == next_token.size());
  CHECK(env[2].second.starts_with(token->replacement));

  // A request signed with the session's dummies is signed again with the replica's real ones.
  aws_request r{"GET",
                "/reports/q1.csv",
                {{"Host", "example-bucket.s3.amazonaws.com"},
                 {"X-Amz-Content-Sha256", std::string(sigv4::empty_sha256)},
                 {"X-Amz-Date", request_date},
                 {"X-Amz-Security-Token", env[2].second}},
                {}};
  sdk_sign(r, env[0].second, env[1].second, s3_scope,
           {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"},
           sigv4::empty_sha256);
  auto plan = a2.plan(to("example-bucket.s3.amazonaws.com"), r.method, r.target, r.headers, false);
  REQUIRE(plan.credential() == "aws");
  REQUIRE_FALSE(plan.complete(r.method, r.target, r.headers, r.body).refused());
  CHECK(header(r, "x-amz-security-token")->value == next_token + "LONGER/==");
  CHECK(header(r, "authorization")->value.find("Credential=ASIAOTHERREPLICA0042/") !=
        std::string::npos);
}
