// github-app: the App's JWT, the installation token minted with it, its swap, records and
// revocation (docs/policy.md, "Minted credentials"). GitHub is a fake transport here;
// tests/integration/test_minted.py runs the whole against a fake API.
#include "brokers/github_app.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "brokers/credential_set.hpp"
#include "brokers/minted_records.hpp"
#include "config/policy.hpp"
#include "tests/unit/brokers/rsa_test_support.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace broker::brokers;
using namespace broker::test::rsa;
using broker::http::header_field;
namespace fs = std::filesystem;

namespace {

const std::string minted_token = "ghs_MINTEDmintedMINTEDminted0123456789ab";

// A fake GitHub: what it was asked, and its answers.
struct fake_github {
  std::mutex mutex;
  std::vector<provider_request> seen;
  int mint_status = 201;
  int revoke_status = 204;

  provider_transport transport() {
    return [this](const provider_request& r) {
      std::lock_guard lock(mutex);
      seen.push_back(r);
      if (r.method != "POST") return provider_answer{revoke_status, ""};
      if (mint_status != 201)
        return provider_answer{mint_status, R"({"message":"Bad credentials"})"};
      return provider_answer{
          201,
          nlohmann::json{{"token", minted_token}, {"expires_at", "2099-01-01T00:00:00Z"}}.dump()};
    };
  }
  std::vector<provider_request> with(const std::string& method) {
    std::lock_guard lock(mutex);
    std::vector<provider_request> out;
    for (const auto& r : seen)
      if (r.method == method) out.push_back(r);
    return out;
  }
};

std::string header_of(const provider_request& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

broker::config::credential_spec app_spec() {
  const std::string text = R"({"credentials": {"gh": {"type": "github-app", "app_id": 1234,
      "installation_id": "5678", "private_key": "env:GITHUB_APP_TEST_KEY",
      "repositories": ["web"], "permissions": {"contents": "write", "pull_requests": "write"},
      "hosts": ["api.github.com"]}}})";
  return broker::config::parse_policy(text, "p.json").credentials.at("gh");
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<fs::path> records_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  return out;
}

// The App's private key in the variable its spec names, for the test's duration.
struct app_key {
  app_key() { setenv("GITHUB_APP_TEST_KEY", to_pem(rsa_key()).c_str(), 1); }
  ~app_key() { unsetenv("GITHUB_APP_TEST_KEY"); }
};

const request_context api{"api.github.com", false, false};

}  // namespace

TEST_CASE("github-app: the App's JWT is RS256 with the App as issuer", "[brokers][github-app]") {
  fake_github github;
  const github_app_client client(*app_spec().github_app, broker::base::secret(to_pem(rsa_key())),
                                 github.transport());
  const auto now = std::chrono::system_clock::now();
  const std::string jwt = client.app_jwt(now);
  const auto parts = split_dots(jwt);
  REQUIRE(parts.size() == 3);
  const auto header = nlohmann::json::parse(*base64url_decode(parts[0]));
  const auto claims = nlohmann::json::parse(*base64url_decode(parts[1]));
  CHECK(header["alg"] == "RS256");
  CHECK(claims["iss"] == 1234);
  const auto at = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
  CHECK(claims["iat"] == at - 60);
  CHECK(claims["exp"] == at + 540);
  CHECK(verify_rs256(rsa_key(), parts[0] + "." + parts[1], *base64url_decode(parts[2])));
}

TEST_CASE("github-app: a mint asks for the repositories and permissions", "[brokers][github-app]") {
  fake_github github;
  const github_app_client client(*app_spec().github_app, broker::base::secret(to_pem(rsa_key())),
                                 github.transport());
  const auto m = client.mint();
  CHECK(m.token.expose() == minted_token);
  const auto posts = github.with("POST");
  REQUIRE(posts.size() == 1);
  CHECK(posts[0].url == "https://api.github.com/app/installations/5678/access_tokens");
  const std::string auth = header_of(posts[0], "Authorization");
  REQUIRE(auth.starts_with("Bearer "));
  const auto parts = split_dots(auth.substr(7));
  CHECK(verify_rs256(rsa_key(), parts[0] + "." + parts[1], *base64url_decode(parts[2])));
  CHECK(
      nlohmann::json::parse(posts[0].body) ==
      nlohmann::json::parse(
          R"({"repositories": ["web"], "permissions": {"contents": "write", "pull_requests": "write"}})"));
  CHECK(header_of(posts[0], "User-Agent") == "broker");

  CHECK(client.revoke(m.token));
  const auto deletes = github.with("DELETE");
  REQUIRE(deletes.size() == 1);
  CHECK(deletes[0].url == "https://api.github.com/installation/token");
  CHECK(header_of(deletes[0], "Authorization") == "token " + minted_token);

  github.mint_status = 401;
  try {
    client.mint();
    FAIL("a refused mint must throw");
  } catch (const mint_error& e) {
    CHECK(e.status() == 401);
    CHECK(std::string(e.what()).find("Bad credentials") != std::string::npos);
  }
}

TEST_CASE("github-app: the session's dummy becomes the minted token; the end revokes it",
          "[brokers][github-app]") {
  const app_key key;
  broker::test::temp_dir records;
  fake_github github;
  std::string why;
  std::vector<std::unique_ptr<request_broker>> list;
  list.push_back(make_github_app_broker(app_spec(), {}, github.transport(), records.path, why));
  REQUIRE(list.back());
  {
    const credential_set set(std::move(list));
    const auto env = set.dummy_environment();
    REQUIRE(env.size() == 2);  // GITHUB_TOKEN and GH_TOKEN by default
    const std::string dummy = env[0].second;
    CHECK(dummy.starts_with("ghs_"));
    CHECK(dummy.size() == minted_token.size());
    CHECK(github.with("POST").empty());  // minted at first use only
    CHECK(set.minted().empty());

    std::vector<header_field> headers{{"Authorization", "token " + dummy}};
    std::string target = "/repos/org/web";
    auto plan = set.plan(api, "GET", target, headers, false);
    REQUIRE_FALSE(plan.decision().refused());
    CHECK(plan.holds_real());
    std::string body;
    CHECK(plan.complete("GET", target, headers, body).action == request_action::pass);
    CHECK(headers[0].value == "token " + minted_token);
    CHECK(github.with("POST").size() == 1);
    REQUIRE(set.minted().size() == 1);
    CHECK(set.minted()[0].credential == "gh");
    // A response echoing the token shows the dummy.
    bool scrubbed = false;
    for (const auto& p : plan.response_patterns()) scrubbed = scrubbed || p.find == minted_token;
    CHECK(scrubbed);
    // The child cannot send the real token itself.
    std::vector<header_field> real{{"Authorization", "token " + minted_token}};
    target = "/repos/org/web";
    CHECK(set.plan(api, "GET", target, real, false).decision().action ==
          request_action::real_secret_blocked);
    // One record, sealed: the token's bytes are not in it.
    const auto files = records_in(records.path);
    REQUIRE(files.size() == 1);
    CHECK(file_text(files[0]).find(minted_token) == std::string::npos);
    CHECK(file_text(files[0]).find("MINTED") == std::string::npos);
  }
  const auto deletes = github.with("DELETE");
  REQUIRE(deletes.size() == 1);
  CHECK(header_of(deletes[0], "Authorization") == "token " + minted_token);
  CHECK(records_in(records.path).empty());
}

TEST_CASE("github-app: a mint that fails is 502, never the App's key", "[brokers][github-app]") {
  const app_key key;
  broker::test::temp_dir records;
  fake_github github;
  github.mint_status = 401;
  std::string why;
  std::vector<std::unique_ptr<request_broker>> list;
  list.push_back(make_github_app_broker(app_spec(), {}, github.transport(), records.path, why));
  const credential_set set(std::move(list));
  const std::string dummy = set.dummy_environment()[0].second;
  std::vector<header_field> headers{{"Authorization", "Bearer " + dummy}};
  std::string target = "/user";
  auto plan = set.plan(api, "GET", target, headers, false);
  std::string body;
  const auto d = plan.complete("GET", target, headers, body);
  CHECK(d.action == request_action::credential_unavailable);
  CHECK(d.where.find("GitHub answered 401") != std::string::npos);
  CHECK(headers[0].value == "Bearer " + dummy);
  // Not asked again at once.
  headers = {{"Authorization", "Bearer " + dummy}};
  plan = set.plan(api, "GET", target, headers, false);
  CHECK(plan.complete("GET", target, headers, body).action ==
        request_action::credential_unavailable);
  CHECK(github.with("POST").size() == 1);
}

TEST_CASE("minted records: a dead session's are revoked, a live one's are not",
          "[brokers][github-app]") {
  broker::test::temp_dir dir;
  const broker::base::secret signing(std::string("signing key bytes, at least a few"));
  const auto seal = minted_seal_key(signing, "issuer A");
  const auto later = std::chrono::system_clock::now() + std::chrono::hours(1);
  const broker::base::secret token(std::string("ghs_recordedRECORDEDrecorded0123456789"));
  std::vector<std::string> revoked;
  auto revoke = [&](const broker::base::secret& t) {
    revoked.emplace_back(t.expose());
    return true;
  };
  auto live = minted_record::write(dir.path, "issuer A", seal, token, later);
  CHECK(revoke_left_records(dir.path, "issuer A", seal, revoke) == 0);  // its process holds it
  CHECK(revoked.empty());
  live.reset();  // the process dies: the file stays, unlocked
  REQUIRE(records_in(dir.path).size() == 1);
  CHECK(revoke_left_records(dir.path, "issuer B", seal, revoke) == 0);  // another App's
  CHECK(revoke_left_records(dir.path, "issuer A", minted_seal_key(signing, "issuer B"), revoke) ==
        0);  // sealed under another key: left alone
  CHECK(revoke_left_records(dir.path, "issuer A", seal, revoke) == 1);
  CHECK(revoked == std::vector<std::string>{std::string(token.expose())});
  CHECK(records_in(dir.path).empty());
  // An expired one is only removed.
  minted_record::write(dir.path, "issuer A", seal, token,
                       std::chrono::system_clock::now() - std::chrono::seconds(1));
  CHECK(revoke_left_records(dir.path, "issuer A", seal, revoke) == 0);
  CHECK(records_in(dir.path).empty());
}
