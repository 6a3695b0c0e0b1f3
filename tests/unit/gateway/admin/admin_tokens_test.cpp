#include "gateway/admin/admin_tokens.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

using namespace broker::gateway;
using broker::base::secret;

TEST_CASE("admin tokens: made, known by their holder, listed without the token, revoked",
          "[admin_tokens]") {
  admin_tokens tokens(nullptr);
  auto ana = tokens.create("ana@team");
  auto bo = tokens.create("bo");
  auto ana2 = tokens.create("ana@team");
  CHECK(ana.token.expose().starts_with("bka_"));
  CHECK(ana.token.size() == 4 + 43);
  CHECK(ana.token.expose() != ana2.token.expose());
  CHECK(ana.info.id.starts_with("a-"));
  CHECK(ana.info.id != ana2.info.id);

  const auto who = tokens.holder(secret(std::string(bo.token.expose())));
  REQUIRE(who);
  CHECK(who->name == "bo");
  CHECK(who->id == bo.info.id);
  CHECK_FALSE(tokens.holder(secret("bka_" + std::string(43, 'A'))));
  CHECK_FALSE(tokens.holder(secret(std::string(bo.token.expose().substr(0, 20)))));

  const auto listed = tokens.list();
  REQUIRE(listed.size() == 3);
  for (const auto& t : listed) {
    const auto text = to_json(t).dump();
    for (const auto* made : {&ana, &bo, &ana2})
      CHECK(text.find(std::string(made->token.expose())) == std::string::npos);
  }

  // By id: that token alone; by name: every token of the operator.
  CHECK(tokens.revoke(bo.info.id).size() == 1);
  CHECK_FALSE(tokens.holder(secret(std::string(bo.token.expose()))));
  CHECK(tokens.holder(secret(std::string(ana.token.expose()))));
  CHECK(tokens.revoke("ana@team").size() == 2);
  CHECK_FALSE(tokens.holder(secret(std::string(ana2.token.expose()))));
  CHECK(tokens.list().empty());
  CHECK(tokens.revoke("nobody").empty());
}

TEST_CASE("admin tokens: revoke takes an id before a name", "[admin_tokens]") {
  admin_tokens tokens(nullptr);
  auto x = tokens.create("x");
  auto named_like_x = tokens.create(x.info.id);  // an operator named like x's id
  const auto gone = tokens.revoke(x.info.id);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].id == x.info.id);
  CHECK(tokens.holder(secret(std::string(named_like_x.token.expose()))));
  CHECK(tokens.revoke(x.info.id).size() == 1);  // now the name
  CHECK(tokens.list().empty());
}

TEST_CASE("admin tokens: a name is a short plain word", "[admin_tokens]") {
  admin_tokens tokens(nullptr);
  CHECK_THROWS_AS(tokens.create(""), std::invalid_argument);
  CHECK_THROWS_AS(tokens.create("ana bo"), std::invalid_argument);
  CHECK_THROWS_AS(tokens.create("x\n{\"id\":1}"), std::invalid_argument);
  CHECK_THROWS_AS(tokens.create(std::string(65, 'a')), std::invalid_argument);
  CHECK_NOTHROW(tokens.create(std::string(64, 'a')));
}

TEST_CASE("admin tokens: Authorization: Bearer TOKEN", "[admin_tokens]") {
  auto t = parse_bearer("Bearer bka_abc");
  REQUIRE(t);
  CHECK(t->expose() == "bka_abc");
  t = parse_bearer("  bearer   bka_abc  ");
  REQUIRE(t);
  CHECK(t->expose() == "bka_abc");
  CHECK_FALSE(parse_bearer("Basic YTpi"));
  CHECK_FALSE(parse_bearer("Bearer"));
  CHECK_FALSE(parse_bearer("Bearer "));
  CHECK_FALSE(parse_bearer("Bearerbka_abc"));
  CHECK_FALSE(parse_bearer(""));
}
