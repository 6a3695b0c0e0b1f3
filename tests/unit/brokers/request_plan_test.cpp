#include "brokers/request_plan.hpp"
#include "base/digest.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "brokers/credential_set.hpp"
#include "tests/unit/brokers/aws_signing_test_support.hpp"

using broker::brokers::credential_set;
using broker::brokers::request_action;
using broker::brokers::request_context;
using namespace broker::brokers::aws_signing_test;

namespace {

// What a request without a body read whole passes to complete().
std::string& no_body() {
  static std::string none;
  none.clear();
  return none;
}

const request_context s3{"example-bucket.s3.amazonaws.com", false, false};
const request_context sts{"sts.amazonaws.com", false, false};

}  // namespace

TEST_CASE("request plan: a request signed with the dummy is re-signed when completed",
          "[brokers][request_plan]") {
  const credential_set set = aws_set();
  aws_request r = s3_get(true);
  auto plan = set.plan(s3, r.method, r.target, r.headers, false);
  CHECK_FALSE(plan.decision().refused());
  CHECK(plan.credential() == "aws");
  CHECK(plan.holds_real());
  CHECK_FALSE(plan.whole_body());  // the payload hash is stated
  CHECK(plan.complete(r.method, r.target, r.headers, no_body()).action == request_action::pass);
  CHECK(header(r, "Authorization")->value ==
        expected_authorization(
            r, s3_scope, {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"},
            broker::brokers::sigv4::empty_sha256));
  check_no_dummy_left(r);
  CHECK_FALSE(plan.answer());
  CHECK_FALSE(plan.rewriter());
}

TEST_CASE("request plan: a body the signature covers is asked for whole first",
          "[brokers][request_plan]") {
  const credential_set set = aws_set();
  aws_request r = sts_post(true);
  auto plan = set.plan(sts, r.method, r.target, r.headers, true);
  REQUIRE(plan.whole_body());
  CHECK(plan.whole_body()->limit == broker::brokers::max_signed_body);
  CHECK_THAT(std::string(plan.whole_body()->why), Catch::Contains("UNSIGNED-PAYLOAD"));
  SECTION("the body as signed") {
    CHECK(plan.complete(r.method, r.target, r.headers, r.body).action == request_action::pass);
    CHECK(header(r, "Authorization")->value ==
          expected_authorization(r, sts_scope,
                                 {"content-type", "host", "x-amz-date", "x-amz-security-token"},
                                 broker::base::sha256_hex(r.body)));
  }
  SECTION("a body altered on the way: refused with the family's sentence, head untouched") {
    const aws_request before = r;
    std::string altered = r.body + "&x=1";
    const auto d = plan.complete(r.method, r.target, r.headers, altered);
    CHECK(d.action == request_action::signature_invalid);
    CHECK(d.credential == "aws");
    CHECK_THAT(d.where, Catch::Contains("AWS signature was refused"));
    CHECK(same(r, before));
  }
}

TEST_CASE("request plan: refusals are decisions naming the credential and why",
          "[brokers][request_plan]") {
  SECTION("a call that would vend new real credentials") {
    const credential_set set = aws_set();
    aws_request r = sts_post(true, "Action=AssumeRole&Version=2011-06-15&RoleArn=x");
    auto plan = set.plan(sts, r.method, r.target, r.headers, true);
    const auto d = plan.complete(r.method, r.target, r.headers, r.body);
    CHECK(d.action == request_action::action_denied);
    CHECK(d.credential == "aws");
    CHECK_THAT(d.where, Catch::Contains("sts:AssumeRole"));
  }
  SECTION("a region outside the allowlist") {
    const credential_set set = aws_set({"eu-west-1"});
    aws_request r = s3_get(true);
    auto plan = set.plan(s3, r.method, r.target, r.headers, false);
    CHECK(plan.decision().action == request_action::scope_not_allowed);
    CHECK(plan.credential() == "aws");
    CHECK_FALSE(plan.holds_real());
  }
  SECTION("a malformed signature naming the dummy") {
    const credential_set set = aws_set();
    aws_request r = s3_get(true);
    header_field* auth = nullptr;
    for (auto& h : r.headers)
      if (h.name == "Authorization") auth = &h;
    auth->value += ", Signature=0000";
    auto plan = set.plan(s3, r.method, r.target, r.headers, false);
    CHECK(plan.decision().action == request_action::signature_invalid);
    CHECK_THAT(plan.decision().where, Catch::Contains("AWS signature was refused"));
  }
  SECTION("the dummy to a host it is not bound to") {
    const credential_set set = aws_set();
    aws_request r = s3_get(true);
    auto plan = set.plan({"s3.evil.example", false, false}, r.method, r.target, r.headers, false);
    CHECK(plan.decision().action == request_action::credential_not_bound);
    CHECK(plan.credential() == "aws");
  }
  SECTION("a request without credentials names none") {
    const credential_set set = aws_set();
    aws_request r{"GET", "/", {{"Host", "example-bucket.s3.amazonaws.com"}}, {}};
    auto plan = set.plan(s3, r.method, r.target, r.headers, false);
    CHECK_FALSE(plan.decision().refused());
    CHECK(plan.credential().empty());
    CHECK_FALSE(plan.holds_real());
    CHECK(plan.complete(r.method, r.target, r.headers, no_body()).action == request_action::pass);
  }
}

TEST_CASE("request plan: the response stage turns what the request was rewritten with back",
          "[brokers][request_plan]") {
  // An upstream that reflects the request (an echo API, a debugging proxy's error page) must
  // show the client what it sent: neither the real key id nor the real signature.
  const credential_set set = aws_set();
  aws_request r = s3_get(true);
  const aws_request sent = r;
  auto plan = set.plan(s3, r.method, r.target, r.headers, false);
  REQUIRE_FALSE(plan.complete(r.method, r.target, r.headers, no_body()).refused());
  std::string echo;
  for (const auto& h : r.headers) echo += h.name + ": " + h.value + "\r\n";
  std::string expected;
  for (const auto& h : sent.headers) expected += h.name + ": " + h.value + "\r\n";
  REQUIRE(echo != expected);

  broker::brokers::stream_scrubber scrubber(plan.response_patterns());
  std::string out;
  scrubber.feed(echo, out);
  scrubber.finish(out);
  CHECK(out == expected);
}
