// STS AssumeRole for aws-sigv4 "assume_role": the signed request and STS's answer.
#include "brokers/aws_assume_role.hpp"
#include "base/digest.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "brokers/sigv4.hpp"

using namespace broker::brokers;
using broker::base::secret;

namespace {

aws_credentials long_lived(bool token = false) {
  aws_credentials c;
  c.access_key_id = secret(std::string("AKIAIOSFODNN7EXAMPLE"));
  c.secret_access_key = secret(std::string("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"));
  if (token) c.session_token = secret(std::string("FwoGZXIvYXdzEXAMPLETOKEN"));
  return c;
}

std::string header_of(const provider_request& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

}  // namespace

TEST_CASE("assume_role: the request is a signed AssumeRole with the session policy",
          "[brokers][aws][assume_role]") {
  broker::config::assume_role_spec role;
  role.arn = "arn:aws:iam::123456789012:role/agent";
  role.policy = R"({"Version":"2012-10-17","Statement":[]})";
  role.duration = std::chrono::seconds(1800);
  const auto now = std::chrono::sys_days(std::chrono::year(2026) / 12 / 7) + std::chrono::hours(3);
  auto r = assume_role_request(role, long_lived(), "broker-0123456789abcdef", now);
  CHECK(r.method == "POST");
  CHECK(r.url == "https://sts.amazonaws.com/");
  CHECK(r.body ==
        "Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2F"
        "agent&RoleSessionName=broker-0123456789abcdef&DurationSeconds=1800&Policy=%7B%22Version"
        "%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%5D%7D");
  CHECK(header_of(r, "x-amz-date") == "20261207T030000Z");
  auto a = broker::brokers::sigv4::parse_authorization(header_of(r, "Authorization"));
  REQUIRE(a);
  CHECK(a->credential.access_key_id == "AKIAIOSFODNN7EXAMPLE");
  CHECK(a->credential.scope.text() == "20261207/us-east-1/sts/aws4_request");
  CHECK(a->signed_headers == std::vector<std::string>{"content-type", "host", "x-amz-date"});
  // Signed as AWS checks it: the same signature computed over the canonical request.
  std::vector<broker::http::header_field> headers{{"content-type", header_of(r, "content-type")},
                                                  {"host", "sts.amazonaws.com"},
                                                  {"x-amz-date", "20261207T030000Z"}};
  const std::string canonical = sigv4::canonical_request(
      "POST", "/", headers, a->signed_headers, broker::base::sha256_hex(r.body), "sts", false);
  const sigv4::signing_key key("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", a->credential.scope);
  CHECK(a->signature ==
        key.sign(sigv4::string_to_sign("20261207T030000Z", a->credential.scope, canonical)));
  // A long-lived key with a session token sends it, signed.
  r = assume_role_request(role, long_lived(true), "broker-x", now);
  CHECK(header_of(r, "x-amz-security-token") == "FwoGZXIvYXdzEXAMPLETOKEN");
  CHECK(sigv4::parse_authorization(header_of(r, "Authorization"))->signed_headers.back() ==
        "x-amz-security-token");
  CHECK(new_role_session_name().size() == 23);
}

TEST_CASE("assume_role: STS's answer", "[brokers][aws][assume_role]") {
  const std::string ok = R"(<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult><Credentials>
    <AccessKeyId>ASIAEXAMPLEEXAMPLE12</AccessKeyId>
    <SecretAccessKey>secretsecretsecretsecretsecretsecret0000</SecretAccessKey>
    <SessionToken>IQoJb3JpZ2luX2VjEXAMPLE</SessionToken>
    <Expiration>2026-12-07T04:00:00Z</Expiration>
  </Credentials></AssumeRoleResult></AssumeRoleResponse>)";
  auto c = parse_assume_role_answer({200, ok});
  CHECK(c.key_id.expose() == "ASIAEXAMPLEEXAMPLE12");
  CHECK(c.token.expose() == "IQoJb3JpZ2luX2VjEXAMPLE");
  CHECK(c.expires ==
        std::chrono::sys_days(std::chrono::year(2026) / 12 / 7) + std::chrono::hours(4));
  try {
    parse_assume_role_answer({403, R"(<ErrorResponse><Error><Type>Sender</Type>
      <Code>AccessDenied</Code><Message>not authorized to perform sts:AssumeRole</Message>
      </Error></ErrorResponse>)"});
    FAIL("an error answer must throw");
  } catch (const mint_error& e) {
    CHECK(e.status() == 403);
    CHECK(std::string(e.what()) ==
          "STS refused AssumeRole: AccessDenied: not authorized to perform sts:AssumeRole");
  }
  CHECK_THROWS_AS(parse_assume_role_answer({200, "<AssumeRoleResponse/>"}), mint_error);
}
