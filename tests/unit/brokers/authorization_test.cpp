#include <catch2/catch.hpp>

#include <string>

#include "brokers/families.hpp"

namespace base = broker::base;

using broker::base::base64_encode;
using broker::base::percent_decode;
using broker::base::percent_encode;
using broker::brokers::decode_basic;
using broker::brokers::parse_auth_value;
using broker::brokers::swap_basic;

TEST_CASE("parse_auth_value splits scheme and token", "[brokers][authorization]") {
  auto a = parse_auth_value("Bearer abc");
  REQUIRE(a);
  CHECK(a->scheme == "Bearer");
  CHECK(a->token == "abc");
  CHECK(a->token_at == 7);

  auto spaced = parse_auth_value(" \ttoken \t  abc.def  ");
  REQUIRE(spaced);
  CHECK(spaced->scheme == "token");
  CHECK(spaced->token == "abc.def");
  CHECK(spaced->token_at == 11);

  auto params = parse_auth_value("Digest a=1, b=2");
  REQUIRE(params);
  CHECK(params->token == "a=1, b=2");

  for (const char* bad : {"", "Bearer", "Bearer   ", "  ", "Be@rer abc", "abc"})
    CHECK_FALSE(parse_auth_value(bad));
}

TEST_CASE("swap_basic rewrites only the halves it is allowed to", "[brokers][authorization]") {
  const std::string value = "Basic " + base::base64_encode("dd:dd");
  std::string only_user = value;
  CHECK(swap_basic(only_user, *parse_auth_value(only_user), "dd", "RR", true, false) == 1);
  CHECK(only_user == "Basic " + base::base64_encode("RR:dd"));
  std::string only_password = value;
  CHECK(swap_basic(only_password, *parse_auth_value(only_password), "dd", "RR", false, true) == 1);
  CHECK(only_password == "Basic " + base::base64_encode("dd:RR"));
  std::string bearer = "Bearer " + base::base64_encode("dd:dd");
  CHECK(swap_basic(bearer, *parse_auth_value(bearer), "dd", "RR", true, true) == 0);
}

TEST_CASE("decode_basic reads Basic credentials of any header", "[brokers][authorization]") {
  CHECK(decode_basic("Basic " + base::base64_encode("u:p")) == std::string("u:p"));
  CHECK(decode_basic("bAsIc   " + base::base64_encode("u:p") + " ") == std::string("u:p"));
  CHECK_FALSE(decode_basic("Bearer " + base::base64_encode("u:p")));
  CHECK_FALSE(decode_basic("Basic not*base64"));
}

TEST_CASE("percent encoding round-trips", "[brokers][authorization]") {
  CHECK(base::percent_encode("aZ09-._~") == "aZ09-._~");
  CHECK(base::percent_encode("a+b/c=d e") == "a%2Bb%2Fc%3Dd%20e");
  CHECK(base::percent_decode("a%2Bb%2fc%3Dd%20e") == "a+b/c=d e");
  CHECK(base::percent_decode("100%") == "100%");
  CHECK(base::percent_decode("%zz%4") == "%zz%4");
  CHECK(base::percent_decode("a+b") == "a+b");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  CHECK(base::percent_decode(base::percent_encode(all)) == all);
}
