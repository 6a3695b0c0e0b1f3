// Multi-pattern find-and-replace over a stream that arrives in pieces (response bodies, request
// bodies). Each piece is searched with memmem once per pattern and copied out in bulk; only a
// tail that is a proper prefix of some pattern is held back for the next piece.
#include "brokers/scrubber.hpp"

#include <string.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace broker::brokers {
namespace {

constexpr std::size_t npos = std::string_view::npos;

std::size_t find_from(std::string_view buf, std::string_view needle, std::size_t from) {
  if (from >= buf.size() || buf.size() - from < needle.size()) return npos;
  const void* hit = ::memmem(buf.data() + from, buf.size() - from, needle.data(), needle.size());
  return hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - buf.data()) : npos;
}

void check(const std::vector<scrub_pattern>& patterns) {
  for (const scrub_pattern& p : patterns) {
    if (p.find.empty()) throw std::invalid_argument("scrub pattern is empty");
    if (p.replacement.size() != p.find.size())
      throw std::invalid_argument("scrub replacement differs in length from its pattern");
  }
}

std::size_t longest_of(const std::vector<scrub_pattern>& patterns) {
  std::size_t longest = 0;
  for (const scrub_pattern& p : patterns) longest = std::max(longest, p.find.size());
  return longest;
}

struct scan_input {
  std::string_view buf;
  const std::vector<scrub_pattern>& patterns;
  std::size_t longest;
  // nullptr: `buf` is the end of the stream, nothing can continue past it. Otherwise the
  // patterns' first bytes, to find a tail that a later piece may complete.
  const std::array<bool, 256>* starts;
};

struct scan_result {
  std::size_t keep_from = 0;  // bytes from here on are held back
  std::optional<std::size_t> first;
  std::size_t count = 0;
};

// The earliest position at or after `from` where some pattern may start a match that runs past
// the end of the buffer (the rest of the buffer is a proper prefix of it); size() if none.
std::size_t earliest_partial(const scan_input& in, std::size_t from) {
  const std::size_t n = in.buf.size();
  if (in.starts == nullptr) return n;
  std::size_t q = std::max(from, n >= in.longest ? n - in.longest + 1 : 0);
  for (; q < n; ++q) {
    if (!(*in.starts)[static_cast<unsigned char>(in.buf[q])]) continue;
    std::string_view rest = in.buf.substr(q);
    for (const scrub_pattern& p : in.patterns)
      if (p.find.size() > rest.size() && p.find.starts_with(rest)) return q;
  }
  return n;
}

// Walks the buffer's matches left to right (leftmost, then longest), calling plain(view) for
// bytes without a match and match(index, position) for each match, in stream order. A match is
// taken only when no candidate that could still complete later starts at or before it.
template <class Plain, class Match>
scan_result scan(const scan_input& in, std::vector<std::size_t>& next, Plain plain, Match match) {
  const std::size_t n = in.buf.size();
  const std::size_t tail = in.starts == nullptr ? n : (n >= in.longest ? n - in.longest + 1 : 0);
  next.resize(in.patterns.size());
  for (std::size_t i = 0; i < in.patterns.size(); ++i)
    next[i] = find_from(in.buf, in.patterns[i].find, 0);

  scan_result r;
  std::size_t pos = 0;  // first byte not yet passed to plain() or match()
  for (;;) {
    std::size_t best = npos, which = 0;
    for (std::size_t i = 0; i < in.patterns.size(); ++i) {
      if (next[i] != npos && next[i] < pos) next[i] = find_from(in.buf, in.patterns[i].find, pos);
      if (next[i] == npos) continue;
      if (next[i] < best ||
          (next[i] == best && in.patterns[i].find.size() > in.patterns[which].find.size())) {
        best = next[i];
        which = i;
      }
    }
    if (best == npos) break;
    if (best >= tail) {
      std::size_t partial = earliest_partial(in, pos);
      if (partial <= best) {  // an earlier or longer candidate is still open: decide later
        plain(in.buf.substr(pos, partial - pos));
        r.keep_from = partial;
        return r;
      }
    }
    plain(in.buf.substr(pos, best - pos));
    match(which, best);
    pos = best + in.patterns[which].find.size();
    ++r.count;
    if (!r.first) r.first = which;
  }
  r.keep_from = earliest_partial(in, pos);
  plain(in.buf.substr(pos, r.keep_from - pos));
  return r;
}

}  // namespace

stream_scrubber::stream_scrubber(std::vector<scrub_pattern> patterns)
    : patterns_(std::move(patterns)) {
  check(patterns_);
  longest_ = longest_of(patterns_);
  for (const scrub_pattern& p : patterns_) starts_[static_cast<unsigned char>(p.find[0])] = true;
  next_.reserve(patterns_.size());
}

std::optional<std::size_t> stream_scrubber::feed(std::string_view in, std::string& out) {
  if (patterns_.empty()) {
    out.append(in);
    return std::nullopt;
  }
  // Held bytes are rare (a piece ended in a pattern's prefix) and short; joining them with the
  // new piece keeps one code path for matches that span pieces.
  const bool joined = !held_.empty();
  if (joined) held_.append(in);
  std::string_view buf = joined ? std::string_view(held_) : in;

  scan_result r = scan(
      scan_input{buf, patterns_, longest_, &starts_}, next_,
      [&](std::string_view bytes) { out.append(bytes); },
      [&](std::size_t i, std::size_t) { out.append(patterns_[i].replacement); });
  matches_ += r.count;
  if (joined)
    held_.erase(0, r.keep_from);
  else
    held_.assign(in.substr(r.keep_from));
  return r.first;
}

std::optional<std::size_t> stream_scrubber::finish(std::string& out) {
  if (held_.empty()) return std::nullopt;
  scan_result r = scan(
      scan_input{held_, patterns_, longest_, nullptr}, next_,
      [&](std::string_view bytes) { out.append(bytes); },
      [&](std::size_t i, std::size_t) { out.append(patterns_[i].replacement); });
  matches_ += r.count;
  held_.clear();
  return r.first;
}

std::size_t scrub_value(std::string& value, const std::vector<scrub_pattern>& patterns) {
  if (patterns.empty() || value.empty()) return 0;
  check(patterns);
  std::vector<std::size_t> next;
  // Same lengths, so each match is overwritten in place; the scan never looks behind itself.
  scan_result r = scan(
      scan_input{value, patterns, longest_of(patterns), nullptr}, next, [](std::string_view) {},
      [&](std::size_t i, std::size_t pos) {
        std::memcpy(value.data() + pos, patterns[i].replacement.data(),
                    patterns[i].replacement.size());
      });
  return r.count;
}

}  // namespace broker::brokers
