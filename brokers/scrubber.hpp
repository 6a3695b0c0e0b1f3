// Finds and replaces fixed byte strings in a stream that arrives in arbitrary pieces, including
// matches split across pieces. Replacements have the same length as what they replace, so framing
// (Content-Length) stays valid. Output lags input by at most (longest pattern - 1) bytes: the
// tail of each piece that could begin a match is held back, so when a match is reported none of
// its bytes has been released yet. What is held depends only on the classes of the tail's bytes
// (scrub_index::hold_from), never on whether they begin a pattern: a child that makes an upstream
// echo its bytes learns nothing of the values from what is held.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "brokers/scrub_index.hpp"

namespace broker::brokers {

class stream_scrubber {
 public:
  // Indexes the patterns for this scrubber alone.
  explicit stream_scrubber(std::vector<scrub_pattern> patterns);
  // Shares an index built once (for many scrubbers over the same patterns, whose index would
  // otherwise be rebuilt for each); null scrubs nothing. A template only so that
  // `stream_scrubber({})` still means the constructor above.
  template <class Index>
  requires std::convertible_to<Index, std::shared_ptr<const scrub_index>>
  explicit stream_scrubber(Index index) : index_(std::move(index)) {
    if (index_ && index_->patterns().empty()) index_.reset();
  }
  ~stream_scrubber();  // wipes the held-back bytes: they may be the start of a pattern
  stream_scrubber(const stream_scrubber&) = default;
  stream_scrubber& operator=(const stream_scrubber&) = default;
  stream_scrubber(stream_scrubber&&) = default;
  stream_scrubber& operator=(stream_scrubber&&) = default;

  // Consumes `in`, appends the released (replaced) bytes to `out`. Returns the index of the first
  // pattern matched during this call, if any. Overlapping matches: the leftmost wins, then the
  // longest of those starting there.
  std::optional<std::size_t> feed(std::string_view in, std::string& out);
  // End of stream: releases what is held back, replacing any match found in it (a match can
  // still be found here: a longer candidate that started earlier had to be ruled out first).
  // Returns the index of the first pattern matched during this call, if any.
  std::optional<std::size_t> finish(std::string& out);

  bool active() const { return index_ != nullptr; }
  std::size_t held() const { return held_.size(); }
  // The bytes its buffer takes: none while nothing is held back (a long-lived stream's scrubber
  // holds nothing between pieces that end outside a pattern's bytes).
  std::size_t held_allocation() const;
  std::size_t matches() const { return matches_; }

 private:
  std::shared_ptr<const scrub_index> index_;  // null when there are no patterns
  std::string held_;
  std::size_t matches_ = 0;
};

// Replaces every pattern in one complete value (a header field); returns how many were replaced.
std::size_t scrub_value(std::string& value, const std::vector<scrub_pattern>& patterns);
std::size_t scrub_value(std::string& value, const scrub_index& index);

}  // namespace broker::brokers
