#include "brokers/token_broker.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "brokers/credential_set.hpp"
#include "config/host_pattern.hpp"

namespace base = broker::base;

using broker::base::secret;
using broker::brokers::access_token;
using broker::brokers::credential_set;
using broker::brokers::issued_token;
using broker::brokers::request_action;
using broker::brokers::request_context;
using broker::brokers::scrub_pattern;
using broker::brokers::source_error;
using broker::brokers::token_broker;
using broker::http::header_field;
using std::chrono::system_clock;
using namespace std::chrono_literals;

namespace {

// Fake Google access tokens ("ya29." and ~100 more characters of the usual alphabet).
std::string fake_token(std::size_t length, unsigned seed) {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string t = "ya29.a0AfB_";
  for (std::size_t i = 0; t.size() < length; ++i)
    t.push_back(alphabet[(i * 7 + seed * 13 + i * i) % alphabet.size()]);
  return t;
}
const std::string real_token = fake_token(110, 1);
const std::string rotated_token = fake_token(150, 2);  // a different length on purpose

broker::config::credential_spec token_spec(std::string type, std::vector<std::string> env = {}) {
  broker::config::credential_spec spec;
  spec.name = type == "gcp" ? "gcloud" : "az";
  spec.type = std::move(type);
  spec.hosts.push_back(*broker::config::host_pattern::parse("*.googleapis.com"));
  spec.hosts.push_back(*broker::config::host_pattern::parse("management.azure.com"));
  spec.env = env.empty()
                 ? (spec.type == "gcp" ? std::vector<std::string>{"GOOGLE_APPLICATION_CREDENTIALS"}
                                       : std::vector<std::string>{"AZURE_ACCESS_TOKEN"})
                 : std::move(env);
  spec.source = spec.type == "gcp" ? "file:/nonexistent/key.json"
                                   : "cmd:az account get-access-token --output json";
  return spec;
}

// A fetcher that always answers `token`, valid for an hour from each call; counts its calls.
token_broker::fetcher fixed_fetcher(std::string token, std::atomic<int>* calls = nullptr,
                                    system_clock::duration lifetime = 1h) {
  return [token = std::move(token), calls, lifetime]() {
    if (calls) ++*calls;
    return access_token{base::secret(std::string(token)), system_clock::now() + lifetime};
  };
}

std::unique_ptr<token_broker> make_token(const std::string& type,
                                         std::vector<std::string> env = {}) {
  return std::make_unique<token_broker>(token_spec(type, std::move(env)),
                                        broker::brokers::request_broker::layer_bindings{},
                                        fixed_fetcher(real_token));
}

credential_set token_set(const std::string& type, std::vector<std::string> env = {}) {
  std::vector<std::unique_ptr<broker::brokers::request_broker>> tokens;
  tokens.push_back(make_token(type, std::move(env)));
  return credential_set(std::move(tokens));
}

// A POST of `form` to `host` through the set's plan: the broker's own answer, if it gives one.
// `whole` says whether the plan asked for the body whole (it is read only then).
std::optional<broker::brokers::local_answer> token_answer(const credential_set& set,
                                                          std::string_view host,
                                                          const std::string& method,
                                                          const std::string& form,
                                                          bool* whole = nullptr) {
  std::string target = "/token";
  std::vector<header_field> headers{{"Host", std::string(host)},
                                    {"Content-Type", "application/x-www-form-urlencoded"}};
  auto plan = set.plan({host, false, false}, method, target, headers, true);
  REQUIRE_FALSE(plan.decision().refused());
  if (whole) *whole = plan.whole_body().has_value();
  if (!plan.whole_body()) return std::nullopt;
  CHECK(plan.whole_body()->limit == broker::brokers::max_token_request);
  std::string body = form;
  REQUIRE_FALSE(plan.complete(method, target, headers, body).refused());
  if (plan.answer()) CHECK(plan.credential() == plan.answer()->credential);
  return plan.answer();
}

request_context to(std::string_view host, bool plaintext = false) {
  return request_context{host, plaintext, false};
}

struct request {
  std::string target = "/storage/v1/b?project=p";
  std::vector<header_field> headers{{"Host", "storage.googleapis.com"}, {"Accept", "*/*"}};
};

const scrub_pattern* pattern_for(const std::vector<scrub_pattern>& patterns,
                                 std::string_view real) {
  for (const auto& p : patterns)
    if (p.find == real) return &p;
  return nullptr;
}

std::string pct(std::string_view text) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~')
      out.push_back(static_cast<char>(c));
    else
      out += {'%', digits[c >> 4], digits[c & 15]};
  }
  return out;
}

}  // namespace

// ---- token_broker -------------------------------------------------------------------------

TEST_CASE("token credential: the first token is fetched and a dummy shaped like it made",
          "[brokers][token_broker]") {
  REQUIRE(real_token.size() == 110);
  std::atomic<int> calls{0};
  const auto before = system_clock::now();
  token_broker t(token_spec("gcp"), {}, fixed_fetcher(real_token, &calls));
  const auto after = system_clock::now();

  CHECK(calls == 1);
  CHECK(t.spec().name == "gcloud");
  CHECK(t.current()->token.expose() == real_token);
  CHECK(t.current()->expires >= before + 1h);
  CHECK(t.current()->expires <= after + 1h);
  CHECK(t.mask(real_token.size()) == t.dummy());  // same length: the mask is the dummy itself

  CHECK(t.dummy().size() == real_token.size());
  CHECK(t.dummy().starts_with("ya29."));
  CHECK(t.dummy() != real_token);
  // The real token's alphabet (base64url), drawn anew at every position.
  CHECK(t.dummy().find_first_not_of(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", 5) ==
        std::string::npos);

  auto live = t.live(system_clock::now());
  REQUIRE(live.size() == 1);
  CHECK(live[0] == t.current());

  // Two credentials of the same token get different dummies (per session, random).
  token_broker other(token_spec("gcp"), {}, fixed_fetcher(real_token));
  CHECK(other.dummy() != t.dummy());
}

TEST_CASE("token credential: a fetcher that fails at the start is the constructor's error",
          "[brokers][token_broker]") {
  auto failing = []() -> access_token { throw source_error("cmd:false: no token"); };
  CHECK_THROWS_AS(token_broker(token_spec("azure"), {}, failing), source_error);
}

TEST_CASE("token credential: refresh_time is 5 minutes before expiry, not before half-life",
          "[brokers][token_broker]") {
  const system_clock::time_point t0 = system_clock::now();
  auto at = [&](system_clock::duration life) {
    return broker::brokers::refresh_time(t0, t0 + life);
  };
  CHECK(at(1h) == t0 + 55min);
  CHECK(at(24h) == t0 + 24h - 5min);
  CHECK(at(10min) == t0 + 5min);  // both rules agree
  CHECK(at(8min) == t0 + 4min);   // half-life wins over 3 min
  CHECK(at(6min) == t0 + 3min);
  CHECK(at(2s) == t0 + 1s);
  CHECK(at(0s) == t0);
}

TEST_CASE("token credential: the gcp key file is an authorized_user key of the dummy client",
          "[brokers][token_broker]") {
  token_broker t(token_spec("gcp"), {}, fixed_fetcher(real_token));
  const auto& client = t.gcp_client();
  // Google's shape: a project number, '-', 32 of [a-z0-9].
  CHECK_THAT(client.client_id,
             Catch::Matches("[0-9]{12}-[a-z0-9]{32}\\.apps\\.googleusercontent\\.com"));
  CHECK_FALSE(client.client_secret.empty());
  CHECK(client.refresh_token.substr(1, 2) == "//");  // Google's "1//0g..." shape

  const std::string text = t.gcp_key_file();
  CHECK(text.find(real_token) == std::string::npos);
  const auto key = nlohmann::json::parse(text);
  CHECK(key.at("type") == "authorized_user");
  CHECK(key.at("client_id") == client.client_id);
  CHECK(key.at("client_secret") == client.client_secret);
  CHECK(key.at("refresh_token") == client.refresh_token);
  CHECK(key.at("token_uri") == "https://oauth2.googleapis.com/token");

  // Another session's client is another client.
  token_broker other(token_spec("gcp"), {}, fixed_fetcher(real_token));
  CHECK(other.gcp_client().client_id != client.client_id);
  CHECK(other.gcp_client().refresh_token != client.refresh_token);
}

TEST_CASE("token credential: the gcp token answer carries the dummy", "[brokers][token_broker]") {
  auto spec = token_spec("gcp");
  token_broker t(spec, {}, fixed_fetcher(real_token));
  const auto answer = nlohmann::json::parse(t.gcp_token_answer());
  CHECK(answer.at("access_token") == t.dummy());
  CHECK(answer.at("token_type") == "Bearer");
  CHECK(answer.at("scope") == "https://www.googleapis.com/auth/cloud-platform");
  const auto expires_in = answer.at("expires_in").get<long long>();
  CHECK(expires_in > 3500);
  CHECK(expires_in <= 3600);
  CHECK(t.gcp_token_answer().find(real_token) == std::string::npos);

  spec.scopes = {"https://www.googleapis.com/auth/devstorage.read_only",
                 "https://www.googleapis.com/auth/userinfo.email"};
  token_broker scoped(spec, {}, fixed_fetcher(real_token));
  CHECK(nlohmann::json::parse(scoped.gcp_token_answer()).at("scope") ==
        "https://www.googleapis.com/auth/devstorage.read_only "
        "https://www.googleapis.com/auth/userinfo.email");
}

TEST_CASE("token credential: azure has a dummy token and no OAuth client",
          "[brokers][token_broker]") {
  token_broker t(token_spec("azure"), {}, fixed_fetcher(real_token));
  CHECK(t.dummy().size() == real_token.size());
  CHECK(t.dummy() != real_token);
  CHECK(t.gcp_client().client_id.empty());
  CHECK(t.gcp_client().refresh_token.empty());
}

// ---- in a credential set ----------------------------------------------------------------------

TEST_CASE("token credential set: a bound bearer dummy becomes the real token",
          "[brokers][token_broker]") {
  for (std::string type : {"gcp", "azure"}) {
    INFO(type);
    const credential_set set = token_set(type);
    CHECK_FALSE(set.empty());
    CHECK(set.size() == 1);  // one broker per credential, whatever its family
    CHECK(set.names() == std::vector<std::string>{type == "gcp" ? "gcloud" : "az"});
    const auto vars = set.dummy_variables();
    REQUIRE_FALSE(vars.empty());
    const std::string dummy = vars.front().value;
    REQUIRE(dummy.size() == real_token.size());

    request r;
    r.headers.push_back({"Authorization", "Bearer " + dummy});
    auto d = set.apply(to("storage.googleapis.com"), r.target, r.headers);
    CHECK(d.action == request_action::pass);
    CHECK(d.swapped == 1);
    CHECK(d.credential == (type == "gcp" ? "gcloud" : "az"));
    CHECK(d.where == "header authorization");
    CHECK(r.headers[2].value == "Bearer " + real_token);
    CHECK(r.headers[0].value == "storage.googleapis.com");

    // Another scheme, or the dummy elsewhere on a bound host, is not swapped.
    request other;
    other.headers.push_back({"Authorization", "Basic " + dummy});
    other.headers.push_back({"X-Goog-Token", dummy});
    auto kept = set.apply(to("management.azure.com"), other.target, other.headers);
    CHECK(kept.action == request_action::pass);
    CHECK(kept.swapped == 0);
    CHECK(other.headers[2].value == "Basic " + dummy);
    CHECK(other.headers[3].value == dummy);
  }
}

TEST_CASE("token credential set: dummies to unbound hosts and real tokens anywhere are refused",
          "[brokers][token_broker]") {
  const credential_set set = token_set("gcp");
  const std::string dummy = set.dummy_variables().front().value;
  SECTION("the dummy to an unbound host") {
    request r;
    r.headers.push_back({"Authorization", "Bearer " + dummy});
    const request before = r;
    auto d = set.apply(to("evil.example"), r.target, r.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.credential == "gcloud");
    CHECK(d.where == "header authorization");
    CHECK(r.headers[2].value == before.headers[2].value);
  }
  SECTION("the dummy refresh token to an unbound host") {
    // The set's own client: read it back from its key file.
    const auto files = set.dummy_files();
    REQUIRE(files.size() == 1);
    const std::string refresh = nlohmann::json::parse(files[0].content).at("refresh_token");
    request r;
    r.target = "/token?refresh_token=" + pct(refresh);
    auto d = set.apply(to("evil.example"), r.target, r.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(d.where == "query");
  }
  SECTION("the dummy in plaintext to a bound host") {
    request r;
    r.headers.push_back({"Authorization", "Bearer " + dummy});
    auto d = set.apply(to("storage.googleapis.com", true), r.target, r.headers);
    CHECK(d.action == request_action::credential_not_bound);
    CHECK(r.headers[2].value == "Bearer " + dummy);
  }
  SECTION("the real token in a header, even to a bound host") {
    request r;
    r.headers.push_back({"Authorization", "Bearer " + dummy});
    r.headers.push_back({"X-Debug", "token=" + real_token});
    const request before = r;
    auto d = set.apply(to("storage.googleapis.com"), r.target, r.headers);
    CHECK(d.action == request_action::real_secret_blocked);
    CHECK(d.credential == "gcloud");
    CHECK(d.where == "header x-debug");
    CHECK(r.headers[2].value == before.headers[2].value);  // nothing swapped
  }
  SECTION("the real token in the query") {
    request r;
    r.target = "/x?access_token=" + real_token;
    auto d = set.apply(to("evil.example"), r.target, r.headers);
    CHECK(d.action == request_action::real_secret_blocked);
    CHECK(d.where == "query");
  }
  SECTION("request bodies") {
    const auto bound = set.request_body_scan(to("storage.googleapis.com"));
    CHECK(pattern_for(bound.patterns(), real_token));
    CHECK_FALSE(pattern_for(bound.patterns(), dummy));
    const auto unbound = set.request_body_scan(to("evil.example"));
    REQUIRE(pattern_for(unbound.patterns(), dummy));
    const std::size_t at = pattern_for(unbound.patterns(), dummy) - unbound.patterns().data();
    CHECK(unbound.decision(at).action == request_action::credential_not_bound);
    CHECK(unbound.decision(at).credential == "gcloud");
  }
}

TEST_CASE("token credential set: responses mask the real token with one of its length",
          "[brokers][token_broker]") {
  const credential_set set = token_set("azure");
  const auto patterns = set.response_patterns();
  const scrub_pattern* p = pattern_for(patterns, real_token);
  REQUIRE(p);
  CHECK(p->replacement.size() == real_token.size());
  CHECK(p->replacement == set.dummy_variables().front().value);
  CHECK(p->replacement != real_token);
}

TEST_CASE("token credential set: the gcp child's token request is answered with the dummy",
          "[brokers][token_broker]") {
  const credential_set set = token_set("gcp");
  const auto files = set.dummy_files();
  REQUIRE(files.size() == 1);
  const auto key = nlohmann::json::parse(files[0].content);
  const std::string refresh = key.at("refresh_token");
  const std::string dummy = set.dummy_variables().front().value;
  const std::string form =
      "grant_type=refresh_token&client_id=" + pct(key.at("client_id").get<std::string>()) +
      "&client_secret=" + pct(key.at("client_secret").get<std::string>()) +
      "&refresh_token=" + pct(refresh);
  REQUIRE(form.find("%2F") != std::string::npos);  // the "1//" is sent encoded

  bool whole = false;
  auto answer = token_answer(set, "oauth2.googleapis.com", "POST", form, &whole);
  CHECK(whole);
  REQUIRE(answer);
  CHECK(answer->credential == "gcloud");
  const auto json = nlohmann::json::parse(answer->json);
  CHECK(json.at("access_token") == dummy);
  CHECK(json.at("expires_in").get<long long>() > 0);
  CHECK(answer->json.find(real_token) == std::string::npos);

  // The parameter may come first.
  CHECK(token_answer(set, "oauth2.googleapis.com", "POST",
                     "refresh_token=" + pct(refresh) + "&grant_type=refresh_token"));

  std::string wrong = refresh;
  wrong.back() = wrong.back() == 'A' ? 'B' : 'A';
  CHECK_FALSE(token_answer(set, "oauth2.googleapis.com", "POST",
                           "grant_type=refresh_token&refresh_token=" + pct(wrong)));
  CHECK_FALSE(token_answer(set, "oauth2.googleapis.com", "POST", "grant_type=refresh_token"));
  // Elsewhere, or not a POST: the body is not even read whole.
  for (const auto& [host, method] :
       {std::pair{"oauth2.evil.example", "POST"}, std::pair{"storage.googleapis.com", "POST"},
        std::pair{"oauth2.googleapis.com", "GET"}}) {
    INFO(host << " " << method);
    CHECK_FALSE(token_answer(set, host, method, form, &whole));
    CHECK_FALSE(whole);
  }

  // An azure-only set answers nothing.
  const credential_set azure = token_set("azure");
  CHECK_FALSE(token_answer(azure, "oauth2.googleapis.com", "POST", form, &whole));
  CHECK_FALSE(whole);
}

TEST_CASE("token credential set: the child's variables and files", "[brokers][token_broker]") {
  SECTION("gcp: a token variable for gcloud and a key file for the libraries") {
    const credential_set set = token_set("gcp");
    const auto vars = set.dummy_variables();
    REQUIRE(vars.size() == 1);
    CHECK(vars[0].name == "CLOUDSDK_AUTH_ACCESS_TOKEN");
    CHECK(vars[0].credential == "gcloud");
    CHECK(vars[0].value.size() == real_token.size());
    CHECK(vars[0].value != real_token);
    CHECK(vars[0].value.starts_with("ya29."));

    const auto files = set.dummy_files();
    REQUIRE(files.size() == 1);
    CHECK(files[0].variable == "GOOGLE_APPLICATION_CREDENTIALS");
    CHECK(files[0].credential == "gcloud");
    CHECK(files[0].file_name == "gcp-gcloud.json");
    const auto key = nlohmann::json::parse(files[0].content);
    CHECK(key.at("type") == "authorized_user");
    CHECK(key.at("token_uri") == "https://oauth2.googleapis.com/token");
    CHECK(files[0].content.find(real_token) == std::string::npos);
  }
  SECTION("azure: each env name holds the dummy, no files") {
    const credential_set set = token_set("azure", {"AZURE_ACCESS_TOKEN", "ARM_ACCESS_TOKEN"});
    const auto vars = set.dummy_variables();
    REQUIRE(vars.size() == 2);
    CHECK(vars[0].name == "AZURE_ACCESS_TOKEN");
    CHECK(vars[1].name == "ARM_ACCESS_TOKEN");
    CHECK(vars[0].value == vars[1].value);
    CHECK(vars[0].value.size() == real_token.size());
    CHECK(vars[0].value != real_token);
    CHECK(vars[0].credential == "az");
    CHECK(set.dummy_files().empty());
    const auto env = set.dummy_environment();
    REQUIRE(env.size() == 2);
    CHECK(env[0] == std::pair<std::string, std::string>{"AZURE_ACCESS_TOKEN", vars[0].value});
  }
}

// A gcp credential with an access boundary (it mints), whose fetcher is `fetch`, in a set.
struct minting_set {
  const token_broker* broker;
  credential_set set;
};
minting_set minting(token_broker::fetcher fetch) {
  auto spec = token_spec("gcp");
  spec.access_boundary = R"({"accessBoundaryRules":[]})";
  auto owned = std::make_unique<token_broker>(
      std::move(spec), broker::brokers::request_broker::layer_bindings{}, std::move(fetch));
  const token_broker* broker = owned.get();
  std::vector<std::unique_ptr<broker::brokers::request_broker>> tokens;
  tokens.push_back(std::move(owned));
  return {broker, credential_set(std::move(tokens))};
}

// The plan of a GET carrying `dummy` as a bearer token to `host`.
broker::brokers::request_decision bearer_plan(const credential_set& set, std::string_view host,
                                              const std::string& dummy, request& r) {
  r.headers.push_back({"Authorization", "Bearer " + dummy});
  return set.plan(to(host), "GET", r.target, r.headers, false).decision();
}

TEST_CASE("token credential: a downscoped token that could not be minted is 502 where bound",
          "[brokers][token_broker]") {
  std::atomic<int> calls{0};
  auto m = minting([&calls]() -> access_token {
    ++calls;
    throw broker::brokers::mint_error(403, "the token exchange failed: access_denied");
  });
  CHECK(calls == 1);  // made anyway, and not fetched again
  CHECK(m.broker->current() == nullptr);
  CHECK(m.broker->mints() == "downscoped Google access token");
  CHECK_FALSE(m.broker->minted_until());
  CHECK(m.set.minted().empty());
  // Its dummy has the family's shape.
  const std::string dummy = m.broker->dummy();
  CHECK(dummy.starts_with("ya29."));

  request bound;
  auto d = bearer_plan(m.set, "storage.googleapis.com", dummy, bound);
  CHECK(d.action == request_action::credential_unavailable);
  CHECK(d.credential == "gcloud");
  CHECK(d.where.find("access_denied") != std::string::npos);
  CHECK(d.where.find("403") != std::string::npos);
  CHECK(bound.headers.back().value == "Bearer " + dummy);  // nothing swapped in
  // Elsewhere its dummy is still a canary; requests without it pass.
  request unbound;
  CHECK(bearer_plan(m.set, "example.com", dummy, unbound).action ==
        request_action::credential_not_bound);
  request plain;
  CHECK(m.set.plan(to("storage.googleapis.com"), "GET", plain.target, plain.headers, false)
            .decision()
            .action == request_action::pass);
  // The child's own token request is still answered with the dummy.
  const std::string form =
      "grant_type=refresh_token&refresh_token=" + pct(m.broker->gcp_client().refresh_token);
  auto answer = token_answer(m.set, "oauth2.googleapis.com", "POST", form);
  REQUIRE(answer);
  CHECK(answer->json.find(dummy) != std::string::npos);
}

TEST_CASE("token credential: a downscoped token expired and not renewed is 502, never sent",
          "[brokers][token_broker]") {
  // The first token has already expired, so the refresher asks at once, and fails.
  std::atomic<int> calls{0};
  auto m = minting([&calls]() -> access_token {
    if (++calls == 1)
      return access_token{base::secret(std::string(real_token)), system_clock::now() - 1s};
    throw broker::brokers::mint_error(0, "Google's STS could not be reached: refused");
  });
  REQUIRE(m.broker->current() != nullptr);
  REQUIRE(m.broker->minted_until());
  CHECK(*m.broker->minted_until() < system_clock::now());
  CHECK(m.set.minted_until("gcloud") == m.broker->minted_until());
  CHECK_FALSE(m.set.minted_until("other"));

  request r;
  auto d = bearer_plan(m.set, "storage.googleapis.com", m.broker->dummy(), r);
  CHECK(d.action == request_action::credential_unavailable);
  CHECK(d.where.find("expired") != std::string::npos);
  for (const auto& h : r.headers) CHECK(h.value.find(real_token) == std::string::npos);
}

TEST_CASE("token credential: a downscoped token that holds is swapped in and its expiry told",
          "[brokers][token_broker]") {
  auto m = minting(fixed_fetcher(real_token));
  request r;
  auto d = bearer_plan(m.set, "storage.googleapis.com", m.broker->dummy(), r);
  CHECK(d.action == request_action::pass);
  CHECK(r.headers.back().value == "Bearer " + real_token);
  const auto minted = m.set.minted();
  REQUIRE(minted.size() == 1);
  CHECK(minted[0].credential == "gcloud");
  CHECK(minted[0].what == "downscoped Google access token");
  CHECK(minted[0].expires > system_clock::now() + 50min);
  // A credential that does not mint has no expiry to tell.
  CHECK_FALSE(token_set("gcp").minted_until("gcloud"));
}

TEST_CASE("token credential set: a rotated token is swapped in, the old one still blocked",
          "[brokers][token_broker][slow]") {
  REQUIRE(rotated_token.size() != real_token.size());
  std::atomic<int> calls{0};
  // The first token expires in 4 s, so the refresher fetches the next one after 2 s (half-life).
  auto fetch = [&calls]() {
    const int n = ++calls;
    if (n == 1)
      return access_token{base::secret(std::string(real_token)), system_clock::now() + 4s};
    return access_token{base::secret(std::string(rotated_token)), system_clock::now() + 1h};
  };
  std::vector<std::unique_ptr<broker::brokers::request_broker>> tokens;
  auto owned = std::make_unique<token_broker>(
      token_spec("gcp"), broker::brokers::request_broker::layer_bindings{}, fetch);
  const token_broker& t = *owned;
  tokens.push_back(std::move(owned));
  const credential_set set(std::move(tokens));
  const std::string dummy = t.dummy();
  CHECK(t.current()->token.expose() == real_token);

  const auto deadline = std::chrono::steady_clock::now() + 6s;
  while (t.current()->token.expose() != rotated_token &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  REQUIRE(t.current()->token.expose() == rotated_token);
  const auto rotated_at = system_clock::now();
  CHECK(calls == 2);
  CHECK(t.dummy() == dummy);  // the child keeps its one dummy

  // The dummy now becomes the new token.
  request r;
  r.headers.push_back({"Authorization", "Bearer " + dummy});
  auto d = set.apply(to("storage.googleapis.com"), r.target, r.headers);
  CHECK(d.action == request_action::pass);
  CHECK(d.swapped == 1);
  CHECK(r.headers[2].value == "Bearer " + rotated_token);

  // Both are live until the old one expires; responses mask each with its own length.
  const auto patterns = set.response_patterns();
  const scrub_pattern* fresh = pattern_for(patterns, rotated_token);
  const scrub_pattern* old = pattern_for(patterns, real_token);
  REQUIRE(fresh);
  REQUIRE(old);
  CHECK(fresh->replacement.size() == rotated_token.size());
  CHECK(fresh->replacement.starts_with(dummy));  // the dummy, repeated to the length
  CHECK(old->replacement.size() == real_token.size());

  // The old token is still refused while it has not expired (it expires 2 s after rotation).
  request leak;
  leak.headers.push_back({"Authorization", "Bearer " + real_token});
  auto blocked = set.apply(to("storage.googleapis.com"), leak.target, leak.headers);
  CHECK(blocked.action == request_action::real_secret_blocked);
  CHECK(leak.headers[2].value == "Bearer " + real_token);
  CHECK(system_clock::now() < rotated_at + 1500ms);  // the checks above ran in the window
  request leak_new;
  leak_new.headers.push_back({"X-Echo", rotated_token});
  CHECK(set.apply(to("storage.googleapis.com"), leak_new.target, leak_new.headers).action ==
        request_action::real_secret_blocked);

  // Once the old one has expired only the newest is live.
  const auto later = t.live(system_clock::now() + 10s);
  REQUIRE(later.size() == 1);
  CHECK(later[0]->token.expose() == rotated_token);
  CHECK(t.live(system_clock::now()).size() == 2);
}
