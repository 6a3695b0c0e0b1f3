#include "session/usage_scanner.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

using broker::session::usage_scanner;

namespace {

usage_scanner scan_every_way_equal(std::string_view text) {
  usage_scanner whole;
  whole.scan(text);
  for (std::size_t at = 0; at <= text.size(); ++at) {
    usage_scanner split;
    split.scan(text.substr(0, at));
    split.scan(text.substr(at));
    INFO("split at " << at);
    REQUIRE(split.last_usage() == whole.last_usage());
    REQUIRE(split.raw_model() == whole.raw_model());
    REQUIRE(split.value_bytes() == whole.value_bytes());
  }
  return whole;
}

}  // namespace

TEST_CASE("the scanner keeps the last usage object and the top-level model", "[usage_scanner]") {
  const auto s = scan_every_way_equal(
      R"({"usage":{"a":1},"model":"gpt-\"5\"","choices":[{"model":"inner",)"
      R"("text":"\"usage\":{\"fake\":1}"}],"usage" :  {"b":{"c":"}"},"d":[1,2]}})");
  CHECK(s.last_usage() == R"({"b":{"c":"}"},"d":[1,2]})");
  CHECK(s.raw_model() == R"(gpt-\"5\")");
  // Values: gpt-\"5\" (9), inner (5), the text (22), "}" (1).
  CHECK(s.value_bytes() == 9 + 5 + 22 + 1);
}

TEST_CASE("the scanner takes the model only from the top level", "[usage_scanner]") {
  CHECK(scan_every_way_equal(R"({"items":[{"model":"inner"}],"model":"outer"})").raw_model() ==
        "outer");
  CHECK(scan_every_way_equal(R"({"model":{"name":"x"},"model":"second"})").raw_model() == "second");
  CHECK(scan_every_way_equal(R"(["model","x"])").raw_model().empty());
}

TEST_CASE("the scanner ignores usage that is not an object", "[usage_scanner]") {
  CHECK(scan_every_way_equal(R"({"usage":null,"x":{"usage":[{"a":1}]}})").last_usage().empty());
  CHECK(scan_every_way_equal(R"({"usages":{"a":1},"usag":{"b":2}})").last_usage().empty());
  // A nested usage key counts as well; the last one wins.
  CHECK(scan_every_way_equal(R"({"response":{"usage":{"n":1}}})").last_usage() == R"({"n":1})");
}

TEST_CASE("the scanner bounds what it keeps", "[usage_scanner]") {
  usage_scanner s;
  s.scan(R"({"model":")" + std::string(1000, 'm') + R"(","usage":{"ok":1},"usage":{"x":")");
  s.scan(std::string(usage_scanner::max_usage_object, 'y'));
  s.scan(R"("}})");
  CHECK(s.raw_model().size() == usage_scanner::max_model_name);
  CHECK(s.last_usage() == R"({"ok":1})");
}
