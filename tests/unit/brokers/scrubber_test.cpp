#include "brokers/scrubber.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
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
  CHECK(out.empty());  // every byte could begin a match of a token: all are held
  CHECK(s.held() == 3);
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

// docs/policy.md: how much is held back never depends on whether the tail begins a value. A child
// that makes an upstream echo "ghp_" plus a guess and pause sees the same cut for every guess.
TEST_CASE("scrubber holds back the same for a value's prefix and for any other token bytes",
          "[brokers][scrubber]") {
  const std::string real = "ghp_R8aZ3kQ0pLm2Xw7Yt5Vb1Nc9Ds4Fe6Gh0Ji";
  const std::string dummy = "ghp_" + std::string(real.size() - 4, 'd');
  const std::vector<scrub_pattern> patterns{{real, dummy}};
  const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=%";
  for (std::size_t known = 4; known + 1 < real.size(); ++known) {  // short of the whole value
    const std::string before = "{\"echo\": \"" + real.substr(0, known);
    std::optional<std::size_t> cut;
    for (char guess : alphabet) {
      stream_scrubber s(patterns);
      std::string out;
      CHECK_FALSE(s.feed(before + guess, out));
      if (!cut) cut = out.size();
      CHECK(out.size() == *cut);
      CHECK(s.held() == before.size() + 1 - *cut);
    }
    CHECK(*cut == before.size() - known);  // from the first token byte on, right or wrong
  }
}

TEST_CASE("scrubber holds nothing after a byte no value has", "[brokers][scrubber]") {
  const std::vector<scrub_pattern> patterns{{"ghp_REALREALREAL", "ghp_dummydummydu"}};
  for (std::string_view event : {"data: {\"a\": \"ghp_REAL\"}\n\n", "x ghp_REALRE ", "[ghp_RE,",
                                 "ghp_REALREAL\"", "ghp_RE}", "ghp_REAL\r\n"}) {
    stream_scrubber s(patterns);
    std::string out;
    s.feed(event, out);
    CHECK(s.held() == 0);
    CHECK(out == event);
  }
}

TEST_CASE("scrubber holds a whole class of bytes when a value has one of it",
          "[brokers][scrubber]") {
  const auto held = [](std::string_view value, std::string_view tail) {
    const std::string replacement(value.size(), 'x');
    stream_scrubber s(std::vector<scrub_pattern>{{value, replacement}});
    std::string out;
    s.feed(tail, out);
    return s.held();
  };
  // Token bytes are always held; punctuation only when some value has punctuation, any of it.
  CHECK(held("p4ssw0rd", "a:b") == 1);
  CHECK(held("p4ss!w0rd", "a:b") == 3);
  CHECK(held("p4ss!w0rd", "a\"b") == 3);
  CHECK(held("p4ss!w0rd", "a b") == 1);
  CHECK(held("p4ss w0rd", "a\tb") == 3);
  CHECK(held("p4ss w0rd", "a\nb") == 1);
  CHECK(held("p4ss\nw0rd", "a\nb") == 3);
  CHECK(held("p4ss\nw0rd",
             "a\x80"
             "b") == 3);
  // ... and never more than the longest value less one.
  CHECK(held("p4ssw0rd", "abcdefghijkl") == 7);
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

// Many patterns: the index (brokers/scrub_index.hpp) against a naive whole-text reference.

namespace {

using broker::brokers::scrub_index;

struct naive_result {
  std::string out;
  std::vector<std::size_t> matched;  // pattern indices, in stream order
};

// Leftmost-longest, found the slow way: from the current position, each pattern's next
// occurrence; the earliest wins, then the longest, then the lowest index; replace and go on
// after it.
naive_result naive(std::string_view in, const std::vector<scrub_pattern>& patterns) {
  naive_result r;
  std::size_t pos = 0;
  for (;;) {
    std::size_t best = std::string_view::npos, which = 0;
    for (std::size_t i = 0; i < patterns.size(); ++i) {
      const std::size_t at = in.find(patterns[i].find, pos);
      if (at == std::string_view::npos) continue;
      if (at < best || (at == best && patterns[i].find.size() > patterns[which].find.size())) {
        best = at;
        which = i;
      }
    }
    if (best == std::string_view::npos) break;
    r.out.append(in.substr(pos, best - pos));
    r.out.append(patterns[which].replacement);
    r.matched.push_back(which);
    pos = best + patterns[which].find.size();
  }
  r.out.append(in.substr(pos));
  return r;
}

// Feeds the pieces to `s`, checking what run() checks, and also what each call reports: the
// first pattern it matched is the next one the reference matched, and the count adds up.
std::string run_checked(stream_scrubber s, const std::vector<std::string_view>& pieces,
                        const std::vector<scrub_pattern>& patterns, const naive_result& expected) {
  std::string out;
  const std::size_t bound = longest(patterns) - 1;
  std::size_t reported = 0;  // matches accounted for by matches()
  std::size_t fed = 0;
  const auto check_call = [&](std::optional<std::size_t> first) {
    if (first) {
      REQUIRE(reported < expected.matched.size());
      CHECK(*first == expected.matched[reported]);
    }
    CHECK((first.has_value() == (s.matches() > reported)));
    reported = s.matches();
  };
  for (std::string_view piece : pieces) {
    check_call(s.feed(piece, out));
    CHECK(s.held() <= bound);
    CHECK(expected.out.compare(0, out.size(), out) == 0);
    fed += piece.size();
    CHECK(out.size() + s.held() == fed);  // nothing lost or duplicated so far
  }
  check_call(s.finish(out));
  CHECK(s.held() == 0);
  CHECK(s.matches() == expected.matched.size());
  return out;
}

// Random patterns over a 4-letter alphabet, so that they share prefixes, hold repeated 4-byte
// grams and occur inside each other; then prefixes, suffixes and infixes of some of them,
// extensions of others, and a duplicate.
struct pattern_set {
  std::vector<std::string> finds, replacements;
  std::vector<scrub_pattern> patterns;
};

pattern_set many_patterns(std::mt19937& rng, std::size_t count, std::size_t min_size,
                          std::size_t max_size) {
  pattern_set set;
  const auto letters = [&](std::size_t n) {
    std::string s(n, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng() % 4);
    return s;
  };
  while (set.finds.size() < count) {
    const std::size_t size = min_size + rng() % (max_size - min_size + 1);
    if (set.finds.empty() || rng() % 3 == 0) {
      set.finds.push_back(letters(size));
      continue;
    }
    const std::string& base = set.finds[rng() % set.finds.size()];
    std::string derived;
    switch (rng() % 5) {
      case 0:  // a prefix
        derived = base.substr(0, std::max(min_size, base.size() - 1 - rng() % base.size()));
        break;
      case 1:  // a suffix
        derived = base.substr(std::min(base.size() - min_size, 1 + rng() % base.size()));
        break;
      case 2:  // an extension: base is its prefix
        derived = base + letters(1 + rng() % 6);
        break;
      case 3:  // a shared prefix, another tail
        derived = base.substr(0, base.size() / 2) + letters(size - std::min(size, base.size() / 2));
        break;
      default:  // base inside it
        derived = letters(1 + rng() % 3) + base + letters(rng() % 3);
    }
    if (derived.size() >= min_size) set.finds.push_back(derived);
  }
  set.finds.push_back(set.finds[rng() % set.finds.size()]);  // a duplicate: the lower index wins
  for (std::size_t i = 0; i < set.finds.size(); ++i) {
    std::string r(set.finds[i].size(), 'A');
    for (char& c : r) c = static_cast<char>('A' + i % 26);
    set.replacements.push_back(r);
  }
  for (std::size_t i = 0; i < set.finds.size(); ++i)
    set.patterns.push_back({set.finds[i], set.replacements[i]});
  return set;
}

// Text made of pieces of the patterns (whole, cut short, overlapping) and random letters.
std::string text_for(std::mt19937& rng, const pattern_set& set, std::size_t size) {
  std::string text;
  while (text.size() < size) {
    const std::string& p = set.finds[rng() % set.finds.size()];
    switch (rng() % 4) {
      case 0:
      case 1:
        text += p;
        break;
      case 2:
        text += p.substr(0, rng() % p.size());
        break;
      default:
        for (std::size_t n = rng() % 5; n > 0; --n)
          text.push_back(static_cast<char>('a' + rng() % 4));
    }
  }
  return text;
}

std::vector<std::shared_ptr<const scrub_index>> every_search(
    const std::vector<scrub_pattern>& patterns) {
  return {std::make_shared<const scrub_index>(patterns),
          std::make_shared<const scrub_index>(patterns, scrub_index::search::hashed),
          std::make_shared<const scrub_index>(patterns, scrub_index::search::direct)};
}

}  // namespace

TEST_CASE("scrubber: the naive reference agrees with the position-by-position one",
          "[brokers][scrubber]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    const pattern_set set = many_patterns(rng, 10, 1, 12);
    const std::string text = text_for(rng, set, 200);
    CHECK(naive(text, set.patterns).out == reference(text, set.patterns));
  }
}

TEST_CASE("scrubber: 40 patterns, every split position, every search", "[brokers][scrubber]") {
  std::mt19937 rng(2024);
  for (int round = 0; round < 6; ++round) {
    const pattern_set set = many_patterns(rng, 40, 8, 40);
    const std::string text = text_for(rng, set, 300);
    const naive_result expected = naive(text, set.patterns);
    REQUIRE(expected.matched.size() > 5);
    const auto indexes = every_search(set.patterns);
    REQUIRE(indexes[0]->hashed());
    REQUIRE(indexes[1]->hashed());
    REQUIRE_FALSE(indexes[2]->hashed());
    std::string_view in(text);
    for (const auto& index : indexes) {
      CHECK(run_checked(stream_scrubber(index), {in}, set.patterns, expected) == expected.out);
      for (std::size_t i = 0; i <= text.size(); ++i)
        CHECK(run_checked(stream_scrubber(index), {in.substr(0, i), in.substr(i)}, set.patterns,
                          expected) == expected.out);
    }
    // The constructor that indexes for itself.
    for (std::size_t i = 0; i <= text.size(); i += 7)
      CHECK(run_checked(stream_scrubber(set.patterns), {in.substr(0, i), in.substr(i)},
                        set.patterns, expected) == expected.out);
  }
}

TEST_CASE("scrubber: many patterns, random pieces, byte at a time", "[brokers][scrubber]") {
  std::mt19937 rng(99);
  for (int round = 0; round < 40; ++round) {
    // Some rounds mix in patterns under the 4-byte hash window (searched one by one), and
    // patterns as short as 4 bytes (a stride of one).
    const std::size_t min_size = round % 4 == 0 ? 1 : round % 4 == 1 ? 4 : 8;
    const pattern_set set = many_patterns(rng, 5 + rng() % 36, min_size, min_size + 30);
    const std::string text = text_for(rng, set, 50 + rng() % 400);
    const naive_result expected = naive(text, set.patterns);
    for (const auto& index : every_search(set.patterns)) {
      std::vector<std::string_view> pieces;
      std::string_view rest(text);
      while (!rest.empty()) {
        const std::size_t n = std::min<std::size_t>(rest.size(), rng() % 50);  // empty ones too
        pieces.push_back(rest.substr(0, n));
        rest.remove_prefix(n);
      }
      CHECK(run_checked(stream_scrubber(index), pieces, set.patterns, expected) == expected.out);
      std::vector<std::string_view> bytes;
      for (std::size_t i = 0; i < text.size(); ++i)
        bytes.push_back(std::string_view(text).substr(i, 1));
      CHECK(run_checked(stream_scrubber(index), bytes, set.patterns, expected) == expected.out);

      std::string value = text;
      CHECK(scrub_value(value, *index) == expected.matched.size());
      CHECK(value == expected.out);
    }
    std::string value = text;
    CHECK(scrub_value(value, set.patterns) == expected.matched.size());
    CHECK(value == expected.out);
  }
}

TEST_CASE("scrubber: the small cases through the hashed index", "[brokers][scrubber]") {
  // The earlier cases' pattern sets are small enough to be searched directly by default.
  const std::vector<std::vector<scrub_pattern>> sets{
      token_patterns,
      {{"ab", "XY"}, {"abcd", "PQRS"}},
      {{"xbcde", "VWXYZ"}, {"bc", "12"}},
      {{"abcab", "12345"}, {"ab", "67"}, {"bca", "890"}, {"cc", "XY"}, {"abcabcab", "ABCDEFGH"}},
      {{"aaaa", "bbbb"}, {"aaaaaaa", "ccccccc"}, {"aaaaa", "ddddd"}}};
  std::mt19937 rng(5);
  for (const auto& patterns : sets) {
    auto index = std::make_shared<const scrub_index>(patterns, scrub_index::search::hashed);
    for (int round = 0; round < 200; ++round) {
      std::string text;
      for (std::size_t n = rng() % 60; n > 0; --n) {
        if (rng() % 3 == 0) {
          text += patterns[rng() % patterns.size()].find;
        } else {
          text.push_back("abcdexghpsk-_REAL1234"[rng() % 21]);
        }
      }
      const naive_result expected = naive(text, patterns);
      std::string_view in(text);
      const std::size_t cut = text.empty() ? 0 : rng() % (text.size() + 1);
      CHECK(run_checked(stream_scrubber(index), {in.substr(0, cut), in.substr(cut)}, patterns,
                        expected) == expected.out);
    }
  }
}

TEST_CASE("scrubbers sharing an index keep their own state", "[brokers][scrubber]") {
  auto index = std::make_shared<const scrub_index>(token_patterns, scrub_index::search::hashed);
  stream_scrubber a(index), b(index);
  std::string out_a, out_b;
  CHECK_FALSE(a.feed("x ghp_REAL", out_a));
  auto m = b.feed("sk-REAL-1234 ghp_", out_b);
  REQUIRE(m);
  CHECK(*m == 1);
  CHECK(a.held() == 8);
  CHECK(b.held() == 4);
  CHECK(a.feed("REALREAL", out_a) == std::optional<std::size_t>(0));
  CHECK_FALSE(b.finish(out_b));
  CHECK_FALSE(a.finish(out_a));
  CHECK(out_a == "x ghp_dummydummydu");
  CHECK(out_b == "sk-dumm-9876 ghp_");
  CHECK(a.matches() == 1);
  CHECK(b.matches() == 1);

  stream_scrubber none(std::shared_ptr<const scrub_index>{});
  CHECK_FALSE(none.active());
  std::string out;
  CHECK_FALSE(none.feed("ghp_REALREALREAL", out));
  CHECK(out == "ghp_REALREALREAL");
}

TEST_CASE("scrub_index refuses malformed patterns", "[brokers][scrubber]") {
  CHECK_THROWS_AS(scrub_index(std::vector<scrub_pattern>{{"", ""}}), std::invalid_argument);
  CHECK_THROWS_AS(
      scrub_index(std::vector<scrub_pattern>{{"abcdefgh", "abcdefg"}}, scrub_index::search::hashed),
      std::invalid_argument);
}

TEST_CASE("scrub_index::each reports every occurrence, overlapping ones included",
          "[brokers][scrubber]") {
  // Random texts over a small alphabet, so patterns overlap and repeat; counted against a
  // position-by-position reference, for the direct search and the hashed one (strides 1..16).
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> owned;
    const int count = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < count; ++i) {
      std::string p;
      const std::size_t size = 1 + rng() % 20;
      for (std::size_t k = 0; k < size; ++k) p.push_back("ab"[rng() % 2]);
      owned.push_back(p);
    }
    std::vector<scrub_pattern> patterns;
    for (const auto& p : owned) patterns.push_back({p, p});
    std::string text;
    const std::size_t size = rng() % 300;
    for (std::size_t k = 0; k < size; ++k) text.push_back("ab"[rng() % 2]);

    std::vector<std::size_t> expected(owned.size());
    for (std::size_t i = 0; i < owned.size(); ++i)
      for (std::size_t at = text.find(owned[i]); at != std::string::npos;
           at = text.find(owned[i], at + 1))
        ++expected[i];
    for (auto how : {scrub_index::search::direct, scrub_index::search::hashed}) {
      const scrub_index index(patterns, how);
      std::vector<std::size_t> seen(owned.size());
      index.each(text, [&](std::size_t i) { ++seen.at(i); });
      INFO("round " << round << (how == scrub_index::search::direct ? " direct" : " hashed"));
      CHECK(seen == expected);
    }
  }
}

TEST_CASE("scrubber holds no buffer while nothing is held back", "[brokers][scrubber]") {
  const std::string real = "ghp_REALREALREALREALREALREALREALREAL1234";
  const std::string dummy(real.size(), 'x');
  const std::vector<scrub_pattern> patterns{{real, dummy}};
  stream_scrubber s(patterns);
  std::string out;
  s.feed("data: {\"text\": \"hello\"}\n\n", out);
  CHECK(s.held() == 0);
  CHECK(s.held_allocation() == 0);
  // A piece ending in a long start of the value: held back, in a buffer of its own.
  s.feed("data: " + real.substr(0, 30), out);
  CHECK(s.held() >= 30);
  CHECK(s.held_allocation() > 0);
  s.feed(real.substr(30) + "\n\n", out);
  CHECK(s.held() == 0);
  CHECK(s.held_allocation() == 0);
  s.finish(out);
  CHECK(out.find(real) == std::string::npos);
  CHECK(out.find(dummy) != std::string::npos);
}
