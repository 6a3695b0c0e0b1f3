#include <catch2/catch.hpp>

#include <string>

#include "base/text.hpp"
#include "config/host_pattern.hpp"
#include "value_broker_test_support.hpp"

namespace {

const std::string dummy = "sk-ant-api03-DUMMYdummy0123456789dummyDUMMY";
const std::string real = "sk-ant-api03-REALreal9876543210realREALreal";

struct header_family {
  broker::config::credential_spec spec;
  std::unique_ptr<broker::brokers::value_broker> b;
  header_family(std::string header, std::string prefix = {}, bool also_bearer = false) {
    spec.name = "anthropic";
    spec.type = "header";
    spec.header = std::move(header);
    spec.prefix = std::move(prefix);
    spec.also_bearer = also_bearer;
    spec.hosts.push_back(*broker::config::host_pattern::parse("api.anthropic.com"));
    spec.source = "env:ANTHROPIC_API_KEY";
    b = broker::brokers::testing::make_broker(spec, dummy, real);
  }
  std::pair<std::string, int> swap(std::string_view name, std::string value) const {
    int n = b->swap_header(name, value);
    return {value, n};
  }
};

}  // namespace

TEST_CASE("header: the family's own header, name in any case", "[brokers][header]") {
  header_family t("x-api-key");
  CHECK(t.swap("x-api-key", dummy) == std::pair{real, 1});
  CHECK(t.swap("X-Api-Key", dummy) == std::pair{real, 1});
  CHECK(t.swap("X-API-KEY", " " + dummy + " ") == std::pair{" " + real + " ", 1});
}

TEST_CASE("header: only that header and only the whole value", "[brokers][header]") {
  header_family t("x-api-key");
  CHECK(t.swap("Authorization", "Bearer " + dummy) == std::pair{"Bearer " + dummy, 0});
  CHECK(t.swap("x-api-key-2", dummy) == std::pair{dummy, 0});
  CHECK(t.swap("x-api-key", "xx" + dummy) == std::pair{"xx" + dummy, 0});
  CHECK(t.swap("x-api-key", dummy + "," + dummy) == std::pair{dummy + "," + dummy, 0});
}

TEST_CASE("header: a prefix is required and compared exactly", "[brokers][header]") {
  header_family t("x-auth", "Token ");
  CHECK(t.swap("X-Auth", "Token " + dummy) == std::pair{"Token " + real, 1});
  CHECK(t.swap("X-Auth", dummy) == std::pair{dummy, 0});
  CHECK(t.swap("X-Auth", "token " + dummy) == std::pair{"token " + dummy, 0});
  CHECK(t.swap("X-Auth", "Token  " + dummy) == std::pair{"Token  " + dummy, 0});
}

TEST_CASE("header: a family may name Authorization with its own prefix", "[brokers][header]") {
  header_family t("authorization", "Bearer ");
  CHECK(t.swap("Authorization", "Bearer " + dummy) == std::pair{"Bearer " + real, 1});
  CHECK(t.swap("Authorization", "bearer " + dummy) == std::pair{"bearer " + dummy, 0});
}

TEST_CASE("header: also_bearer swaps the key sent as Authorization: Bearer too",
          "[brokers][header]") {
  // @anthropic-ai/sdk 1.x sends ANTHROPIC_API_KEY this way, older clients as x-api-key.
  header_family t("x-api-key", "", true);
  CHECK(t.swap("x-api-key", dummy) == std::pair{real, 1});
  CHECK(t.swap("Authorization", "Bearer " + dummy) == std::pair{"Bearer " + real, 1});
  CHECK(t.swap("authorization", "bearer " + dummy) == std::pair{"bearer " + real, 1});
  CHECK(t.swap("Authorization", "Basic " + dummy) == std::pair{"Basic " + dummy, 0});
  CHECK(t.swap("Authorization", "Bearer x" + dummy) == std::pair{"Bearer x" + dummy, 0});
}
