#include "brokers/aws_signing.hpp"
#include "base/digest.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/brokers/aws_signing_test_support.hpp"

namespace sigv4 = broker::brokers::sigv4;
using broker::brokers::aws_identity;
using broker::brokers::aws_scope_refusal;
using broker::brokers::find_aws_request;
using broker::http::header_field;
using namespace broker::brokers::aws_signing_test;

namespace {

// An S3 PUT whose x-amz-content-sha256 is the hex digest of `body`.
aws_request s3_put(const std::string& body) {
  aws_request r{"PUT",
                "/uploads/file.bin",
                {{"Host", "example-bucket.s3.amazonaws.com"},
                 {"Content-Length", std::to_string(body.size())},
                 {"X-Amz-Content-Sha256", broker::base::sha256_hex(body)},
                 {"X-Amz-Date", request_date}},
                body};
  sdk_sign(r, dummy_key_id, dummy_secret, s3_scope,
           {"content-length", "host", "x-amz-content-sha256", "x-amz-date"},
           broker::base::sha256_hex(body));
  return r;
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
      if (!broker::http::iequals(r.headers[i].name, "authorization") &&
          !broker::http::iequals(r.headers[i].name, "x-amz-security-token"))
        CHECK(r.headers[i].value == before.headers[i].value);
    }
  }
}

TEST_CASE("aws signing: the identity whose dummy key id is named is the one used",
          "[brokers][aws_signing]") {
  aws_identity first = identity(false);
  first.name = "first";
  first.dummy_key_id = other_key_id;  // another session credential's dummy
  const broker::brokers::aws_credentials first_real =
      real_credentials(false, "AKIAFIRSTREALKEYID00");
  first.fixed = &first_real;
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
                                 broker::base::sha256_hex("the original content")));
    CHECK(header(r, "x-amz-content-sha256")->value ==
          broker::base::sha256_hex("the original content"));
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
                               broker::base::sha256_hex(sts_form)));
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
    const std::string to_sign =
        "AWS4-HMAC-SHA256-PAYLOAD\n" + request_date + "\n" + s3_scope.text() + "\n" + previous +
        "\n" + std::string(sigv4::empty_sha256) + "\n" + broker::base::sha256_hex(data);
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

// ---- STS calls that vend credentials ----------------------------------------------------------

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
