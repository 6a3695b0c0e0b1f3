// The stream scrubber at piece boundaries (brokers/scrubber.hpp). Input: 1-3 patterns with
// same-length replacements, each as [length byte][find][replacement], after a count byte; the
// rest is the text, scrubbed whole and in pieces cut at input-derived points.
//
// What the header promises, and so what is checked: matches are taken leftmost first, then the
// longest starting there, whatever the pieces, so the streamed output equals the one-piece run
// and scrub_value on the whole text (with the same match count); replacements keep the length;
// output lags input by at most (longest pattern - 1) bytes; and each call reports a match
// exactly when it made one.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/scrubber.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace broker;
using fuzz::check;

constexpr std::size_t max_patterns = 3;
// Short patterns make matches, overlaps and prefixes that straddle a cut likely.
constexpr std::size_t max_pattern_length = 8;
constexpr std::size_t max_bytewise = 512;

struct scrubbed {
  std::string out;
  std::size_t matches = 0;
};

// feed and finish name a pattern exactly when the call made a match.
void check_reported(std::optional<std::size_t> first, std::size_t matches_before,
                    const brokers::stream_scrubber& scrubber, std::size_t patterns) {
  check(first.has_value() == (scrubber.matches() > matches_before),
        "a call's reported match disagrees with matches()");
  check(!first || *first < patterns, "a reported match names no pattern");
}

scrubbed scrub_stream(const std::vector<brokers::scrub_pattern>& patterns, std::size_t longest,
                      const std::vector<std::string_view>& pieces) {
  brokers::stream_scrubber scrubber(patterns);
  scrubbed s;
  std::size_t fed = 0;
  for (std::string_view piece : pieces) {
    const std::size_t before = scrubber.matches();
    check_reported(scrubber.feed(piece, s.out), before, scrubber, patterns.size());
    fed += piece.size();
    check(scrubber.held() < longest, "scrubber held back a whole pattern length or more");
    check(s.out.size() + scrubber.held() == fed, "released and held bytes do not add up");
  }
  const std::size_t before = scrubber.matches();
  check_reported(scrubber.finish(s.out), before, scrubber, patterns.size());
  check(scrubber.held() == 0, "finish() left bytes held");
  s.matches = scrubber.matches();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::byte_reader in(fuzz::as_text(data, size));
  std::vector<brokers::scrub_pattern> patterns;
  std::size_t longest = 0;
  for (std::size_t n = 1 + in.byte() % max_patterns; n > 0; --n) {
    const std::size_t length = 1 + in.byte() % max_pattern_length;
    const std::string_view find = in.bytes(length);
    const std::string_view replacement = in.bytes(length);
    if (replacement.size() != length) break;  // the input ran out
    patterns.push_back({find, replacement});
    longest = std::max(longest, length);
  }
  if (patterns.empty()) return 0;
  const std::string_view text = in.rest();

  const scrubbed whole = scrub_stream(patterns, longest, {text});
  const scrubbed split =
      scrub_stream(patterns, longest, fuzz::pieces_of(text, fuzz::hash_of(text)));
  check(whole.out.size() == text.size(), "scrubbing changed the length");
  check(split.out == whole.out, "split changed the scrubbed output");
  check(split.matches == whole.matches, "split changed the match count");
  if (text.size() <= max_bytewise)
    check(scrub_stream(patterns, longest, fuzz::bytes_of(text)).out == whole.out,
          "byte-at-a-time feeding changed the scrubbed output");

  std::string value(text);
  const std::size_t replaced = brokers::scrub_value(value, patterns);
  check(value == whole.out, "stream output differs from scrub_value on the whole text");
  check(replaced == whole.matches, "stream match count differs from scrub_value's");
  return 0;
}
