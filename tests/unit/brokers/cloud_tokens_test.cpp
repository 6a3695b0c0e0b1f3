#include "brokers/cloud_tokens.hpp"

#include <stdlib.h>
#include <time.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <nlohmann/json.hpp>

#include "tests/unit/brokers/rsa_test_support.hpp"
#include "tests/unit/brokers/source_error_of.hpp"

using broker::brokers::access_token;
using broker::brokers::jwt_bearer_assertion;
using broker::brokers::jwt_bearer_form;
using broker::brokers::parse_oauth_token_response;
using broker::brokers::parse_service_account;
using broker::brokers::parse_token_command_output;
using broker::brokers::service_account;
using broker::brokers::source_error;
using broker::test::source_error_of;
using namespace std::chrono_literals;
using namespace broker::test::rsa;

namespace {
// Sets TZ for one test (and tzset()s) and restores it afterwards.
struct scoped_tz {
  std::optional<std::string> old;
  explicit scoped_tz(const char* zone) {
    if (const char* v = ::getenv("TZ")) old = v;
    ::setenv("TZ", zone, 1);
    ::tzset();
  }
  ~scoped_tz() {
    if (old)
      ::setenv("TZ", old->c_str(), 1);
    else
      ::unsetenv("TZ");
    ::tzset();
  }
};

const auto now = std::chrono::sys_days(std::chrono::year(2026) / 11 / 30) + 1h;

constexpr std::string_view token_value = "ya29.TOKENVALUEdistinct-abc_123";

std::string account_json(const std::string& pem, const std::string& key_id = "kid-0123",
                         std::optional<std::string> token_uri = std::nullopt) {
  nlohmann::json doc = {{"type", "service_account"},
                        {"project_id", "demo-project"},
                        {"private_key_id", key_id},
                        {"private_key", pem},
                        {"client_email", "robot@demo-project.iam.gserviceaccount.com"},
                        {"client_id", "1234567890"}};
  if (token_uri) doc["token_uri"] = *token_uri;
  return doc.dump(2);
}

}  // namespace

TEST_CASE("service account: a key file parses", "[brokers][cloud]") {
  const std::string pem = to_pem(rsa_key());
  service_account account = parse_service_account(account_json(pem));
  CHECK(account.client_email == "robot@demo-project.iam.gserviceaccount.com");
  CHECK(account.private_key_id == "kid-0123");
  CHECK(account.token_uri == "https://oauth2.googleapis.com/token");
  CHECK(account.private_key_pem.expose() == pem);

  account = parse_service_account(account_json(pem, "", "https://oauth2.example.test/token"));
  CHECK(account.private_key_id.empty());
  CHECK(account.token_uri == "https://oauth2.example.test/token");
}

TEST_CASE("service account: errors name the field, never the key", "[brokers][cloud]") {
  const std::string pem = to_pem(rsa_key());
  const std::string pem_body = pem.substr(40, 40);  // a piece of the key that must not leak
  auto error = [](const nlohmann::json& doc) {
    return source_error_of([&] { return parse_service_account(doc.dump()); });
  };
  nlohmann::json doc = nlohmann::json::parse(account_json(pem));

  auto without = [&](const char* field) {
    nlohmann::json copy = doc;
    copy.erase(field);
    return error(copy);
  };
  CHECK(without("client_email") == "service account key: \"client_email\" is missing");
  CHECK(without("private_key") == "service account key: \"private_key\" is missing");
  CHECK(without("type") == "service account key: \"type\" is missing");

  nlohmann::json user = doc;
  user["type"] = "authorized_user";
  CHECK(error(user) == "service account key: \"type\" is not \"service_account\"");

  nlohmann::json mistyped = doc;
  mistyped["client_email"] = 42;
  std::string mistyped_error = error(mistyped);
  CHECK(mistyped_error == "service account key: \"client_email\" is not a string");
  CHECK(mistyped_error.find(pem_body) == std::string::npos);

  std::string truncated = source_error_of([&] {
    std::string text = account_json(pem);
    return parse_service_account(text.substr(0, text.size() / 2));
  });
  CHECK(truncated.find("service account key: not valid JSON") != std::string::npos);
  CHECK(truncated.find(pem_body) == std::string::npos);
}

TEST_CASE("JWT bearer assertion: header, claims and a signature that verifies",
          "[brokers][cloud]") {
  service_account account = parse_service_account(account_json(to_pem(rsa_key())));
  const std::string scope = "https://www.googleapis.com/auth/cloud-platform";
  const auto issued = now + 500ms;  // fractions of a second are dropped
  const std::string jwt = jwt_bearer_assertion(account, scope, issued);

  CHECK(jwt.find_first_of("+/= \n") == std::string::npos);  // base64url, unpadded
  const auto parts = split_dots(jwt);
  REQUIRE(parts.size() == 3);

  auto header_text = base64url_decode(parts[0]);
  REQUIRE(header_text);
  const auto header = nlohmann::json::parse(*header_text);
  CHECK(header == nlohmann::json{{"alg", "RS256"}, {"typ", "JWT"}, {"kid", "kid-0123"}});

  auto claims_text = base64url_decode(parts[1]);
  REQUIRE(claims_text);
  const auto claims = nlohmann::json::parse(*claims_text);
  const long long iat =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  CHECK(claims == nlohmann::json{{"iss", "robot@demo-project.iam.gserviceaccount.com"},
                                 {"scope", scope},
                                 {"aud", "https://oauth2.googleapis.com/token"},
                                 {"iat", iat},
                                 {"exp", iat + 3600}});

  auto signature = base64url_decode(parts[2]);
  REQUIRE(signature);
  CHECK(signature->size() == 256);  // RSA-2048
  const std::string signing_input = parts[0] + "." + parts[1];
  CHECK(verify_rs256(rsa_key(), signing_input, *signature));

  // The signature covers the claims: those of another scope do not verify with it.
  const auto other_claims = split_dots(jwt_bearer_assertion(account, "other-scope", issued))[1];
  CHECK(other_claims != parts[1]);
  CHECK_FALSE(verify_rs256(rsa_key(), parts[0] + "." + other_claims, *signature));
  // A different key does not verify it either.
  pkey_ptr stranger(EVP_RSA_gen(2048));
  REQUIRE(stranger);
  CHECK_FALSE(verify_rs256(stranger.get(), signing_input, *signature));
}

TEST_CASE("JWT bearer assertion: no kid without a private_key_id", "[brokers][cloud]") {
  service_account account = parse_service_account(account_json(to_pem(rsa_key()), ""));
  const auto parts = split_dots(jwt_bearer_assertion(account, "scope-a scope-b", now));
  REQUIRE(parts.size() == 3);
  const auto header = nlohmann::json::parse(*base64url_decode(parts[0]));
  CHECK(header == nlohmann::json{{"alg", "RS256"}, {"typ", "JWT"}});
  const auto claims = nlohmann::json::parse(*base64url_decode(parts[1]));
  CHECK(claims["scope"] == "scope-a scope-b");
  CHECK(verify_rs256(rsa_key(), parts[0] + "." + parts[1], *base64url_decode(parts[2])));
}

TEST_CASE("JWT bearer assertion: an unusable key is a source_error", "[brokers][cloud]") {
  auto error_with = [](const std::string& pem) {
    service_account account = parse_service_account(account_json(pem));
    return source_error_of([&] { return jwt_bearer_assertion(account, "scope", now); });
  };
  const std::string garbage =
      "-----BEGIN PRIVATE KEY-----\nTm90QUtleVNFQ1JFVGRpc3RpbmN0\n-----END PRIVATE KEY-----\n";
  std::string bad = error_with(garbage);
  CHECK(bad.find("service account robot@demo-project.iam.gserviceaccount.com") !=
        std::string::npos);
  CHECK(bad.find("not an unencrypted PEM private key") != std::string::npos);
  CHECK(bad.find("Tm90QUtleVNFQ1JFVGRpc3RpbmN0") == std::string::npos);
  CHECK(error_with("not a pem at all").find("not an unencrypted PEM") != std::string::npos);

  // Encrypted keys are refused, not prompted for.
  CHECK(error_with(to_pem(rsa_key(), "passphrase")).find("not an unencrypted PEM") !=
        std::string::npos);

  // RS256 needs RSA.
  pkey_ptr ec(EVP_EC_gen("P-256"));
  REQUIRE(ec);
  CHECK(error_with(to_pem(ec.get())).find("not an RSA key") != std::string::npos);
}

TEST_CASE("jwt_bearer_form is the RFC 7523 token request body", "[brokers][cloud]") {
  CHECK(jwt_bearer_form("aGVhZA.Y2xhaW1z.c2ln-_") ==
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
        "&assertion=aGVhZA.Y2xhaW1z.c2ln-_");
  CHECK(jwt_bearer_form("a+b/c=") ==
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a%2Bb%2Fc%3D");
}

TEST_CASE("token response: access_token and expires_in", "[brokers][cloud]") {
  access_token token =
      parse_oauth_token_response(R"({"access_token": ")" + std::string(token_value) +
                                     R"(", "expires_in": 3599, "token_type": "Bearer"})",
                                 now);
  CHECK(token.token.expose() == token_value);
  CHECK(token.expires == now + 3599s);

  token = parse_oauth_token_response(R"({"access_token": "t", "expires_in": "120"})", now);
  CHECK(token.expires == now + 120s);
  token = parse_oauth_token_response(R"({"access_token": "t", "expires_in": 59.9})", now);
  CHECK(token.expires == now + 59s);

  // expires_in is optional (RFC 6749 §5.1): an hour.
  token = parse_oauth_token_response(R"({"access_token": "t", "token_type": "Bearer"})", now);
  CHECK(token.expires == now + 3600s);
}

TEST_CASE("token response: OAuth errors and malformed answers", "[brokers][cloud]") {
  auto error = [](const std::string& json) {
    return source_error_of([&] { return parse_oauth_token_response(json, now); });
  };
  CHECK(error(R"({"error": "invalid_grant", "error_description": "Invalid JWT Signature."})") ==
        "token response: the issuer refused: invalid_grant (Invalid JWT Signature.)");
  CHECK(error(R"({"error": "invalid_scope"})") ==
        "token response: the issuer refused: invalid_scope");
  CHECK(error(R"({"error": "x\u0001y"})") == "token response: the issuer refused: x?y");

  const std::string value(token_value);
  CHECK(error(R"({"token_type": "Bearer"})") == "token response: \"access_token\" is missing");
  CHECK(error(R"({"access_token": ""})") == "token response: \"access_token\" is missing");
  std::string bad_expiry = error(R"({"access_token": ")" + value + R"(", "expires_in": -5})");
  CHECK(bad_expiry == "token response: \"expires_in\" is not a number of seconds");
  CHECK(error(R"({"access_token": "t", "expires_in": "soon"})").find("expires_in") !=
        std::string::npos);
  CHECK(error(R"({"access_token": "t", "expires_in": 1e12})").find("expires_in") !=
        std::string::npos);

  std::string truncated = error(R"({"access_token": ")" + value);
  CHECK(truncated.find("token response: not valid JSON") != std::string::npos);
  CHECK(truncated.find(value) == std::string::npos);
  CHECK(error("<html>502</html>").find("not valid JSON") != std::string::npos);
}

TEST_CASE("token command: az output with expires_on", "[brokers][cloud]") {
  const std::string value(token_value);
  const auto expires_on = std::chrono::sys_days(std::chrono::year(2026) / 11 / 30) + 2h;
  const long long epoch =
      std::chrono::duration_cast<std::chrono::seconds>(expires_on.time_since_epoch()).count();
  // expiresOn is local time and deliberately inconsistent here: expires_on wins.
  const std::string base = R"({"accessToken": ")" + value +
                           R"(", "expiresOn": "2030-01-01 00:00:00.000000", )"
                           R"("subscription": "0000", "tenant": "1111", "tokenType": "Bearer", )";

  access_token token =
      parse_token_command_output(base + "\"expires_on\": " + std::to_string(epoch) + "}\n", now);
  CHECK(token.token.expose() == value);
  CHECK(token.expires == expires_on);

  token =
      parse_token_command_output(base + "\"expires_on\": \"" + std::to_string(epoch) + "\"}", now);
  CHECK(token.expires == expires_on);

  std::string bad = source_error_of(
      [&] { return parse_token_command_output(base + "\"expires_on\": \"tomorrow\"}", now); });
  CHECK(bad == "token command output: \"expires_on\" is not a time in epoch seconds");
}

TEST_CASE("token command: az output with only expiresOn is local time", "[brokers][cloud]") {
  scoped_tz zone("EST5");  // UTC-5, no daylight saving
  access_token token = parse_token_command_output(
      R"({"accessToken": "t", "expiresOn": "2026-11-30 01:23:45.000000", "tokenType": "Bearer"})",
      now);
  CHECK(token.expires ==
        std::chrono::sys_days(std::chrono::year(2026) / 11 / 30) + 6h + 23min + 45s);

  token = parse_token_command_output(R"({"accessToken": "t", "expiresOn": "2026-11-30 01:23:45"})",
                                     now);
  CHECK(token.expires ==
        std::chrono::sys_days(std::chrono::year(2026) / 11 / 30) + 6h + 23min + 45s);

  CHECK(source_error_of([] {
          return parse_token_command_output(
              R"({"accessToken": "t", "expiresOn": "2026-11-30T01:23:45Z"})", now);
        }) == "token command output: \"expiresOn\" is not a local date-time");

  CHECK(source_error_of([] {
          return parse_token_command_output(
              R"({"accessToken": "t", "expiresOn": "2026-02-30 01:23:45.000000"})", now);
        }).find("expiresOn") != std::string::npos);

  // Neither: the default lifetime.
  token = parse_token_command_output(R"({"accessToken": "t"})", now, 600s);
  CHECK(token.expires == now + 600s);
}

TEST_CASE("token command: OAuth-style JSON", "[brokers][cloud]") {
  access_token token =
      parse_token_command_output(R"({"access_token": "t1", "expires_in": 100})", now);
  CHECK(token.token.expose() == "t1");
  CHECK(token.expires == now + 100s);
  token = parse_token_command_output(R"({"access_token": "t2"})", now);
  CHECK(token.expires == now + 3000s);  // the command default, not the OAuth one

  CHECK(source_error_of([] {
          return parse_token_command_output(R"({"error": "login_required"})", now);
        }) == "token command output: the issuer refused: login_required");
  CHECK(source_error_of([] { return parse_token_command_output(R"({"token": "t"})", now); }) ==
        "token command output: no \"accessToken\" or \"access_token\"");
}

TEST_CASE("token command: a bare token line", "[brokers][cloud]") {
  const std::string value(token_value);
  access_token token = parse_token_command_output(value + "\n", now);
  CHECK(token.token.expose() == value);
  CHECK(token.expires == now + 3000s);
  token = parse_token_command_output("  " + value + "\r\n\n", now, 60s);
  CHECK(token.token.expose() == value);
  CHECK(token.expires == now + 60s);

  std::string two_lines = source_error_of(
      [&] { return parse_token_command_output("WARNING: x\n" + value + "\n", now); });
  CHECK(two_lines == "token command output: neither JSON nor a single token on one line");
  CHECK(source_error_of([&] { return parse_token_command_output(value + " extra", now); }) ==
        two_lines);
  CHECK(source_error_of([] { return parse_token_command_output(" \n", now); }) ==
        "token command output: empty");
}
