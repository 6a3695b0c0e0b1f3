#include "live/connect_to.hpp"

#include <catch2/catch.hpp>

using namespace broker::live;

TEST_CASE("connect-to rules follow curl's HOST:PORT:ADDR:PORT", "[connect_to]") {
  const std::vector<connect_to_rule> rules = {
      parse_connect_to("api.example.test:443:127.0.0.1:8443"),
      parse_connect_to("::[::1]:"),
  };
  auto hit = apply_connect_to(rules, "api.example.test", 443);
  REQUIRE(hit);
  CHECK(hit->host == "127.0.0.1");
  CHECK(hit->port == 8443);
  // The second rule matches any host and port, keeping the port.
  auto any = apply_connect_to(rules, "other.test", 80);
  REQUIRE(any);
  CHECK(any->host == "::1");
  CHECK(any->port == 80);
}

TEST_CASE("connect-to rules with no match and malformed specs", "[connect_to]") {
  const std::vector<connect_to_rule> rules = {parse_connect_to("a.test:443:127.0.0.1:1")};
  CHECK_FALSE(apply_connect_to(rules, "a.test", 80));
  CHECK_FALSE(apply_connect_to(rules, "b.test", 443));
  CHECK(apply_connect_to(rules, "A.TEST.", 443) == std::nullopt);  // lookups use normalized names
  CHECK_THROWS_AS(parse_connect_to("a.test:443"), std::invalid_argument);
  CHECK_THROWS_AS(parse_connect_to("a.test:99999:b:1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_connect_to("a.test:443:bad host:1"), std::invalid_argument);
}
