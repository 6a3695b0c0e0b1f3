#include <catch2/catch.hpp>

#include "config/cidr.hpp"

using broker::config::cidr;
using broker::config::ip_address;

namespace {
ip_address ip(const char* text) {
  return *ip_address::parse(text);
}
}  // namespace

TEST_CASE("cidr parses IPv4 blocks", "[config][cidr]") {
  auto c = cidr::parse("10.20.0.0/16");
  REQUIRE(c);
  CHECK(c->prefix_len() == 16);
  CHECK(c->to_string() == "10.20.0.0/16");
  CHECK(c->contains(ip("10.20.0.0")));
  CHECK(c->contains(ip("10.20.255.255")));
  CHECK_FALSE(c->contains(ip("10.21.0.0")));
  CHECK_FALSE(c->contains(ip("10.19.255.255")));

  auto odd = cidr::parse("172.16.0.0/12");
  REQUIRE(odd);
  CHECK(odd->contains(ip("172.31.255.1")));
  CHECK_FALSE(odd->contains(ip("172.32.0.1")));
}

TEST_CASE("cidr edge prefixes", "[config][cidr]") {
  auto all = cidr::parse("0.0.0.0/0");
  REQUIRE(all);
  CHECK(all->contains(ip("255.1.2.3")));
  CHECK_FALSE(all->contains(ip("::1")));  // an IPv4 block never contains IPv6

  auto host = cidr::parse("192.0.2.7");  // bare address = host route
  REQUIRE(host);
  CHECK(host->prefix_len() == 32);
  CHECK(host->contains(ip("192.0.2.7")));
  CHECK_FALSE(host->contains(ip("192.0.2.6")));
}

TEST_CASE("cidr parses IPv6 blocks", "[config][cidr]") {
  auto ula = cidr::parse("fd00::/8");
  REQUIRE(ula);
  CHECK(ula->contains(ip("fd12:3456::1")));
  CHECK_FALSE(ula->contains(ip("fe80::1")));
  CHECK_FALSE(ula->contains(ip("10.0.0.1")));

  auto odd = cidr::parse("2001:db8::/33");
  REQUIRE(odd);
  CHECK(odd->contains(ip("2001:db8:7fff::1")));
  CHECK_FALSE(odd->contains(ip("2001:db8:8000::1")));

  auto loop = cidr::parse("::1");
  REQUIRE(loop);
  CHECK(loop->prefix_len() == 128);
  CHECK(loop->to_string() == "::1/128");
}

TEST_CASE("an IPv4 block does not contain v4-mapped addresses", "[config][cidr]") {
  auto c = cidr::parse("127.0.0.0/8");
  REQUIRE(c);
  CHECK_FALSE(c->contains(ip("::ffff:127.0.0.1")));
  auto mapped = cidr::parse("::ffff:0:0/96");
  REQUIRE(mapped);
  CHECK(mapped->contains(ip("::ffff:127.0.0.1")));
  CHECK_FALSE(mapped->contains(ip("127.0.0.1")));
}

TEST_CASE("cidr refuses malformed blocks", "[config][cidr]") {
  for (const char* bad :
       {"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/08", "10.0.0.0/8/8",
        "fd00::/129", "fd00::1/8", "example.com/8", "/8", "", "10.0.0.0/ 8", "10.0.0.0/1x"})
    CHECK_FALSE(cidr::parse(bad));
}

TEST_CASE("cidr constructor canonicalizes", "[config][cidr]") {
  cidr c(ip("10.1.2.3"), 8);
  CHECK(c.to_string() == "10.0.0.0/8");
  CHECK(c.contains(ip("10.200.0.1")));
  cidr clamped(ip("10.1.2.3"), 99);
  CHECK(clamped.prefix_len() == 32);
}
