#include <catch2/catch.hpp>

#include "base/text.hpp"
#include "gateway/session_record.hpp"

namespace base = broker::base;

using namespace broker::gateway;
using broker::base::secret;

TEST_CASE("a Basic proxy credential gives the session id and token", "[gateway]") {
  const auto value = "Basic " + broker::base::base64_encode("g-0a1b2c3d4e5f:tok-en_123");
  auto c = parse_proxy_authorization(value);
  REQUIRE(c);
  CHECK(c->id == "g-0a1b2c3d4e5f");
  CHECK(c->token.expose() == "tok-en_123");
  // The scheme is case-insensitive; surrounding blanks are not part of the credential.
  CHECK(parse_proxy_authorization("  bAsIc   " + broker::base::base64_encode("a:b") + " "));
}

TEST_CASE("anything but a Basic credential with an id and a token is none", "[gateway]") {
  using broker::base::base64_encode;
  for (const std::string& bad :
       {std::string(""), std::string("Basic"), std::string("Basic "),
        "Bearer " + base::base64_encode("a:b"), std::string("Basic !!!notbase64"),
        "Basic " + base::base64_encode("no-colon"), "Basic " + base::base64_encode(":token"),
        "Basic " + base::base64_encode("id:"), "Basicx " + base::base64_encode("a:b")})
    CHECK_FALSE(parse_proxy_authorization(bad));
}

TEST_CASE("a record keeps only its token's hash and matches that token alone", "[gateway]") {
  session_record r;
  r.id = new_gateway_session_id();
  const base::secret token = new_proxy_token();
  r.token_sha256 = token_sha256(token);
  CHECK(r.id.size() == 14);
  CHECK(r.id.starts_with("g-"));
  CHECK(token.size() == 43);
  CHECK(token_matches(r, token));
  CHECK_FALSE(token_matches(r, base::secret(std::string(token.expose()) + "x")));
  CHECK_FALSE(token_matches(r, new_proxy_token()));
  CHECK(r.token_sha256.find(token.expose()) == std::string::npos);
  CHECK(new_dummy_seed() != new_dummy_seed());
  CHECK(new_dummy_seed().size() == 64);
}

TEST_CASE("a record survives JSON, and a broken one is named", "[gateway]") {
  session_record r;
  r.id = "g-000000000001";
  r.token_sha256 = std::string(64, 'a');
  r.created_ms = 1700000000000;
  r.expires_ms = 1700000360000;
  r.user = "alice";
  r.labels = {{"team", "infra"}, {"ci", "yes"}};
  r.policies = {{"narrow.json", R"({"version":1})"}};
  r.dummy_seed = std::string(64, 'b');
  r.revoked = true;
  const auto back = record_from_json(nlohmann::json::parse(to_json(r).dump()));
  CHECK(back.id == r.id);
  CHECK(back.token_sha256 == r.token_sha256);
  CHECK(back.expires_ms == r.expires_ms);
  CHECK(back.labels.size() == 2);
  CHECK(back.policies.at(0).text == r.policies[0].text);
  CHECK(back.revoked);
  const auto view = public_view(r, r.created_ms);
  CHECK(view["state"] == "revoked");
  CHECK_FALSE(view.contains("token_sha256"));
  CHECK_FALSE(view.contains("dummy_seed"));

  auto broken = nlohmann::json::parse(to_json(r).dump());
  broken.erase("dummy_seed");
  CHECK_THROWS_WITH(record_from_json(broken), Catch::Contains("dummy_seed"));
  broken = nlohmann::json::parse(to_json(r).dump());
  broken["revoked"] = "yes";
  CHECK_THROWS_WITH(record_from_json(broken), Catch::Contains("revoked"));
}
