#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "config/host_pattern.hpp"
#include "config/punycode.hpp"

using broker::config::host_pattern;
using broker::config::normalize_host;

TEST_CASE("normalize_host lower-cases and drops one trailing dot", "[config][host]") {
  CHECK(normalize_host("API.GitHub.COM") == "api.github.com");
  CHECK(normalize_host("api.github.com.") == "api.github.com");
  CHECK_FALSE(normalize_host("api.github.com.."));
  CHECK_FALSE(normalize_host("."));
  CHECK_FALSE(normalize_host(""));
  CHECK(normalize_host("localhost") == "localhost");
  CHECK(normalize_host("my_host.internal") == "my_host.internal");
}

TEST_CASE("normalize_host converts UTF-8 labels to punycode", "[config][host]") {
  CHECK(normalize_host("bücher.example") == "xn--bcher-kva.example");
  CHECK(normalize_host("münchen.de") == "xn--mnchen-3ya.de");
  CHECK(normalize_host("MÜNCHEN.de") == "xn--mnchen-3ya.de");  // upper-case Ü folds to ü
  CHECK(normalize_host("xn--mnchen-3ya.de") == "xn--mnchen-3ya.de");
  CHECK(normalize_host("XN--MNCHEN-3YA.DE") == "xn--mnchen-3ya.de");
  CHECK(normalize_host("пример.рф") == "xn--e1afmkfd.xn--p1ai");
  // Ideographic full stop separates labels, as UTS #46 maps it to '.'.
  CHECK(normalize_host("bücher\xE3\x80\x82"
                       "example") == "xn--bcher-kva.example");
}

TEST_CASE("punycode_encode matches RFC 3492 samples", "[config][host]") {
  using broker::config::punycode_encode;
  // 7.1 (A) Arabic (Egyptian)
  CHECK(punycode_encode(U"\u0644\u064A\u0647\u0645\u0627\u0628\u062A\u0643\u0644\u0645\u0648"
                        U"\u0634\u0639\u0631\u0628\u064A\u061F") == "egbpdaj6bu4bxfgehfvwxn");
  // 7.1 (B) Chinese (simplified)
  CHECK(punycode_encode(U"\u4ED6\u4EEC\u4E3A\u4EC0\u4E48\u4E0D\u8BF4\u4E2D\u6587") ==
        "ihqwcrb4cv8a8dqg056pqjye");
  // 7.1 (L) mixed basic and non-basic code points
  CHECK(punycode_encode(U"3\u5E74B\u7D44\u91D1\u516B\u5148\u751F") == "3B-ww4c5e180e575a65lsy2b");
  CHECK(punycode_encode(U"abc") == "abc-");
}

TEST_CASE("normalize_host refuses invalid names", "[config][host]") {
  CHECK_FALSE(normalize_host("a..b"));
  CHECK_FALSE(normalize_host(".example.com"));
  CHECK_FALSE(normalize_host("exa mple.com"));
  CHECK_FALSE(normalize_host("example.com:443"));
  CHECK_FALSE(normalize_host("*.example.com"));
  CHECK_FALSE(normalize_host("user@example.com"));
  CHECK_FALSE(
      normalize_host("ex\xff"
                     "ample.com"));  // not UTF-8
  CHECK_FALSE(
      normalize_host("gith\xC2\xAD"
                     "ub.com"));  // soft hyphen: invisible
  CHECK_FALSE(
      normalize_host("a\xE2\x80\x8B"
                     "b.com"));  // zero-width space
  CHECK(normalize_host(std::string(63, 'a') + ".com"));
  CHECK_FALSE(normalize_host(std::string(64, 'a') + ".com"));
  std::string long_name;
  for (int i = 0; i < 50; ++i) long_name += "abcd.";
  long_name += "com";  // 253 characters
  CHECK(normalize_host(long_name));
  CHECK_FALSE(normalize_host("x" + long_name));
}

TEST_CASE("IP literals are not host names", "[config][host]") {
  CHECK_FALSE(normalize_host("10.0.0.1"));
  CHECK_FALSE(normalize_host("127.1"));
  CHECK_FALSE(normalize_host("0x7f.1"));
  CHECK_FALSE(normalize_host("2130706433"));
  CHECK_FALSE(normalize_host("::1"));
  CHECK_FALSE(normalize_host("[::1]"));
  CHECK(normalize_host("1.2.3.example"));  // digits are fine where the last label is not
  CHECK(normalize_host("0xdead.beef") == "0xdead.beef");
}

TEST_CASE("exact host patterns", "[config][host]") {
  auto p = host_pattern::parse("API.GitHub.com.");
  REQUIRE(p);
  CHECK(p->text() == "api.github.com");
  CHECK(p->matches("api.github.com"));
  CHECK_FALSE(p->matches("github.com"));
  CHECK_FALSE(p->matches("x.api.github.com"));
  CHECK_FALSE(p->matches("api.github.com.evil.example"));
}

TEST_CASE("wildcard patterns match subdomains at any depth, not the apex", "[config][host]") {
  auto p = host_pattern::parse("*.githubusercontent.com");
  REQUIRE(p);
  CHECK(p->text() == "*.githubusercontent.com");
  CHECK(p->matches("raw.githubusercontent.com"));
  CHECK(p->matches("a.b.c.githubusercontent.com"));
  CHECK_FALSE(p->matches("githubusercontent.com"));
  CHECK_FALSE(p->matches("evilgithubusercontent.com"));
  CHECK_FALSE(p->matches("githubusercontent.com.evil.com"));

  auto idn = host_pattern::parse("*.Bücher.example");
  REQUIRE(idn);
  CHECK(idn->text() == "*.xn--bcher-kva.example");
  CHECK(idn->matches(*normalize_host("shop.bücher.example")));
}

TEST_CASE("the any pattern matches host names but never IP literals", "[config][host]") {
  auto any = host_pattern::parse("*");
  REQUIRE(any);
  CHECK(any->matches("example.com"));
  CHECK(any->matches("localhost"));
  CHECK_FALSE(any->matches("10.0.0.1"));
  CHECK_FALSE(any->matches("::1"));
  auto wild = host_pattern::parse("*.0.1");
  CHECK_FALSE(wild);  // "0.1" is not a host name
}

TEST_CASE("malformed host patterns", "[config][host]") {
  for (const char* bad :
       {"", "**", "*.", "*.*.example.com", "a.*.example.com", "*example.com", "ex*ample.com",
        "10.0.0.1", "10.0.0.0/8", "[::1]", "http://x.com", "x.com/path", "x.com:443"})
    CHECK_FALSE(host_pattern::parse(bad));
}

TEST_CASE("an ASCII name normalizes as its full-width spelling does", "[config][host]") {
  // ASCII names take a fast path; a full-width letter, digit or dot (which fold to ASCII) sends
  // the same name down the code-point path. Both must agree on every input.
  const std::string alphabet = "abcXYZ019-_.:/ \x01";
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1), length(1, 12);
  int compared = 0, valid = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string name;
    const std::size_t n = length(rng);
    for (std::size_t k = 0; k < n; ++k) name += alphabet[pick(rng)];
    if (i % 50 == 0) name = std::string(64, 'a') + "." + name;  // over the label limit
    const auto at = name.find_first_of("abcXYZ019.");
    if (at == std::string::npos) continue;
    const char c = name[at];
    std::string wide;
    if (c == '.') {
      wide = "\xEF\xBC\x8E";  // U+FF0E
    } else {
      const char32_t cp = c >= 'a'   ? 0xff41 + (c - 'a')
                          : c >= 'A' ? 0xff21 + (c - 'A')
                                     : 0xff10 + (c - '0');
      wide = {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
              static_cast<char>(0x80 | (cp & 0x3F))};
    }
    const std::string spelled = name.substr(0, at) + wide + name.substr(at + 1);
    INFO(name);
    REQUIRE(normalize_host(name) == normalize_host(spelled));
    ++compared;
    if (normalize_host(name)) ++valid;
  }
  CHECK(compared > 15000);
  CHECK(valid > 1000);
}
