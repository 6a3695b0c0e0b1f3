// Finds and replaces fixed byte strings in a stream that arrives in arbitrary pieces, including
// matches split across pieces. Replacements have the same length as what they replace, so framing
// (Content-Length) stays valid. Output lags input by at most (longest pattern - 1) bytes: a byte
// is released only once no match can start at it, so when a match is reported none of its bytes
// has been released yet.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace broker::brokers {

struct scrub_pattern {
  std::string_view find;         // non-empty; must outlive the scrubber
  std::string_view replacement;  // same length as find
};

class stream_scrubber {
 public:
  explicit stream_scrubber(std::vector<scrub_pattern> patterns);

  // Consumes `in`, appends the released (replaced) bytes to `out`. Returns the index of the first
  // pattern matched during this call, if any. Overlapping matches: the leftmost wins, then the
  // longest of those starting there.
  std::optional<std::size_t> feed(std::string_view in, std::string& out);
  // End of stream: releases what is held back, replacing any match found in it (a match can
  // still be found here: a longer candidate that started earlier had to be ruled out first).
  // Returns the index of the first pattern matched during this call, if any.
  std::optional<std::size_t> finish(std::string& out);

  bool active() const { return !patterns_.empty(); }
  std::size_t held() const { return held_.size(); }
  std::size_t matches() const { return matches_; }

 private:
  std::vector<scrub_pattern> patterns_;
  std::size_t longest_ = 0;
  std::string held_;
  std::size_t matches_ = 0;
  std::array<bool, 256> starts_{};  // first bytes of the patterns, for the held-back tail
  std::vector<std::size_t> next_;   // per pattern, its next match position (scratch per feed)
};

// Replaces every pattern in one complete value (a header field); returns how many were replaced.
std::size_t scrub_value(std::string& value, const std::vector<scrub_pattern>& patterns);

}  // namespace broker::brokers
