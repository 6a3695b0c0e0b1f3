#include <catch2/catch.hpp>

#include <string>

#include "base/text.hpp"
#include "config/host_pattern.hpp"
#include "value_broker_test_support.hpp"

namespace base = broker::base;

using broker::base::base64_encode;

namespace {

const std::string dummy = "sk-proj-DUMMYdummy0123456789dummyDUMMY0";
const std::string real = "sk-proj-REALreal9876543210realREALreal9";

struct bearer {
  broker::config::credential_spec spec;
  std::unique_ptr<broker::brokers::value_broker> b;
  bearer() {
    spec.name = "openai";
    spec.type = "bearer";
    spec.hosts.push_back(*broker::config::host_pattern::parse("api.openai.com"));
    spec.source = "env:OPENAI_API_KEY";
    b = broker::brokers::testing::make_broker(spec, dummy, real);
  }
  std::pair<std::string, int> swap(std::string_view name, std::string value) const {
    int n = b->swap_header(name, value);
    return {value, n};
  }
};

}  // namespace

TEST_CASE("bearer: Authorization: Bearer, any case and spacing", "[brokers][bearer]") {
  bearer t;
  CHECK(t.swap("Authorization", "Bearer " + dummy) == std::pair{"Bearer " + real, 1});
  CHECK(t.swap("aUtHoRiZaTiOn", "BEARER " + dummy) == std::pair{"BEARER " + real, 1});
  CHECK(t.swap("authorization", "  bearer \t " + dummy + "  ") ==
        std::pair{"  bearer \t " + real + "  ", 1});
}

TEST_CASE("bearer: other schemes and longer values are not swapped", "[brokers][bearer]") {
  bearer t;
  for (const std::string& value :
       {"token " + dummy, "Basic " + base::base64_encode("user:" + dummy), "Bearer xx" + dummy,
        "Bearer " + dummy + "=", "Bearer " + dummy + ", Bearer " + dummy, dummy})
    CHECK(t.swap("Authorization", value) == std::pair{value, 0});
  CHECK(t.swap("x-api-key", dummy) == std::pair{dummy, 0});
}

TEST_CASE("bearer: multiple Authorization headers each swapped", "[brokers][bearer]") {
  bearer t;
  std::string first = "Bearer " + dummy, second = "bearer " + dummy;
  CHECK(t.b->swap_header("Authorization", first) == 1);
  CHECK(t.b->swap_header("AUTHORIZATION", second) == 1);
  CHECK(first == "Bearer " + real);
  CHECK(second == "bearer " + real);
}
