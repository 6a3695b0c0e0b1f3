#include <catch2/catch.hpp>

#include "config/address.hpp"

using broker::config::ip_address;

TEST_CASE("ip_address parses strict dotted-quad IPv4", "[config][address]") {
  auto a = ip_address::parse("192.168.1.20");
  REQUIRE(a);
  CHECK(a->v4);
  CHECK(a->v4_value() == 0xc0a80114u);
  CHECK(a->to_string() == "192.168.1.20");
  CHECK(ip_address::parse("0.0.0.0")->v4_value() == 0);
  CHECK(ip_address::parse("255.255.255.255")->v4_value() == 0xffffffffu);

  // Forms inet_aton would read differently: octal, hex, short, out of range.
  for (const char* bad : {"010.0.0.1", "0x7f.0.0.1", "127.1", "256.0.0.1", "1.2.3.4.5", "1.2.3.",
                          ".1.2.3", "1..2.3", "", "1.2.3.4 ", "a.b.c.d", "[1.2.3.4]"})
    CHECK_FALSE(ip_address::parse(bad));
}

TEST_CASE("ip_address from_v4 round-trips", "[config][address]") {
  auto a = ip_address::from_v4(0x0a141e28u);
  CHECK(a.to_string() == "10.20.30.40");
  CHECK(a == *ip_address::parse("10.20.30.40"));
  CHECK(a.v4_value() == 0x0a141e28u);
}

TEST_CASE("ip_address parses RFC 4291 IPv6 text", "[config][address]") {
  auto a = ip_address::parse("2001:0DB8:0000:0000:0000:ff00:0042:8329");
  REQUIRE(a);
  CHECK_FALSE(a->v4);
  CHECK(a->bytes[0] == 0x20);
  CHECK(a->bytes[1] == 0x01);
  CHECK(a->bytes[15] == 0x29);
  CHECK(a->to_string() == "2001:db8::ff00:42:8329");

  CHECK(ip_address::parse("::")->to_string() == "::");
  CHECK(ip_address::parse("::1")->to_string() == "::1");
  CHECK(ip_address::parse("[::1]")->to_string() == "::1");
  CHECK(ip_address::parse("fe80::")->to_string() == "fe80::");
  CHECK(ip_address::parse("1:2:3:4:5:6:7::")->to_string() == "1:2:3:4:5:6:7:0");
  CHECK(ip_address::parse("::ffff:10.1.2.3")->to_string() == "::ffff:10.1.2.3");
  CHECK(ip_address::parse("64:ff9b::192.0.2.33")->to_string() == "64:ff9b::c000:221");
  CHECK(*ip_address::parse("::ffff:a01:203") == *ip_address::parse("::ffff:10.1.2.3"));

  for (const char* bad : {":::", "1:::2", "1::2::3", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7",
                          ":1::", "1::2:", "12345::", "g::1", "fe80::1%eth0", "[::1", "::1]",
                          "::ffff:1.2.3", "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3.4:1"})
    CHECK_FALSE(ip_address::parse(bad));
}

TEST_CASE("IPv6 text follows RFC 5952", "[config][address]") {
  // Longest zero run compressed; first one on a tie; a single zero group is not compressed.
  CHECK(ip_address::parse("2001:db8:0:0:1:0:0:1")->to_string() == "2001:db8::1:0:0:1");
  CHECK(ip_address::parse("2001:0:0:1:0:0:0:1")->to_string() == "2001:0:0:1::1");
  CHECK(ip_address::parse("2001:db8:0:1:1:1:1:1")->to_string() == "2001:db8:0:1:1:1:1:1");
}

TEST_CASE("v4-mapped IPv6 stays IPv6", "[config][address]") {
  auto mapped = ip_address::parse("::ffff:127.0.0.1");
  auto plain = ip_address::parse("127.0.0.1");
  REQUIRE(mapped);
  REQUIRE(plain);
  CHECK_FALSE(mapped->v4);
  CHECK_FALSE(*mapped == *plain);
}
