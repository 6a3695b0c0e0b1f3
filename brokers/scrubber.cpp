// Multi-pattern find-and-replace over a stream that arrives in pieces (response bodies, request
// bodies). Each piece is walked match by match through the patterns' index (scrub_index, one
// pass whatever their number) and copied out in bulk between matches; only a tail that could be
// the start of a pattern is held back for the next piece, judged by the classes of its bytes and
// never by whether it is one (scrub_index::hold_from).
#include "brokers/scrubber.hpp"

#include <cstring>
#include <utility>

#include "base/heap_bytes.hpp"
#include "base/secret.hpp"

namespace broker::brokers {
namespace {

struct scan_input {
  std::string_view buf;
  const scrub_index& index;
  // false: `buf` is the end of the stream, nothing can continue past it. Otherwise a tail that a
  // later piece may complete into a match is held back.
  bool open;
};

struct scan_result {
  std::size_t keep_from = 0;  // bytes from here on are held back
  std::optional<std::size_t> first;
  std::size_t count = 0;
};

// Walks the buffer's matches left to right (leftmost, then longest), calling plain(view) for
// bytes without a match and match(index, position) for each match, in stream order. A match is
// taken only when no candidate that could still complete later starts at or before it.
template <class Plain, class Match>
scan_result scan(const scan_input& in, scrub_index::cursor& at, Plain plain, Match match) {
  const std::size_t n = in.buf.size();
  const std::size_t longest = in.index.longest();
  const std::size_t tail = !in.open ? n : (n >= longest ? n - longest + 1 : 0);
  const auto hold_from = [&](std::size_t from) {
    return in.open ? in.index.hold_from(in.buf, from) : n;
  };
  at.reset(in.index);

  scan_result r;
  std::size_t pos = 0;  // first byte not yet passed to plain() or match()
  while (std::optional<scrub_match> m = in.index.find(in.buf, pos, at)) {
    if (m->start >= tail) {
      // In the held tail, where an earlier or longer candidate may still be open: decided
      // with the next piece.
      const std::size_t held = hold_from(pos);
      if (held <= m->start) {
        plain(in.buf.substr(pos, held - pos));
        r.keep_from = held;
        return r;
      }
    }
    plain(in.buf.substr(pos, m->start - pos));
    match(m->pattern, m->start);
    pos = m->start + in.index.patterns()[m->pattern].find.size();
    ++r.count;
    if (!r.first) r.first = m->pattern;
  }
  r.keep_from = hold_from(pos);
  plain(in.buf.substr(pos, r.keep_from - pos));
  return r;
}

// A scan's scratch, one per thread and reset by each scan: a scrubber or a header value does not
// keep one of its own between scans.
scrub_index::cursor& scratch_cursor() {
  thread_local scrub_index::cursor at;
  return at;
}

std::shared_ptr<const scrub_index> index_of(std::vector<scrub_pattern> patterns) {
  if (patterns.empty()) return nullptr;
  return std::make_shared<const scrub_index>(std::move(patterns));
}

}  // namespace

stream_scrubber::stream_scrubber(std::vector<scrub_pattern> patterns)
    : index_(index_of(std::move(patterns))) {}

stream_scrubber::~stream_scrubber() {
  base::wipe(held_);
}

std::optional<std::size_t> stream_scrubber::feed(std::string_view in, std::string& out) {
  if (!index_) {
    out.append(in);
    return std::nullopt;
  }
  // Held bytes are rare (a piece ended in a pattern's prefix) and short; joining them with the
  // new piece keeps one code path for matches that span pieces.
  const bool joined = !held_.empty();
  if (joined) held_.append(in);
  std::string_view buf = joined ? std::string_view(held_) : in;

  const std::vector<scrub_pattern>& patterns = index_->patterns();
  scan_result r = scan(
      scan_input{buf, *index_, true}, scratch_cursor(),
      [&](std::string_view bytes) { out.append(bytes); },
      [&](std::size_t i, std::size_t) { out.append(patterns[i].replacement); });
  matches_ += r.count;
  if (joined)
    held_.erase(0, r.keep_from);
  else
    held_.assign(in.substr(r.keep_from));
  // Nothing held back: the buffer (which may have held the start of a value) wiped and let go.
  if (held_.empty() && held_allocation() != 0) {
    base::wipe(held_);
    std::string().swap(held_);
  }
  return r.first;
}

std::size_t stream_scrubber::held_allocation() const {
  return base::heap_bytes(held_);
}

std::optional<std::size_t> stream_scrubber::finish(std::string& out) {
  if (held_.empty()) return std::nullopt;
  const std::vector<scrub_pattern>& patterns = index_->patterns();
  scan_result r = scan(
      scan_input{held_, *index_, false}, scratch_cursor(),
      [&](std::string_view bytes) { out.append(bytes); },
      [&](std::size_t i, std::size_t) { out.append(patterns[i].replacement); });
  matches_ += r.count;
  held_.clear();
  return r.first;
}

std::size_t scrub_value(std::string& value, const std::vector<scrub_pattern>& patterns) {
  if (patterns.empty() || value.empty()) return 0;
  // A header value is short: searching each pattern directly costs less than indexing them.
  return scrub_value(value, scrub_index(patterns, scrub_index::search::direct));
}

std::size_t scrub_value(std::string& value, const scrub_index& index) {
  if (index.patterns().empty() || value.empty()) return 0;
  const std::vector<scrub_pattern>& patterns = index.patterns();
  // A response head's every name and value is scrubbed: a cursor of its own was an allocation
  // and a free for each of them.
  scrub_index::cursor& at = scratch_cursor();
  // Same lengths, so each match is overwritten in place; the scan never looks behind itself.
  scan_result r = scan(
      scan_input{value, index, false}, at, [](std::string_view) {},
      [&](std::size_t i, std::size_t pos) {
        std::memcpy(value.data() + pos, patterns[i].replacement.data(),
                    patterns[i].replacement.size());
      });
  return r.count;
}

}  // namespace broker::brokers
