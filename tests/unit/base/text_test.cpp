#include "base/text.hpp"

#include <catch2/catch.hpp>

#include <string>

namespace base = broker::base;

using broker::base::base64_decode;
using broker::base::base64_encode;

TEST_CASE("base64 round-trips and matches RFC 4648 vectors", "[brokers][base64]") {
  CHECK(base::base64_encode("") == "");
  CHECK(base::base64_encode("f") == "Zg==");
  CHECK(base::base64_encode("fo") == "Zm8=");
  CHECK(base::base64_encode("foo") == "Zm9v");
  CHECK(base::base64_encode("foob") == "Zm9vYg==");
  CHECK(base::base64_encode("fooba") == "Zm9vYmE=");
  CHECK(base::base64_encode("foobar") == "Zm9vYmFy");
  for (const char* text : {"", "f", "fo", "foo", "foob", "fooba", "foobar"})
    CHECK(base::base64_decode(base::base64_encode(text)) == std::string(text));
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  CHECK(base::base64_decode(base::base64_encode(all)) == all);
  CHECK(base::base64_encode("x-access-token:abc") == "eC1hY2Nlc3MtdG9rZW46YWJj");
}

TEST_CASE("base64_decode refuses bad input and tolerates missing padding", "[brokers][base64]") {
  CHECK(base::base64_decode("Zm8") == std::string("fo"));
  CHECK(base::base64_decode("Zg") == std::string("f"));
  CHECK_FALSE(base::base64_decode("Z"));
  CHECK_FALSE(base::base64_decode("Zm9v!"));
  CHECK_FALSE(base::base64_decode("Zm=v"));
  CHECK_FALSE(base::base64_decode("Zm9 v"));
  CHECK_FALSE(base::base64_decode("Zg="));
  CHECK_FALSE(base::base64_decode("Zg==="));
}
