#include "brokers/dummy_shape.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/brokers/dummy_alphabets.hpp"

using broker::brokers::github_checksum;
using broker::brokers::known_prefix;
using broker::brokers::public_shape;
using broker::brokers::shape_piece;

namespace {

using namespace broker::brokers::test;

using kind = shape_piece::kind;

// A piece as the tests write it: what, where, and the alphabet a drawn one comes from.
struct piece {
  kind what;
  std::size_t at, size;
  std::string_view alphabet = {};
  bool operator==(const piece&) const = default;
};

std::ostream& operator<<(std::ostream& out, const piece& p) {
  const char* names[] = {"keep", "draw", "checksum"};
  return out << names[static_cast<int>(p.what)] << '(' << p.at << ',' << p.size << ',' << p.alphabet
             << ')';
}

std::vector<piece> pieces(std::string_view value) {
  std::vector<piece> out;
  for (const shape_piece& p : public_shape(value))
    out.push_back({p.what, p.at, p.size, p.alphabet});
  return out;
}

// The one alphabet `value` is drawn from, when all of it is drawn from one.
std::string_view drawn_from(std::string_view value) {
  const std::vector<piece> shape = pieces(value);
  REQUIRE(shape.size() == 1);
  REQUIRE(shape[0].what == kind::draw);
  CHECK(shape[0].size == value.size());
  return shape[0].alphabet;
}

std::string repeat(std::string_view alphabet, std::size_t size) {
  std::string out;
  for (std::size_t i = 0; i < size; ++i) out += alphabet[i * 7 % alphabet.size()];
  return out;
}

std::string checksum(std::string_view random) {
  const auto sum = github_checksum(random);
  return std::string(sum.begin(), sum.end());
}

}  // namespace

TEST_CASE("known_prefix picks the longest known prefix", "[brokers][dummy_shape]") {
  CHECK(known_prefix("sk-ant-api03-abc") == "sk-ant-api03-");
  CHECK(known_prefix("sk-ant-admin01-abc") == "sk-ant-admin01-");
  CHECK(known_prefix("sk-ant-other") == "sk-ant-");
  CHECK(known_prefix("sk-proj-abc") == "sk-proj-");
  CHECK(known_prefix("sk-svcacct-abc") == "sk-svcacct-");
  CHECK(known_prefix("sk-admin-abc") == "sk-admin-");
  CHECK(known_prefix("sk-abc") == "sk-");
  CHECK(known_prefix("github_pat_11ABC") == "github_pat_");
  CHECK(known_prefix("ghp_abc") == "ghp_");
  CHECK(known_prefix("AKIAIOSFODNN7EXAMPLE") == "AKIA");
  CHECK(known_prefix("plain-token") == "");
  CHECK(known_prefix("ghp_") == "");  // nothing after it: not a token of that kind
  CHECK(known_prefix("") == "");
}

TEST_CASE("GitHub's checksum is the CRC32 of the random part in 6 base62 digits",
          "[brokers][dummy_shape]") {
  // Computed independently: Python's zlib.crc32 of the 30 characters, written in base62 with
  // the digits 0-9A-Za-z and zero-padded to 6 (the scheme GitHub's secret scanners check).
  CHECK(checksum("BrokerChecksumVectorNumber0001") == "1wcJTv");  // CRC32 0x6a3b9cdb
  CHECK(checksum("BrokerChecksumVectorNumber0002") == "4S84YL");  // 0xf332cd61
  CHECK(checksum("BrokerChecksumVectorNumber0004") == "0TsfR6");  // 0x1a516854: padded
  CHECK(checksum("000000000000000000000000000000") == "2C8GjS");  // 0x77e5db82
  CHECK(checksum("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz") == "4IlJEz");  // 0xeaf2cd15
  CHECK(checksum("") == "000000");                                // CRC32 0
}

TEST_CASE("a GitHub token keeps its prefix, and its checksum only where the real one is valid",
          "[brokers][dummy_shape]") {
  const std::string random = repeat(base62, 30);
  const std::string valid = "ghp_" + random + checksum(random);
  CHECK(pieces(valid) == std::vector<piece>{{kind::keep, 0, 4},
                                            {kind::draw, 4, 30, base62},
                                            {kind::github_checksum, 34, 6}});
  std::string invalid = valid;
  invalid.back() = invalid.back() == 'A' ? 'B' : 'A';
  CHECK(pieces(invalid) == std::vector<piece>{{kind::keep, 0, 4}, {kind::draw, 4, 36, base62}});
  // Letters only, digits only: still GitHub's base62, never a smaller alphabet.
  CHECK(pieces("ghp_" + repeat("abcXYZ", 36))[1] == piece{kind::draw, 4, 36, base62});
  CHECK(pieces("gho_" + repeat("0123456789", 36))[1] == piece{kind::draw, 4, 36, base62});
  // npm's tokens took the format.
  CHECK(pieces("npm_" + random + checksum(random)).back() == piece{kind::github_checksum, 34, 6});
}

TEST_CASE("a fine-grained GitHub token keeps its '_' between its parts", "[brokers][dummy_shape]") {
  const std::string token = "github_pat_" + repeat(base62, 22) + "_" + repeat("a1B", 59);
  CHECK(pieces(token) == std::vector<piece>{{kind::keep, 0, 11},
                                            {kind::draw, 11, 22, base62},
                                            {kind::keep, 33, 1},
                                            {kind::draw, 34, 59, base62}});
  // Where its last part ends in a valid checksum, the dummy's does too.
  const std::string random = repeat("x7Q", 53);
  CHECK(pieces("github_pat_" + repeat(base62, 22) + "_" + random + checksum(random)).back() ==
        piece{kind::github_checksum, 87, 6});
}

TEST_CASE("each run is drawn from the smallest public alphabet that holds it",
          "[brokers][dummy_shape]") {
  CHECK(drawn_from("31415926535") == "0123456789");
  CHECK(drawn_from("deadbeef0123") == "0123456789abcdef");
  CHECK(drawn_from("DEADBEEF0123") == "0123456789ABCDEF");
  CHECK(drawn_from("MZXW6YTBOI") == "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
  CHECK(drawn_from("abcxyz019") == "abcdefghijklmnopqrstuvwxyz0123456789");
  CHECK(drawn_from("ABCXYZ019") == "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  CHECK(drawn_from("abcXYZ") == "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
  CHECK(drawn_from("abcXYZ019") == base62);
  CHECK(drawn_from("abc-XYZ_019") == base64url);
  CHECK(drawn_from("abc+XYZ/019") ==
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  // Other characters: not the set the value uses, but plain characters, which no encoder
  // changes where dummies travel (not even '~', which a form encoder escapes).
  CHECK(drawn_from("abcDEF123.ghiJKL456.mnoPQR789") == plain);
  CHECK(drawn_from("pass word: \"quoted\" \xc3\xa9!") == plain);
  CHECK(drawn_from("--------") == base64url);
}

TEST_CASE("a run of other characters is drawn from what no form encoder escapes",
          "[brokers][dummy_shape]") {
  // A Google refresh token ("1//0" and base64url): Node's clients send it in a form body
  // (URLSearchParams), which keeps only letters, digits and "*-._" and writes '~' as %7E. A
  // dummy drawn with '~' reached the token endpoint escaped, where its swap did not find it.
  const std::string_view refresh = "1//0GeminiRefresh-abc_DEF";
  CHECK(drawn_from(refresh) == plain);
  const auto form_keeps = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '*' ||
           c == '-' || c == '.' || c == '_';
  };
  for (char c : plain) CHECK(form_keeps(c));
}

TEST_CASE("a family's alphabet is the least its runs are drawn from", "[brokers][dummy_shape]") {
  // AWS key ids are base32; one that is not is drawn from the next alphabet that holds it.
  CHECK(pieces("AKIAIOSFODNN7EXAMPLE")[1] ==
        piece{kind::draw, 4, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"});
  CHECK(pieces("AKIA1234567890ABCDEF")[1] ==
        piece{kind::draw, 4, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"});
  CHECK(pieces("dop_v1_" + repeat("0123456789abcdef", 64))[1] ==
        piece{kind::draw, 7, 64, "0123456789abcdef"});
  CHECK(pieces("sk-proj-" + repeat(base64url, 40))[1] == piece{kind::draw, 8, 40, base64url});
}

TEST_CASE("Slack's and SendGrid's separators stay; each part has its own alphabet",
          "[brokers][dummy_shape]") {
  const std::string slack = "xoxb-123456789012-1234567890123-" + repeat(base62, 24);
  CHECK(pieces(slack) == std::vector<piece>{{kind::keep, 0, 5},
                                            {kind::draw, 5, 12, "0123456789"},
                                            {kind::keep, 17, 1},
                                            {kind::draw, 18, 13, "0123456789"},
                                            {kind::keep, 31, 1},
                                            {kind::draw, 32, 24, base62}});
  const std::string sendgrid = "SG." + repeat(base64url, 22) + "." + repeat(base64url, 43);
  CHECK(pieces(sendgrid) == std::vector<piece>{{kind::keep, 0, 3},
                                               {kind::draw, 3, 22, base64url},
                                               {kind::keep, 25, 1},
                                               {kind::draw, 26, 43, base64url}});
  // All prefix and separators: nothing to draw, so all of it is drawn.
  CHECK(drawn_from("xoxb--") == base64url);
}

TEST_CASE("base64 padding stays at the end", "[brokers][dummy_shape]") {
  const std::string_view base64 =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  CHECK(pieces("c2VjcmV0+/c2VjcmV0==") ==
        std::vector<piece>{{kind::draw, 0, 18, base64}, {kind::keep, 18, 2}});
  CHECK(pieces("c2VjcmV0-_c2VjcmV0c=") ==
        std::vector<piece>{{kind::draw, 0, 19, base64url}, {kind::keep, 19, 1}});
  // '=' elsewhere is no padding: all of it is drawn.
  CHECK(drawn_from("a=b=") == plain);
  CHECK(drawn_from("=") == plain);
}

TEST_CASE("a UUID keeps its dashes, version and variant", "[brokers][dummy_shape]") {
  const std::string_view hex = "0123456789abcdef";
  CHECK(pieces("6f1c8a2e-93b4-4d7f-a1e5-0c2b9d8e7f61") ==
        std::vector<piece>{{kind::draw, 0, 8, hex},
                           {kind::keep, 8, 1},
                           {kind::draw, 9, 4, hex},
                           {kind::keep, 13, 1},
                           {kind::keep, 14, 1},
                           {kind::draw, 15, 3, hex},
                           {kind::keep, 18, 1},
                           {kind::draw, 19, 1, "89ab"},
                           {kind::draw, 20, 3, hex},
                           {kind::keep, 23, 1},
                           {kind::draw, 24, 12, hex}});
  // Upper case: upper-case digits. Mixed case is no UUID this knows.
  CHECK(pieces("6F1C8A2E-93B4-4D7F-A1E5-0C2B9D8E7F61")[0].alphabet == "0123456789ABCDEF");
  CHECK(drawn_from("6F1C8a2e-93b4-4d7f-a1e5-0c2b9d8e7f61") == base64url);
}

TEST_CASE("a JWT keeps its header and claims; its signature is drawn", "[brokers][dummy_shape]") {
  const std::string head = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9";
  const std::string claims = "eyJleHAiOjE5MDAwMDAwMDB9";
  const std::string jwt = head + "." + claims + "." + repeat("Qm9n", 43);
  const std::size_t signature = head.size() + claims.size() + 2;
  CHECK(pieces(jwt) ==
        std::vector<piece>{{kind::keep, 0, signature}, {kind::draw, signature, 43, base64url}});
}

TEST_CASE("an empty value has no shape", "[brokers][dummy_shape]") {
  CHECK_THROWS_AS(public_shape(""), std::invalid_argument);
}
