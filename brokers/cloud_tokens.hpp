// OAuth 2.0 access tokens for the GCP and Azure families: a Google service-account key turned
// into a JWT bearer assertion (RFC 7523 §2.1) and the token endpoint's answer read back
// (RFC 6749 §5.1, §5.2), or the output of a token command (gcloud auth print-access-token,
// az account get-access-token). Pure functions over text; the HTTP exchange is the caller's.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/secret.hpp"
#include "brokers/secret_source.hpp"

namespace broker::brokers {

struct access_token {
  base::secret token;
  std::chrono::system_clock::time_point expires;  // when the issuer says it stops working
};

// A Google service-account key file: {"type": "service_account", "client_email": ...,
// "private_key": PEM, "private_key_id": ..., "token_uri": ...}.
struct service_account {
  std::string client_email;
  std::string private_key_id;  // may be empty: the assertion then carries no "kid"
  std::string token_uri;       // "https://oauth2.googleapis.com/token" when the file has none
  base::secret private_key_pem;
};

inline constexpr std::string_view google_token_uri = "https://oauth2.googleapis.com/token";

// Throws source_error naming the missing or mistyped field (never a value) when `json` is not a
// service-account key.
service_account parse_service_account(std::string_view json);

// The signed assertion "header.claims.signature" (base64url, no padding), RS256 with the
// account's key: header {"alg":"RS256","typ":"JWT","kid":private_key_id}, claims {"iss":
// client_email, "scope": scope, "aud": token_uri, "iat": now, "exp": now + 1 h}. It is good
// for an hour's worth of tokens: treat it like a secret (wipe it once sent). Throws source_error
// when the key is not an unencrypted RSA private key in PEM.
std::string jwt_bearer_assertion(const service_account& account, std::string_view scope,
                                 std::chrono::system_clock::time_point now);

// The token request's application/x-www-form-urlencoded body for `assertion`.
std::string jwt_bearer_form(std::string_view assertion);

// Google's STS token exchange (RFC 8693) that downscopes `subject_token` with a Credential Access
// Boundary (`boundary`: {"accessBoundary": ...} as JSON): the form to POST to google_sts_uri. It
// holds the token: wipe it once sent.
inline constexpr std::string_view google_sts_uri = "https://sts.googleapis.com/v1/token";
std::string downscope_form(std::string_view subject_token, std::string_view boundary);

// A token endpoint's JSON answer: {"access_token": ..., "expires_in": 3599, ...}; expires =
// now + expires_in (3600 s when absent). Throws source_error when access_token is missing or
// the answer is an OAuth error (the message then carries "error" and "error_description", which
// are not secrets).
access_token parse_oauth_token_response(std::string_view json,
                                        std::chrono::system_clock::time_point now);

// What a token command printed, one of
//  - az account get-access-token JSON: "accessToken", expiry from "expires_on" (epoch seconds,
//    number or string) or else "expiresOn" ("2026-11-30 01:23:45.000000", LOCAL time);
//  - token-endpoint JSON as above ("access_token", "expires_in");
//  - a bare token on one line (gcloud auth print-access-token).
// Without an expiry in the output, expires = now + default_lifetime. Throws source_error for
// anything else, never quoting the output.
access_token parse_token_command_output(
    std::string_view text, std::chrono::system_clock::time_point now,
    std::chrono::seconds default_lifetime = std::chrono::seconds(3000));

}  // namespace broker::brokers
