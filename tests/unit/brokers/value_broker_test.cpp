#include "brokers/value_broker.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "config/host_pattern.hpp"
#include "value_broker_test_support.hpp"

using broker::brokers::testing::make_broker;
using broker::config::credential_spec;

namespace {

const std::string dummy = "tok_DUMMY0123456789dummy";
const std::string real = "tok_REAL9876543210realre";

credential_spec spec_of(std::string type, std::vector<std::string> query = {}) {
  credential_spec spec;
  spec.name = "test";
  spec.type = std::move(type);
  spec.hosts.push_back(*broker::config::host_pattern::parse("api.example.com"));
  spec.source = "env:UNUSED";
  spec.query = std::move(query);
  return spec;
}

}  // namespace

TEST_CASE("swap_query swaps only opted-in parameters whose whole value is the dummy",
          "[brokers][query]") {
  auto spec = spec_of("bearer", {"api_key", "token"});
  auto b = make_broker(spec, dummy, real);

  std::string target = "/v1/x?a=1&api_key=" + dummy + "&b=" + dummy + "&token=x" + dummy;
  CHECK(b->swap_query(target) == 1);
  CHECK(target == "/v1/x?a=1&api_key=" + real + "&b=" + dummy + "&token=x" + dummy);

  std::string twice = "/p?token=" + dummy + "&api_key=" + dummy + "#frag";
  CHECK(b->swap_query(twice) == 2);
  CHECK(twice == "/p?token=" + real + "&api_key=" + real + "#frag");

  std::string encoded = "/p?api%5Fkey=" + dummy;  // a percent-encoded name still names it
  CHECK(b->swap_query(encoded) == 1);
  CHECK(encoded == "/p?api%5Fkey=" + real);

  std::string path_only = "/p/" + dummy;
  CHECK(b->swap_query(path_only) == 0);

  const auto plain_spec = spec_of("bearer");  // the broker refers to its spec: keep it alive
  auto no_query = make_broker(plain_spec, dummy, real);
  std::string untouched = "/p?api_key=" + dummy;
  CHECK(no_query->swap_query(untouched) == 0);
  CHECK(untouched == "/p?api_key=" + dummy);
}

TEST_CASE("swap_query percent-encodes a real value that needs it", "[brokers][query]") {
  const std::string odd_dummy = "Ab+/Cd=1", odd_real = "Xy+/Zw=9";
  auto spec = spec_of("bearer", {"key"});
  auto b = make_broker(spec, odd_dummy, odd_real);
  std::string raw = "/p?key=Ab+/Cd=1&z=1";
  CHECK(b->swap_query(raw) == 1);
  CHECK(raw == "/p?key=Xy%2B%2FZw%3D9&z=1");
  std::string encoded = "/p?key=Ab%2B%2FCd%3D1";
  CHECK(b->swap_query(encoded) == 1);
  CHECK(encoded == "/p?key=Xy%2B%2FZw%3D9");
}

TEST_CASE("make_value_broker knows the static-value families", "[brokers][factory]") {
  for (const char* type : {"github", "bearer", "basic"})
    CHECK(make_broker(spec_of(type), dummy, real));
  auto header = spec_of("header");
  header.header = "x-api-key";
  CHECK(make_broker(header, dummy, real));
  // The other families are not one static value (aws_broker, token_broker).
  for (const char* type : {"aws-sigv4", "gcp", "azure", "nope"})
    CHECK_THROWS_AS(make_broker(spec_of(type), dummy, real), std::invalid_argument);
  CHECK_THROWS_AS(make_broker(spec_of("bearer"), dummy, "short"), std::invalid_argument);
}
