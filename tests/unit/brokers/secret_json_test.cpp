#include "brokers/secret_json.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "brokers/secret_source.hpp"

using broker::brokers::secret_json;
using broker::brokers::source_error;
using broker::brokers::wipe_strings;

namespace {

std::string error_of(std::string_view text) {
  try {
    secret_json doc(text, "doc");
  } catch (const source_error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("secret_json: syntax errors give a position, never the text", "[brokers][secret_json]") {
  const std::string error = error_of(R"({"key": "hunter2-distinct)");
  CHECK(error.starts_with("doc: not valid JSON (error at byte "));
  CHECK(error.find("hunter2") == std::string::npos);
  CHECK(error_of("[\"hunter2-distinct\"]") == "doc: not a JSON object");
  CHECK(error_of("").starts_with("doc: not valid JSON"));
}

TEST_CASE("secret_json: take_secret moves a string out and wipes the copy",
          "[brokers][secret_json]") {
  secret_json doc(R"({"key": "hunter2", "n": 5, "nothing": null, "name": "robot"})", "doc");
  auto value = doc.take_secret("key");
  REQUIRE(value);
  CHECK(value->expose() == "hunter2");
  REQUIRE(doc.find("key") != nullptr);
  CHECK(doc.find("key")->get<std::string>().empty());  // the document's copy is gone

  CHECK_FALSE(doc.take_secret("absent"));
  CHECK_FALSE(doc.take_secret("nothing"));
  CHECK_FALSE(doc.text("nothing"));
  CHECK(doc.text("name") == "robot");
  CHECK(doc.find("absent") == nullptr);
  try {
    (void)doc.take_secret("n");
    FAIL("a number is not a string");
  } catch (const source_error& e) {
    CHECK(std::string(e.what()) == "doc: \"n\" is not a string");
  }
  CHECK_THROWS_AS(doc.text("n"), source_error);
  CHECK(doc.message("m") == "doc: m");
}

TEST_CASE("wipe_strings clears every string value, however deep", "[brokers][secret_json]") {
  nlohmann::json value = nlohmann::json::parse(R"({"a": ["x", {"b": "y"}, 1], "c": "z"})");
  wipe_strings(value);
  CHECK(value == nlohmann::json::parse(R"({"a": ["", {"b": ""}, 1], "c": ""})"));

  nlohmann::json deep = "leaf";
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  wipe_strings(deep);  // no recursion to overflow
  const nlohmann::json* at = &deep;
  while (at->is_array()) at = &(*at)[0];
  CHECK(*at == "");
}
