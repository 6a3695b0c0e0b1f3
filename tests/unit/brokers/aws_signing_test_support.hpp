// Shared by the AWS signing tests (aws_signing_test.cpp) and the credential-set tests that sign
// through it (aws_signing_set_test.cpp): fake real and dummy credentials, an identity over them,
// an independent SigV4 signer to check results with, and requests as SDKs sign them.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "brokers/aws_broker.hpp"
#include "brokers/aws_signing.hpp"
#include "brokers/credential_set.hpp"
#include "brokers/sigv4.hpp"
#include "config/host_pattern.hpp"
#include "http/message.hpp"

namespace broker::brokers::aws_signing_test {

using http::header_field;

// Fake credentials. The dummies have their real's length, as a session's dummies do.
inline const std::string real_key_id = "AKIAIOSFODNN7EXAMPLE";
inline const std::string dummy_key_id = "AKIAQX3DUMMY4KEY9ZZT";
inline const std::string real_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
inline const std::string dummy_secret = "qR7tDummyS3cretK3yV4lueXq/Pz+Lm0Nn1Oo2Pp";
inline const std::string real_token =
    "FwoGZXIvYXdzEBYaDREALrealTOKENtoken+/0123456789abcdefREALrealREAL==";
inline const std::string dummy_token =
    "FwoGZXIvYXdzEBYaDDUMMYdummyTOKtoken+/9876543210zyxwvuDUMMYdummyDU==";
inline const std::string other_key_id = "AKIAOTHERPERSONSKEY1";

inline const std::string request_date = "20240102T030405Z";
inline const sigv4::credential_scope s3_scope{"20240102", "us-east-1", "s3"};
inline const sigv4::credential_scope sts_scope{"20240102", "us-east-1", "sts"};

inline const std::vector<std::string> any_list;  // an empty allowlist: any region or service

// The real credentials as a session holds them (in secrets), for the lifetime of the test.
inline aws_credentials real_credentials(bool with_token, std::string key_id = real_key_id) {
  aws_credentials c;
  c.access_key_id = base::secret(std::move(key_id));
  c.secret_access_key = base::secret(std::string(real_secret));
  if (with_token) c.session_token = base::secret(std::string(real_token));
  return c;
}
inline const aws_credentials real_with_token = real_credentials(true);
inline const aws_credentials real_without_token = real_credentials(false);

inline aws_identity identity(bool with_token, const std::vector<std::string>* regions = &any_list,
                             const std::vector<std::string>* services = &any_list) {
  return aws_identity{"aws",
                      dummy_key_id,
                      dummy_secret,
                      with_token ? std::string_view(dummy_token) : std::string_view(),
                      with_token ? &real_with_token : &real_without_token,
                      regions,
                      services};
}

// ---- An independent SigV4 signer (OpenSSL HMAC directly), to check what resign() produced ----

inline std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  REQUIRE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
               reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
               &len) != nullptr);
  return std::string(reinterpret_cast<const char*>(out), len);
}

inline std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline std::string independent_signature(std::string_view secret_key,
                                         const sigv4::credential_scope& scope,
                                         std::string_view text) {
  std::string k = hmac("AWS4" + std::string(secret_key), scope.date);
  k = hmac(k, scope.region);
  k = hmac(k, scope.service);
  k = hmac(k, "aws4_request");
  return hex(hmac(k, text));
}

inline std::string pct(std::string_view text) {  // RFC 3986 unreserved kept, upper-case hex
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

inline std::string join(const std::vector<std::string>& names) {
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

inline const header_field* header(const aws_request& r, std::string_view name) {
  for (const auto& h : r.headers)
    if (broker::http::iequals(h.name, name)) return &h;
  return nullptr;
}

// What an SDK does with the credentials it holds: sign the request's canonical form with the
// sigv4 primitives and add the Authorization header.
inline void sdk_sign(aws_request& r, std::string_view key_id, std::string_view secret_key,
                     const sigv4::credential_scope& scope,
                     const std::vector<std::string>& signed_headers, std::string_view payload_hash,
                     std::string_view amz_date = request_date) {
  const sigv4::signing_key key(secret_key, scope);
  const std::string canonical = sigv4::canonical_request(
      r.method, r.target, r.headers, signed_headers, payload_hash, scope.service, false);
  r.headers.push_back(
      {"Authorization", "AWS4-HMAC-SHA256 Credential=" + std::string(key_id) + "/" + scope.text() +
                            ", SignedHeaders=" + join(signed_headers) + ", Signature=" +
                            key.sign(sigv4::string_to_sign(amz_date, scope, canonical))});
}

// An S3 GET signed with the dummy credentials, with the session token when `with_token`.
inline aws_request s3_get(bool with_token, std::string_view key_id = dummy_key_id,
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

// An STS query-API POST as botocore sends it: form body, no x-amz-content-sha256, the payload
// hash signed is the body's digest.
inline const std::string sts_form = "Action=GetCallerIdentity&Version=2011-06-15";
inline aws_request sts_post(bool with_token, const std::string& body = sts_form) {
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
  sdk_sign(r, dummy_key_id, dummy_secret, sts_scope, signed_headers,
           broker::base::sha256_hex(body));
  return r;
}

// The Authorization value a request signed with the REAL credentials must carry, computed
// independently from the request as it now is.
inline std::string expected_authorization(const aws_request& r,
                                          const sigv4::credential_scope& scope,
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
inline void check_no_dummy_left(const aws_request& r) {
  for (const std::string& dummy : {dummy_key_id, dummy_secret, dummy_token, pct(dummy_token)}) {
    CHECK(r.target.find(dummy) == std::string::npos);
    for (const auto& h : r.headers) {
      INFO("header " << h.name);
      CHECK(h.value.find(dummy) == std::string::npos);
    }
  }
}

inline bool same(const aws_request& a, const aws_request& b) {
  if (a.target != b.target || a.headers.size() != b.headers.size()) return false;
  for (std::size_t i = 0; i < a.headers.size(); ++i)
    if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value)
      return false;
  return true;
}

// One aws-sigv4 credential over the fake values (key id, secret and, when `with_token`, the
// session token), bound to *.amazonaws.com, with a regions allowlist when given.
inline aws_broker::init aws_init(const std::vector<std::string>& regions, bool with_token = true) {
  aws_broker::init init;
  init.spec.name = "aws";
  init.spec.type = "aws-sigv4";
  init.spec.hosts.push_back(*broker::config::host_pattern::parse("*.amazonaws.com"));
  init.spec.env = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};
  init.spec.source = "env:AWS_ACCESS_KEY_ID";
  init.spec.regions = regions;
  init.real.access_key_id = base::secret(std::string(real_key_id));
  init.real.secret_access_key = base::secret(std::string(real_secret));
  init.dummy_key_id = dummy_key_id;
  init.dummy_secret = dummy_secret;
  if (with_token) {
    init.real.session_token = base::secret(std::string(real_token));
    init.dummy_token = dummy_token;
  }
  return init;
}

inline credential_set aws_set(const std::vector<std::string>& regions = {}) {
  std::vector<std::unique_ptr<request_broker>> brokers;
  brokers.push_back(std::make_unique<aws_broker>(aws_init(regions)));
  return credential_set(std::move(brokers));
}

}  // namespace broker::brokers::aws_signing_test
