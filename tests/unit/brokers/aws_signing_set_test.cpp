#include "brokers/credential_set.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "brokers/aws_signing.hpp"
#include "config/host_pattern.hpp"
#include "tests/unit/brokers/aws_signing_test_support.hpp"

namespace base = broker::base;

namespace sigv4 = broker::brokers::sigv4;
using broker::base::secret;
using broker::brokers::aws_broker;
using broker::brokers::credential_set;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::brokers::request_decision;
using broker::http::header_field;
using namespace broker::brokers::aws_signing_test;

// ---- through the credential set ---------------------------------------------------------------

namespace {

request_context to(std::string_view host, bool plaintext = false) {
  return request_context{host, plaintext, false};
}

}  // namespace

TEST_CASE("aws signing: the credential set finds, binds and re-signs", "[brokers][aws_signing]") {
  const credential_set set = aws_set();
  REQUIRE(set.size() == 1);
  aws_request r = s3_get(true);
  const aws_request before = r;

  // apply() leaves an AWS request to the signing step: nothing swapped as a header value.
  auto d = set.apply(to("example-bucket.s3.amazonaws.com"), r.target, r.headers);
  CHECK(d.action == request_action::pass);
  CHECK(d.swapped == 0);
  CHECK(same(r, before));

  // The plan follows it: the aws-sigv4 family claims it, and re-signs it once complete.
  auto plan = set.plan(to("example-bucket.s3.amazonaws.com"), r.method, r.target, r.headers, false);
  CHECK(plan.decision().action == request_action::pass);
  CHECK(plan.credential() == "aws");
  CHECK(plan.holds_real());
  CHECK(same(r, before));
  CHECK_FALSE(plan.complete(r.method, r.target, r.headers, r.body).refused());
  CHECK(header(r, "authorization")->value ==
        expected_authorization(
            r, s3_scope, {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"},
            sigv4::empty_sha256));
  CHECK(header(r, "x-amz-security-token")->value == real_token);
  check_no_dummy_left(r);
}

TEST_CASE("aws signing: the credential set refuses unbound hosts, scopes and bad signatures",
          "[brokers][aws_signing]") {
  const aws_request r = s3_get(true);
  auto plan = [&](const credential_set& set, const request_context& where, aws_request copy) {
    return set.plan(where, copy.method, copy.target, copy.headers, false).decision();
  };
  SECTION("an unbound host: not ours to sign, and apply() refuses the dummy") {
    const credential_set set = aws_set();
    CHECK(plan(set, to("s3.evil.example"), r).action == request_action::credential_not_bound);
    aws_request copy = r;
    auto d = set.apply(to("s3.evil.example"), copy.target, copy.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "aws");
  }
  SECTION("plaintext to a bound, non-loopback host") {
    const credential_set set = aws_set();
    CHECK(plan(set, to("example-bucket.s3.amazonaws.com", true), r).action ==
          request_action::credential_not_bound);
  }
  SECTION("a region outside the credential's regions") {
    const credential_set set = aws_set({"eu-west-1"});
    const request_decision refused = plan(set, to("example-bucket.s3.amazonaws.com"), r);
    CHECK(refused.action == request_action::scope_not_allowed);
    CHECK(refused.credential == "aws");
    CHECK_THAT(refused.where, Catch::Contains("us-east-1"));
  }
  SECTION("a region inside the list") {
    const credential_set set = aws_set({"eu-west-1", "us-east-1"});
    const request_decision d = plan(set, to("example-bucket.s3.amazonaws.com"), r);
    CHECK(d.action == request_action::pass);
    CHECK(d.credential == "aws");
  }
  SECTION("a malformed signature naming the dummy") {
    const credential_set set = aws_set();
    aws_request bad = r;
    bad.headers.back().value += ", Signature=0000";  // a repeated component
    const request_decision refused = plan(set, to("example-bucket.s3.amazonaws.com"), bad);
    CHECK(refused.action == request_action::signature_invalid);
    CHECK(refused.credential == "aws");
  }
  SECTION("the real secret key anywhere is blocked by apply()") {
    const credential_set set = aws_set();
    aws_request leak = r;
    leak.headers.push_back({"X-Debug", real_secret});
    auto d = set.apply(to("example-bucket.s3.amazonaws.com"), leak.target, leak.headers);
    CHECK(d.action == request_action::real_secret_blocked);
    CHECK(d.credential == "aws");
  }
}

// ---- temporary credentials that are fetched again before they expire ---------------------------

namespace {

const std::string next_key_id = "ASIANEXTNEXTNEXT7777";
const std::string next_secret = "nExTsEcReTnExTsEcReTnExTsEcReT/+12345678";
const std::string next_token = "IQoJb3JpZ2luX2VjENEXTnextNEXTtoken+/token";

broker::brokers::aws_real_credentials issue(const std::string& key_id,
                                            const std::string& secret_key, const std::string& token,
                                            std::chrono::system_clock::time_point expires) {
  broker::brokers::aws_real_credentials c;
  c.key_id = base::secret(std::string(key_id));
  c.secret_key = base::secret(std::string(secret_key));
  c.token = base::secret(std::string(token));
  c.expires = expires;
  return c;
}

// A set whose credentials (long-term at first: no token part) are replaced after about a
// second by temporary ones with a session token.
credential_set rotating_set() {
  using clock = std::chrono::system_clock;
  aws_broker::init init = aws_init({}, false);
  const auto now = clock::now();
  init.rotation =
      std::make_unique<broker::brokers::rotating<broker::brokers::aws_real_credentials>>(
          "test", issue(real_key_id, real_secret, "", now + std::chrono::seconds(2)), now, [] {
            return issue(next_key_id, next_secret, next_token,
                         clock::now() + std::chrono::hours(1));
          });
  std::vector<std::unique_ptr<broker::brokers::request_broker>> brokers;
  brokers.push_back(std::make_unique<aws_broker>(std::move(init)));
  return credential_set(std::move(brokers));
}

std::string signing_key_id(const credential_set& set, aws_request& r) {
  auto plan = set.plan(to("example-bucket.s3.amazonaws.com"), r.method, r.target, r.headers, false);
  REQUIRE(plan.credential() == "aws");
  REQUIRE_FALSE(plan.complete(r.method, r.target, r.headers, r.body).refused());
  const std::string& auth = header(r, "authorization")->value;
  const auto at = auth.find("Credential=") + 11;
  return auth.substr(at, 20);
}

}  // namespace

TEST_CASE("aws signing: temporary credentials are re-signed with the newest issue",
          "[brokers][aws_signing]") {
  const credential_set set = rotating_set();
  aws_request first = s3_get(false);
  CHECK(signing_key_id(set, first) == real_key_id);
  CHECK_FALSE(header(first, "x-amz-security-token"));

  // The refresher fetches the next issue at half the first one's life (~1 s).
  std::string key_id;
  for (int i = 0; i < 50 && key_id != next_key_id; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    aws_request r = s3_get(false);
    key_id = signing_key_id(set, r);
  }
  REQUIRE(key_id == next_key_id);

  // The child was given no token (the first issue had none): the real one goes along, signed.
  aws_request r = s3_get(false);
  signing_key_id(set, r);
  REQUIRE(header(r, "x-amz-security-token"));
  CHECK(header(r, "x-amz-security-token")->value == next_token);
  const std::string& auth = header(r, "authorization")->value;
  CHECK(auth.find("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,") !=
        std::string::npos);
  const std::string expected_signature = independent_signature(
      next_secret, s3_scope,
      sigv4::string_to_sign(request_date, s3_scope,
                            sigv4::canonical_request(r.method, r.target, r.headers,
                                                     {"host", "x-amz-content-sha256", "x-amz-date",
                                                      "x-amz-security-token"},
                                                     sigv4::empty_sha256, "s3", false)));
  CHECK(auth.ends_with("Signature=" + expected_signature));

  // Every issue still alive is a real value: refused in requests, masked in responses.
  for (const std::string& real : {real_key_id, next_key_id, next_secret, next_token}) {
    INFO(real);
    std::string target = "/x?leak=" + real;
    std::vector<header_field> headers{{"Host", "example-bucket.s3.amazonaws.com"}};
    CHECK(set.apply(to("example-bucket.s3.amazonaws.com"), target, headers).action ==
          request_action::real_secret_blocked);
  }
  const auto patterns = set.response_patterns();
  for (const std::string& real : {next_key_id, next_secret, next_token}) {
    auto it = std::find_if(patterns.begin(), patterns.end(),
                           [&](const auto& p) { return p.find == real; });
    REQUIRE(it != patterns.end());
    CHECK(it->replacement.size() == real.size());
    CHECK(it->replacement != real);
  }
}
