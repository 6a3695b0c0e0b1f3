#include "brokers/aws_signing.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "brokers/credential_set.hpp"
#include "config/host_pattern.hpp"

namespace sigv4 = broker::brokers::sigv4;
using broker::brokers::aws_identity;
using broker::brokers::aws_scope_refusal;
using broker::brokers::credential;
using broker::brokers::credential_part;
using broker::brokers::credential_set;
using broker::brokers::find_aws_request;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::brokers::request_decision;
using broker::brokers::secret;
using broker::proxy::header_field;

namespace {

// Fake credentials. The dummies have their real's length, as a session's dummies do.
const std::string real_key_id = "AKIAIOSFODNN7EXAMPLE";
const std::string dummy_key_id = "AKIAQX3DUMMY4KEY9ZZT";
const std::string real_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const std::string dummy_secret = "qR7tDummyS3cretK3yV4lueXq/Pz+Lm0Nn1Oo2Pp";
const std::string real_token =
    "FwoGZXIvYXdzEBYaDREALrealTOKENtoken+/0123456789abcdefREALrealREAL==";
const std::string dummy_token =
    "FwoGZXIvYXdzEBYaDDUMMYdummyTOKtoken+/9876543210zyxwvuDUMMYdummyDU==";
const std::string other_key_id = "AKIAOTHERPERSONSKEY1";

const std::string request_date = "20240102T030405Z";
const sigv4::credential_scope s3_scope{"20240102", "us-east-1", "s3"};
const sigv4::credential_scope sts_scope{"20240102", "us-east-1", "sts"};

const std::vector<std::string> any_list;  // an empty allowlist: any region or service

aws_identity identity(bool with_token, const std::vector<std::string>* regions = &any_list,
                      const std::vector<std::string>* services = &any_list) {
  aws_identity id{"aws", dummy_key_id, real_key_id, dummy_secret, real_secret,
                  {},    {},           regions,     services};
  if (with_token) {
    id.dummy_token = dummy_token;
    id.real_token = real_token;
  }
  return id;
}

// ---- An independent SigV4 signer (OpenSSL HMAC directly), to check what resign() produced ----

std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  REQUIRE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
               reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
               &len) != nullptr);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string independent_signature(std::string_view secret_key, const sigv4::credential_scope& scope,
                                  std::string_view text) {
  std::string k = hmac("AWS4" + std::string(secret_key), scope.date);
  k = hmac(k, scope.region);
  k = hmac(k, scope.service);
  k = hmac(k, "aws4_request");
  return hex(hmac(k, text));
}

std::string pct(std::string_view text) {  // RFC 3986 unreserved kept, upper-case hex
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', digits[c >> 4], digits[c & 15]};
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ";") + n;
  return out;
}

struct aws_request {
  std::string method;
  std::string target;
  std::vector<header_field> headers;
  std::string body;
};

const header_field* header(const aws_request& r, std::string_view name) {
  for (const auto& h : r.headers)
    if (broker::proxy::iequals(h.name, name)) return &h;
  return nullptr;
}

// What an SDK does with the credentials it holds: sign the request's canonical form with the
// sigv4 primitives and add the Authorization header.
void sdk_sign(aws_request& r, std::string_view key_id, std::string_view secret_key,
              const sigv4::credential_scope& scope, const std::vector<std::string>& signed_headers,
              std::string_view payload_hash, std::string_view amz_date = request_date) {
  const sigv4::signing_key key(secret_key, scope);
  const std::string canonical = sigv4::canonical_request(
      r.method, r.target, r.headers, signed_headers, payload_hash, scope.service, false);
  r.headers.push_back(
      {"Authorization", "AWS4-HMAC-SHA256 Credential=" + std::string(key_id) + "/" + scope.text() +
                            ", SignedHeaders=" + join(signed_headers) + ", Signature=" +
                            key.sign(sigv4::string_to_sign(amz_date, scope, canonical))});
}

// An S3 GET signed with the dummy credentials, with the session token when `with_token`.
aws_request s3_get(bool with_token, std::string_view key_id = dummy_key_id,
                   std::string_view secret_key = dummy_secret) {
  aws_request r{"GET",
                "/reports/2024/q1.csv?versionId=3HL4kqtJlcpXroDTDmJ%2Brmsr&x-id=GetObject",
                {{"Host", "example-bucket.s3.amazonaws.com"},
                 {"User-Agent", "aws-sdk-cpp/1.11.0"},
                 {"X-Amz-Content-Sha256", std::string(sigv4::empty_sha256)},
                 {"X-Amz-Date", request_date}},
                {}};
  std::vector<std::string> signed_headers{"host", "x-amz-content-sha256", "x-amz-date"};
  if (with_token) {
    r.headers.push_back({"X-Amz-Security-Token", dummy_token});
    signed_headers.push_back("x-amz-security-token");
  }
  sdk_sign(r, key_id, secret_key, s3_scope, signed_headers, sigv4::empty_sha256);
  return r;
}

// An S3 PUT whose x-amz-content-sha256 is the hex digest of `body`.
aws_request s3_put(const std::string& body) {
  aws_request r{"PUT",
                "/uploads/file.bin",
                {{"Host", "example-bucket.s3.amazonaws.com"},
                 {"Content-Length", std::to_string(body.size())},
                 {"X-Amz-Content-Sha256", sigv4::sha256_hex(body)},
                 {"X-Amz-Date", request_date}},
                body};
  sdk_sign(r, dummy_key_id, dummy_secret, s3_scope,
           {"content-length", "host", "x-amz-content-sha256", "x-amz-date"},
           sigv4::sha256_hex(body));
  return r;
}

// An STS query-API POST as botocore sends it: form body, no x-amz-content-sha256, the payload
// hash signed is the body's digest.
const std::string sts_form = "Action=GetCallerIdentity&Version=2011-06-15";
aws_request sts_post(bool with_token, const std::string& body = sts_form) {
  aws_request r{"POST",
                "/",
                {{"Host", "sts.amazonaws.com"},
                 {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
                 {"X-Amz-Date", request_date}},
                body};
  std::vector<std::string> signed_headers{"content-type", "host", "x-amz-date"};
  if (with_token) {
    r.headers.push_back({"X-Amz-Security-Token", dummy_token});
    signed_headers.push_back("x-amz-security-token");
  }
  sdk_sign(r, dummy_key_id, dummy_secret, sts_scope, signed_headers, sigv4::sha256_hex(body));
  return r;
}

// The Authorization value a request signed with the REAL credentials must carry, computed
// independently from the request as it now is.
std::string expected_authorization(const aws_request& r, const sigv4::credential_scope& scope,
                                   const std::vector<std::string>& signed_headers,
                                   std::string_view payload_hash) {
  const std::string canonical = sigv4::canonical_request(
      r.method, r.target, r.headers, signed_headers, payload_hash, scope.service, false);
  return "AWS4-HMAC-SHA256 Credential=" + real_key_id + "/" + scope.text() +
         ", SignedHeaders=" + join(signed_headers) + ", Signature=" +
         independent_signature(real_secret, scope,
                               sigv4::string_to_sign(request_date, scope, canonical));
}

// No dummy value (raw or percent-encoded) is left anywhere in the request head.
void check_no_dummy_left(const aws_request& r) {
  for (const std::string& dummy : {dummy_key_id, dummy_secret, dummy_token, pct(dummy_token)}) {
    CHECK(r.target.find(dummy) == std::string::npos);
    for (const auto& h : r.headers) {
      INFO("header " << h.name);
      CHECK(h.value.find(dummy) == std::string::npos);
    }
  }
}

bool same(const aws_request& a, const aws_request& b) {
  if (a.target != b.target || a.headers.size() != b.headers.size()) return false;
  for (std::size_t i = 0; i < a.headers.size(); ++i)
    if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value)
      return false;
  return true;
}

// Resigns `r` in place (find_aws_request + resign); REQUIREs that it is ours.
void resign(const aws_identity& id, aws_request& r, bool has_body) {
  auto request = find_aws_request({&id}, r.target, r.headers, has_body);
  REQUIRE(request);
  request->resign(r.method, r.target, r.headers, r.body);
}

// find_aws_request + resign must throw sigv4_error and leave the request as it was.
void check_refused(const aws_identity& id, aws_request r, bool has_body) {
  const aws_request before = r;
  auto request = find_aws_request({&id}, r.target, r.headers, has_body);
  REQUIRE(request);
  CHECK_THROWS_AS(request->resign(r.method, r.target, r.headers, r.body), sigv4::sigv4_error);
  CHECK(same(r, before));
}

// Splits a target's query into its raw "name=value" pieces, in order.
std::vector<std::pair<std::string, std::string>> raw_query(const std::string& target) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string_view q = std::string_view(target).substr(target.find('?') + 1);
  while (!q.empty()) {
    const std::size_t end = std::min(q.find('&'), q.size());
    const std::string_view param = q.substr(0, end);
    const std::size_t eq = param.find('=');
    out.emplace_back(std::string(param.substr(0, eq)),
                     eq == std::string_view::npos ? "" : std::string(param.substr(eq + 1)));
    q.remove_prefix(std::min(end + 1, q.size()));
  }
  return out;
}

}  // namespace

// ---- header form ------------------------------------------------------------------------------

TEST_CASE("aws signing: a dummy-signed request is re-signed with the real credentials",
          "[brokers][aws_signing]") {
  for (bool with_token : {true, false}) {
    INFO("identity with a session token: " << with_token);
    const aws_identity id = identity(with_token);
    aws_request r = s3_get(with_token);
    const aws_request before = r;

    auto request = find_aws_request({&id}, r.target, r.headers, false);
    REQUIRE(request);
    CHECK(request->credential() == "aws");
    CHECK(&request->identity() == &id);
    CHECK(request->scope().date == "20240102");
    CHECK(request->scope().region == "us-east-1");
    CHECK(request->scope().service == "s3");
    CHECK_FALSE(request->needs_body());
    request->resign(r.method, r.target, r.headers, r.body);

    std::vector<std::string> signed_headers{"host", "x-amz-content-sha256", "x-amz-date"};
    if (with_token) signed_headers.push_back("x-amz-security-token");
    const header_field* auth = header(r, "authorization");
    REQUIRE(auth);
    CHECK(auth->value == expected_authorization(r, s3_scope, signed_headers, sigv4::empty_sha256));
    CHECK(auth->value.find("Credential=" + real_key_id + "/") != std::string::npos);
    CHECK(auth->value != before.headers.back().value);
    if (with_token) {
      REQUIRE(header(r, "x-amz-security-token"));
      CHECK(header(r, "x-amz-security-token")->value == real_token);
    } else {
      CHECK_FALSE(header(r, "x-amz-security-token"));
    }
    check_no_dummy_left(r);
    // Nothing else changed: the target, the other headers and their order.
    CHECK(r.target == before.target);
    REQUIRE(r.headers.size() == before.headers.size());
    for (std::size_t i = 0; i < r.headers.size(); ++i) {
      CHECK(r.headers[i].name == before.headers[i].name);
      if (!broker::proxy::iequals(r.headers[i].name, "authorization") &&
          !broker::proxy::iequals(r.headers[i].name, "x-amz-security-token"))
        CHECK(r.headers[i].value == before.headers[i].value);
    }
  }
}

TEST_CASE("aws signing: the identity whose dummy key id is named is the one used",
          "[brokers][aws_signing]") {
  aws_identity first = identity(false);
  first.name = "first";
  first.dummy_key_id = other_key_id;  // another session credential's dummy
  first.real_key_id = "AKIAFIRSTREALKEYID00";
  const aws_identity second = identity(true);
  aws_request r = s3_get(true);
  auto request = find_aws_request({&first, &second}, r.target, r.headers, false);
  REQUIRE(request);
  CHECK(request->credential() == "aws");
  request->resign(r.method, r.target, r.headers, r.body);
  CHECK(header(r, "authorization")->value.find("Credential=" + real_key_id + "/") !=
        std::string::npos);
}

TEST_CASE("aws signing: headers outside SignedHeaders may change, signed ones may not",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(true);
  SECTION("an unsigned header changed after signing still verifies") {
    aws_request r = s3_get(true);
    r.headers[1].value = "curl/8.0";  // User-Agent is not signed
    REQUIRE_NOTHROW(resign(id, r, false));
    CHECK(header(r, "authorization")->value ==
          expected_authorization(
              r, s3_scope, {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"},
              sigv4::empty_sha256));
  }
  SECTION("a signed header changed after signing is refused, nothing modified") {
    aws_request r = s3_get(true);
    r.headers[0].value = "other-bucket.s3.amazonaws.com";
    check_refused(id, r, false);
  }
  SECTION("a changed target is refused") {
    aws_request r = s3_get(true);
    r.target = "/reports/2024/q2.csv?versionId=3HL4kqtJlcpXroDTDmJ%2Brmsr&x-id=GetObject";
    check_refused(id, r, false);
  }
  SECTION("a changed session token is refused") {
    aws_request r = s3_get(true);
    header_field* token = nullptr;
    for (auto& h : r.headers)
      if (h.name == "X-Amz-Security-Token") token = &h;
    REQUIRE(token);
    token->value[20] = token->value[20] == 'x' ? 'y' : 'x';
    check_refused(id, r, false);
  }
  SECTION("a signed header that is absent is refused") {
    aws_request r = s3_get(true);
    r.headers.erase(r.headers.begin() + 4);  // X-Amz-Security-Token
    check_refused(id, r, false);
  }
}

TEST_CASE("aws signing: a body that does not match what was signed is refused",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(true);
  SECTION("payload hash from the body (no x-amz-content-sha256)") {
    aws_request r = sts_post(true);
    {
      auto request = find_aws_request({&id}, r.target, r.headers, true);
      REQUIRE(request);
      CHECK(request->needs_body());
    }
    r.body = "Action=GetCallerIdentity&Version=2011-06-16";
    check_refused(id, r, true);
  }
  SECTION("a hex x-amz-content-sha256 that the body does not match") {
    aws_request r = s3_put("the original content");
    {
      auto request = find_aws_request({&id}, r.target, r.headers, true);
      REQUIRE(request);
      CHECK(request->needs_body());
    }
    r.body = "the tampered content";  // same length: Content-Length still matches
    REQUIRE(r.body.size() == std::string("the original content").size());
    check_refused(id, r, true);
  }
  SECTION("the untampered PUT verifies and keeps its digest") {
    aws_request r = s3_put("the original content");
    resign(id, r, true);
    CHECK(header(r, "authorization")->value ==
          expected_authorization(r, s3_scope,
                                 {"content-length", "host", "x-amz-content-sha256", "x-amz-date"},
                                 sigv4::sha256_hex("the original content")));
    CHECK(header(r, "x-amz-content-sha256")->value == sigv4::sha256_hex("the original content"));
  }
}

TEST_CASE("aws signing: a request not signed with the dummy secret is refused",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(true);
  check_refused(id, s3_get(true, dummy_key_id, real_secret), false);
  check_refused(id, s3_get(true, dummy_key_id, "someone else's secret key, 40 bytes long"), false);
}

TEST_CASE("aws signing: a scope date that is not the request's date is refused",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(false);
  aws_request r{"GET",
                "/",
                {{"Host", "example-bucket.s3.amazonaws.com"},
                 {"X-Amz-Content-Sha256", std::string(sigv4::empty_sha256)},
                 {"X-Amz-Date", request_date}},
                {}};
  // Signed consistently (the signature itself is right for this scope and date).
  const sigv4::credential_scope yesterday{"20240101", "us-east-1", "s3"};
  sdk_sign(r, dummy_key_id, dummy_secret, yesterday, {"host", "x-amz-content-sha256", "x-amz-date"},
           sigv4::empty_sha256);
  const aws_request before = r;
  auto request = find_aws_request({&id}, r.target, r.headers, false);
  REQUIRE(request);
  CHECK_THROWS_WITH(request->resign(r.method, r.target, r.headers, r.body),
                    Catch::Contains("date"));
  CHECK(same(r, before));
}

TEST_CASE("aws signing: a request without X-Amz-Date is refused", "[brokers][aws_signing]") {
  const aws_identity id = identity(false);
  aws_request r{"GET",
                "/",
                {{"Host", "example-bucket.s3.amazonaws.com"},
                 {"X-Amz-Content-Sha256", std::string(sigv4::empty_sha256)}},
                {}};
  sdk_sign(r, dummy_key_id, dummy_secret, s3_scope, {"host", "x-amz-content-sha256"},
           sigv4::empty_sha256);
  check_refused(id, r, false);
}

TEST_CASE("aws signing: a malformed Authorization naming the dummy key id is refused",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(true);
  const aws_request good = s3_get(true);
  const std::string signature =
      good.headers.back().value.substr(good.headers.back().value.find("Signature=") + 10);
  const std::string credential = "Credential=" + dummy_key_id + "/" + s3_scope.text();
  const std::vector<std::string> malformed{
      "AWS4-HMAC-SHA256 " + credential + ", SignedHeaders=host;x-amz-date",  // no Signature
      "AWS4-HMAC-SHA256 " + credential + ", SignedHeaders=x-amz-date;host, Signature=" + signature,
      "AWS4-HMAC-SHA256 " + credential +
          ", SignedHeaders=host, Signature=" + signature.substr(0, 40),
      "AWS4-HMAC-SHA256 Credential=" + dummy_key_id + "/2024/us-east-1/s3/aws4_request" +
          ", SignedHeaders=host, Signature=" + signature,
      "AWS4-HMAC-SHA1 " + credential + ", SignedHeaders=host, Signature=" + signature,
      "Bearer " + dummy_key_id,
  };
  for (const std::string& value : malformed) {
    INFO(value);
    aws_request r = good;
    r.headers.back().value = value;
    const aws_request before = r;
    CHECK_THROWS_AS(find_aws_request({&id}, r.target, r.headers, false), sigv4::sigv4_error);
    CHECK(same(r, before));
  }
}

TEST_CASE("aws signing: requests that are not ours are left alone", "[brokers][aws_signing]") {
  const aws_identity id = identity(true);
  // Someone else's key id, well-formed and correctly signed with some secret.
  const aws_request other = s3_get(true, other_key_id, real_secret);
  CHECK_FALSE(find_aws_request({&id}, other.target, other.headers, false));
  // Another scheme.
  aws_request bearer{
      "GET",
      "/",
      {{"Host", "example.amazonaws.com"}, {"Authorization", "Bearer ya29.a0AfB_byCsomething"}},
      {}};
  CHECK_FALSE(find_aws_request({&id}, bearer.target, bearer.headers, false));
  // No signature at all.
  aws_request plain{"GET", "/?list-type=2", {{"Host", "example.amazonaws.com"}}, {}};
  CHECK_FALSE(find_aws_request({&id}, plain.target, plain.headers, false));
  // No identities.
  const aws_request ours = s3_get(true);
  CHECK_FALSE(find_aws_request({}, ours.target, ours.headers, false));
  // Someone else's presigned URL that is not one we could parse (SigV4a) passes untouched;
  // the same naming our dummy key id is refused.
  const std::string sigv4a =
      "/k?X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256&X-Amz-Credential=" + other_key_id +
      "%2F20240102%2Fs3%2Faws4_request&X-Amz-Date=20240102T030405Z&X-Amz-SignedHeaders=host"
      "&X-Amz-Signature=3045022100ab";
  const std::vector<header_field> host{{"Host", "example.amazonaws.com"}};
  CHECK_FALSE(find_aws_request({&id}, sigv4a, host, false));
  std::string ours_sigv4a = sigv4a;
  ours_sigv4a.replace(ours_sigv4a.find(other_key_id), other_key_id.size(), dummy_key_id);
  CHECK_THROWS_AS(find_aws_request({&id}, ours_sigv4a, host, false), sigv4::sigv4_error);
  // A SigV4a Authorization naming the dummy says what it is.
  const std::vector<header_field> v4a_header{
      {"Host", "example.amazonaws.com"},
      {"Authorization", "AWS4-ECDSA-P256-SHA256 Credential=" + dummy_key_id +
                            "/20240102/s3/aws4_request, SignedHeaders=host, Signature=3045"}};
  CHECK_THROWS_WITH(find_aws_request({&id}, "/k", v4a_header, false), Catch::Contains("SigV4a"));
}

// ---- presigned query form ---------------------------------------------------------------------

namespace {

// A presigned S3 GET URL as botocore makes one, signed with the dummy credentials; extra
// parameters before and after the X-Amz-* ones.
aws_request presigned_get(bool with_token, std::string_view key_id = dummy_key_id) {
  std::string target = "/example-bucket/photos/cat%20pic.jpg?x-id=GetObject";
  target += "&X-Amz-Algorithm=AWS4-HMAC-SHA256";
  target +=
      "&X-Amz-Credential=" + std::string(key_id) + "%2F20240102%2Fus-east-1%2Fs3%2Faws4_request";
  target += "&X-Amz-Date=" + request_date;
  target += "&X-Amz-Expires=900";
  if (with_token) target += "&X-Amz-Security-Token=" + pct(dummy_token);
  target += "&X-Amz-SignedHeaders=host";
  target += "&response-content-disposition=attachment%3B%20filename%3D%22cat.jpg%22";
  aws_request r{"GET", target, {{"Host", "s3.us-east-1.amazonaws.com"}, {"Accept", "*/*"}}, {}};
  const sigv4::signing_key key(dummy_secret, s3_scope);
  const std::string canonical = sigv4::canonical_request(r.method, r.target, r.headers, {"host"},
                                                         sigv4::unsigned_payload, "s3", true);
  r.target +=
      "&X-Amz-Signature=" + key.sign(sigv4::string_to_sign(request_date, s3_scope, canonical));
  return r;
}

}  // namespace

TEST_CASE("aws signing: a presigned URL gets the real key id, token and signature",
          "[brokers][aws_signing][presigned]") {
  for (bool with_token : {true, false}) {
    INFO("identity with a session token: " << with_token);
    const aws_identity id = identity(with_token);
    aws_request r = presigned_get(with_token);
    const aws_request before = r;

    auto request = find_aws_request({&id}, r.target, r.headers, true);
    REQUIRE(request);
    CHECK_FALSE(request->needs_body());  // S3 presigned URLs sign UNSIGNED-PAYLOAD
    CHECK(request->scope().service == "s3");
    request->resign(r.method, r.target, r.headers, r.body);

    const auto params = raw_query(r.target);
    const auto params_before = raw_query(before.target);
    REQUIRE(params.size() == params_before.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << params_before[i].first);
      CHECK(params[i].first == params_before[i].first);  // same names, same order
      const std::string& name = params[i].first;
      if (name == "X-Amz-Credential") {
        CHECK(params[i].second == real_key_id + "%2F20240102%2Fus-east-1%2Fs3%2Faws4_request");
      } else if (name == "X-Amz-Security-Token") {
        CHECK(params[i].second == pct(real_token));
      } else if (name == "X-Amz-Signature") {
        const std::string canonical = sigv4::canonical_request(
            r.method, r.target, r.headers, {"host"}, sigv4::unsigned_payload, "s3", true);
        CHECK(params[i].second ==
              independent_signature(real_secret, s3_scope,
                                    sigv4::string_to_sign(request_date, s3_scope, canonical)));
        CHECK(params[i].second != params_before[i].second);
      } else {
        CHECK(params[i].second == params_before[i].second);  // byte for byte
      }
    }
    CHECK(r.target.substr(0, r.target.find('?')) == "/example-bucket/photos/cat%20pic.jpg");
    CHECK(r.target.find(real_key_id) != std::string::npos);
    check_no_dummy_left(r);
    CHECK(same(aws_request{r.method, before.target, r.headers, {}}, before));  // headers untouched
  }
}

TEST_CASE("aws signing: a tampered presigned URL is refused, someone else's is not ours",
          "[brokers][aws_signing][presigned]") {
  const aws_identity id = identity(true);
  SECTION("a longer expiry") {
    aws_request r = presigned_get(true);
    const std::size_t at = r.target.find("X-Amz-Expires=900");
    REQUIRE(at != std::string::npos);
    r.target.replace(at, 17, "X-Amz-Expires=604800");
    check_refused(id, r, false);
  }
  SECTION("another object") {
    aws_request r = presigned_get(true);
    r.target.replace(r.target.find("cat%20pic"), 9, "dog%20pic");
    check_refused(id, r, false);
  }
  SECTION("another key id") {
    const aws_request r = presigned_get(true, other_key_id);
    CHECK_FALSE(find_aws_request({&id}, r.target, r.headers, false));
  }
}

// ---- bodies -----------------------------------------------------------------------------------

TEST_CASE("aws signing: an STS form POST is verified and signed over its body",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(true);
  aws_request r = sts_post(true);
  auto request = find_aws_request({&id}, r.target, r.headers, true);
  REQUIRE(request);
  CHECK(request->needs_body());
  CHECK(request->scope().service == "sts");
  request->resign(r.method, r.target, r.headers, r.body);
  CHECK(header(r, "authorization")->value ==
        expected_authorization(r, sts_scope,
                               {"content-type", "host", "x-amz-date", "x-amz-security-token"},
                               sigv4::sha256_hex(sts_form)));
  CHECK(header(r, "x-amz-security-token")->value == real_token);
  CHECK_FALSE(header(r, "x-amz-content-sha256"));  // none added
  CHECK(r.body == sts_form);
  check_no_dummy_left(r);
}

TEST_CASE("aws signing: without a body and without x-amz-content-sha256 the empty hash is signed",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(false);
  aws_request r{"GET",
                "/?Action=GetCallerIdentity&Version=2011-06-15",
                {{"Host", "sts.amazonaws.com"}, {"X-Amz-Date", request_date}},
                {}};
  sdk_sign(r, dummy_key_id, dummy_secret, sts_scope, {"host", "x-amz-date"}, sigv4::empty_sha256);
  auto request = find_aws_request({&id}, r.target, r.headers, false);
  REQUIRE(request);
  CHECK_FALSE(request->needs_body());
  request->resign(r.method, r.target, r.headers, "");
  CHECK(header(r, "authorization")->value ==
        expected_authorization(r, sts_scope, {"host", "x-amz-date"}, sigv4::empty_sha256));
}

namespace {

// aws-chunked: each chunk's signature chains from the previous one (the seed first).
std::string chunked_body(const std::vector<std::string>& chunks, std::string_view secret_key,
                         std::string previous) {
  std::string body;
  auto element = [&](const std::string& data) {
    const std::string to_sign = "AWS4-HMAC-SHA256-PAYLOAD\n" + request_date + "\n" +
                                s3_scope.text() + "\n" + previous + "\n" +
                                std::string(sigv4::empty_sha256) + "\n" + sigv4::sha256_hex(data);
    previous = independent_signature(secret_key, s3_scope, to_sign);
    char size[20];
    std::snprintf(size, sizeof size, "%zx", data.size());
    body += std::string(size) + ";chunk-signature=" + previous + "\r\n" + data + "\r\n";
  };
  for (const auto& c : chunks) element(c);
  element("");  // the final chunk: no data; its "\r\n" closes the (empty) trailer section
  return body;
}

std::string signature_of(const aws_request& r) {
  const std::string& v = header(r, "authorization")->value;
  return v.substr(v.find("Signature=") + 10);
}

aws_request s3_streaming_put(const std::string& content_sha256, std::size_t decoded_length) {
  aws_request r{"PUT",
                "/uploads/big.bin",
                {{"Host", "example-bucket.s3.amazonaws.com"},
                 {"Content-Encoding", "aws-chunked"},
                 {"X-Amz-Content-Sha256", content_sha256},
                 {"X-Amz-Date", request_date},
                 {"X-Amz-Decoded-Content-Length", std::to_string(decoded_length)}},
                {}};
  sdk_sign(r, dummy_key_id, dummy_secret, s3_scope,
           {"content-encoding", "host", "x-amz-content-sha256", "x-amz-date",
            "x-amz-decoded-content-length"},
           content_sha256);
  return r;
}

}  // namespace

TEST_CASE("aws signing: body_resigner only for streaming signed payloads",
          "[brokers][aws_signing][chunked]") {
  const aws_identity id = identity(false);
  SECTION("UNSIGNED-PAYLOAD") {
    aws_request r = s3_streaming_put(std::string(sigv4::unsigned_payload), 5);
    auto request = find_aws_request({&id}, r.target, r.headers, true);
    REQUIRE(request);
    CHECK_FALSE(request->needs_body());
    request->resign(r.method, r.target, r.headers, "");
    CHECK(header(r, "authorization")->value ==
          expected_authorization(r, s3_scope,
                                 {"content-encoding", "host", "x-amz-content-sha256", "x-amz-date",
                                  "x-amz-decoded-content-length"},
                                 sigv4::unsigned_payload));
    CHECK_FALSE(request->body_resigner());
  }
  SECTION("a hex digest") {
    aws_request r = s3_put("content");
    auto request = find_aws_request({&id}, r.target, r.headers, true);
    REQUIRE(request);
    request->resign(r.method, r.target, r.headers, r.body);
    CHECK_FALSE(request->body_resigner());
  }
  SECTION("a presigned URL") {
    aws_request r = presigned_get(false);
    auto request = find_aws_request({&id}, r.target, r.headers, false);
    REQUIRE(request);
    request->resign(r.method, r.target, r.headers, r.body);
    CHECK_FALSE(request->body_resigner());
  }
}

TEST_CASE("aws signing: a dummy-signed aws-chunked body is re-signed from the real seed",
          "[brokers][aws_signing][chunked]") {
  const aws_identity id = identity(true);
  const std::vector<std::string> chunks{std::string(8192, 'a'), std::string(100, 'b')};
  aws_request r = s3_streaming_put(std::string(sigv4::streaming_signed), 8292);
  const std::string dummy_seed = signature_of(r);
  const std::string body = chunked_body(chunks, dummy_secret, dummy_seed);

  auto request = find_aws_request({&id}, r.target, r.headers, true);
  REQUIRE(request);
  CHECK_FALSE(request->needs_body());  // streamed: checked chunk by chunk
  request->resign(r.method, r.target, r.headers, "");
  const std::string real_seed = signature_of(r);
  CHECK(header(r, "authorization")->value ==
        expected_authorization(r, s3_scope,
                               {"content-encoding", "host", "x-amz-content-sha256", "x-amz-date",
                                "x-amz-decoded-content-length"},
                               sigv4::streaming_signed));
  REQUIRE(real_seed != dummy_seed);

  const std::string expected = chunked_body(chunks, real_secret, real_seed);
  REQUIRE(expected.size() == body.size());
  REQUIRE(expected != body);

  SECTION("whole") {
    auto resigner = request->body_resigner();
    REQUIRE(resigner);
    std::string out;
    resigner->feed(body, out);
    CHECK(out == expected);
    CHECK(resigner->complete());
    CHECK_NOTHROW(resigner->finish());
  }
  SECTION("in pieces") {
    auto resigner = request->body_resigner();
    REQUIRE(resigner);
    std::string out;
    for (std::size_t at = 0; at < body.size(); at += 1000)
      resigner->feed(std::string_view(body).substr(at, 1000), out);
    CHECK(out == expected);
    CHECK(resigner->complete());
  }
  SECTION("a chunk chained from the real seed (not the dummy's) is refused") {
    auto resigner = request->body_resigner();
    REQUIRE(resigner);
    std::string out;
    CHECK_THROWS_AS(resigner->feed(chunked_body(chunks, dummy_secret, real_seed), out),
                    sigv4::sigv4_error);
    CHECK(out.empty());
  }
  SECTION("a tampered chunk is refused") {
    auto resigner = request->body_resigner();
    REQUIRE(resigner);
    std::string bad = body;
    bad[bad.find("\r\n") + 2 + 100] = 'z';
    std::string out;
    CHECK_THROWS_AS(resigner->feed(bad, out), sigv4::sigv4_error);
    CHECK(out.empty());
  }
}

// ---- allowlists -------------------------------------------------------------------------------

TEST_CASE("aws signing: aws_scope_refusal applies the regions and services lists",
          "[brokers][aws_signing]") {
  const std::vector<std::string> regions{"us-east-1", "eu-west-1"};
  const std::vector<std::string> services{"s3", "sts"};
  const aws_identity limited = identity(false, &regions, &services);
  CHECK(aws_scope_refusal(limited, {"20240102", "us-east-1", "s3"}).empty());
  CHECK(aws_scope_refusal(limited, {"20240102", "eu-west-1", "sts"}).empty());

  const std::string region = aws_scope_refusal(limited, {"20240102", "us-west-2", "s3"});
  CHECK_THAT(region, Catch::Contains("region") && Catch::Contains("us-west-2"));
  const std::string service = aws_scope_refusal(limited, {"20240102", "us-east-1", "iam"});
  CHECK_THAT(service, Catch::Contains("service") && Catch::Contains("iam"));
  CHECK_FALSE(aws_scope_refusal(limited, {"20240102", "ap-south-1", "ec2"}).empty());
  // Names match exactly.
  CHECK_FALSE(aws_scope_refusal(limited, {"20240102", "US-EAST-1", "s3"}).empty());
  CHECK_FALSE(aws_scope_refusal(limited, {"20240102", "us-east-1", "s3-object-lambda"}).empty());

  const std::vector<std::string> only_s3{"s3"};
  const aws_identity any_region = identity(false, &any_list, &only_s3);
  CHECK(aws_scope_refusal(any_region, {"20240102", "me-central-1", "s3"}).empty());
  CHECK_FALSE(aws_scope_refusal(any_region, {"20240102", "me-central-1", "kms"}).empty());

  const aws_identity any = identity(false);
  CHECK(aws_scope_refusal(any, {"20240102", "cn-north-1", "anything"}).empty());
}

// ---- through the credential set ---------------------------------------------------------------

namespace {

credential aws_part(credential_part part, const std::string& real, const std::string& dummy,
                    std::string env, const std::vector<std::string>& regions) {
  credential c;
  c.spec.name = "aws";
  c.spec.type = "aws-sigv4";
  c.spec.hosts.push_back(*broker::config::host_pattern::parse("*.amazonaws.com"));
  c.spec.env = {std::move(env)};
  c.spec.source = "env:AWS_ACCESS_KEY_ID";
  c.spec.regions = regions;
  c.part = part;
  c.real = secret(std::string(real));
  c.dummy = dummy;
  return c;
}

credential_set aws_set(const std::vector<std::string>& regions = {}) {
  std::vector<credential> list;
  list.push_back(aws_part(credential_part::aws_key_id, real_key_id, dummy_key_id,
                          "AWS_ACCESS_KEY_ID", regions));
  list.push_back(aws_part(credential_part::aws_secret, real_secret, dummy_secret,
                          "AWS_SECRET_ACCESS_KEY", regions));
  list.push_back(
      aws_part(credential_part::aws_token, real_token, dummy_token, "AWS_SESSION_TOKEN", regions));
  return credential_set(std::move(list));
}

request_context to(std::string_view host, bool plaintext = false) {
  return request_context{host, plaintext, false};
}

}  // namespace

TEST_CASE("aws signing: the credential set finds, binds and re-signs", "[brokers][aws_signing]") {
  const credential_set set = aws_set();
  REQUIRE(set.size() == 3);
  aws_request r = s3_get(true);
  const aws_request before = r;

  // apply() leaves an AWS request to the signing step: nothing swapped as a header value.
  auto d = set.apply(to("example-bucket.s3.amazonaws.com"), r.target, r.headers);
  CHECK(d.action == request_action::pass);
  CHECK(d.swapped == 0);
  CHECK(same(r, before));

  request_decision refused;
  auto request = set.find_aws_request(to("example-bucket.s3.amazonaws.com"), r.target, r.headers,
                                      false, refused);
  REQUIRE(request);
  CHECK(refused.action == request_action::pass);
  CHECK(request->credential() == "aws");
  request->resign(r.method, r.target, r.headers, r.body);
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
  SECTION("an unbound host: not ours to sign, and apply() refuses the dummy") {
    const credential_set set = aws_set();
    request_decision refused;
    CHECK_FALSE(set.find_aws_request(to("s3.evil.example"), r.target, r.headers, false, refused));
    CHECK(refused.action == request_action::pass);
    aws_request copy = r;
    auto d = set.apply(to("s3.evil.example"), copy.target, copy.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "aws");
  }
  SECTION("plaintext to a bound, non-loopback host") {
    const credential_set set = aws_set();
    request_decision refused;
    CHECK_FALSE(set.find_aws_request(to("example-bucket.s3.amazonaws.com", true), r.target,
                                     r.headers, false, refused));
  }
  SECTION("a region outside the credential's regions") {
    const credential_set set = aws_set({"eu-west-1"});
    request_decision refused;
    CHECK_FALSE(set.find_aws_request(to("example-bucket.s3.amazonaws.com"), r.target, r.headers,
                                     false, refused));
    CHECK(refused.action == request_action::credential_not_bound);
    CHECK(refused.credential == "aws");
    CHECK_THAT(refused.where, Catch::Contains("us-east-1"));
  }
  SECTION("a region inside the list") {
    const credential_set set = aws_set({"eu-west-1", "us-east-1"});
    request_decision refused;
    CHECK(set.find_aws_request(to("example-bucket.s3.amazonaws.com"), r.target, r.headers, false,
                               refused));
    CHECK(refused.action == request_action::pass);
  }
  SECTION("a malformed signature naming the dummy") {
    const credential_set set = aws_set();
    aws_request bad = r;
    bad.headers.back().value += ", Signature=0000";  // a repeated component
    request_decision refused;
    CHECK_FALSE(set.find_aws_request(to("example-bucket.s3.amazonaws.com"), bad.target, bad.headers,
                                     false, refused));
    CHECK(refused.action == request_action::signature_invalid);
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
  c.key_id = secret(std::string(key_id));
  c.secret_key = secret(std::string(secret_key));
  c.token = secret(std::string(token));
  c.key_id_mask = broker::brokers::same_length_mask(dummy_key_id, key_id.size());
  c.secret_mask = broker::brokers::same_length_mask(dummy_secret, secret_key.size());
  c.token_mask = broker::brokers::same_length_mask(dummy_secret, token.size());
  c.expires = expires;
  return c;
}

// A set whose credentials (long-term at first: no token part) are replaced after about a
// second by temporary ones with a session token.
credential_set rotating_set() {
  using clock = std::chrono::system_clock;
  std::vector<credential> list;
  list.push_back(
      aws_part(credential_part::aws_key_id, real_key_id, dummy_key_id, "AWS_ACCESS_KEY_ID", {}));
  list.push_back(aws_part(credential_part::aws_secret, real_secret, dummy_secret,
                          "AWS_SECRET_ACCESS_KEY", {}));
  const auto now = clock::now();
  credential_set::aws_rotation_list rotations;
  rotations.emplace_back(
      "aws",
      std::make_unique<broker::brokers::rotating<broker::brokers::aws_real_credentials>>(
          "test", issue(real_key_id, real_secret, "", now + std::chrono::seconds(2)), now, [] {
            return issue(next_key_id, next_secret, next_token,
                         clock::now() + std::chrono::hours(1));
          }));
  return credential_set(std::move(list), {}, std::move(rotations));
}

std::string signing_key_id(const credential_set& set, aws_request& r) {
  request_decision refused;
  auto request = set.find_aws_request(to("example-bucket.s3.amazonaws.com"), r.target, r.headers,
                                      false, refused);
  REQUIRE(request);
  request->resign(r.method, r.target, r.headers, r.body);
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

TEST_CASE("aws signing: STS calls that hand out new credentials may not be signed",
          "[brokers][aws_signing]") {
  const aws_identity id = identity(false);
  for (const char* action : {"GetSessionToken", "AssumeRole", "GetFederationToken",
                             "AssumeRoleWithWebIdentity", "AssumeRoleWithSAML"}) {
    INFO(action);
    const aws_request r = sts_post(
        false, std::string("Action=") + action + "&Version=2011-06-15&DurationSeconds=900");
    auto request = find_aws_request({&id}, r.target, r.headers, true);
    REQUIRE(request);
    CHECK(request->needs_body());
    CHECK(request->action_refusal(r.target, r.body).find(std::string("sts:") + action) == 0);
    // In the query string of a GET too.
    CHECK_FALSE(
        request->action_refusal(std::string("/?Version=2011-06-15&Action=") + action, "").empty());
  }
  const aws_request who = sts_post(false);
  auto request = find_aws_request({&id}, who.target, who.headers, true);
  REQUIRE(request);
  CHECK(request->action_refusal(who.target, who.body).empty());
  // Other services are not STS, whatever their parameters say.
  const aws_request get = s3_get(false);
  auto s3 = find_aws_request({&id}, get.target, get.headers, false);
  REQUIRE(s3);
  CHECK(s3->action_refusal("/k?Action=AssumeRole", "").empty());
}
