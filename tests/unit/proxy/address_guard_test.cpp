#include "proxy/address_guard.hpp"

#include <string>

#include <catch2/catch.hpp>

using broker::config::ip_address;
using broker::proxy::address_class;
using broker::proxy::classify;

namespace {

address_class of(const std::string& text) {
  auto address = ip_address::parse(text);
  INFO(text);
  REQUIRE(address.has_value());
  return classify(*address);
}

void check(std::initializer_list<const char*> addresses, address_class expected) {
  for (const char* text : addresses) {
    INFO(text);
    CHECK(of(text) == expected);
  }
}

}  // namespace

TEST_CASE("IPv4 public unicast is global", "[address_guard]") {
  check({"8.8.8.8",        "1.1.1.1",        "93.184.216.34",   "9.255.255.255", "11.0.0.0",
         "100.63.255.255", "100.128.0.0",    "126.255.255.255", "128.0.0.0",     "169.253.255.255",
         "169.255.0.0",    "172.15.255.255", "172.32.0.0",      "192.0.1.0",     "192.0.3.0",
         "192.88.98.255",  "192.88.100.0",   "192.167.255.255", "192.169.0.0",   "198.17.255.255",
         "198.20.0.0",     "198.51.99.255",  "198.51.101.0",    "203.0.112.255", "203.0.114.0",
         "223.255.255.255"},
        address_class::global);
}

TEST_CASE("IPv4 special-purpose ranges", "[address_guard]") {
  check({"0.0.0.0", "0.1.2.3", "0.255.255.255"}, address_class::unspecified);
  check({"127.0.0.1", "127.0.0.0", "127.255.255.254"}, address_class::loopback);
  check({"10.0.0.0", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.0.1",
         "192.168.255.255"},
        address_class::private_use);
  check({"100.64.0.0", "100.127.255.255", "100.100.100.100"}, address_class::cgnat);
  check({"169.254.0.1", "169.254.169.254", "169.254.255.255"}, address_class::link_local);
  check({"224.0.0.1", "239.255.255.250", "230.1.2.3"}, address_class::multicast);
  check({"192.0.0.1", "192.0.0.255", "192.0.2.1", "192.88.99.1", "198.18.0.0", "198.19.255.255",
         "198.51.100.7", "203.0.113.200", "240.0.0.1", "250.1.2.3", "255.255.255.254",
         "255.255.255.255"},
        address_class::reserved);
}

TEST_CASE("IPv6 basics", "[address_guard]") {
  CHECK(of("::") == address_class::unspecified);
  CHECK(of("::1") == address_class::loopback);
  check({"2606:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001:80b::200e", "2001:1::1",
         "2001:4:112::1", "3ffe::1", "2003::1"},
        address_class::global);
  check({"fe80::1", "fe80::1:2:3:4", "febf:ffff::1"}, address_class::link_local);
  check({"fc00::1", "fd12:3456:789a::1", "fdff::", "fec0::1", "feff::1"},
        address_class::unique_local);
  check({"ff02::1", "ff05::1:3", "ff0e::1"}, address_class::multicast);
  check({"100::", "100::ffff:ffff:ffff:ffff", "2001:db8::1", "2001:db8:ffff::1", "2001:2::1",
         "2001:10::1", "2001:20::1", "3fff::1", "3fff:fff::1"},
        address_class::reserved);
}

TEST_CASE("IPv6 outside 2000::/3 without a special meaning is reserved", "[address_guard]") {
  check({"100:0:0:1::", "4000::1", "8000::1", "e000::1", "fe00::1", "1::1", "64:ff9b:2::1",
         "64:ff9b::1:0:0:1", "::ffff:0:a00:1"},
        address_class::reserved);
  CHECK(of("3fff:1000::1") == address_class::global);  // just past the /20
  CHECK(of("2001:30::1") == address_class::global);    // past ORCHIDv2
}

TEST_CASE("v4-mapped IPv6 is classified by its IPv4 address", "[address_guard]") {
  CHECK(of("::ffff:127.0.0.1") == address_class::loopback);
  CHECK(of("::ffff:8.8.8.8") == address_class::global);
  CHECK(of("::ffff:10.1.2.3") == address_class::private_use);
  CHECK(of("::ffff:169.254.169.254") == address_class::link_local);
  CHECK(of("::ffff:0.0.0.0") == address_class::unspecified);
  CHECK(of("::ffff:100.64.0.1") == address_class::cgnat);
  CHECK(of("::ffff:224.0.0.1") == address_class::multicast);
  CHECK(of("::ffff:198.51.100.1") == address_class::reserved);
}

TEST_CASE("v4-compatible IPv6 is classified by its IPv4 address", "[address_guard]") {
  CHECK(of("::127.0.0.1") == address_class::loopback);
  CHECK(of("::8.8.8.8") == address_class::global);
  CHECK(of("::192.168.1.1") == address_class::private_use);
  CHECK(of("::169.254.169.254") == address_class::link_local);
  CHECK(of("::2") == address_class::unspecified);  // 0.0.0.2
}

TEST_CASE("NAT64 well-known prefix is classified by its IPv4 address", "[address_guard]") {
  CHECK(of("64:ff9b::a00:1") == address_class::private_use);  // 10.0.0.1
  CHECK(of("64:ff9b::7f00:1") == address_class::loopback);
  CHECK(of("64:ff9b::8.8.8.8") == address_class::global);
  CHECK(of("64:ff9b::169.254.169.254") == address_class::link_local);
  CHECK(of("64:ff9b::100.64.1.1") == address_class::cgnat);
}

TEST_CASE("NAT64 local-use prefix checks every RFC 6052 placement", "[address_guard]") {
  // /96 placement.
  CHECK(of("64:ff9b:1:ffff:ffff:8ff:a00:1") != address_class::global);
  // /64 placement of 10.0.0.1 (bytes 9..12); read any other way every v4 here looks global.
  CHECK(of("64:ff9b:1:808:a:0:100:0") == address_class::private_use);
  CHECK(of("64:ff9b:1:808:808:8:808:808") == address_class::global);    // 8.8.8.8 every way
  CHECK(of("64:ff9b:1:87f:8:808:808:808") == address_class::loopback);  // /56: 127.8.8.8
  CHECK(of("64:ff9b:1:0:0:0:a00:1") != address_class::global);
}

TEST_CASE("6to4 is classified by its IPv4 address", "[address_guard]") {
  CHECK(of("2002:7f00:1::1") == address_class::loopback);
  CHECK(of("2002:808:808::1") == address_class::global);
  CHECK(of("2002:c0a8:101::1") == address_class::private_use);
  CHECK(of("2002:a9fe:a9fe::") == address_class::link_local);
  CHECK(of("2002::1") == address_class::unspecified);
  CHECK(of("2002:e000::1") == address_class::multicast);
}

TEST_CASE("Teredo takes the worse of server and client", "[address_guard]") {
  // Server 65.54.227.120 (global); client 8.8.8.8 obfuscated as f7f7:f7f7.
  CHECK(of("2001:0:4136:e378:8000:63bf:f7f7:f7f7") == address_class::global);
  // Client 127.0.0.1 obfuscated: 0x7f000001 ^ 0xffffffff = 0x80fffffe.
  CHECK(of("2001:0:4136:e378:8000:63bf:80ff:fffe") == address_class::loopback);
  // Client 169.254.169.254 obfuscated: 5601:5601.
  CHECK(of("2001:0:4136:e378::5601:5601") == address_class::link_local);
  // Server private, client public.
  CHECK(of("2001:0:a00:1:8000:63bf:f7f7:f7f7") == address_class::private_use);
  // Server loopback and client private: loopback is the worse.
  CHECK(of("2001:0:7f00:1::f5ff:fffe") == address_class::loopback);
  // All-zero client bits decode to 255.255.255.255.
  CHECK(of("2001:0:4136:e378::") == address_class::reserved);
}

TEST_CASE("IPv4 given as ip_address::from_v4", "[address_guard]") {
  CHECK(classify(ip_address::from_v4(0xa9fea9fe)) == address_class::link_local);
  CHECK(classify(ip_address::from_v4(0x08080808)) == address_class::global);
}

TEST_CASE("address classes have names", "[address_guard]") {
  using broker::proxy::to_string;
  CHECK(to_string(address_class::global) == "global");
  CHECK(to_string(address_class::unspecified) == "unspecified");
  CHECK(to_string(address_class::loopback) == "loopback");
  CHECK(to_string(address_class::private_use) == "private");
  CHECK(to_string(address_class::link_local) == "link-local");
  CHECK(to_string(address_class::cgnat) == "cgnat");
  CHECK(to_string(address_class::unique_local) == "unique-local");
  CHECK(to_string(address_class::multicast) == "multicast");
  CHECK(to_string(address_class::reserved) == "reserved");
}
