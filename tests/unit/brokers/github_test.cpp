#include <catch2/catch.hpp>

#include <string>

#include "base/text.hpp"
#include "config/host_pattern.hpp"
#include "value_broker_test_support.hpp"

namespace base = broker::base;

using broker::base::base64_decode;
using broker::base::base64_encode;

namespace {

const std::string dummy = "ghp_DUMMYdummy0123456789dummyDUMMY01234";
const std::string real = "ghp_REALreal9876543210realREALreal98765";

struct github {
  broker::config::credential_spec spec;
  std::unique_ptr<broker::brokers::value_broker> b;
  github() {
    spec.name = "github";
    spec.type = "github";
    spec.hosts.push_back(*broker::config::host_pattern::parse("api.github.com"));
    spec.source = "env:GITHUB_TOKEN";
    b = broker::brokers::testing::make_broker(spec, dummy, real);
  }
  std::pair<std::string, int> swap(std::string_view name, std::string value) const {
    int n = b->swap_header(name, value);
    return {value, n};
  }
};

std::string basic(const std::string& user_pass) {
  return "Basic " + base::base64_encode(user_pass);
}

}  // namespace

TEST_CASE("github: Bearer and token schemes, any case and spacing", "[brokers][github]") {
  github g;
  CHECK(g.swap("Authorization", "Bearer " + dummy) == std::pair{"Bearer " + real, 1});
  CHECK(g.swap("authorization", "token " + dummy) == std::pair{"token " + real, 1});
  CHECK(g.swap("aUtHoRiZaTiOn", "BEARER   " + dummy) == std::pair{"BEARER   " + real, 1});
  CHECK(g.swap("AUTHORIZATION", "Token\t" + dummy + " ") == std::pair{"Token\t" + real + " ", 1});
}

TEST_CASE("github: Basic with the dummy as either half or both", "[brokers][github]") {
  github g;
  // git over HTTPS
  auto [git, n1] = g.swap("Authorization", basic("x-access-token:" + dummy));
  CHECK(n1 == 1);
  CHECK(git == basic("x-access-token:" + real));
  // token as the user name
  auto [user, n2] = g.swap("authorization", basic(dummy + ":x-oauth-basic"));
  CHECK(n2 == 1);
  CHECK(user == basic(real + ":x-oauth-basic"));
  auto [bare, n3] = g.swap("authorization", basic(dummy + ":"));
  CHECK(n3 == 1);
  CHECK(base::base64_decode(bare.substr(6)) == real + ":");
  auto [both, n4] = g.swap("authorization", "basic  " + base::base64_encode(dummy + ":" + dummy));
  CHECK(n4 == 2);
  CHECK(both == "basic  " + base::base64_encode(real + ":" + real));
}

TEST_CASE("github: dummies not in the family's form are left alone", "[brokers][github]") {
  github g;
  for (const std::string& value :
       {"Bearer xx" + dummy, "Bearer " + dummy + "x", "Bearer " + dummy + " extra", dummy,
        std::string("Bearer"), "Digest " + dummy, basic("x-access-token:" + dummy + "x"),
        basic("someone:prefix" + dummy), basic(dummy), "Basic !!" + dummy})
    CHECK(g.swap("Authorization", value) == std::pair{value, 0});
  // Only Authorization; never another header, not even Proxy-Authorization.
  CHECK(g.swap("X-Token", "Bearer " + dummy) == std::pair{"Bearer " + dummy, 0});
  CHECK(g.swap("Proxy-Authorization", "Bearer " + dummy) == std::pair{"Bearer " + dummy, 0});
}

TEST_CASE("github: each Authorization header is processed", "[brokers][github]") {
  github g;
  std::vector<std::pair<std::string, std::string>> headers{
      {"Authorization", "Bearer " + dummy},
      {"Accept", "application/json"},
      {"authorization", basic("x-access-token:" + dummy)}};
  int total = 0;
  for (auto& [name, value] : headers) total += g.b->swap_header(name, value);
  CHECK(total == 2);
  CHECK(headers[0].second == "Bearer " + real);
  CHECK(headers[1].second == "application/json");
  CHECK(headers[2].second == basic("x-access-token:" + real));
}
