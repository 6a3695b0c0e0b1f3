#include <catch2/catch.hpp>

#include <string>

#include "base/text.hpp"
#include "config/host_pattern.hpp"
#include "value_broker_test_support.hpp"

namespace base = broker::base;

using broker::base::base64_encode;

namespace {

const std::string dummy = "npm_DUMMYdummy0123456789dummyDUMMY012";
const std::string real = "npm_REALreal9876543210realREALreal987";

struct basic_family {
  broker::config::credential_spec spec;
  std::unique_ptr<broker::brokers::value_broker> b;
  basic_family() {
    spec.name = "registry";
    spec.type = "basic";
    spec.hosts.push_back(*broker::config::host_pattern::parse("registry.example.com"));
    spec.source = "env:REGISTRY_PASSWORD";
    b = broker::brokers::testing::make_broker(spec, dummy, real);
  }
  std::pair<std::string, int> swap(std::string_view name, std::string value) const {
    int n = b->swap_header(name, value);
    return {value, n};
  }
};

std::string basic(const std::string& user_pass, std::string scheme = "Basic ") {
  return scheme + base::base64_encode(user_pass);
}

}  // namespace

TEST_CASE("basic: the password half or the user half", "[brokers][basic]") {
  basic_family t;
  CHECK(t.swap("Authorization", basic("alice:" + dummy)) == std::pair{basic("alice:" + real), 1});
  CHECK(t.swap("authorization", basic(dummy + ":x-oauth-basic")) ==
        std::pair{basic(real + ":x-oauth-basic"), 1});
  CHECK(t.swap("AUTHORIZATION", basic(dummy + ":" + dummy, "BASIC ")) ==
        std::pair{basic(real + ":" + real, "BASIC "), 2});
  // A password may contain colons; the user name may not (RFC 7617 §2).
  CHECK(t.swap("Authorization", basic("alice:a:" + dummy)) ==
        std::pair{basic("alice:a:" + dummy), 0});
}

TEST_CASE("basic: other forms are not swapped", "[brokers][basic]") {
  basic_family t;
  for (const std::string& value :
       {"Bearer " + dummy, basic("alice:" + dummy + "x"), basic("alice:x" + dummy), basic(dummy),
        "Basic " + dummy, std::string("Basic")})
    CHECK(t.swap("Authorization", value) == std::pair{value, 0});
  CHECK(t.swap("X-Basic", basic("alice:" + dummy)) == std::pair{basic("alice:" + dummy), 0});
}
