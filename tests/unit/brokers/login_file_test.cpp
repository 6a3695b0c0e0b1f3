#include "brokers/login_file.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "brokers/credential_set.hpp"
#include "brokers/dummy_key.hpp"
#include "tests/unit/temp_dir.hpp"

namespace base = broker::base;

using broker::brokers::credential_set;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::config::parse_policy;
using broker::http::header_field;
using broker::test::temp_dir;
using nlohmann::json;

namespace {

// A Claude-Code-shaped login: OAuth access and refresh tokens, refreshed at a token endpoint
// that returns new ones (JSON).
const std::string access_real = "sk-ant-oat01-REALaccess0123456789abcdefREALaccess";
const std::string refresh_real = "sk-ant-ort01-REALrefresh0123456789abcdefREALrefresh";

const char* claude_policy = R"({ "version": 1, "credentials": { "claude_login": {
  "type": "bearer", "hosts": ["api.anthropic.com", "platform.claude.com"],
  "file": "~/.claude/.credentials.json",
  "fields": ["claudeAiOauth.accessToken"],
  "refresh": { "url": "https://platform.claude.com/v1/oauth/token",
               "token": "claudeAiOauth.refreshToken",
               "response": { "access_token": "claudeAiOauth.accessToken",
                             "refresh_token": "claudeAiOauth.refreshToken" },
               "expires_at_ms": "claudeAiOauth.expiresAt" } } } })";

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct login_home {
  temp_dir dir;
  std::string old_home;
  std::filesystem::path file;
  explicit login_home(const std::string& content) {
    const char* h = std::getenv("HOME");
    old_home = h ? h : "";
    ::setenv("HOME", dir.path.c_str(), 1);
    std::filesystem::create_directories(dir.path / ".claude");
    file = dir.path / ".claude/.credentials.json";
    std::ofstream(file) << content;
    ::chmod(file.c_str(), 0600);
  }
  ~login_home() { ::setenv("HOME", old_home.c_str(), 1); }
};

std::string claude_file(const std::string& access, const std::string& refresh) {
  json j;
  j["claudeAiOauth"] = {{"accessToken", access},
                        {"refreshToken", refresh},
                        {"expiresAt", 1700000000000},
                        {"scopes", {"user:inference"}},
                        {"subscriptionType", "max"}};
  return j.dump();
}

credential_set load(const char* policy) {
  std::vector<broker::config::policy> layers{parse_policy(policy, "p.json")};
  return credential_set::load(layers, nullptr, {}, true);
}

json child_copy(const credential_set& set) {
  auto files = set.dummy_files();
  REQUIRE(files.size() == 1);
  return json::parse(files[0].content);
}

const request_context anthropic{"api.anthropic.com", false, false};
const request_context token_host{"platform.claude.com", false, false};
const request_context elsewhere{"collector.example", false, false};

// The response a token endpoint sends: new access and refresh tokens.
std::string token_response(const std::string& access, const std::string& refresh) {
  return json{{"token_type", "Bearer"},
              {"access_token", access},
              {"refresh_token", refresh},
              {"expires_in", 28800}}
      .dump();
}

}  // namespace

TEST_CASE("the child's copy of a login file holds same-shaped dummies at the same members",
          "[brokers][login_file]") {
  login_home home(claude_file(access_real, refresh_real));
  auto set = load(claude_policy);
  REQUIRE(set.size() == 1);
  auto files = set.dummy_files();
  REQUIRE(files.size() == 1);
  CHECK(files[0].target == (home.dir.path / ".claude/.credentials.json").string());
  CHECK(files[0].variable.empty());
  CHECK(files[0].content.find(access_real) == std::string::npos);
  CHECK(files[0].content.find(refresh_real) == std::string::npos);
  const json copy = json::parse(files[0].content);
  const auto& oauth = copy.at("claudeAiOauth");
  CHECK(oauth.at("subscriptionType") == "max");
  CHECK(oauth.at("expiresAt") == 1700000000000);
  const std::string access = oauth.at("accessToken"), refresh = oauth.at("refreshToken");
  CHECK(access.size() == access_real.size());
  CHECK(access.starts_with("sk-ant-oat01-"));
  CHECK(refresh.starts_with("sk-ant-ort01-"));
  CHECK(access != access_real);
}

TEST_CASE("a login file's access token dummy becomes real on its hosts and is a canary elsewhere",
          "[brokers][login_file]") {
  login_home home(claude_file(access_real, refresh_real));
  auto set = load(claude_policy);
  const std::string dummy = child_copy(set)["claudeAiOauth"]["accessToken"];
  std::string target = "/v1/messages";
  std::vector<header_field> headers{{"Authorization", "Bearer " + dummy}};
  auto plan = set.plan(anthropic, "POST", target, headers, true);
  CHECK_FALSE(plan.decision().refused());
  CHECK(headers[0].value == "Bearer " + access_real);

  std::vector<header_field> leak{{"Authorization", "Bearer " + dummy}};
  auto refused = set.plan(elsewhere, "POST", target, leak, true);
  CHECK(refused.decision().action == request_action::credential_not_bound);
  std::vector<header_field> real{{"x-note", access_real}};
  CHECK(set.plan(anthropic, "GET", target, real, false).decision().action ==
        request_action::real_secret_blocked);
}

TEST_CASE("the refresh token's dummy is never swapped in a header", "[brokers][login_file]") {
  login_home home(claude_file(access_real, refresh_real));
  auto set = load(claude_policy);
  const std::string dummy = child_copy(set)["claudeAiOauth"]["refreshToken"];
  std::string target = "/v1/messages";
  std::vector<header_field> headers{{"Authorization", "Bearer " + dummy}};
  auto plan = set.plan(anthropic, "POST", target, headers, true);
  CHECK(headers[0].value == "Bearer " + dummy);
}

TEST_CASE(
    "an OAuth refresh swaps the refresh token, hands out fresh dummies and writes the "
    "rotated login back",
    "[brokers][login_file]") {
  login_home home(claude_file(access_real, refresh_real));
  auto set = load(claude_policy);
  const json copy = child_copy(set);
  const std::string refresh_dummy = copy["claudeAiOauth"]["refreshToken"];

  std::string target = "/v1/oauth/token";
  std::vector<header_field> headers{{"Content-Type", "application/json"}};
  auto plan = set.plan(token_host, "POST", target, headers, true);
  REQUIRE_FALSE(plan.decision().refused());
  REQUIRE(plan.whole_body());
  std::string body = json{{"grant_type", "refresh_token"},
                          {"refresh_token", refresh_dummy},
                          {"client_id", "9d1c250a-e61b-44d9-88ed-5944d1962f5e"}}
                         .dump();
  const auto sent_size = body.size();
  CHECK_FALSE(plan.complete("POST", target, headers, body).refused());
  CHECK(body.size() == sent_size);
  CHECK(json::parse(body)["refresh_token"] == refresh_real);

  const std::string new_access = "sk-ant-oat01-NEWaccess0123456789abcdefNEWaccess00";
  const std::string new_refresh = "sk-ant-ort01-NEWrefresh0123456789abcdefNEWrefresh00";
  REQUIRE(plan.response_whole_body(200) > 0);
  CHECK(plan.response_whole_body(400) == 0);
  std::string response = token_response(new_access, new_refresh);
  plan.rewrite_response(200, response);
  CHECK(response.find(new_access) == std::string::npos);
  CHECK(response.find(new_refresh) == std::string::npos);
  const json answer = json::parse(response);
  const std::string access_dummy2 = answer["access_token"];
  const std::string refresh_dummy2 = answer["refresh_token"];
  CHECK(answer["expires_in"] == 28800);
  CHECK(access_dummy2.size() == new_access.size());

  // The real file holds the rotated login, its other members kept.
  const json real = json::parse(read(home.file));
  CHECK(real["claudeAiOauth"]["accessToken"] == new_access);
  CHECK(real["claudeAiOauth"]["refreshToken"] == new_refresh);
  CHECK(real["claudeAiOauth"]["subscriptionType"] == "max");
  CHECK(real["claudeAiOauth"]["expiresAt"].get<std::int64_t>() > 1700000000000);
  struct stat st {};
  REQUIRE(::stat(home.file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  // The new dummy becomes the new real value; the new real values are refused as sent.
  std::string t = "/v1/messages";
  std::vector<header_field> next{{"Authorization", "Bearer " + access_dummy2}};
  CHECK_FALSE(set.plan(anthropic, "POST", t, next, true).decision().refused());
  CHECK(next[0].value == "Bearer " + new_access);
  std::vector<header_field> leak{{"Authorization", "Bearer " + access_dummy2}};
  CHECK(set.plan(elsewhere, "POST", t, leak, true).decision().action ==
        request_action::credential_not_bound);
  std::vector<header_field> real_sent{{"x-note", new_refresh}};
  CHECK(set.plan(anthropic, "GET", t, real_sent, false).decision().action ==
        request_action::real_secret_blocked);
  // Responses echoing the new real values show their dummies.
  bool scrubbed = false;
  for (const auto& p : set.response_patterns())
    scrubbed = scrubbed || (p.find == new_access && p.replacement == access_dummy2);
  CHECK(scrubbed);

  // A second refresh redeems the newest real refresh token, whichever dummy the child sends.
  std::string t2 = "/v1/oauth/token";
  std::vector<header_field> h2;
  auto plan2 = set.plan(token_host, "POST", t2, h2, true);
  std::string form = "grant_type=refresh_token&refresh_token=" + refresh_dummy2;
  CHECK_FALSE(plan2.complete("POST", t2, h2, form).refused());
  CHECK(form == "grant_type=refresh_token&refresh_token=" + new_refresh);
}

TEST_CASE("a login file refreshed elsewhere is not overwritten, and its newer tokens are used",
          "[brokers][login_file]") {
  login_home home(claude_file(access_real, refresh_real));
  auto set = load(claude_policy);
  const std::string refresh_dummy = child_copy(set)["claudeAiOauth"]["refreshToken"];
  // Another session rotated the login after this one read it.
  const std::string other_refresh = "sk-ant-ort01-OTHERrefresh0123456789abcdefOTHERrefr";
  std::ofstream(home.file) << claude_file("sk-ant-oat01-OTHERaccess0123456789abcdefOTHERacc",
                                          other_refresh);
  std::string target = "/v1/oauth/token";
  std::vector<header_field> headers;
  auto plan = set.plan(token_host, "POST", target, headers, true);
  std::string body = R"({"refresh_token":")" + refresh_dummy + R"("})";
  plan.complete("POST", target, headers, body);
  CHECK(body == R"({"refresh_token":")" + other_refresh + R"("})");

  // Meanwhile a third party rotates again before this response lands: the file is kept.
  const std::string third = claude_file("sk-ant-oat01-THIRDaccess0123456789abcdefTHIRDacc",
                                        "sk-ant-ort01-THIRDrefresh0123456789abcdefTHIRDrefr");
  std::ofstream(home.file) << third;
  std::string response = token_response("sk-ant-oat01-NEWaccess0123456789abcdefNEWaccess00",
                                        "sk-ant-ort01-NEWrefresh0123456789abcdefNEWrefresh00");
  plan.rewrite_response(200, response);
  CHECK(read(home.file) == third);
}

TEST_CASE("login files are skipped unless asked for, and a missing one is no error",
          "[brokers][login_file]") {
  login_home home(claude_file(access_real, refresh_real));
  std::vector<broker::config::policy> layers{parse_policy(claude_policy, "p.json")};
  std::vector<std::string> skipped;
  CHECK(credential_set::load(layers, &skipped).empty());
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].find("netns") != std::string::npos);
  std::filesystem::remove(home.file);
  skipped.clear();
  CHECK(credential_set::load(layers, &skipped, {}, true).empty());
  CHECK(skipped.size() == 1);
}

TEST_CASE("a login file that is not JSON is an error naming the file, never its bytes",
          "[brokers][login_file]") {
  login_home home("{\"claudeAiOauth\": {\"accessToken\": \"" + access_real + "\"");
  try {
    load(claude_policy);
    FAIL("expected a source_error");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    CHECK(what.find(".credentials.json") != std::string::npos);
    CHECK(what.find(access_real) == std::string::npos);
  }
}

TEST_CASE("gh's hosts.yml is a dummy copy with only its tokens changed", "[brokers][login_file]") {
  temp_dir dir;
  const char* h = std::getenv("HOME");
  const std::string old_home = h ? h : "";
  ::setenv("HOME", dir.path.c_str(), 1);
  std::filesystem::create_directories(dir.path / ".config/gh");
  const std::string token = "gho_REALgithubOAuth0123456789abcdefABCD";
  const std::string yaml =
      "github.com:\n    users:\n        octo:\n            oauth_token: " + token +
      "\n    git_protocol: https\n    oauth_token: \"" + token + "\"\n    user: octo\n";
  std::ofstream(dir.path / ".config/gh/hosts.yml") << yaml;
  auto set = load(R"({ "credentials": { "gh_login": { "type": "github",
    "hosts": ["github.com", "api.github.com"], "file": "~/.config/gh/hosts.yml",
    "fields": ["oauth_token"] } } })");
  ::setenv("HOME", old_home.c_str(), 1);
  REQUIRE(set.size() == 1);
  const std::string copy = set.dummy_files().at(0).content;
  CHECK(copy.size() == yaml.size());
  CHECK(copy.find(token) == std::string::npos);
  CHECK(copy.find("git_protocol: https\n    oauth_token: \"gho_") != std::string::npos);
  const std::size_t at = copy.find("oauth_token: gho_") + 13;
  const std::string dummy = copy.substr(at, token.size());
  std::string target = "/user";
  std::vector<header_field> headers{{"Authorization", "token " + dummy}};
  CHECK_FALSE(set.plan({"api.github.com", false, false}, "GET", target, headers, false)
                  .decision()
                  .refused());
  CHECK(headers[0].value == "token " + token);
}

TEST_CASE(
    "with the user's stable dummies, a login file's API key keeps its dummy across "
    "sessions and its OAuth tokens do not",
    "[brokers][login_file][dummy_key]") {
  const std::string key_real = "sk-proj-REALcodexApiKey0123456789abcdefREALkey";
  const std::string access =
      "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.REALaccessSignature0123456789";
  const std::string refresh = "rt_REALrefresh0123456789abcdefREALrefresh";
  temp_dir dir;
  const char* h = std::getenv("HOME");
  const std::string old_home = h ? h : "";
  ::setenv("HOME", dir.path.c_str(), 1);
  std::filesystem::create_directories(dir.path / ".codex");
  std::ofstream(dir.path / ".codex/auth.json")
      << json{{"OPENAI_API_KEY", key_real},
              {"tokens", {{"access_token", access}, {"refresh_token", refresh}}}}
             .dump();
  const char* codex_policy = R"({ "version": 1, "credentials": { "codex_login": {
    "type": "bearer", "hosts": ["api.openai.com", "auth.openai.com"],
    "file": "~/.codex/auth.json", "fields": ["OPENAI_API_KEY", "tokens.access_token"],
    "refresh": { "url": "https://auth.openai.com/oauth/token", "token": "tokens.refresh_token",
                 "response": { "access_token": "tokens.access_token",
                               "refresh_token": "tokens.refresh_token" } } } } })";
  const auto stable = std::make_shared<const broker::brokers::stable_dummies>(
      broker::base::secret(std::string(32, 'k')));
  const auto session = [&] {
    std::vector<broker::config::policy> layers{parse_policy(codex_policy, "p.json")};
    return child_copy(credential_set::load(layers, nullptr, {}, true, stable));
  };
  const json one = session(), two = session();
  ::setenv("HOME", old_home.c_str(), 1);
  CHECK(one["OPENAI_API_KEY"] == two["OPENAI_API_KEY"]);
  CHECK(one["OPENAI_API_KEY"] != key_real);
  CHECK(one["OPENAI_API_KEY"].get<std::string>().starts_with("sk-proj-"));
  CHECK(one["tokens"]["access_token"] != two["tokens"]["access_token"]);
  CHECK(one["tokens"]["refresh_token"] != two["tokens"]["refresh_token"]);
}
