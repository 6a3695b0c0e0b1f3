#include "base/json_text.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <random>
#include <string>

using broker::base::append_json_string;
using broker::base::json_members;

namespace {

std::string json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

// What a JSON reader makes of the string we wrote (throws when it is not valid JSON).
std::string read_back(std::string_view text) {
  return nlohmann::json::parse(json_string(text)).get<std::string>();
}

}  // namespace

TEST_CASE("a JSON string escapes quotes, backslashes and control bytes", "[json_text]") {
  CHECK(json_string("plain /path?q=1") == "\"plain /path?q=1\"");
  CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_string("\n\r\t\b\f") == "\"\\n\\r\\t\\b\\f\"");
  CHECK(json_string(std::string("\x01\x1f\x00", 3)) == "\"\\u0001\\u001f\\u0000\"");
  CHECK(read_back(std::string("x\x00y\"\\\x7f", 6)) == std::string("x\x00y\"\\\x7f", 6));
}

TEST_CASE("a JSON string keeps valid UTF-8 and replaces each bad sequence with U+FFFD",
          "[json_text]") {
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(read_back("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(read_back("a\xFFz") == "a" + fffd + "z");
  CHECK(read_back("a\xE2\x82z") == "a" + fffd + "z");                 // truncated: one replacement
  CHECK(read_back("\xC0\xAF") == fffd + fffd);                        // overlong
  CHECK(read_back("\xED\xA0\x80") == fffd + fffd + fffd);             // a surrogate
  CHECK(read_back("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // past U+10FFFF
  CHECK(read_back("end\xF0\x9F\x98") == "end" + fffd);                // cut at the end
  CHECK(read_back("\x80\xBF") == fffd + fffd);                        // lone continuation bytes
}

TEST_CASE("any bytes make valid JSON, and valid UTF-8 comes back unchanged", "[json_text]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255), length(0, 40);
  for (int i = 0; i < 20000; ++i) {
    std::string text(static_cast<std::size_t>(length(rng)), '\0');
    for (auto& c : text) c = static_cast<char>(byte(rng));
    std::string back;
    REQUIRE_NOTHROW(back = read_back(text));
    // nlohmann's own writer, strict, throws on invalid UTF-8: where it does not, ours must agree.
    bool valid = true;
    try {
      (void)nlohmann::json(text).dump();
    } catch (const nlohmann::json::type_error&) {
      valid = false;
    }
    if (valid) REQUIRE(back == text);
    if (!valid) REQUIRE(back != text);
  }
}

TEST_CASE("JSON members are written in order with the types a reader expects", "[json_text]") {
  json_members m;
  CHECK(m.empty());
  m.add("s", "x").add("neg", -3).add("big", std::uint64_t{18446744073709551615u});
  m.add("ms", 41.2).add("whole", 3.0).add("nan", std::nan("")).add("yes", true);
  m.add_null("none").add_text_or_null("empty", "").add_text_or_null("full", "v");
  m.add_json("policy", nlohmann::ordered_json{{"b", 1}, {"a", {1, 2}}});
  CHECK(m.text() ==
        "\"s\":\"x\",\"neg\":-3,\"big\":18446744073709551615,\"ms\":41.2,\"whole\":3.0,"
        "\"nan\":null,\"yes\":true,\"none\":null,\"empty\":null,\"full\":\"v\","
        "\"policy\":{\"b\":1,\"a\":[1,2]}");
  const auto j = nlohmann::ordered_json::parse("{" + m.text() + "}");
  CHECK(j["ms"].get<double>() == 41.2);
  CHECK(j["whole"].is_number_float());
  CHECK(j["big"].is_number_unsigned());
}
