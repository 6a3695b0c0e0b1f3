#include "brokers/scrubber.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using broker::brokers::scrub_pattern;
using broker::brokers::scrub_value;
using broker::brokers::stream_scrubber;

namespace {

// The whole-input answer: at each position the longest pattern that matches there, else copy.
std::string reference(std::string_view in, const std::vector<scrub_pattern>& patterns) {
  std::string out;
  for (std::size_t i = 0; i < in.size();) {
    const scrub_pattern* best = nullptr;
    for (const scrub_pattern& p : patterns)
      if (in.substr(i).starts_with(p.find) && (!best || p.find.size() > best->find.size()))
        best = &p;
    if (best) {
      out.append(best->replacement);
      i += best->find.size();
    } else {
      out.push_back(in[i++]);
    }
  }
  return out;
}

std::size_t longest(const std::vector<scrub_pattern>& patterns) {
  std::size_t n = 0;
  for (const auto& p : patterns) n = std::max(n, p.find.size());
  return n;
}

// Feeds the pieces one by one, checking the invariants after each: the lag bound, and that
// everything released so far is final (a prefix of the whole-input answer: no byte of a match
// is released before the match is replaced).
std::string run(const std::vector<std::string_view>& pieces,
                const std::vector<scrub_pattern>& patterns, const std::string& expected) {
  stream_scrubber s(patterns);
  std::string out;
  const std::size_t bound = longest(patterns) == 0 ? 0 : longest(patterns) - 1;
  for (std::string_view piece : pieces) {
    const std::size_t before = out.size();
    auto matched = s.feed(piece, out);
    CHECK(s.held() <= bound);
    CHECK(expected.compare(0, out.size(), out) == 0);
    if (matched) {  // the replacement of the reported pattern is out already
      CHECK(out.size() > before);
      CHECK(out.find(patterns[*matched].replacement, before) != std::string::npos);
    }
  }
  s.finish(out);
  CHECK(s.held() == 0);
  return out;
}

const std::vector<scrub_pattern> token_patterns{
    {"ghp_REALREALREAL", "ghp_dummydummydu"},
    {"sk-REAL-1234", "sk-dumm-9876"},
};

}  // namespace

TEST_CASE("scrubber replaces patterns at every split position", "[brokers][scrubber]") {
  const std::string input =
      "{\"token\":\"ghp_REALREALREAL\",\"k\":\"sk-REAL-1234\"}ghp_REALREALREALsk-REAL-1234"
      " ghp_REALREAL sk-REAL-123 end";
  const std::string expected = reference(input, token_patterns);
  REQUIRE(expected.find("REAL") == expected.find("REALREAL sk"));  // only the partials remain
  for (std::size_t i = 0; i <= input.size(); ++i) {
    std::string_view in(input);
    CHECK(run({in.substr(0, i), in.substr(i)}, token_patterns, expected) == expected);
  }
}

TEST_CASE("scrubber: every split into three pieces, pattern spanning all three",
          "[brokers][scrubber]") {
  const std::string input = "xx ghp_REALREALREAL yy sk-REAL-1234";
  const std::string expected = reference(input, token_patterns);
  std::string_view in(input);
  for (std::size_t i = 0; i <= input.size(); ++i)
    for (std::size_t j = i; j <= input.size(); ++j)
      CHECK(run({in.substr(0, i), in.substr(i, j - i), in.substr(j)}, token_patterns, expected) ==
            expected);
}

TEST_CASE("scrubber: byte-at-a-time feeding", "[brokers][scrubber]") {
  const std::string input = "ghp_REALREALREALghp_REALREALREAL.sk-REAL-1234sk-REAL-1234";
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < input.size(); ++i)
    bytes.push_back(std::string_view(input).substr(i, 1));
  CHECK(run(bytes, token_patterns, reference(input, token_patterns)) ==
        "ghp_dummydummydughp_dummydummydu.sk-dumm-9876sk-dumm-9876");
}

TEST_CASE("scrubber: patterns that are prefixes of each other", "[brokers][scrubber]") {
  const std::vector<scrub_pattern> patterns{{"ab", "XY"}, {"abcd", "PQRS"}};
  for (auto [input, expected] :
       std::vector<std::pair<std::string, std::string>>{{"xxabcdyy", "xxPQRSyy"},
                                                        {"xxabcyy", "xxXYcyy"},
                                                        {"xxabc", "xxXYc"},
                                                        {"ab", "XY"},
                                                        {"abcdab", "PQRSXY"},
                                                        {"aabcabcd", "aXYcPQRS"}}) {
    CHECK(reference(input, patterns) == expected);
    std::string_view in(input);
    for (std::size_t i = 0; i <= input.size(); ++i)
      CHECK(run({in.substr(0, i), in.substr(i)}, patterns, expected) == expected);
  }
}

TEST_CASE("scrubber: an earlier open candidate wins over a later complete one",
          "[brokers][scrubber]") {
  const std::vector<scrub_pattern> patterns{{"xbcde", "VWXYZ"}, {"bc", "12"}};
  for (auto [input, expected] :
       std::vector<std::pair<std::string, std::string>>{{"axbcdef", "aVWXYZf"},
                                                        {"axbcdf", "ax12df"},
                                                        {"axbc", "ax12"},
                                                        {"xbcxbcde", "x12VWXYZ"}}) {
    std::string_view in(input);
    for (std::size_t i = 0; i <= input.size(); ++i)
      CHECK(run({in.substr(0, i), in.substr(i)}, patterns, expected) == expected);
  }
}

TEST_CASE("scrubber: a match found only at finish is reported", "[brokers][scrubber]") {
  const std::vector<scrub_pattern> patterns{{"abcd", "WXYZ"}, {"b", "2"}};
  stream_scrubber s(patterns);
  std::string out;
  CHECK_FALSE(s.feed("zab", out));
  CHECK(out == "z");
  CHECK(s.held() == 2);
  auto last = s.finish(out);
  REQUIRE(last);
  CHECK(*last == 1);
  CHECK(out == "za2");
  CHECK(s.matches() == 1);
}

TEST_CASE("scrubber: random inputs over a small alphabet match the reference",
          "[brokers][scrubber]") {
  // Many overlaps: patterns over {a,b,c} and inputs over the same letters.
  const std::vector<scrub_pattern> patterns{
      {"abcab", "12345"}, {"ab", "67"}, {"bca", "890"}, {"cc", "XY"}, {"abcabcab", "ABCDEFGH"}};
  std::mt19937 rng(12345);
  for (int round = 0; round < 400; ++round) {
    std::string input(rng() % 40, 'a');
    for (char& c : input) c = static_cast<char>('a' + rng() % 3);
    const std::string expected = reference(input, patterns);
    std::vector<std::string_view> pieces;
    std::string_view rest(input);
    while (!rest.empty()) {
      std::size_t n = std::min<std::size_t>(rest.size(), rng() % 6);  // empty pieces too
      pieces.push_back(rest.substr(0, n));
      rest.remove_prefix(n);
    }
    CHECK(run(pieces, patterns, expected) == expected);
  }
}

TEST_CASE("scrubber reports the first pattern matched in a feed and counts matches",
          "[brokers][scrubber]") {
  stream_scrubber s(token_patterns);
  std::string out;
  CHECK_FALSE(s.feed("nothing here ", out));
  CHECK(out == "nothing here ");
  CHECK(s.held() == 0);  // no pattern prefix at the end: nothing is held back
  auto m = s.feed("a sk-REAL-1234 b ghp_REALREALREAL", out);
  REQUIRE(m);
  CHECK(*m == 1);
  CHECK(s.matches() == 2);
  CHECK_FALSE(s.feed(" tail ghp_RE", out));
  CHECK(s.held() == 6);
  CHECK(out == "nothing here a sk-dumm-9876 b ghp_dummydummydu tail ");
  auto spanning = s.feed("ALREALREAL!", out);
  REQUIRE(spanning);
  CHECK(*spanning == 0);
  CHECK(out == "nothing here a sk-dumm-9876 b ghp_dummydummydu tail ghp_dummydummydu!");
  CHECK_FALSE(s.finish(out));
  CHECK(s.matches() == 3);
}

TEST_CASE("scrubber without patterns passes everything through", "[brokers][scrubber]") {
  stream_scrubber s({});
  CHECK_FALSE(s.active());
  std::string out;
  CHECK_FALSE(s.feed("ghp_REALREALREAL", out));
  CHECK(s.held() == 0);
  CHECK(out == "ghp_REALREALREAL");
  CHECK_FALSE(s.finish(out));
  CHECK(out == "ghp_REALREALREAL");
}

TEST_CASE("scrubber holds at most the longest pattern minus one", "[brokers][scrubber]") {
  stream_scrubber s(std::vector<scrub_pattern>{{"aaaa", "bbbb"}});
  std::string out;
  s.feed("xaaa", out);
  CHECK(s.held() == 3);
  CHECK(out == "x");
  s.feed("", out);
  CHECK(s.held() == 3);
  s.feed("a", out);
  CHECK(s.held() == 0);
  CHECK(out == "xbbbb");
}

TEST_CASE("scrubber refuses malformed patterns", "[brokers][scrubber]") {
  CHECK_THROWS_AS(stream_scrubber(std::vector<scrub_pattern>{{"", ""}}), std::invalid_argument);
  CHECK_THROWS_AS(stream_scrubber(std::vector<scrub_pattern>{{"abc", "ab"}}),
                  std::invalid_argument);
}

TEST_CASE("scrub_value replaces every pattern in a complete value", "[brokers][scrubber]") {
  std::string value = "token ghp_REALREALREAL and sk-REAL-1234, again ghp_REALREALREAL";
  CHECK(scrub_value(value, token_patterns) == 3);
  CHECK(value == "token ghp_dummydummydu and sk-dumm-9876, again ghp_dummydummydu");
  std::string partial = "ghp_REALREAL";
  CHECK(scrub_value(partial, token_patterns) == 0);
  CHECK(partial == "ghp_REALREAL");
  std::string none = "x";
  CHECK(scrub_value(none, {}) == 0);

  const std::vector<scrub_pattern> nested{{"abcd", "WXYZ"}, {"b", "2"}};
  std::string tail = "zabc";
  CHECK(scrub_value(tail, nested) == 1);
  CHECK(tail == "za2c");
}
