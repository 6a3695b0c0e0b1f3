#include "sandbox/file_merge.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

using broker::sandbox::merge_three;
using json = nlohmann::json;

TEST_CASE("merge_three: two sessions' JSON changes both survive", "[wrap][merge]") {
  const auto base = R"({"numStartups": 1, "projects": {"/a": {"n": 1}}, "theme": "dark"})";
  const auto host =
      R"({"numStartups": 2, "projects": {"/a": {"n": 1}, "/b": {"n": 5}}, "theme": "dark"})";
  const auto child = R"({"numStartups": 1, "projects": {"/a": {"n": 2}}, "tips": true})";
  const auto out = merge_three(base, host, child);
  REQUIRE(out);
  CHECK(json::parse(*out) == json::parse(R"({"numStartups": 2, "projects": {"/a": {"n": 2},
      "/b": {"n": 5}}, "tips": true})"));  // theme: removed by the child
  CHECK(merge_three(base, base, child) == std::string(child));
  CHECK(merge_three(base, host, base) == std::string(host));
}

TEST_CASE("merge_three: appended logs, and what cannot merge", "[wrap][merge]") {
  CHECK(merge_three("a\n", "a\nb\n", "a\nc\n") == std::string("a\nb\nc\n"));
  CHECK_FALSE(merge_three("a\n", "x\n", "a\nc\n"));  // the host rewrote it
  CHECK_FALSE(merge_three("{}", "[1]", R"({"a":1})"));
}
