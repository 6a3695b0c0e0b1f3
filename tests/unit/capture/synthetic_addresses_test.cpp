#include "capture/synthetic_addresses.hpp"

#include <catch2/catch.hpp>

using broker::capture::synthetic_addresses;
using broker::config::ip_address;

namespace {

ip_address ip(const char* text) {
  return *ip_address::parse(text);
}

synthetic_addresses ranges() {
  return synthetic_addresses(ip("198.18.0.0"), ip("fd62:726b:7200::"));
}

}  // namespace

TEST_CASE("a name keeps its synthetic addresses, and they lead back to it", "[capture]") {
  auto names = ranges();
  auto github = names.assign("api.github.com");
  REQUIRE(github);
  CHECK(github->v4.to_string() == "198.18.0.2");
  CHECK(github->v6.to_string() == "fd62:726b:7200::2");
  auto openai = names.assign("api.openai.com");
  REQUIRE(openai);
  CHECK(openai->v4.to_string() == "198.18.0.3");
  CHECK(names.assign("api.github.com")->v4.to_string() == "198.18.0.2");

  CHECK(names.name_of(ip("198.18.0.2")) == "api.github.com");
  CHECK(names.name_of(ip("fd62:726b:7200::3")) == "api.openai.com");
  // A dual-stack listener shows an IPv4 client's target as v4-mapped.
  CHECK(names.name_of(ip("::ffff:198.18.0.3")) == "api.openai.com");
}

TEST_CASE("addresses never handed out have no name", "[capture]") {
  auto names = ranges();
  names.assign("a.example");
  CHECK_FALSE(names.name_of(ip("198.18.0.0")));
  CHECK_FALSE(names.name_of(ip("198.18.0.1")));  // the namespace's own address
  CHECK_FALSE(names.name_of(ip("198.18.0.3")));  // not yet given
  CHECK_FALSE(names.name_of(ip("198.19.255.255")));
  CHECK_FALSE(names.name_of(ip("fd62:726b:7200:0:1::2")));  // beyond the counter bytes
  CHECK_FALSE(names.name_of(ip("fd62:726b:7201::2")));
  CHECK_FALSE(names.name_of(ip("93.184.216.34")));

  CHECK(names.in_range(ip("198.18.0.3")));
  CHECK(names.in_range(ip("198.19.255.255")));
  CHECK_FALSE(names.in_range(ip("198.20.0.1")));
  CHECK(names.in_range(ip("fd62:726b:7200::ffff")));
  CHECK_FALSE(names.in_range(ip("fd62:726b:7201::2")));
  CHECK_FALSE(names.in_range(ip("8.8.8.8")));
}

TEST_CASE("the number of names is bounded", "[capture]") {
  auto names = ranges();
  for (std::size_t i = 0; i < synthetic_addresses::max_names; ++i)
    REQUIRE(names.assign("n" + std::to_string(i) + ".example"));
  CHECK_FALSE(names.assign("one-more.example"));
  CHECK(names.assign("n7.example"));  // names that have addresses keep them
  const auto last = names.assign("n65535.example");
  REQUIRE(last);
  CHECK(last->v4.to_string() == "198.19.0.1");
  CHECK(names.name_of(last->v4) == "n65535.example");
  CHECK(names.name_of(last->v6) == "n65535.example");
}
