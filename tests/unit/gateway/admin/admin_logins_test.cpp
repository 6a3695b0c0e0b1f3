#include "gateway/admin/admin_logins.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <string>

using namespace broker::gateway;
using broker::base::secret;

TEST_CASE("admin logins: a login is its own secret, lives with its admin token, ends at sign-out",
          "[admin_logins]") {
  auto tokens = std::make_shared<admin_tokens>(nullptr);
  admin_logins logins(nullptr, tokens);
  auto ana = tokens->create("ana");
  const auto cookie = logins.open(ana.info);
  CHECK(cookie.expose().starts_with("bkl_"));
  CHECK(cookie.size() == 4 + 43);
  CHECK(cookie.expose() != ana.token.expose());

  auto found = logins.find(secret(std::string(cookie.expose())));
  REQUIRE(found);
  CHECK(found->holder.name == "ana");
  CHECK(found->holder.id == ana.info.id);
  CHECK(found->csrf.size() == 43);
  // The admin token is not a login, nor is a login of another.
  CHECK_FALSE(logins.find(secret(std::string(ana.token.expose()))));
  const auto second = logins.open(ana.info);
  CHECK(logins.find(secret(std::string(second.expose())))->csrf != found->csrf);

  logins.close(secret(std::string(cookie.expose())));
  CHECK_FALSE(logins.find(secret(std::string(cookie.expose()))));
  CHECK(logins.find(secret(std::string(second.expose()))));
  tokens->revoke("ana");
  CHECK_FALSE(logins.find(secret(std::string(second.expose()))));
}

TEST_CASE("admin logins: the cookie's value in a Cookie field", "[admin_logins]") {
  const auto value = [](std::string_view field) {
    auto v = cookie_value(field, "broker_console");
    return v ? std::string(v->expose()) : std::string("<none>");
  };
  CHECK(value("broker_console=bkl_x") == "bkl_x");
  CHECK(value("a=1; broker_console=bkl_y; b=2") == "bkl_y");
  CHECK(value("a=1;broker_console=\"bkl_z\"") == "bkl_z");
  CHECK(value("xbroker_console=bkl_x") == "<none>");
  CHECK(value("broker_console=") == "<none>");
  CHECK(value("broker_console") == "<none>");
  CHECK(value("") == "<none>");
}
